"""report: the pull request body of an upgrade, from the evidence already recorded."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from stackctl.cli.app import (
    app,
    console,
    emit_result,
    markdown_table,
    markdown_text,
    say,
    table,
)
from stackctl.cli.options import JsonOpt, LockOpt, MarkdownOpt, ProfileArg, one_format

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
    out += [f"![{markdown_text(Path(p).name)}]({p})" for p in s.pictures]
    out += [""] if s.pictures else []
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


# A table is as wide as the page and no wider: a cell breaks a long word (a digest, an image reference, a
# command) where it must instead of pushing the last columns out of sight; a table that still cannot fit
# scrolls inside its own box rather than cutting the page.
_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
.table{max-width:100%;overflow-x:auto;margin:.5em 0 1em}
table{border-collapse:collapse;font-size:12px;max-width:100%}th,td{border:1px solid #ccc;padding:3px 6px;
text-align:left;vertical-align:top;overflow-wrap:anywhere}th{background:#f3f3f3}
code{font-size:90%;background:#f3f3f3;padding:0 2px;border-radius:2px;overflow-wrap:anywhere}
pre{background:#f6f6f6;padding:.5em;overflow:auto}
.status{font-size:12px;padding:1px 6px;border-radius:3px;background:#eee}.ok{background:#d8f0d8}
.failed{background:#f6d5d5}.stale{background:#f8ecc8}figure{margin:1em 0}svg{max-width:100%;height:auto}"""
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _inline(text: str) -> str:
    """Text as HTML, its Markdown code spans (`stackctl build X`, as the Markdown body shows them) as code."""
    out, at = [], 0
    for m in _CODE_SPAN.finditer(text):
        code = m.group(2)
        if len(code) > 1 and code[0] == code[-1] == " ":  # "`` `x` ``": Markdown's padding around a backtick
            code = code[1:-1]
        out += [html.escape(text[at:m.start()]), f"<code>{html.escape(code)}</code>"]
        at = m.end()
    return "".join(out) + html.escape(text[at:])


def _svg(path: str) -> str:
    """A picture's SVG, inline: the page stays one file a reviewer can open or attach."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"<p>{html.escape(path)}: cannot read the picture ({html.escape(str(exc))})</p>"
    start = text.find("<svg")
    return text[start:] if start >= 0 else f"<p>{html.escape(path)} is not an SVG picture</p>"


def render_html(rep: Report) -> str:
    """The report as one self-contained HTML page: every section's tables, lines and pictures."""
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{e(rep.stack)}: stackctl report</title><style>{_CSS}</style></head><body>",
           f"<h1>{e(rep.stack)}" + (f" (since {e(rep.since)})" if rep.since else "") + "</h1>",
           f"<p>{_inline(rep.summary)}</p>"]
    for s in rep.sections:
        klass = s.status.replace(" ", "-")
        out.append(f'<section id="{e(s.key)}"><h2>{e(s.title)} <span class="status {klass}">{e(s.status)}</span>'
                   "</h2>")
        when = f" at {e(s.time)}" if s.time else ""
        out.append(f"<p><em>from <code>{e(s.source)}</code>{when}</em></p>")
        if s.text:
            out.append(f"<p>{_inline(s.text)}</p>")
        for t in s.tables:
            if not t.rows:
                continue
            if t.title:
                out.append(f"<h3>{e(t.title)}</h3>")
            out.append('<div class="table"><table>')
            if any(t.columns):
                out.append("<tr>" + "".join(f"<th>{e(c)}</th>" for c in t.columns) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{_inline(str(c))}</td>" for c in row) + "</tr>" for row in t.rows]
            out.append("</table></div>")
        for p in s.pictures:
            out.append(f'<figure>{_svg(p)}<figcaption>{e(p)}</figcaption></figure>')
        if s.lines:
            out.append("<pre>" + e("\n".join(s.lines)) + "</pre>")
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


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
        for p in s.pictures:
            console.print(f"picture: {p}", markup=False)
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
    as_html: Annotated[bool, typer.Option("--html", help="Print one self-contained HTML page: the tables and "
                                          "the benchmarks' pictures, for a reviewer's browser.")] = False,
    as_json: JsonOpt = False,
    out: Annotated[Path | None, typer.Option("--out", metavar="FILE",
                                             help="Write the report to FILE instead of printing it: the --html "
                                             "page, else the Markdown body.")] = None,
) -> None:
    """Write the pull request body from the recorded evidence.

    Each section names the command that produced it and when; evidence never recorded is shown as
    "not run", evidence made for another lock or profile as "stale", each with the command to run.
    Nothing is run or fetched.
    """
    from stackctl.usecases import report_profile

    fmt = one_format(as_json, markdown, as_html, out=out)
    rep = report_profile(profile, lock, since=since, since_lock=since_lock, record_dir=record_dir)
    emit_result(rep, fmt, lambda: _print_human(rep), markdown=lambda: render_markdown(rep),
                html=lambda: render_html(rep), out=out)
