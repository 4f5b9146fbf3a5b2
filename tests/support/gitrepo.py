"""git for tests: a fixed identity, no home directory and no system or global configuration."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    """Run `git -C repo ARGS...` and return its stdout; a failure raises CalledProcessError."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                               "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1",
                               "PATH": "/usr/bin:/bin:/usr/local/bin"}).stdout
