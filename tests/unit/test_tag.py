"""`stackctl tag`: the tag the profile's template gives, Docker's grammar enforced."""

from __future__ import annotations

import json

from tests.conftest import REPO, STACKS
from tests.support.cli import Cli


def test_reference_tag(cli: Cli) -> None:
    r = cli("tag", str(STACKS / "torch-2.11-post2.toml"))
    assert r.code == 0
    assert r.out.strip() == "ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post2_musa5.2.0"
    r = cli("tag", "torch-2.11-post1", "--json", cwd=REPO)
    assert json.loads(r.out) == {
        "repository": "vllm-musa", "tag": "ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post1_musa5.2.0",
        "ref": "vllm-musa:ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post1_musa5.2.0"}


def test_repository_override_is_validated(cli: Cli) -> None:
    r = cli("tag", str(STACKS / "torch-2.11-post2.toml"), "--repository", "127.0.0.1:5000/team/vllm-musa", "--json")
    assert json.loads(r.out)["ref"].startswith("127.0.0.1:5000/team/vllm-musa:ubuntu22.04_")
    r = cli("tag", str(STACKS / "torch-2.11-post2.toml"), "--repository", "Team/VLLM")
    assert r.code == 2 and "is not a valid repository" in r.err
