"""The README's first command: `stackctl resolve stacks/public-example.toml` against the real public index
of the user's pip configuration (PIP_INDEX_URL, pip's `index-url`, or pip's default), with the machine's
CA bundle. Without CI set, an unreachable index skips; in CI it fails like every other missing service.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import STACKS
from tests.support.cli import Cli

pytestmark = pytest.mark.network



def test_public_example_resolves_for_real(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache"))  # cold: every answer from the index
    lock = tmp_path / "public-example.lock"
    r = cli("resolve", str(STACKS / "public-example.toml"), "--lock", str(lock), "--json")
    if r.code == 3 and not os.environ.get("CI"):
        pytest.skip(f"public index unreachable: {r.err.strip()[:200]}")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    files = {(f["name"], f["target"]): f for f in data["files"]}
    assert set(files) == {("pycparser", "cp311-linux_x86_64"), ("cffi", "cp311-linux_x86_64")}
    for f in files.values():
        assert re.fullmatch(r"[0-9a-f]{64}", f["sha256"]) and f["size"] > 0
        assert f["url"].startswith("https://") and "@" not in f["url"].split("/")[2]
        assert f["upload_time_source"] == "index" and f["upload_time"].endswith("Z")
        assert f["newest_in_line"] is not None and not f["yanked"]
    cffi = files[("cffi", "cp311-linux_x86_64")]
    assert cffi["filename"].startswith("cffi-1.17.1-cp311-cp311-manylinux")
    assert files[("pycparser", "cp311-linux_x86_64")]["filename"] == "pycparser-2.22-py3-none-any.whl"
    assert cffi["requires_dist"] == ["pycparser"]
    # the whole stack is its two pins: cffi's one dependency is pinned
    assert {(c["target"], c["name"]) for c in data["closure"]} <= {("cp311-linux_x86_64", "pycparser")}
    assert json.loads(lock.read_text())["stack"] == "public-example"
