"""The README's first command: `stackctl resolve stacks/public-example.toml` against the real public index
of the user's pip configuration (PIP_INDEX_URL, pip's `index-url`, or pip's default), with the machine's
CA bundle. Without CI set, an unreachable index skips; in CI it fails like every other missing service.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import STACKS, Result

pytestmark = pytest.mark.network

Cli = Callable[..., Result]


def test_public_example_resolves_for_real(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache"))  # cold: every answer from the index
    lock = tmp_path / "public-example.lock"
    r = cli("resolve", str(STACKS / "public-example.toml"), "--lock", str(lock), "--json")
    if r.code == 3 and not os.environ.get("CI"):
        pytest.skip(f"public index unreachable: {r.err.strip()[:200]}")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    targets = {"cp310-linux_x86_64", "cp312-linux_x86_64"}
    files = {(f["name"], f["target"]): f for f in data["files"]}
    assert set(files) == {(n, t) for n in ("torchada", "torch", "numpy", "packaging") for t in targets}
    for f in files.values():
        assert re.fullmatch(r"[0-9a-f]{64}", f["sha256"]) and f["size"] > 0
        assert f["url"].startswith("https://") and "@" not in f["url"].split("/")[2]
        assert f["upload_time_source"] == "index" and f["upload_time"].endswith("Z")
        assert f["newest_in_line"] is not None and not f["yanked"]
    assert files[("torch", "cp312-linux_x86_64")]["filename"].startswith("torch-2.9.1-cp312-cp312-")
    assert any(d.startswith("torch") for d in files[("torchada", "cp310-linux_x86_64")]["requires_dist"])
    closure = {(c["target"], c["name"]) for c in data["closure"]}
    assert {t for t, _ in closure} == targets and all((t, "filelock") in closure for t in targets)
    assert json.loads(lock.read_text())["stack"] == "public-example"
