"""validate, show, export: the profile itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stackctl.base.words import count
from stackctl.cli.app import JsonOpt, VerboseOpt, app, console, emit, table
from stackctl.errors import CheckFailed, InputError
from stackctl.profile.locate import load_profile
from stackctl.profile.model import Stack


@app.command()
def validate(
    profiles: Annotated[list[str], typer.Argument(metavar="PROFILE...",
                                                  help="Profile files (or stack names in ./stacks/).")],
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Check profiles; exit 2 listing every problem.

    One line per problem: FILE:LINE KEY.PATH: what is wrong.
    """
    from stackctl.errors import Problem, ProfileError

    stacks: list[Stack] = []
    problems: list[Problem] = []
    for spec in profiles:
        try:
            stacks.append(load_profile(spec))
        except ProfileError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ProfileError(tuple(problems))

    def human() -> None:
        for s in stacks:
            console.print(f"[green]ok[/] {s.name}: {count(len(s.pins), 'pin')}, {count(len(s.targets), 'target')} "
                          f"({', '.join(s.sources)})", markup=True, highlight=False)

    emit({"stacks": [{"stack": s.name, "sources": list(s.sources), "pins": len(s.pins), "digest": s.digest()}
                     for s in stacks]}, as_json, human)


@app.command()
def show(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")],
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Print the effective profile after inheritance."""
    from stackctl.review.diff import rendered_tag

    s = load_profile(profile)

    def human() -> None:
        console.print(f"[bold]{s.name}[/]  {s.description}")
        console.print(f"from: {' <- '.join(s.sources)}")
        console.print(f"targets: {', '.join(t.label for t in s.targets)}")
        console.print("indexes: " + ", ".join(f"{i.name}={i.url or '(pip configuration)'}" for i in s.indexes))
        rows = [[p.name, p.version, p.index, p.file or "", p.train or "", p.abi.value, p.note] for p in s.pins]
        console.print(table("pins", ["package", "version", "index", "file", "train", "abi", "note"], rows))
        gate = [[str(e.order), e.dist, e.module, e.mode.value, e.check.value, e.expected or "",
                  e.skip_import_if or ""] for e in s.gate_entries()]
        console.print(table("gate", ["#", "distribution", "module", "mode", "check", "expected", "skip import if"],
                            gate))
        for p in s.probes:
            console.print(f"probe {p.name}: {p.describe()}", markup=False)
        if s.image:
            console.print(f"image: {s.image.repository}:{rendered_tag(s)} from {s.image.base}")

    emit({"stack": s, "digest": s.digest(), "gate": s.gate_entries(), "tag": rendered_tag(s)}, as_json, human)


@app.command()
def export(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file or stack name.")],
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Directory for the requirement files.")] = Path("."),
    lock: Annotated[Path | None, typer.Option("--lock", metavar="PATH",
                                              help="Add --hash lines from this lock.")] = None,
    check: Annotated[bool, typer.Option("--check", help="Compare with the files in --out; exit 1 on drift.")] = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Write the pip requirement files the profile declares.

    With --check, write nothing: exit 1 with a diff when the files in --out drifted.
    """
    from stackctl.resolve.export import drift, read_existing, render_requirements, write_requirements
    from stackctl.resolve.lock import read_lock

    s = load_profile(profile)
    files = render_requirements(s, read_lock(lock) if lock else None)
    if not files:
        raise InputError(f"{s.name}: no pin names a requirement file (pins.NAME.file)")
    if check:
        existing = read_existing(out, files)
        drifts = drift(files, existing)

        def show_drift() -> None:
            for d in drifts:
                console.print(d.diff, markup=False)
            if not drifts:
                console.print(f"[green]ok[/] {', '.join(sorted(files))} match {s.name}")

        emit({"stack": s.name, "drift": drifts, "checked": sorted(files)}, as_json, show_drift)
        if drifts:
            raise CheckFailed(f"{count(len(drifts), 'requirement file')} in {out} drifted from {s.name}: "
                              + ", ".join(d.file for d in drifts),
                              hint=f"run `stackctl export {profile} --out {out}` and commit the result")
        return
    write_requirements(out, files)
    emit({"stack": s.name, "written": sorted(str(out / n) for n in files)}, as_json,
         lambda: console.print("\n".join(f"wrote {out / n}" for n in files)))
