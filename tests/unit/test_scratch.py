"""A build's scratch directories: what an interrupted or killed build left is cleared by the next build, a live
build's is never touched, and nothing but stackctl's own prefix is removed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stackctl.base.scratch import OWNER, UNOWNED_AGE_S, clear_stale, remove_scratch, scratch_dir


def _left(parent: Path, name: str, *, owner: bool = True, age: float = 0.0) -> Path:
    """A directory as a run that died left it: its owner file there (nobody holds its lock), a partial layout."""
    path = parent / name
    (path / "oci" / "blobs").mkdir(parents=True)
    (path / "oci" / "blobs" / "partial").write_bytes(b"x" * 1024)
    if owner:
        (path / OWNER).touch()
    if age:
        then = time.time() - age
        os.utime(path, (then, then))
    return path


def test_the_next_build_clears_what_a_killed_build_left_and_only_that(tmp_path: Path) -> None:
    dead = _left(tmp_path, ".buildx.k1ll3d00")
    older = _left(tmp_path, ".buildx.0ldstyle", owner=False, age=UNOWNED_AGE_S + 30)
    being_made = _left(tmp_path, ".buildx.n0wn0w00", owner=False)
    others = [_left(tmp_path, ".bake.k1ll3d00"), _left(tmp_path, "context"), _left(tmp_path, "x.buildx.y")]
    with scratch_dir(tmp_path, ".buildx.") as work:
        assert work.is_dir() and work.name.startswith(".buildx.")
        assert not dead.exists() and not older.exists()
        assert being_made.exists() and all(p.exists() for p in others)
        # a second build beside a live one leaves it alone
        with scratch_dir(tmp_path, ".buildx.") as beside:
            assert work.is_dir() and beside != work
        assert not beside.exists() and work.is_dir()
        assert clear_stale(tmp_path, ".buildx.") == []
    assert not work.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([being_made.name, *(p.name for p in others)])


def test_an_interrupt_raised_inside_the_build_leaves_no_scratch(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), scratch_dir(tmp_path, ".buildx.") as work:
        (work / "oci").mkdir()
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_the_interrupt_handler_removes_the_scratch_of_a_build_left_running(tmp_path: Path) -> None:
    """A build on a worker thread is never unwound when the process ends on Ctrl-C: the handler removes its
    directory (`stackctl.cli._interrupted`), and the build's own ending later removes nothing twice."""
    with scratch_dir(tmp_path, ".buildx.") as work:
        (work / "metadata.json").write_text("{}")
        assert remove_scratch() == 1
        assert not work.exists()
    assert remove_scratch() == 0
    assert list(tmp_path.iterdir()) == []
