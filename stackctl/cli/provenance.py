"""verify: an image in a registry re-checked against its labels, SBOM, provenance and a lock."""

from __future__ import annotations

from typing import Annotated

import typer

from stackctl.cli.app import app, console, console_err, emit, table
from stackctl.cli.options import GivenLockOpt, JsonOpt


@app.command()
def verify(
    ref: Annotated[str, typer.Argument(metavar="REF", help="host[:port]/name[:tag|@digest] in a registry.")],
    lock: GivenLockOpt = None,
    layers: Annotated[bool, typer.Option("--layers", help="Also stream every layer: each must hash to its "
                                         "digest and unpack to its diff_id.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Re-check a published image from the registry.

    Labels, the SBOM in the image and beside it, the provenance statement, the distributions the image
    records as installed, the reproducible config, and with --lock all of them against the lock.
    """
    from stackctl.base import to_jsonable
    from stackctl.engine import verify_remote
    from stackctl.image import raise_if_failed
    from stackctl.resolve import read_lock

    locked = read_lock(lock) if lock is not None else None
    if not as_json and console_err.is_terminal:
        with console_err.status(f"reading {ref} from the registry"):
            result = verify_remote(ref, locked, stream_layers=layers)
    else:
        result = verify_remote(ref, locked, stream_layers=layers)

    def human() -> None:
        console.print(f"{result.ref}\n  config {result.config_digest}"
                      + (f"\n  lock   {result.lock_digest}" if result.lock_digest else ""), markup=False)
        console.print(table(None, ["check", "result", "detail"],
                            [(f.check, "PASS" if f.ok else "FAIL", f.detail) for f in result.findings]))

    emit({**to_jsonable(result), "ok": not result.failed}, as_json, human)
    raise_if_failed(result)
