"""Hostile files where `check` and `export` read and write: a file that is a symbolic link to itself, and a
PEP 751 lock file holding an integer Python does not convert. Each is one line naming the file, an exit code
the commands document, and nothing written; never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import Cli, Result
from tests.support.index_server import IndexServer
from tests.support.profiles import write_profile
from tests.support.wheels import build_wheel

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
TARGET = f"cp{PY.replace('.', '')}-linux_x86_64"
PYLOCK = f"pylock.{TARGET}.toml"


@pytest.fixture
def repo(tmp_path: Path, cli: Cli) -> Iterator[Path]:
    """A resolved profile of one pin from a loopback index, its lock written."""
    wheel = build_wheel(tmp_path / "wheels", "toplib", "1.2.0", files={"toplib/__init__.py": ""})
    with IndexServer() as server:
        server.add(wheel)
        write_profile(tmp_path / "repo", "pl", {"toplib": {"version": "1.2.0", "file": "requirements.txt"}},
                      index="vendor", index_url=server.url, python=(PY,))
        r = cli("resolve", "pl", cwd=tmp_path / "repo")
        assert r.code == 0, r.err
        yield tmp_path / "repo"


def loop(path: Path) -> Path:
    """`path` made a symbolic link to itself."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(path.name)
    return path


def one_error(r: Result) -> str:
    assert "Traceback" not in r.err, r.err
    lines = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert r.code == 2 and len(lines) == 1, (r.code, r.out, r.err)
    return lines[0]


@pytest.mark.parametrize("fmt", ["requirements", "pylock"])
def test_a_file_that_links_to_itself_is_named_and_nothing_is_written(cli: Cli, repo: Path, fmt: str) -> None:
    name = "requirements.txt" if fmt == "requirements" else PYLOCK
    looped = loop(repo / "out" / name)
    r = cli("export", "pl", "--format", fmt, "--out", "out", cwd=repo)
    assert one_error(r).startswith(f"error: out/{name}: ") and "symbolic links" in r.err
    assert looped.is_symlink() and sorted(p.name for p in (repo / "out").iterdir()) == [name]
    r = cli("check", "pl", "--format", fmt, "--requirements", "out", cwd=repo)
    assert one_error(r).startswith(f"error: out/{name}: ") and "symbolic links" in r.err


def test_an_output_directory_that_links_to_itself_is_named(cli: Cli, repo: Path) -> None:
    loop(repo / "out")
    r = cli("export", "pl", "--out", "out", cwd=repo)
    assert one_error(r).startswith("error: out/requirements.txt: ") and "symbolic links" in r.err
    r = cli("check", "pl", "--requirements", "out", cwd=repo)
    assert one_error(r).startswith("error: out/requirements.txt: ") and "symbolic links" in r.err


def test_a_lock_that_links_to_itself_is_not_called_missing(cli: Cli, repo: Path) -> None:
    lock = repo / "stacks" / "pl.lock"
    lock.unlink()
    loop(lock)
    r = cli("check", "pl", cwd=repo)
    assert "Traceback" not in r.err and r.code == 1
    assert "FAIL stacks/pl.lock: cannot read the lock (Too many levels of symbolic links)" in r.out, r.out


def test_a_pylock_file_with_an_integer_python_does_not_convert_fails_the_check(cli: Cli, repo: Path) -> None:
    assert cli("export", "pl", "--format", "pylock", "--out", "locks", cwd=repo).code == 0
    path = repo / "locks" / PYLOCK
    path.write_text(path.read_text() + "size = 1" + "0" * 5000 + "\n")
    r = cli("check", "pl", "--format", "pylock", "--requirements", "locks", cwd=repo)
    assert "Traceback" not in r.err and r.code == 1, r.err
    [fail] = [ln for ln in r.out.splitlines() if ln.startswith("FAIL")]
    assert fail.startswith(f"FAIL locks/{PYLOCK}: differs from pl: not a PEP 751 lock file (a number of 5001 "
                           "digits; at most 4300)"), fail


def test_a_profile_that_links_to_itself_is_named_not_called_unknown(cli: Cli, tmp_path: Path) -> None:
    loop(tmp_path / "stacks" / "pl.toml")
    for args in (("check", "pl"), ("validate", "stacks/pl.toml")):
        r = cli(*args, cwd=tmp_path)
        assert one_error(r) == "error: stacks/pl.toml: cannot read: Too many levels of symbolic links", r.err
