"""verify: an image in a registry re-checked against its labels, SBOM, provenance and a lock."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import stackctl.cli.image  # noqa: F401  (typer runs an app of one command as that command: register inspect & co)
from stackctl.cli.app import JsonOpt, VerboseOpt, app, console, console_err, emit, table


@app.command()
def verify(
    ref: Annotated[str, typer.Argument(metavar="REF", help="host[:port]/name[:tag|@digest] in a registry.")],
    lock: Annotated[Path | None, typer.Option("--lock", metavar="PATH",
                                              help="Also check against this lock (labels, SBOM, installed).")] = None,
    layers: Annotated[bool, typer.Option("--layers", help="Also stream every layer: each must hash to its "
                                         "digest and unpack to its diff_id.")] = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Re-check a published image from the registry.

    Labels, the SBOM in the image and beside it, the provenance statement, the distributions the image
    records as installed, the reproducible config, and with --lock all of them against the lock.
    """
    from stackctl.engine.registry import Registry, parse_ref
    from stackctl.errors import InputError
    from stackctl.image.verify import raise_if_failed, verify_image
    from stackctl.resolve.lock import read_lock

    parsed = parse_ref(ref)
    if parsed is None:
        raise InputError(f"{ref}: names no registry host; verify reads host[:port]/name[:tag|@digest]")
    locked = read_lock(lock) if lock is not None else None
    repository = f"{parsed.registry}/{parsed.name}"
    if not as_json and console_err.is_terminal:
        with console_err.status(f"reading {ref} from the registry"):
            result = verify_image(Registry(), repository, parsed.reference, locked, stream_layers=layers)
    else:
        result = verify_image(Registry(), repository, parsed.reference, locked, stream_layers=layers)

    def human() -> None:
        console.print(f"{result.ref}\n  config {result.config_digest}"
                      + (f"\n  lock   {result.lock_digest}" if result.lock_digest else ""), markup=False)
        console.print(table(None, ["check", "", "detail"],
                            [(f.check, "PASS" if f.ok else "FAIL", f.detail) for f in result.findings]))

    emit({**_plain(result), "ok": not result.failed}, as_json, human)
    raise_if_failed(result)


def _plain(result: object) -> dict[str, object]:
    from stackctl.base.jsonout import to_jsonable

    data = to_jsonable(result)
    assert isinstance(data, dict)
    return data
