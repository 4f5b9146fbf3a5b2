"""`stackctl tag`: the tag the profile's template gives, Docker's grammar enforced."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO, STACKS, Result
from tests.support.imagestack import make_stack_repo


def test_reference_tag(cli: Callable[..., Result]) -> None:
    r = cli("tag", str(STACKS / "torch-2.11-post2.toml"))
    assert r.code == 0
    assert r.out.strip() == "ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post2_musa5.2.0"
    r = cli("tag", "torch-2.11-post1", "--json", cwd=REPO)
    assert json.loads(r.out) == {
        "repository": "vllm-musa", "tag": "ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post1_musa5.2.0",
        "ref": "vllm-musa:ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post1_musa5.2.0"}


def test_repository_override_is_validated(cli: Callable[..., Result]) -> None:
    r = cli("tag", str(STACKS / "torch-2.11-post2.toml"), "--repository", "127.0.0.1:5000/team/vllm-musa", "--json")
    assert json.loads(r.out)["ref"].startswith("127.0.0.1:5000/team/vllm-musa:ubuntu22.04_")
    r = cli("tag", str(STACKS / "torch-2.11-post2.toml"), "--repository", "Team/VLLM")
    assert r.code == 2 and "is not a valid repository" in r.err


def test_too_long_tag_is_an_input_error(tmp_path: Path, cli: Callable[..., Result]) -> None:
    repo = make_stack_repo(tmp_path, "t", "127.0.0.1:5000/t/t", commit=False)
    text = repo.profile.read_text().replace('tag = "py{python}', 'tag = "' + "x" * 130 + 'py{python}')
    repo.profile.write_text(text)
    r = cli("tag", str(repo.profile))
    assert r.code == 2 and "longer than 128 characters" in r.err


def test_no_image_section(tmp_path: Path, cli: Callable[..., Result]) -> None:
    repo = make_stack_repo(tmp_path, "t", "127.0.0.1:5000/t/t", commit=False)
    repo.profile.write_text(repo.profile.read_text().split("[image]")[0])
    r = cli("tag", str(repo.profile))
    assert r.code == 2 and "has no image table" in r.err
