"""Fail fast and say what to do: a build checks the engine before it downloads anything, a typo'd path is
refused before any work, and every connection failure names what was tried and why in words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.imagestack import make_stack_repo
from tests.support.index_server import free_port


def test_build_with_an_unreachable_engine_downloads_nothing(cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    repo = make_stack_repo(tmp_path, "ff", "127.0.0.1:5000/t/ff")
    port = free_port()
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{port}")
    r = cli("build", "ff", "--record-dir", str(tmp_path / "build"), cwd=repo.root)
    assert r.code == 3, r.out + r.err
    assert r.err.splitlines() == [
        f"error: cannot reach the Docker engine at tcp://127.0.0.1:{port} (DOCKER_HOST): "
        "connection refused: nothing listens there",
        "hint: start the engine (`bash .ci/services.sh`) or point DOCKER_HOST at it"]
    assert not (tmp_path / "build").exists()  # no wheelhouse fetched, no context written


def test_a_missing_wheelhouse_is_an_error_unless_fetch(cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    repo = make_stack_repo(tmp_path, "ff", "127.0.0.1:5000/t/ff")
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{free_port()}")
    typo = tmp_path / "wheelhuose"
    r = cli("build", "ff", "--wheelhouse", str(typo), cwd=repo.root)
    assert r.code == 2
    assert r.err.splitlines() == [f"error: --wheelhouse {typo}: no such directory",
                                  "hint: check the path, or add --fetch to download the lock's wheels into it"]
    assert not typo.exists()
    r = cli("render", "ff", "--out", str(tmp_path / "ctx"), "--wheelhouse", str(typo), cwd=repo.root)
    assert r.code == 2 and r.err.splitlines()[0] == f"error: --wheelhouse {typo}: no such directory"
    assert not typo.exists() and not (tmp_path / "ctx").exists()
    # with --fetch the directory is wanted: the run goes on (here to the engine, which is down)
    r = cli("build", "ff", "--wheelhouse", str(typo), "--fetch", cwd=repo.root)
    assert r.code == 3 and "cannot reach the Docker engine" in r.err


def test_inspect_of_a_down_registry_names_the_url_and_the_cause(cli: Cli) -> None:
    port = free_port()
    r = cli("inspect", f"127.0.0.1:{port}/x/y:1", "--json")
    assert r.code == 3
    assert json.loads(r.out)["error"] == (f"registry 127.0.0.1:{port} unreachable at http://127.0.0.1:{port}/v2/: "
                                          "connection refused: nothing listens there")
    assert "ConnectionError" not in r.err and "HTTPConnection" not in r.err
    assert r.err.splitlines()[1].startswith("hint: check that the registry runs")


def test_fetch_in_a_ci_log_prints_timestamped_lines(cli: Cli, tmp_path: Path) -> None:
    import re

    repo = make_stack_repo(tmp_path, "ff", "127.0.0.1:5000/t/ff")
    # the wheelhouse already holds every wheel: each is checked and kept, and the log says how far it got
    r = cli("fetch", "ff", "--target", repo.stack.targets[0].label, "--dest", str(repo.wheelhouse), cwd=repo.root)
    assert r.code == 0, r.err
    lines = r.err.splitlines()
    wheels = [ln for ln in lines if " fetch wheels " in ln]
    sizes = [ln for ln in lines if " fetch wheels " not in ln]
    assert wheels and all(re.fullmatch(r"\d\d:\d\d:\d\d fetch wheels \d/5", ln) for ln in wheels), r.err
    assert wheels[-1].endswith(" 5/5")
    # and the bytes: what a multi-gigabyte torch wheel needs to show it is moving
    assert sizes and all(re.fullmatch(r"\d\d:\d\d:\d\d fetch [\d.]+ (B|KiB|MiB|GiB) of [\d.]+ (B|KiB|MiB|GiB)", ln)
                         for ln in sizes), r.err
    total = sizes[-1].split(" of ")[1]
    assert sizes[-1].split(" fetch ")[1] == f"{total} of {total}"
    assert "\r" not in r.err and "\x1b" not in r.err


def test_render_in_a_ci_log_prints_a_line_per_wheel(cli: Cli, tmp_path: Path) -> None:
    import re

    repo = make_stack_repo(tmp_path, "ff", "127.0.0.1:5000/t/ff")
    r = cli("render", "ff", "--out", str(tmp_path / "ctx"), "--wheelhouse", str(repo.wheelhouse), cwd=repo.root)
    assert r.code == 0, r.err
    lines = r.err.splitlines()
    assert [re.sub(r"^\d\d:\d\d:\d\d context wheel (\d)/5: \S+\.whl$", r"\1", ln) for ln in lines] == list("12345")


def test_fetch_and_render_reports_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.support.fit import check_fits

    repo = make_stack_repo(tmp_path, "ff", "127.0.0.1:5000/t/ff")
    check_fits(cli, monkeypatch, ["fetch", "ff", "--target", repo.stack.targets[0].label, "--dest",
                                  str(repo.wheelhouse)], ["target", "dest"], cwd=repo.root)
    check_fits(cli, monkeypatch, ["render", "ff", "--out", str(tmp_path / "ctx")], ["context"], cwd=repo.root)


def test_a_reader_that_stops_reading_is_not_a_failed_check(tmp_path: Path) -> None:
    """`stackctl inspect REF | head -2`: the pipe closes before the output ends. That is the reader's choice, not
    a check that failed: the command runs on, exits with its own code and says nothing."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "stackctl", "show", str(REPO / "stacks" / "public-example.toml")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # closed before the first write: every write meets a closed pipe
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and err == b""
