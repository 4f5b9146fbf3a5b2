"""verify: an image in a registry re-checked against its labels, SBOM, provenance and a lock."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer

from stackctl.cli.app import app, console, console_err, emit, say, step_lines, table
from stackctl.cli.options import BuilderOpt, JsonOpt, VerifyLockOpt


@app.command()
def verify(
    ref: Annotated[str, typer.Argument(metavar="REF", help="host[:port]/name[:tag|@digest] in a registry.")],
    lock: VerifyLockOpt = None,
    layers: Annotated[bool, typer.Option("--layers", help="Also stream every layer: each must hash to its "
                                         "digest and unpack to its diff_id.")] = False,
    key: Annotated[Path | None, typer.Option("--key", metavar="PUB.pem", help="Require the provenance and SBOM "
                                             "statements to be signed by this public key (PEM).")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Rebuild the image from its revision and lock on the "
                                          "local engine, without cache, and compare it with the registry's.")] = False,
    source: Annotated[Path, typer.Option("--source", metavar="DIR", help="With --rebuild: the git repository "
                                         "holding the image's revision.")] = Path("."),
    wheelhouse: Annotated[Path | None, typer.Option("--wheelhouse", metavar="DIR", help="With --rebuild: a "
                                                    "directory holding the lock's wheels.")] = None,
    builder: BuilderOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-check a published image from the registry.

    Labels, the SBOM in the image and beside it, the provenance statement, the distributions the image
    records as installed, the reproducible config, and with --lock all of them against the lock. --key
    requires the statements to be signed by that key; --rebuild builds the revision again and compares (on the
    builder the image was built with: the digest of a BuildKit build and of a classic one differ).
    """
    from stackctl.base import to_jsonable
    from stackctl.usecases import verify_remote

    # A rebuild reports each build step as a timestamped line (it takes as long as a build); a plain
    # verify is a few registry reads under a spinner.
    spinner = not as_json and not rebuild and console_err.is_terminal
    with console_err.status(f"reading {ref} from the registry") if spinner else nullcontext():
        result = verify_remote(ref, lock, stream_layers=layers, key=key, rebuild_from=source if rebuild else None,
                               wheelhouse=wheelhouse, builder=builder,
                               on_step=step_lines("rebuild") if rebuild and not as_json else None)

    def human() -> None:
        console.print(f"{result.ref}\n  config {result.config_digest}"
                      + (f"\n  lock   {result.lock_digest}" if result.lock_digest else ""), markup=False)
        console.print(table(None, ["check", "result", "detail"],
                            [(f.check, "PASS" if f.ok else "FAIL", f.detail) for f in result.findings]))
        if result.rebuild is not None:
            say(f"rebuilt revision {result.rebuild.revision[:12]} in {result.rebuild.seconds:.1f} s; compared:")
            for line in result.rebuild.compared:
                say(f"  {line}")

    emit({**to_jsonable(result), "ok": not result.failed}, as_json, human)
    if (failure := result.failure()) is not None:
        raise failure
