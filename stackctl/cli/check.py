"""check: the one command CI runs on a pull request, one line per failure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stackctl.cli.annotate import AnnotationsOpt, annotate
from stackctl.cli.app import app, console, console_err, emit
from stackctl.cli.options import JsonOpt, LockOpt, ProfileArg


@app.command()
def check(
    profile: ProfileArg,
    lock: LockOpt = None,
    requirements: Annotated[Path | None, typer.Option(
        "--requirements", metavar="DIR",
        help="Directory whose requirement files must match the profile (and the lock's hashes "
        "with --hashes).")] = None,
    hashes: Annotated[bool, typer.Option("--hashes", help="The requirement files carry the lock's --hash lines.")]
    = False,
    annotations: AnnotationsOpt = None,
    target: Annotated[str | None, typer.Option("--target", metavar="LABEL", help="The requirement files are one "
                                               "target's (`export --target LABEL`), e.g. cp310-linux_x86_64.")]
    = None,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help="What --requirements holds: requirements "
                                     "(pip requirement files) or pylock (`export --format pylock`'s PEP 751 "
                                     "lock files, held to the lock).")] = "requirements",
    as_json: JsonOpt = False,
) -> None:
    """For CI: exit 1 when the lock or requirement files are stale.

    One PASS or FAIL line per check: the lock matches the profile, and each requirement file in
    --requirements matches what `stackctl export` writes; a file that drifted fails once per pin
    pinned twice, at another version, missing, in the wrong file, or not in the profile.
    """
    from stackctl.usecases import check_profile

    report = check_profile(profile, lock, requirements, hashes=hashes, target=target, fmt=fmt)

    def human() -> None:
        for line in report.passed:
            console.print(f"PASS {line}", markup=False)
        for line in report.failed:
            console.print(f"FAIL {line}", markup=False)
        for line in report.warnings:
            console_err.print(f"[yellow]warning:[/] {line}", highlight=False, soft_wrap=not console_err.is_terminal)

    emit({"stack": report.stack, "passed": report.passed, "failed": report.failed, "warnings": report.warnings},
         as_json, human)
    annotate(report.annotations())
    if (failure := report.failure()) is not None:
        raise failure
