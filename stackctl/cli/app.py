"""The typer application and the output helpers every command shares."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.progress import Progress as ProgressDisplay
    from rich.table import Table
    from rich.text import Text

    from stackctl.base import Progress
    from stackctl.errors import StackctlError

app = typer.Typer(
    name="stackctl",
    help="Pin, prove, build and publish GPU inference image stacks from a declarative profile.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print stackctl's version and exit (with --verbose: "
                                          "also the engine API and uv it uses).")] = False,
) -> None:
    # `stackctl --version [--verbose]` is answered before the commands load (stackctl.cli.main); this option
    # is here for --help and shell completion.
    if version:
        from stackctl.cli import print_version

        print_version(False)
        raise typer.Exit(0)


class _LazyConsole:
    """A rich Console made on first use: a run that prints only JSON (and its progress lines) never imports rich,
    whose import is a large share of a warm resolve (benchmarks/README.md)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def made(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.made(), name)


if TYPE_CHECKING:
    console: Console
    console_err: Console
else:
    console = _LazyConsole(highlight=False, soft_wrap=True)
    console_err = _LazyConsole(stderr=True, highlight=False)


def _real(c: Console) -> Console:
    """The Console itself, for rich code that takes one (a progress display)."""
    return c.made() if isinstance(c, _LazyConsole) else c


def err_is_terminal() -> bool:
    """`console_err.is_terminal`, without importing rich when the answer cannot be yes: stderr is no tty and
    nothing rich heeds says otherwise (TTY_COMPATIBLE, FORCE_COLOR, a notebook). Anything else asks rich."""
    if isinstance(console_err, _LazyConsole) and console_err._console is None:
        isatty = getattr(sys.stderr, "isatty", None)
        try:
            tty = isatty is not None and bool(isatty())
        except ValueError:  # closed
            tty = False
        overridden = any(v in os.environ for v in ("TTY_COMPATIBLE", "FORCE_COLOR", "FORCE_TERMINAL"))
        if not tty and not overridden and "IPython" not in sys.modules:
            return False
    return console_err.is_terminal


class _Output:
    """This run's output flags as parsed (--json, --markdown, --verbose: how an error is shown), and whether it
    already printed its JSON report (a failing check must not print a second one)."""

    json_emitted = False
    as_json = False
    markdown = False
    verbose = False
    argv: tuple[str, ...] = ()  # this run's arguments, for records to say which command made them

    def reset(self, args: list[str]) -> None:
        self.json_emitted = self.as_json = self.markdown = self.verbose = False
        self.argv = tuple(args)


output = _Output()


def invoked() -> str:
    """This run's command line, as a record quotes it: a URL's user:password (`--index NAME=URL`) left out."""
    import shlex

    from stackctl.base import strip_userinfo

    def clean(arg: str) -> str:
        if "://" not in arg:
            return arg
        head, sep, url = arg.partition("=") if "=" in arg.split("://", 1)[0] else ("", "", arg)
        return head + sep + strip_userinfo(url)

    return shlex.join(["stackctl", *(clean(a) for a in output.argv)])


class Format(Enum):
    """What a run prints on stdout (`options.one_format`): one document, for a person or for another program."""

    HUMAN = "human"
    JSON = "json"
    MARKDOWN = "markdown"
    HTML = "html"


def emit(value: Any, as_json: bool, human: Callable[[], object]) -> None:
    """Print `value` as JSON when asked, else let `human` render it for a person."""
    if as_json:
        from stackctl.base import dumps

        print(dumps(value))
        output.json_emitted = True
    else:
        human()


def emit_result(value: Any, fmt: Format, human: Callable[[], object], *, markdown: Callable[[], str] | None = None,
                html: Callable[[], str] | None = None, failure: StackctlError | None = None,
                out: Path | None = None) -> None:
    """Print `value` in the one format the run asked for (`one_format`): JSON, the document `markdown` or
    `html` writes, else `human` for a person; with `out`, that document goes into the file (atomically) and a
    line says so. Then raise `failure`, the result's own: a check that failed exits 1 after its result is shown."""
    document = markdown if fmt is Format.MARKDOWN else html if fmt is Format.HTML else None
    if out is not None and document is not None:
        from stackctl.base import write_atomic

        write_atomic(out, document())
        console.print(f"wrote {out}", markup=False)
    elif fmt is Format.MARKDOWN and markdown is not None:
        print(markdown(), end="")
    elif fmt is Format.HTML and html is not None:
        print(html(), end="")
    else:
        emit(value, fmt is Format.JSON, human)
    if failure is not None:
        raise failure


