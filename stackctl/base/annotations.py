"""Problems as the places reviewers already look: GitHub workflow commands and GitLab Code Quality reports.

Pure: annotations in, text or JSON-ready values out. A stage says where each of its problems is (a file,
a line where it knows one) as data; the CLI decides whether and where to print them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from stackctl.errors import Problem


class Level(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTICE = "notice"


# GitLab's severities run info, minor, major, critical, blocker: a failed check fails the pipeline, so major.
_GITLAB_SEVERITY = {Level.ERROR: "major", Level.WARNING: "minor", Level.NOTICE: "info"}


@dataclass(frozen=True)
class Annotation:
    """One problem where a reviewer sees it: the file (relative to the repository) and line it is about."""

    level: Level
    message: str
    file: str | None = None
    line: int | None = None
    title: str | None = None


def from_problem(problem: Problem, title: str = "stackctl validate") -> Annotation:
    """A profile problem at its FILE:LINE; the key path leads the message, as on the terminal."""
    message = f"{problem.key}: {problem.message}" if problem.key else problem.message
    return Annotation(Level.ERROR, message, problem.file, problem.line, title)


def relative(file: str, root: str, cwd: str) -> str:
    """`file` (as the user named it, relative to `cwd` or absolute) as a path under the repository `root`,
    which is what both CI systems match against the diff. A file outside the root stays as it was given."""
    absolute = os.path.normpath(os.path.join(cwd, file))
    root = os.path.normpath(root)
    if absolute == root or not absolute.startswith(root.rstrip(os.sep) + os.sep):
        return file
    return os.path.relpath(absolute, root).replace(os.sep, "/")


def rebased(annotations: Iterable[Annotation], root: str | None, cwd: str) -> tuple[Annotation, ...]:
    if root is None:
        return tuple(annotations)
    return tuple(a if a.file is None else Annotation(a.level, a.message, relative(a.file, root, cwd), a.line,
                                                     a.title) for a in annotations)


# GitHub's workflow-command rules (the runner decodes the same set): in the message `%`, CR and LF are
# percent-encoded; in a property value also `:` and `,`, which would otherwise end the value.
def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_command(a: Annotation) -> str:
    """`::error file=F,line=N,title=T::message`; properties the annotation lacks are left out."""
    props = [f"{k}={escape_property(v)}" for k, v in
             (("file", a.file), ("line", str(a.line) if a.line else None), ("title", a.title)) if v]
    return f"::{a.level.value}{' ' + ','.join(props) if props else ''}::{escape_data(a.message)}"


def github_group(title: str) -> str:
    return f"::group::{escape_data(title)}"


def github_endgroup() -> str:
    return "::endgroup::"


def gitlab_issue(a: Annotation) -> dict[str, Any]:
    """One Code Quality issue. GitLab keys issues by fingerprint across pipelines (new, fixed, unchanged):
    the fingerprint is the check, file, line and message, so two problems never collapse into one."""
    path = a.file or "."
    check = a.title or "stackctl"
    fingerprint = hashlib.sha256("\0".join([check, path, str(a.line or 0), a.message]).encode()).hexdigest()
    return {"description": a.message, "check_name": check, "fingerprint": fingerprint[:32],
            "severity": _GITLAB_SEVERITY[a.level], "location": {"path": path, "lines": {"begin": a.line or 1}}}


def gitlab_report(annotations: Sequence[Annotation]) -> list[dict[str, Any]]:
    """The whole report: every annotation with a file (GitLab places each issue in a file), in order, and
    no two with one fingerprint."""
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for a in annotations:
        if a.file is None:
            continue
        issue = gitlab_issue(a)
        if issue["fingerprint"] not in seen:
            seen.add(issue["fingerprint"])
            out.append(issue)
    return out
