"""check: the one command CI runs on a pull request, one line per failure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stackctl.base.words import count
from stackctl.cli.app import JsonOpt, VerboseOpt, app, console, emit
from stackctl.errors import CheckFailed
from stackctl.profile.locate import load_profile


@app.command()
def check(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file or stack name.")],
    lock: Annotated[Path | None, typer.Option("--lock", metavar="PATH",
                                              help="Lock file (default: the .lock beside the profile).")] = None,
    requirements: Annotated[Path | None, typer.Option(
        "--requirements", metavar="DIR",
        help="Directory whose requirement files must match the profile (and the lock's hashes "
        "with --hashes).")] = None,
    hashes: Annotated[bool, typer.Option("--hashes", help="The requirement files carry the lock's --hash lines.")]
    = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """For CI: exit 1 when the lock or requirement files are stale.

    One PASS or FAIL line per check: the lock matches the profile, and each requirement file in
    --requirements matches what `stackctl export` writes; a file that drifted fails once per pin
    pinned twice, at another version, missing, in the wrong file, or not in the profile.
    """
    from stackctl.resolve.check import check_stack
    from stackctl.resolve.lock import lock_path

    stack = load_profile(profile)  # a profile that does not validate stops here, exit 2
    report = check_stack(stack, lock_path(profile, lock), requirements, hashes=hashes, profile_arg=profile)
    passes, failures = report.passed, report.failed

    def human() -> None:
        for line in passes:
            console.print(f"PASS {line}", markup=False)
        for line in failures:
            console.print(f"FAIL {line}", markup=False)

    emit({"stack": stack.name, "passed": passes, "failed": failures}, as_json, human)
    if failures:
        raise CheckFailed(f"{count(len(failures), 'check')} failed for {stack.name}")
