"""Hostile files where `check` and `export` read and write: a PEP 751 lock file holding an integer Python does
not convert. Each is one line naming the file, an exit code the commands document, and nothing written;
never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import Cli
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


def test_a_pylock_file_with_an_integer_python_does_not_convert_fails_the_check(cli: Cli, repo: Path) -> None:
    assert cli("export", "pl", "--format", "pylock", "--out", "locks", cwd=repo).code == 0
    path = repo / "locks" / PYLOCK
    path.write_text(path.read_text() + "size = 1" + "0" * 5000 + "\n")
    r = cli("check", "pl", "--format", "pylock", "--requirements", "locks", cwd=repo)
    assert "Traceback" not in r.err and r.code == 1, r.err
    [fail] = [ln for ln in r.out.splitlines() if ln.startswith("FAIL")]
    assert fail.startswith(f"FAIL locks/{PYLOCK}: differs from pl: not a PEP 751 lock file (a number of 5001 "
                           "digits; at most 4300)"), fail
