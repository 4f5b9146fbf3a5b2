"""diff and scan: what a reviewer reads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stackctl.cli.app import JsonOpt, MarkdownOpt, VerboseOpt, app, console, emit, markdown_table, table
from stackctl.cli.profiles import load_profile, resolve_profile_arg
from stackctl.errors import CheckFailed, InputError

_PIN_COLUMNS = ["package", "before", "after", "note"]


@app.command()
def diff(
    before: Annotated[str, typer.Argument(help="Profile, PATH@GITREV, or stack name.")],
    after: Annotated[str, typer.Argument(help="Profile, PATH@GITREV, or stack name.")],
    markdown: MarkdownOpt = False,
    changed_only: Annotated[bool, typer.Option("--changed-only", help="Leave unchanged pins out.")] = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Package / before / after / note for two stacks, plus index, target, gate and image changes."""
    from stackctl.cli.resolve import is_lock_ref, lock_diff_report
    from stackctl.diff import diff_stacks

    if is_lock_ref(before) and is_lock_ref(after):
        lock_diff_report(before, after, markdown, as_json)
        return

    d = diff_stacks(load_profile(before), load_profile(after), before, after)
    pins = d.moved if changed_only else d.pins
    rows = [[p.package, p.before or "—", p.after or "—", p.note] for p in pins]
    frows = [[f"{f.section}: {f.key}", f.before or "—", f.after or "—"] for f in d.fields]

    def human() -> None:
        if markdown:
            print(markdown_table(_PIN_COLUMNS, rows))
            if frows:
                print()
                print(markdown_table(["field", "before", "after"], frows))
            return
        console.print(table(f"{d.before} → {d.after}", _PIN_COLUMNS, rows))
        if frows:
            console.print(table("other changes", ["field", "before", "after"], frows))
        console.print(f"{len(d.moved)} of {len(d.pins)} pins changed, {len(d.fields)} other changes")

    emit({"before": d.before, "after": d.after,
          "pins": [{"package": p.package, "before": p.before, "after": p.after, "change": p.change,
                    "move": p.move, "note": p.note} for p in pins],
          "fields": d.fields}, as_json, human)


@app.command()
def scan(
    path: Annotated[Path, typer.Argument(help="Tree (or file) to search; git-tracked files in a repository.")],
    stack: Annotated[str, typer.Option("--stack", help="The new profile.")],
    since: Annotated[str, typer.Option("--since", help="The old profile whose pins NEW superseded.")],
    allow: Annotated[Path | None, typer.Option("--allow", help="Allow file: PATH_GLOB or PATH_GLOB:LINE a line "
                                                "(default: PATH/.stackctl-scan-allow if present).")] = None,
    markdown: MarkdownOpt = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Find references to superseded pins; exit 1 when any remain."""
    from stackctl import scan as core

    new, old = load_profile(stack), load_profile(since)
    items = core.superseded(old, new)
    allow_file = allow or (path / ".stackctl-scan-allow" if path.is_dir() else None)
    rules: tuple[core.AllowRule, ...] = ()
    if allow is not None and not allow.is_file():
        raise InputError(f"{allow}: no such allow file")
    if allow_file is not None and allow_file.is_file():
        rules = core.parse_allow(allow_file.read_text(encoding="utf-8"), str(allow_file))
    # The old profile itself is meant to name the old versions.
    since_path = Path(resolve_profile_arg(since))
    exclude = frozenset({since_path.resolve()}) if since_path.exists() else frozenset()
    refs, read = core.scan_tree(path, core.needles(items), rules, exclude)

    def human() -> None:
        if markdown:
            print(markdown_table(["file", "line", "packages", "superseded", "text"],
                                 [[r.path, str(r.line), ", ".join(r.packages), ", ".join(r.old), r.text]
                                  for r in refs]))
            return
        for r in refs:
            console.print(f"{r.path}:{r.line}: {r.text}", markup=False)
        sup = ", ".join(f"{s.package} {s.old}" for s in items) or "nothing"
        console.print(f"{len(refs)} stale reference(s) in {read} text files; superseded: {sup}")

    emit({"superseded": items, "references": refs, "files_read": read}, as_json, human)
    if refs:
        raise CheckFailed(f"{len(refs)} stale reference(s) to superseded pins under {path}")
