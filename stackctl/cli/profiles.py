"""validate, show, export: the profile itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stackctl.base import count
from stackctl.cli.annotate import AnnotationsOpt
from stackctl.cli.app import app, console, emit, output, say, table
from stackctl.cli.options import ExportLockOpt, IndexOpt, JsonOpt, ProfileArg, overrides


@app.command()
def validate(
    profiles: Annotated[list[str], typer.Argument(metavar="PROFILE...",
                                                  help="Profile files (or stack names in ./stacks/).")],
    annotations: AnnotationsOpt = None,
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
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the effective profile after inheritance.

    Each index is shown at the URL a run would use, and where that URL comes from (an override of
    --index or STACKCTL_INDEX_<NAME>_URL is said as one).
    """
    from stackctl.usecases import show_profile

    shown = show_profile(profile, overrides(index))
    s, in_force = shown.stack, shown.indexes

    def human() -> None:
        say(f"{s.name}  {s.description}", style="bold")
        say(f"from: {' <- '.join(s.sources)}")
        say(f"targets: {', '.join(t.label for t in s.targets)}")
        for ep in in_force:
            say(ep.described, style="yellow" if ep.overridden else None)
        rows = [[p.name, p.version, p.index, p.file or "", p.train or "", p.abi.value, p.note] for p in s.pins]
        console.print(table("pins", ["package", "version", "index", "file", "train", "abi", "note"], rows))
        gate = [[str(e.order), e.dist, e.module, e.mode.value, e.check.value, e.expected or "",
                  e.skip_import_if or ""] for e in s.gate_entries()]
        console.print(table("gate", ["#", "distribution", "module", "mode", "check", "expected", "skip import if"],
                            gate))
        for p in s.probes:
            say(f"probe {p.name}: {p.describe()}")
        if s.image:  # the tag alone runs to 80 characters: a table when it fits, else a line of its own
            console.print(table(None, ["image", "tag", "base"],
                                [[s.image.repository, shown.tag or "", s.image.base]]))

    emit({"stack": s, "digest": s.digest(), "gate": s.gate_entries(), "tag": shown.tag,
          "indexes_in_force": [{"name": e.name, "url": e.url, "source": e.source_label, "override": e.overridden}
                               for e in in_force]}, as_json, human)


@app.command()
def export(
    profile: ProfileArg,
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Directory for the requirement files.")] = Path("."),
    lock: ExportLockOpt = None,
    check: Annotated[bool, typer.Option("--check", help="Compare with the files in --out; exit 1 on drift.")] = False,
    target: Annotated[str | None, typer.Option("--target", metavar="LABEL", help="Only this target's files "
                                               "(e.g. cp310-linux_x86_64): markers evaluated, pins for other "
                                               "targets left out, no marker text.")] = None,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help="requirements: the pip requirement files "
                                     "the profile declares; pylock: PEP 751 lock files from the lock, one "
                                     "pylock.TARGET.toml per target.")] = "requirements",
    as_json: JsonOpt = False,
) -> None:
    """Write requirement files, or the lock as PEP 751 lock files.

    With --check, write nothing: exit 1 with a diff when the files in --out drifted. With --target, the
    files one image of that target installs. --format pylock writes pylock.TARGET.toml from the lock (the
    .lock beside the profile unless --lock): every pin and closure wheel with its URL, size, upload time,
    sha256 and index, for `pip install -r` or `uv pip install -r`.
    """
    from stackctl.usecases import export_profile

    result = export_profile(profile, out, lock, check=check, target=target, fmt=fmt).result
    if result.checked:
        def show_drift() -> None:
            for d in result.drift:
                console.print(d.diff, markup=False)
            if not result.drift:
                console.print(f"[green]ok[/] {', '.join(sorted(result.files))} match {result.stack}")

        emit({"stack": result.stack, "drift": result.drift, "checked": sorted(result.files)}, as_json, show_drift)
        if (failure := result.failure(profile)) is not None:
            raise failure
        return
    emit({"stack": result.stack, "written": sorted(str(p) for p in result.written)}, as_json,
         lambda: console.print("\n".join(f"wrote {p}" for p in result.written)))


@app.command()
def schema(
    as_json: JsonOpt = False,
) -> None:
    """Print the profile format's JSON Schema, for editors.

    The JSON Schema (draft 2020-12) of one profile file, with or without --json, made from the same table
    `validate` checks keys with. Point a TOML editor at it (a `#:schema PATH` comment, taplo, Even Better
    TOML) to complete keys and flag typos as a profile is typed; rules that span keys or files (gate order,
    declared indexes, extends) are `validate`'s alone.
    """
    import json

    from stackctl.profile import profile_schema

    print(json.dumps(profile_schema(), indent=2))
    output.json_emitted = True