def progress_display(head: str | None = None) -> ProgressDisplay:
    """How every bar looks: on stderr, gone when done; `head` names the work before the bar."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    from stackctl.base import human_size

    class Count(ProgressColumn):
        """Bytes as sizes (`1.2 GiB/3.9 GiB`, the units of every other size stackctl prints) for a task that
        counts bytes, else `3/9`."""

        def __init__(self) -> None:
            super().__init__()
            self.items = MofNCompleteColumn()

        def render(self, task: Task) -> Text:
            if not counts_bytes(task.description):
                return self.items.render(task)
            total = "?" if task.total is None else human_size(task.total)
            return Text(f"{human_size(task.completed)}/{total}", style="progress.download")

    columns: list[ProgressColumn] = [TextColumn(f"[bold]{head}[/]")] if head else []
    columns += [BarColumn(), Count(), TimeElapsedColumn(), TextColumn("{task.description}")]
    return Progress(*columns, console=_real(console_err), transient=True)


def counts_bytes(label: str) -> bool:
    """Whether a progress label counts bytes (`bytes`, `push layer 3f2a...`) rather than items."""
    return label == "bytes" or " layer " in f" {label} "


class Phase:
    """What the run was doing last, as its progress said it (`resolve pages 3/20`, `build step 5/25: RUN ...`):
    what `error: interrupted` names when Ctrl-C ends the run."""

    now: str | None = None

    @classmethod
    def said(cls, text: str) -> None:
        cls.now = text


@contextmanager
def progress_bar(enabled: bool, head: str | None = None) -> Iterator[Progress | None]:
    """A `Progress` callback drawing one bar per label on a terminal (when `enabled`). Not on a terminal (a CI
    log) and given a `head`, a timestamped line at every tenth of each kind of work, never a carriage return:
    `12:03:04 fetch wheels 3/9`; else None (nothing to draw)."""
    if not err_is_terminal() and head:
        Phase.said(head)
        yield progress_lines(head)
        return
    if not enabled or not err_is_terminal():
        if head:
            Phase.said(head)
        yield None
        return
    if head:
        Phase.said(head)
    with progress_display() as bar:
        tasks: dict[str, Any] = {}

        def update(label: str, done: int, total: int) -> None:
            Phase.said(f"{head} {label}" if head else label)
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=total)
            bar.update(tasks[label], completed=done, total=total)

        yield update


def progress_lines(head: str) -> Progress:
    """Progress for a log that is no terminal: a timestamped line at every tenth of each label's work and at
    its end (`12:03:10 fetch 1.2 GiB of 3.9 GiB`, `12:03:11 resolve pages 9/9`), never a carriage return."""
    import time

    said: dict[str, int] = {}

    def line(label: str, done: int, total: int) -> None:
        Phase.said(f"{head} {label}")
        if done - said.get(label, 0) >= max(1, total // 10) or (done == total and said.get(label) != done):
            said[label] = done
            if label == "bytes" or counts_bytes(label):
                from stackctl.base import human_size  # a resolve's lines count items only
            what = (f"{human_size(done)} of {human_size(total)}" if label == "bytes" else
                    f"{label} {human_size(done)} of {human_size(total)}" if counts_bytes(label) else
                    f"{label} {done}/{total}")
            print(f"{time.strftime('%H:%M:%S')} {head} {what}", file=sys.stderr, flush=True)

    return line


PIPED_WIDTH = 80  # what a CI log or a pager is read at: the width a table must fit when stdout is no terminal


def short_hash(value: str) -> str:
    """A sha256 (or other long hex digest, `sha256:` prefix kept) cut to 12 hex where the full one is not the
    point: enough to tell two apart; `--json` carries the whole value."""
    prefix, _, digest = value.rpartition(":")
    if len(digest) >= 40 and all(c in "0123456789abcdef" for c in digest):
        return f"{prefix}:{digest[:12]}" if prefix else digest[:12]
    return value


class FitTable:
    """A table whose values are never cut: versions, hashes, revisions and file names stay whole on one line.

    Every column is no_wrap except the free-text ones named in `wrap` (they wrap between words). When the
    table does not fit the console (piped: 80 columns) it prints as `key: value` lines per row instead, so
    a CI log or an 80-column terminal shows each value whole."""

    def __init__(self, title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]],
                 wrap: Sequence[str] = ()) -> None:
        self.title, self.columns, self.rows, self.wrap = title, list(columns), [list(r) for r in rows], set(wrap)

    def min_width(self) -> int:
        """The narrowest the table gets without cutting a value: no_wrap cells whole, free text by its
        longest item (see `_need`); plus rich's borders and padding (3 per column and 1)."""
        widths = [self._need(i) for i in range(len(self.columns))]
        return sum(widths) + 3 * len(widths) + 1

    def _need(self, col: int) -> int:
        """A column's narrowest width: a no_wrap column its longest value; a free-text column its longest item
        (`3.12 (series 3.12)`) up to FREE_TEXT_WIDTH, and never less than its longest word, so that a squeezed
        table never stacks an item a word to a line (a table that cannot give that prints as blocks)."""
        from rich.cells import cell_len

        texts = [self.columns[col]] + [r[col] for r in self.rows if col < len(r)]
        if self.columns[col] not in self.wrap:
            return max((cell_len(line) for t in texts for line in t.splitlines()), default=0)
        word = max((cell_len(w) for t in texts for w in t.split()), default=0)
        item = max((cell_len(i.strip()) for t in texts for part in t.splitlines() for i in _items(part)), default=0)
        return max(word, min(item, FREE_TEXT_WIDTH))

    def fits(self, console: Console, width: int) -> bool:
        limit = width if console.is_terminal else min(width, PIPED_WIDTH)
        return self.min_width() <= limit

    def as_table(self) -> Table:
        from rich.table import Table
        from rich.text import Text

        t = Table(show_lines=False)
        for i, c in enumerate(self.columns):
            if c in self.wrap:
                t.add_column(c, overflow="fold", min_width=self._need(i))
            else:
                t.add_column(c, no_wrap=True)
        for r in self.rows:
            t.add_row(*(Text(c) for c in r))
        return t

    def as_blocks(self, width: int | None = None) -> list[Text]:
        """One block per row: the first column as its head, then `key: value` for every other non-empty cell.

        Within `width`, a line is never left for the terminal to fold (it would fold inside a version or a
        tag): a value that does not fit beside its key goes on the lines below it, free text (items joined
        by `; `, prose) one item to a line and wrapped between words. Only a single word longer than the
        screen runs on."""
        import textwrap

        from rich.cells import cell_len
        from rich.text import Text

        lines: list[Text] = [Text(self.title, style="bold")] if self.title else []
        for r in self.rows:
            lines.append(Text(f"{self.columns[0]}: {r[0]}", style="bold"))
            for c, v in zip(self.columns[1:], r[1:], strict=False):
                if not v.strip():
                    continue
                head = f"  {c}: " if c else "  "  # a column with no header shows its value alone
                if width is None or (cell_len(head + v) <= width and "\n" not in v):
                    lines.append(Text(head + v))
                    continue
                lines.append(Text(head.rstrip()))
                items = [i for part in v.splitlines() for i in (_items(part) if c in self.wrap else [part])]
                for item in items:
                    wrapped = textwrap.wrap(item, width=max(20, width - 4), break_long_words=False,
                                            break_on_hyphens=False) if c in self.wrap else [item]
                    for w in wrapped or [item]:
                        # indented under its key when that fits, less (or not) when only that keeps it whole
                        pad = next((n for n in (4, 2, 0) if n + cell_len(w) <= width), 4)
                        lines.append(Text(" " * pad + w))
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Never folded by rich: a title or value longer than the screen runs on rather than being cut inside
        # a name; the blocks below place values so that a line rarely reaches the edge at all.
        limit = options.max_width if console.is_terminal else min(options.max_width, PIPED_WIDTH)
        lines = self.as_blocks(limit)
        for line in lines:
            line.no_wrap, line.overflow = True, "ignore"
        if self.fits(console, options.max_width):
            yield from lines[:1] if self.title else []
            yield self.as_table()
            return
        yield from lines


