"""check: the one command CI runs on a pull request, one line per failure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stackctl.cli.app import JsonOpt, VerboseOpt, app, console, emit
from stackctl.errors import CheckFailed, InputError, StackctlError
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
    --requirements matches what `stackctl export` writes.
    """
    from stackctl.resolve.export import drift, render_requirements
    from stackctl.resolve.lock import lock_path, read_lock

    stack = load_profile(profile)  # a profile that does not validate stops here, exit 2
    if requirements is not None and requirements.exists() and not requirements.is_dir():
        raise InputError(f"--requirements {requirements}: not a directory (the one `stackctl export --out` wrote)")
    failures: list[str] = []
    passes: list[str] = []
    path = lock_path(profile, lock)
    locked = None
    try:
        locked = read_lock(path)
    except StackctlError as exc:
        failures.append(str(exc))
    if locked is not None:
        if not locked.made_from(stack):
            failures.append(f"{path}: made from another version of {stack.name}; run `stackctl resolve {profile}`")
            locked = None
        else:
            passes.append(f"{path} matches {stack.name}")
    if requirements is not None and (locked is not None or not hashes):
        expected = render_requirements(stack, locked if hashes else None)
        existing = {n: (requirements / n).read_text(encoding="utf-8") if (requirements / n).is_file() else None
                    for n in expected}
        drifted = {d.file for d in drift(expected, existing)}
        with_lock = f" --lock {path}" if hashes else ""
        for name in expected:
            if name in drifted:
                what = "missing" if existing[name] is None else f"differs from {stack.name}"
                failures.append(f"{requirements / name}: {what}; "
                                f"run `stackctl export {profile} --out {requirements}{with_lock}`")
            else:
                passes.append(f"{requirements / name} matches {stack.name}")

    def human() -> None:
        for line in passes:
            console.print(f"PASS {line}", markup=False)
        for line in failures:
            console.print(f"FAIL {line}", markup=False)

    emit({"stack": stack.name, "passed": passes, "failed": failures}, as_json, human)
    if failures:
        raise CheckFailed(f"{len(failures)} check(s) failed for {stack.name}")
