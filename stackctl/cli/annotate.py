"""`--annotations`: a command's problems also as GitHub workflow commands or a GitLab Code Quality report.

On a terminal nothing changes. Under GitHub Actions (GITHUB_ACTIONS=true) or with `--annotations github`,
each problem with a file also prints as `::error file=F,line=N,title=T::message` and long phases fold into
`::group::` sections; `--annotations gitlab=PATH` writes the Code Quality report when the run ends, whatever
its outcome (an empty list for a clean run, so the merge request shows the problems as fixed).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from stackctl.cli.app import output
from stackctl.errors import EXIT_INPUT, EXIT_OK, InputError, ProfileError, StackctlError

# Every run imports this module; the annotation model (stackctl.base's) is imported by a run that annotates.
if TYPE_CHECKING:
    from stackctl.base import Annotation


def _seen(ctx: typer.Context, value: list[str] | None) -> list[str] | None:
    start(value, ctx.info_name or "stackctl")
    return value


AnnotationsOpt = Annotated[list[str] | None, typer.Option(
    "--annotations", metavar="KIND", callback=_seen,
    help="Also report problems where CI shows them: `github` prints workflow commands (the default under "
    "GITHUB_ACTIONS=true), `gitlab=PATH` writes a Code Quality report, `none` turns both off.")]


@dataclass
class Sink:
    """Where this run's annotations go, and every one so far (the GitLab report is written once, at the end)."""

    title: str
    github: bool = False
    gitlab: Path | None = None
    root: str | None = None
    collected: list[Annotation] = field(default_factory=list)

    def print(self, line: str) -> None:
        # --json or --markdown claims stdout: then stderr, which the runner reads workflow commands on too
        print(line, file=sys.stderr if output.as_json or output.markdown else sys.stdout, flush=True)


_current: list[Sink] = []  # this run's sink, if any (one command per process run; tests run several)


def start(option: list[str] | None, command: str) -> Sink | None:
    """Read `--annotations` (and GITHUB_ACTIONS) for this run, as the option is parsed; None when nothing is to
    be annotated."""
    _current.clear()
    github = os.environ.get("GITHUB_ACTIONS") == "true"
    gitlab: Path | None = None
    for value in option or ():
        kind, sep, path = value.partition("=")
        if value == "github":
            github = True
        elif value == "none":
            github, gitlab = False, None
        elif kind == "gitlab" and sep and path:
            gitlab = Path(path)
        else:
            raise InputError(f"--annotations {value!r}: use github, gitlab=PATH or none")
    if not github and gitlab is None:
        return None
    root = os.environ.get("GITHUB_WORKSPACE") if github else None
    root = root or os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    sink = Sink(f"stackctl {command}", github, gitlab, root)
    _current.append(sink)
    return sink


def annotate(items: Iterable[Annotation]) -> None:
    """Report `items` where this run's sink sends them (nothing without one)."""
    if not _current:
        return
    from stackctl.base import Annotation, github_command, rebased

    sink = _current[0]
    for a in rebased(items, sink.root, os.getcwd()):
        if a.title is None:
            a = Annotation(a.level, a.message, a.file, a.line, sink.title)
        sink.collected.append(a)
        if sink.github:
            sink.print(github_command(a))


@contextmanager
def group(title: str) -> Iterator[None]:
    """A foldable section of a GitHub log around a long phase (a build's steps, a resolve's pages)."""
    sink = _current[0] if _current else None
    if sink is None or not sink.github:
        yield
        return
    from stackctl.base import github_endgroup, github_group

    sink.print(github_group(title))
    try:
        yield
    finally:
        sink.print(github_endgroup())


def reset() -> None:
    _current.clear()


def finish(exc: StackctlError | None) -> int:
    """At the end of a run: a profile that failed to load is annotated line by line (whichever command
    loaded it), then the GitLab report is written. The exit code a report that cannot be written adds."""
    if not _current:
        return EXIT_OK
    sink = _current[0]
    if isinstance(exc, ProfileError):
        from stackctl.base import from_problem

        annotate(from_problem(p, sink.title) for p in exc.problems)
    _current.clear()
    if sink.gitlab is not None:
        import json

        from stackctl.base import gitlab_report, write_atomic

        try:
            write_atomic(sink.gitlab, json.dumps(gitlab_report(sink.collected), indent=2) + "\n")
        except OSError as exc_:
            print(f"error: --annotations gitlab={sink.gitlab}: cannot write the report: {exc_.strerror}",
                  file=sys.stderr)
            return EXIT_INPUT
    return EXIT_OK
