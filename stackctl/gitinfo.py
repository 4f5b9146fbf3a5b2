"""What the source tree says about itself: revision, branch, exact tag, dirty state, remote."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from stackctl.errors import InputError, ServiceError


@dataclass(frozen=True)
class GitInfo:
    revision: str  # full commit id
    branch: str | None  # None when HEAD is detached
    tag: str | None  # a tag pointing exactly at HEAD
    dirty: bool  # tracked files differ from HEAD
    remote: str | None = None  # origin's URL, userinfo removed

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


def strip_userinfo(url: str) -> str:
    """`https://user:token@host/x` → `https://host/x`: a remote URL must not carry a credential into a label."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url, flags=re.I)


def read_git(repo: Path) -> GitInfo:
    head = _git(repo, "rev-parse", "--verify", "HEAD")
    if head.returncode != 0:
        raise InputError(f"{repo}: not a git work tree with a commit; pass --revision and --ref for a source archive")
    branch = _git(repo, "symbolic-ref", "--short", "-q", "HEAD").stdout.strip() or None
    tag = _git(repo, "describe", "--tags", "--exact-match", "HEAD").stdout.strip() or None
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    if status.returncode != 0:
        raise ServiceError(f"{repo}: git status failed: {status.stderr.strip()}")
    remote = _git(repo, "remote", "get-url", "origin").stdout.strip() or None
    return GitInfo(head.stdout.strip(), branch, tag, bool(status.stdout.strip()),
                   strip_userinfo(remote) if remote else None)
