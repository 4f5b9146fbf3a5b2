"""diff and scan: what a reviewer reads."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from stackctl.base import count
from stackctl.cli.annotate import AnnotationsOpt, annotate
from stackctl.cli.app import (
    app,
    console,
    console_err,
    emit,
    invoked,
    markdown_table,
    say,
    short_hash,
    table,
)
from stackctl.cli.options import JsonOpt, MarkdownOpt, NoRecordOpt, one_format

if TYPE_CHECKING:
    from stackctl.review import ImageDiff, LockDiff, StackDiff

_PIN_COLUMNS = ["package", "before", "after", "note"]


@app.command()
def diff(
    before: Annotated[str, typer.Argument(metavar="A",
                                          help="Profile, lock or image (profiles and locks may be PATH@GITREV).")],
    after: Annotated[str, typer.Argument(metavar="B",
                                         help="Profile, lock or image (profiles and locks may be PATH@GITREV).")],
    markdown: MarkdownOpt = False,
    changed_only: Annotated[bool, typer.Option("--changed-only", help="Leave unchanged pins out.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Compare two profiles, locks or images, pin by pin.

    Package / before / after / note. Profiles also show index, target, gate and image changes; locks
    show file and hash changes; images (`host:port/name:tag`) compare the distributions each image says it
    has installed.
    """
    from stackctl.review import ImageDiff, LockDiff, compare

    one_format(as_json, markdown)
    d = compare(before, after)
    if isinstance(d, LockDiff):
        _print_lock_diff(d, markdown, as_json)
    elif isinstance(d, ImageDiff):
        _print_image_diff(d, markdown, changed_only, as_json)
    else:
        _print_stack_diff(d, markdown, changed_only, as_json)


def _print_stack_diff(d: StackDiff, markdown: bool, changed_only: bool, as_json: bool) -> None:
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


def _print_image_diff(d: ImageDiff, markdown: bool, changed_only: bool, as_json: bool) -> None:
    pins = d.moved if changed_only else d.pins
    table_rows = [[r.package, r.before or "—", r.after or "—", r.note] for r in pins]

    def human() -> None:
        if markdown:
            print(markdown_table(_PIN_COLUMNS, table_rows))
            return
        console.print(table(f"{d.before} → {d.after}", _PIN_COLUMNS, table_rows))
        say(f"{len(d.moved)} of {count(len(pins), 'installed distribution')} "
            "changed")

    emit({"before": d.before, "after": d.after, "pins": pins}, as_json, human)


@app.command()
def scan(
    path: Annotated[Path, typer.Argument(metavar="PATH",
                                         help="Tree (or file) to search; git-tracked files in a repository.")],
    stack: Annotated[str, typer.Option("--stack", metavar="NEW", help="The new profile.")],
    since: Annotated[str, typer.Option("--since", metavar="OLD", help="The old profile whose pins NEW superseded.")],
    allow: Annotated[Path | None, typer.Option("--allow", metavar="FILE",
                                               help="Allow file: PATH_GLOB or PATH_GLOB:LINE a line "
                                                "(default: PATH/.stackctl-scan-allow if present).")] = None,
    record: Annotated[Path | None, typer.Option("--record", metavar="FILE",
                                                help="Where the result goes, with both profiles' digests and the "
                                                "time, for `stackctl report` (default: build/NEW.scan.json).")]
    = None,
    no_record: NoRecordOpt = False,
    markdown: MarkdownOpt = False,
    annotations: AnnotationsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Find references to superseded pins; exit 1 when any remain."""
    from stackctl.usecases import scan_profile

    one_format(as_json, markdown)
    result = scan_profile(path, stack, since, allow, record=record, no_record=no_record, command=invoked())
    for w in result.warnings:
        console_err.print(f"[yellow]warning:[/] {w}", highlight=False)
    refs, items, read = result.references, result.superseded, result.files_read

    def human() -> None:
        if markdown:
            print(markdown_table(["file", "line", "packages", "superseded", "text"],
                                 [[r.path, str(r.line), ", ".join(r.packages), ", ".join(r.old), r.text]
                                  for r in refs]))
            return
        for r in refs:
            console.print(f"{r.path}:{r.line}: {r.text}", markup=False)
        sup = ", ".join(f"{s.package} {s.old}" for s in items) or "nothing"
        say(f"{count(len(refs), 'stale reference')} in {count(read, 'text file')}; superseded: {sup}")
        if result.recorded is not None:
            say(f"recorded in {result.recorded} (what `stackctl report` reads)")

    emit(result, as_json, human)
    annotate(result.annotations(path))
    if (failure := result.failure(path)) is not None:
        raise failure


def _print_lock_diff(d: LockDiff, markdown: bool, as_json: bool) -> None:
    """`stackctl diff A.lock B.lock` (either may be PATH@GITREV): file, hash and upload-time changes."""
    cols = ["package", "target", "field", "before", "after"]
    rows = [[c.package, c.target, c.field, c.before or "—", c.after or "—"] for c in d.changes]

    def human() -> None:
        if markdown:  # a pull request wraps a whole hash; a terminal shows 12 hex (--json has them whole)
            print(markdown_table(cols, rows))
        else:
            console.print(table(f"{d.before} → {d.after}", cols, [[*r[:3], short_hash(r[3]), short_hash(r[4])]
                                                                  for r in rows]))
            console.print(f"{len(d.changes)} change{'' if len(d.changes) == 1 else 's'}")

    emit(d, as_json, human)
