"""diff and scan: what a reviewer reads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stackctl.base.words import count
from stackctl.cli.app import (
    JsonOpt,
    MarkdownOpt,
    VerboseOpt,
    app,
    console,
    emit,
    invoked,
    markdown_table,
    one_format,
    short_hash,
    table,
)
from stackctl.errors import CheckFailed, InputError
from stackctl.profile.locate import load_profile, resolve_profile_arg

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
    verbose: VerboseOpt = False,
) -> None:
    """Compare two profiles, locks or images, pin by pin.

    Package / before / after / note. Profiles also show index, target, gate and image changes; locks
    show file and hash changes; images (`host:port/name:tag`) compare the distributions each image says it
    has installed.
    """
    from stackctl.resolve.lock import is_lock_ref
    from stackctl.review.diff import diff_stacks

    one_format(as_json, markdown)
    kinds = [("lock" if is_lock_ref(x) else "image" if _is_image_ref(x) else "profile") for x in (before, after)]
    if kinds[0] != kinds[1]:
        raise InputError(f"cannot compare a {kinds[0]} ({before}) with a {kinds[1]} ({after}): "
                         "give two profiles, two locks or two images")
    if kinds[0] == "lock":
        lock_diff_report(before, after, markdown, as_json)
        return
    if kinds[0] == "image":
        _image_diff(before, after, markdown, changed_only, as_json)
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


def _is_image_ref(spec: str) -> bool:
    """`name:tag`, `host:port/name:tag` or `name@sha256:...`, and not a file, profile or lock."""
    if Path(spec).exists() or Path(spec.partition("@")[0]).suffix in (".toml", ".lock"):
        return False
    return "@sha256:" in spec or ":" in spec.rpartition("/")[2]


def _image_diff(before: str, after: str, markdown: bool, changed_only: bool, as_json: bool) -> None:
    from stackctl.image.labels import diff_installed
    from stackctl.profile.versions import classify
    from stackctl.review.images import image_pins

    rows = [r for r in diff_installed(image_pins(before), image_pins(after))
            if not changed_only or r.change != "unchanged"]

    def note(before_v: str | None, after_v: str | None, change: str) -> str:
        if change != "changed" or before_v is None or after_v is None:
            return change
        try:
            return classify(before_v, after_v)
        except ValueError:  # an installed version that is not PEP 440: say only that it moved
            return change

    table_rows = [[r.package, r.before or "—", r.after or "—", note(r.before, r.after, r.change)] for r in rows]

    def human() -> None:
        if markdown:
            print(markdown_table(_PIN_COLUMNS, table_rows))
            return
        console.print(table(f"{before} → {after}", _PIN_COLUMNS, table_rows))
        moved = sum(1 for r in rows if r.change != "unchanged")
        console.print(f"{moved} of {len(rows)} installed distributions changed")

    emit({"before": before, "after": after,
          "pins": [{"package": r.package, "before": r.before, "after": r.after, "change": r.change,
                    "note": t[3]} for r, t in zip(rows, table_rows, strict=True)]}, as_json, human)


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
                                                help="Also write the result, with both profiles' digests and "
                                                "the time, for `stackctl report` (build/NEW.scan.json).")] = None,
    markdown: MarkdownOpt = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Find references to superseded pins; exit 1 when any remain."""
    from stackctl.review import scan as core

    one_format(as_json, markdown)
    new, old = load_profile(stack), load_profile(since)
    items = core.superseded(old, new)
    allow_file = allow or (path / ".stackctl-scan-allow" if path.is_dir() else None)
    rules: tuple[core.AllowRule, ...] = ()
    if allow is not None and not allow.is_file():
        raise InputError(f"{allow}: " + ("a directory, not an allow file" if allow.is_dir() else "no such allow file"))
    if allow_file is not None and allow_file.is_file():
        try:
            text = allow_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{allow_file}: cannot read the allow file: {exc}") from None
        rules = core.parse_allow(text, str(allow_file))
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
        console.print(f"{count(len(refs), 'stale reference')} in {count(read, 'text file')}; superseded: {sup}")

    result = {"superseded": items, "references": refs, "files_read": read}
    if record is not None:
        from stackctl.base.evidence import write_evidence

        write_evidence(record, "scan", new.name, result, profile_digests=(new.digest(), old.digest()),
                       command=invoked())
    emit(result, as_json, human)
    if refs:
        raise CheckFailed(f"{count(len(refs), 'stale reference')} to superseded pins under {path}")


def lock_diff_report(before: str, after: str, markdown: bool, as_json: bool) -> None:
    """`stackctl diff A.lock B.lock` (either may be PATH@GITREV): file, hash and upload-time changes."""
    from stackctl.resolve.lock import read_lock_ref
    from stackctl.review.diff import diff_locks

    d = diff_locks(read_lock_ref(before), read_lock_ref(after), before, after)
    cols = ["package", "target", "field", "before", "after"]
    rows = [[c.package, c.target, c.field, c.before or "—", c.after or "—"] for c in d.changes]

    def human() -> None:
        if markdown:  # a pull request wraps a whole hash; a terminal shows 12 hex (--json has them whole)
            print(markdown_table(cols, rows))
        else:
            console.print(table(f"{before} → {after}", cols, [[*r[:3], short_hash(r[3]), short_hash(r[4])]
                                                              for r in rows]))
            console.print(f"{len(d.changes)} change{'' if len(d.changes) == 1 else 's'}")

    emit(d, as_json, human)