def say(text: str, style: str | None = None) -> None:
    """A line of prose on stdout. On a terminal, wrapped between words at its width with the rest indented,
    never inside a word: the terminal is never left to fold a version, a URL or a path. Piped (a log, grep),
    one line per fact, as written: a reader of the log finds it whole."""
    import textwrap

    if not console.is_terminal:
        console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)
        return
    for line in textwrap.wrap(text, width=max(20, console.width), subsequent_indent="  ", break_long_words=False,
                              break_on_hyphens=False) or [""]:
        console.print(line, style=style, markup=False, highlight=False)


def _items(text: str) -> list[str]:
    """`a (x; y); b` as its items `a (x; y)` and `b`: split at `; ` outside parentheses only."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == ";" and depth <= 0 and text[i + 1:i + 2] == " ":
            out.append(text[start:i])
            start = i + 2
    return [*out, text[start:]]


# Columns of prose or of space-separated items: they wrap between words, never inside one.
FREE_TEXT = ("note", "other lines", "dynamic section changes", "problem", "text", "skip import if", "detail")
# The narrowest a free-text column is squeezed to in a table: an item (`3.12 (series 3.12)`) up to this stays on
# one line; 9 columns stacked it a word to a line.
FREE_TEXT_WIDTH = 24


LOG_LINE = 240  # the most characters of what a progress line in a log says: a reader finds it on one line


def step_lines(head: str, noun: str = "step") -> Callable[[int, int, str], None]:
    """Progress for a log that is no terminal (CI): one timestamped line per step as it starts, on stderr,
    never a carriage return or an escape (`12:03:04 build step 3/9: tools: RUN python3 -c ...`), and after
    the steps one per phase, said as a phase (`12:03:09 build phase: exporting layers (...)`)."""
    from stackctl.base import is_phase

    def step(n: int, of: int, what: str) -> None:
        import time

        said = what if len(what) <= LOG_LINE else what[:LOG_LINE - 2] + " …"
        where = "phase" if is_phase(n) else f"{noun} {n}/{of}"
        Phase.said(f"{head} {where}" + (f": {said.partition(' (')[0]}" if is_phase(n) else ""))
        print(f"{time.strftime('%H:%M:%S')} {head} {where}: {said}", file=sys.stderr, flush=True)

    return step


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]],
          wrap: Sequence[str] = FREE_TEXT) -> FitTable:
    """A table of plain text (versions, labels and paths are never read as markup) that keeps every value whole;
    `wrap` names the free-text columns that may wrap between words."""
    return FitTable(title, columns, rows, wrap)


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
