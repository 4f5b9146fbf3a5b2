"""A build's scratch directories (`build/STACK/.buildx.XXXXXXXX/`: buildx's metadata, the OCI layout as the
exporter writes it): gone however the build ends, and those a killed run left cleared by the next one.

A build may run on a worker thread that an interrupt leaves behind (the process ends without unwinding it), so
a `finally` alone does not remove its directory: each live one is known here, and the interrupt's handler
removes them (`remove_scratch`) once it has ended the processes writing into them. A run that was killed
outright removes nothing; while a directory is in use its run holds an exclusive lock on a file inside it, so
the next build under the same parent tells a live directory (locked) from a dead run's (free) and removes only
the latter, and only directories of its own prefix.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

OWNER = ".owner"  # the file inside a scratch directory its live run holds locked
# A directory without the owner file is an older stackctl's (or one caught between its creation and its lock):
# cleared only once it is this old, so a directory being made this very moment is left alone.
UNOWNED_AGE_S = 60.0

_live: dict[Path, int] = {}  # scratch directory → the descriptor holding its lock
_live_lock = threading.Lock()


@contextlib.contextmanager
def scratch_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A fresh directory `parent/PREFIX…` for one build's scratch, removed when the block ends however it ends
    (and by `remove_scratch` on an interrupt); the stale ones a dead run left under `parent` are cleared first."""
    parent.mkdir(parents=True, exist_ok=True)
    clear_stale(parent, prefix)
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    fd = os.open(work / OWNER, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    with _live_lock:
        _live[work] = fd
    try:
        yield work
    finally:
        _release(work)


def clear_stale(parent: Path, prefix: str) -> list[Path]:
    """Remove the directories `parent/PREFIX…` no live run holds: each one whose owner file nobody has locked,
    and each one without an owner file older than a minute. Returns those removed."""
    removed: list[Path] = []
    try:
        found = [p for p in parent.iterdir() if p.name.startswith(prefix) and p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed
    for path in sorted(found):
        if _stale(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def remove_scratch() -> int:
    """Remove every scratch directory of this process still in use (on an interrupt, once the processes
    writing into them are ended); how many."""
    with _live_lock:
        live = list(_live)
    for work in live:
        _release(work)
    return len(live)


def _release(work: Path) -> None:
    with _live_lock:
        fd = _live.pop(work, None)
    shutil.rmtree(work, ignore_errors=True)  # removed while still locked: no other run takes it for stale
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _stale(path: Path) -> bool:
    try:
        fd = os.open(path / OWNER, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        try:
            return time.time() - path.stat().st_mtime > UNOWNED_AGE_S
        except OSError:
            return False
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: its run is alive (in this process or another)
        return False
    finally:
        os.close(fd)  # closing it lets go of the lock taken, if any
    return True
