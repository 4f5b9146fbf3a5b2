"""report: the pull request body of an upgrade, from the evidence already recorded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from stackctl.cli.app import (
    app,
    console,
    emit,
    markdown_table,
    markdown_text,
    one_format,
    say,
    table,
)
from stackctl.cli.options import JsonOpt, LockOpt, MarkdownOpt, ProfileArg

if TYPE_CHECKING:
    from stackctl.review import Report, Section

DETAILS_OVER = 10  # rows: a longer table folds into <details> so the body stays readable
_MARK = {"ok": "✅", "failed": "❌", "not run": "⚪ not run", "stale": "⚠️ stale", "not applicable": "⚫ not applicable"}


def _code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if text else ""


def render_markdown(rep: Report) -> str:
    out = [f"## {markdown_text(rep.stack)}" + (f" (since {markdown_text(rep.since)})" if rep.since else ""), "",
           markdown_text(rep.summary), ""]
    for s in rep.sections:
        out += _markdown_section(s)
    return "\n".join(out).rstrip() + "\n"


def _markdown_section(s: Section) -> list[str]:
    status = _MARK.get(s.status, s.status)
    out = [f"### {markdown_text(s.title)} {status}", ""]
    when = f" at {s.time}" if s.time else ""
    out += [f"_from {_code(s.source)}{markdown_text(when)}_", ""]
    if s.text:
        out += [markdown_text(s.text), ""]
    for t in s.tables:
        if not t.rows:
            continue
        body = markdown_table(list(t.columns) if any(t.columns) else ["", ""], [list(r) for r in t.rows])
        title = markdown_text(t.title) if t.title else f"{len(t.rows)} rows"
        if len(t.rows) > DETAILS_OVER:
            counted = f"{title} ({len(t.rows)} rows)" if t.title else title
            out += [f"<details><summary>{counted}</summary>", "", body, "", "</details>", ""]
        else:
            out += ([f"**{title}**", ""] if t.title else []) + [body, ""]
    if s.lines:
        fence = "```"
        while fence in "\n".join(s.lines):
            fence += "`"
        block = [fence, *s.lines, fence]
        if len(s.lines) > DETAILS_OVER:
            out += [f"<details><summary>{len(s.lines)} lines</summary>", "", *block, "", "</details>", ""]
        else:
            out += [*block, ""]
    return out


def _print_human(rep: Report) -> None:
    say(rep.summary)
    for s in rep.sections:
        console.print()
        when = f" at {s.time}" if s.time else ""
        say(f"{s.title}: {s.status.upper()} (from `{s.source}`{when})")
        if s.text:
            say(s.text)
        for t in s.tables:
            if t.rows and not any(t.columns):  # a record's fields: `image: REF` lines, not a table without heads
                for key, value in t.rows:
                    console.print(f"{key}: {value}", markup=False)
            elif t.rows:
                console.print(table(t.title or None, list(t.columns), [list(r) for r in t.rows]))
        for line in s.lines:
            console.print(line, markup=False)


@app.command()
def report(
    profile: ProfileArg,
    since: Annotated[str | None, typer.Option("--since", metavar="OLD",
                                              help="The profile the upgrade starts from (default: the one "
                                              "PROFILE extends).")] = None,
    lock: LockOpt = None,
    since_lock: Annotated[Path | None, typer.Option("--since-lock", metavar="PATH",
                                                    help="The old stack's lock (default: beside OLD).")] = None,
    record_dir: Annotated[Path, typer.Option("--record-dir", metavar="DIR",
                                             help="Where the build, ABI, wheel-diff, scan and publication "
                                             "records are.")] = Path("build"),
    markdown: MarkdownOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the pull request body from the recorded evidence.

    Each section names the command that produced it and when; evidence never recorded is shown as
    "not run", evidence made for another lock or profile as "stale", each with the command to run.
    Nothing is run or fetched.
    """
    from stackctl.profile import load_profile
    from stackctl.review import report_for

    one_format(as_json, markdown)
    rep = report_for(load_profile(profile), profile, lock, since=since, since_lock=since_lock, record_dir=record_dir)

    def human() -> None:
        if markdown:
            print(render_markdown(rep), end="")
        else:
            _print_human(rep)

    emit(rep, as_json, human)
