from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stackctl.cli import main
from tests.support.cli import Cli, Result
from tests.support.gitrepo import git

pytest_plugins = ["tests.support.engine", "tests.support.engines", "tests.support.isolation", "tests.support.raycluster"]

REPO = Path(__file__).resolve().parent.parent
STACKS = REPO / "stacks"
DATA = Path(__file__).resolve().parent / "data"


def _records(directory: Path) -> dict[str, tuple[int, int]]:
    try:
        return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in directory.iterdir() if p.is_file()}
    except OSError:
        return {}


@pytest.fixture(autouse=True)
def checkout_records_untouched() -> Iterator[None]:
    """The checkout's build/ holds the user's own records, which `stackctl report` quotes as evidence: a test
    that records there (a check run from the checkout without --record, --no-record or a cwd of its own) puts
    a test's scan or a loopback server's wheel diff into the user's pull request. It fails, and what it
    created is removed again."""
    records = REPO / "build"
    before = _records(records)
    yield
    after = _records(records)
    created = sorted(set(after) - set(before))
    changed = sorted(n for n in set(after) & set(before) if after[n] != before[n])
    for name in created:
        (records / name).unlink(missing_ok=True)
    if created or changed:
        pytest.fail(f"the test wrote the checkout's records in {records}: created {created}, changed {changed}; "
                    "give the command --no-record, --record PATH or a cwd of its own", pytrace=False)


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
