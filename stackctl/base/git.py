"""What the source tree says about itself: revision, branch, exact tag, dirty state, remote."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from stackctl.base.urls import strip_userinfo
from stackctl.errors import InputError, ServiceError


@dataclass(frozen=True)
class GitInfo:
    revision: str  # full commit id
    branch: str | None  # None when HEAD is detached
    tag: str | None  # a tag pointing exactly at HEAD
    dirty: bool  # tracked files differ from HEAD, or a build input is not in HEAD at all
    remote: str | None = None  # origin's URL, userinfo removed
    untracked_inputs: tuple[str, ...] = ()  # build inputs git does not track (so HEAD does not hold them)

    @property
    def ref(self) -> str:
        """`.version` label: the exact tag, else the branch, else the revision."""
        return self.tag or self.branch or self.revision

    @property
    def revision_label(self) -> str:
        return self.revision + ("-dirty" if self.dirty else "")


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ServiceError("git is not installed; pass --revision and --ref to build from a source archive") from None


def _untracked(top: Path, inputs: tuple[Path, ...]) -> tuple[str, ...]:
    """The inputs HEAD does not hold: untracked, ignored, or outside the work tree altogether."""
    inside = {}
    out = []
    for path in inputs:
        resolved = path.resolve()
        if resolved.is_relative_to(top):
            inside[resolved.relative_to(top).as_posix()] = str(path)
        else:
            out.append(str(path))
    if inside:
        listed = _git(top, "ls-files", "-z", "--", *inside).stdout.split("\0")
        out += [shown for rel, shown in inside.items() if rel not in listed]
    return tuple(out)


def read_git(repo: Path, inputs: tuple[Path, ...] = ()) -> GitInfo:
    """`inputs` (the profile, the lock) must be in HEAD for the tree to count as clean: an untracked
    profile builds an image no checkout of the revision can rebuild."""
    head = _git(repo, "rev-parse", "--verify", "HEAD")
    if head.returncode != 0:
        raise InputError(f"{repo}: not a git work tree with a commit; pass --revision and --ref for a source archive")
    top = Path(_git(repo, "rev-parse", "--show-toplevel").stdout.strip()).resolve()
    branch = _git(repo, "symbolic-ref", "--short", "-q", "HEAD").stdout.strip() or None
    tag = _git(repo, "describe", "--tags", "--exact-match", "HEAD").stdout.strip() or None
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    if status.returncode != 0:
        raise ServiceError(f"{repo}: git status failed: {status.stderr.strip()}")
    untracked = _untracked(top, inputs)
    remote = _git(repo, "remote", "get-url", "origin").stdout.strip() or None
    return GitInfo(head.stdout.strip(), branch, tag, bool(status.stdout.strip()) or bool(untracked),
                   strip_userinfo(remote) if remote else None, untracked)


def committed_at(path: Path) -> int | None:
    """Seconds since 1970 of the last commit that wrote `path`, when the file is that commit's (tracked, not
    changed since); None otherwise, or outside a work tree. A checkout moves a file's mtime; this it keeps."""
    try:
        where = path.resolve().parent
        if _git(where, "status", "--porcelain", "--", path.name).stdout.strip():
            return None  # changed or untracked: its content is newer than any commit of it
        return commit_time(where, "HEAD", path.name)
    except (OSError, ServiceError):
        return None


def commit_time(repo: Path, revision: str, path: str | None = None) -> int | None:
    """Seconds since 1970 of a commit's committer date (SOURCE_DATE_EPOCH's usual source); None if unknown."""
    out = _git(repo, "log", "-1", "--format=%ct", revision, *(("--", path) if path else ()))
    text = out.stdout.strip()
    return int(text) if out.returncode == 0 and text.isdigit() else None
