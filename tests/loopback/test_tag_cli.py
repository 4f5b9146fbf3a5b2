"""`stackctl tag` on a profile in a git work tree."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import Cli
from tests.support.imagestack import make_stack_repo


def test_too_long_tag_is_an_input_error(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "t", "127.0.0.1:5000/t/t", commit=False)
    text = repo.profile.read_text().replace('tag = "py{python}', 'tag = "' + "x" * 130 + 'py{python}')
    repo.profile.write_text(text)
    r = cli("tag", str(repo.profile))
    assert r.code == 2 and "longer than 128 characters" in r.err


def test_no_image_section(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "t", "127.0.0.1:5000/t/t", commit=False)
    repo.profile.write_text(repo.profile.read_text().split("[image]")[0])
    r = cli("tag", str(repo.profile))
    assert r.code == 2 and "has no image table" in r.err
