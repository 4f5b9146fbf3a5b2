"""validate, show, export: the profile itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stackctl.base import count
from stackctl.cli.app import app, console, emit, table
from stackctl.cli.options import GivenLockOpt, JsonOpt, ProfileArg
from stackctl.profile import load_profile


@app.command()
def validate(
    profiles: Annotated[list[str], typer.Argument(metavar="PROFILE...",
                                                  help="Profile files (or stack names in ./stacks/).")],
    as_json: JsonOpt = False,
) -> None:
    """Check profiles; exit 2 listing every problem.

    One line per problem: FILE:LINE KEY.PATH: what is wrong.
    """
    from stackctl.profile import load_profiles

    stacks = load_profiles(profiles)

    def human() -> None:
        for s in stacks:
            console.print(f"[green]ok[/] {s.name}: {count(len(s.pins), 'pin')}, {count(len(s.targets), 'target')} "
                          f"({', '.join(s.sources)})", markup=True, highlight=False)

    emit({"stacks": [{"stack": s.name, "sources": list(s.sources), "pins": len(s.pins), "digest": s.digest()}
                     for s in stacks]}, as_json, human)


@app.command()
def show(
    profile: ProfileArg,
    as_json: JsonOpt = False,
) -> None:
    """Print the effective profile after inheritance."""
    from stackctl.review import rendered_tag

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
    profile: ProfileArg,
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Directory for the requirement files.")] = Path("."),
    lock: GivenLockOpt = None,
    check: Annotated[bool, typer.Option("--check", help="Compare with the files in --out; exit 1 on drift.")] = False,
    target: Annotated[str | None, typer.Option("--target", metavar="LABEL", help="Only this target's files "
                                               "(e.g. cp310-linux_x86_64): markers evaluated, pins for other "
                                               "targets left out, no marker text.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the pip requirement files the profile declares.

    With --check, write nothing: exit 1 with a diff when the files in --out drifted. With --target, the
    files one image of that target installs.
    """
    from stackctl.resolve import export_requirements

    s = load_profile(profile)
    result = export_requirements(s, out, lock, check=check, target=target)
    if result.checked:
        def show_drift() -> None:
            for d in result.drift:
                console.print(d.diff, markup=False)
            if not result.drift:
                console.print(f"[green]ok[/] {', '.join(sorted(result.files))} match {s.name}")

        emit({"stack": s.name, "drift": result.drift, "checked": sorted(result.files)}, as_json, show_drift)
        if (failure := result.failure(profile)) is not None:
            raise failure
        return
    emit({"stack": s.name, "written": sorted(str(out / n) for n in result.files)}, as_json,
         lambda: console.print("\n".join(f"wrote {out / n}" for n in result.files)))
