from __future__ import annotations

from pathlib import Path

import pytest

from stackctl.cli import main
from tests.support.cli import Cli, Result
from tests.support.gitrepo import git

pytest_plugins = ["tests.support.engine", "tests.support.engines", "tests.support.isolation"]

REPO = Path(__file__).resolve().parent.parent
STACKS = REPO / "stacks"
DATA = Path(__file__).resolve().parent / "data"


def _runner(capture: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str, cwd: Path | None = None) -> Result:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capture.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capture.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Run `stackctl ARGS...` in this process; returns exit code, stdout, stderr."""
    return _runner(capsys, monkeypatch)


@pytest.fixture
def cli_fd(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`cli`, with stdout and stderr captured at the file descriptors: what a child process stackctl starts
    (a credential helper) writes to the terminal is seen too."""
    return _runner(capfd, monkeypatch)


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return repo
