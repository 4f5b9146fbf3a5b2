"""The typer application and the output helpers every command shares."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from stackctl.base import jsonout

if TYPE_CHECKING:
    from rich.progress import Progress as ProgressDisplay

    from stackctl.base.progress import Progress

app = typer.Typer(
    name="stackctl",
    help="Pin, prove, build and publish GPU inference image stacks from a declarative profile.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

console = Console(highlight=False, soft_wrap=True)
console_err = Console(stderr=True, highlight=False)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
MarkdownOpt = Annotated[bool, typer.Option("--markdown", help="Print a Markdown table for a pull request.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", help="Show tracebacks for errors.")]


class _Output:
    """Whether this run already printed its JSON report (a failing check must not print a second one)."""

    json_emitted = False


output = _Output()


def one_format(as_json: bool, markdown: bool) -> None:
    """--json and --markdown both claim stdout: a run prints one document, never a guess between them."""
    if as_json and markdown:
        from stackctl.errors import InputError

        raise InputError("--json and --markdown exclude each other: pick one")


def emit(value: Any, as_json: bool, human: Callable[[], object]) -> None:
    """Print `value` as JSON when asked, else let `human` render it for a person."""
    if as_json:
        print(jsonout.dumps(value))
        output.json_emitted = True
    else:
        human()


def progress_display(head: str | None = None) -> ProgressDisplay:
    """How every bar looks: on stderr, gone when done; `head` names the work before the bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn

    columns: list[ProgressColumn] = [TextColumn(f"[bold]{head}[/]")] if head else []
    columns += [BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.description}")]
    return Progress(*columns, console=console_err, transient=True)


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Progress | None]:
    """A `Progress` callback drawing one bar per label on a terminal; None (nothing to draw) elsewhere."""
    if not enabled or not console_err.is_terminal:
        yield None
        return
    with progress_display() as bar:
        tasks: dict[str, Any] = {}

        def update(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=total)
            bar.update(tasks[label], completed=done, total=total)

        yield update


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """A rich table whose cells are plain text: versions, labels and paths are never read as markup."""
    t = Table(title=Text(title) if title else None, title_justify="left", show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*(Text(c) for c in r))
    return t


_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def markdown_text(text: str) -> str:
    """Text a pull request shows as written: `<dist-info>` would be dropped as an unknown HTML tag, two
    globs (`*.json`, `libcuda.so.*`) would italicise the text between them, and `__init__.py` would print
    as a bold "init". An underscore inside a word (deep_ep) is literal and stays as it is."""
    for raw, escaped in (("|", "\\|"), ("\n", " "), ("<", "&lt;"), (">", "&gt;"), ("*", "\\*")):
        text = text.replace(raw, escaped)
    return _EDGE_UNDERSCORE.sub(r"\\_", text)


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return markdown_text(text) or " "

    out = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)
