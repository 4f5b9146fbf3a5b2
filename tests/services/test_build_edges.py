"""A build's edges on the containerd-store engine: what an interrupted build leaves behind, which registries a
build asks about its base, and where a failed step's output is kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.services.test_buildkit_build import _on, stack
from tests.support.engine import Cleanup
from tests.support.engines import EngineCase, _engines, engine_up

pytestmark = pytest.mark.integration


@pytest.fixture
def on_containerd(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngineCase, Cleanup]]:
    yield from _on(engine_up(_engines()["26-containerd"]), monkeypatch)


def _processes_naming(text: str) -> list[str]:
    """The command lines of this machine's processes that name `text` (a build's record directory)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        line = " ".join(a.decode(errors="replace") for a in argv if a)
        if text in line:
            found.append(line)
    return found


def test_ctrl_c_during_a_build_leaves_no_scratch_and_no_buildx_behind(
        tmp_path: Path, on_containerd: tuple[EngineCase, Cleanup], registry: str) -> None:
    """Each Ctrl-C left build/STACK/.buildx.XXXXXXXX (the layout as exported, in part) and buildx itself running:
    the build runs on a worker thread the interrupt leaves behind, so its `finally` never ran. Now the interrupt
    ends buildx and removes the directory; and a directory a killed run left is cleared by the next build."""
    engine, cleanup = on_containerd
    repo = stack(tmp_path, registry, cleanup)
    records = tmp_path / "build"
    env = {**os.environ, "DOCKER_HOST": engine.host, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    argv = [sys.executable, "-m", "stackctl", "build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir",
            str(records), "--builder", "buildkit", "--no-cache"]
    proc = subprocess.Popen(argv, cwd=repo.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    try:
        for line in proc.stderr:  # the steps are BuildKit's: buildx runs, writing into its scratch directory
            seen.append(line)
            if " build step " in line:
                break
        assert list((records / "e2e").glob(".buildx.*")), seen
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, "".join(seen) + rest
    assert "error: interrupted during build step" in rest, rest
    assert "Traceback" not in rest
    assert list((records / "e2e").glob(".buildx.*")) == []
    deadline = time.monotonic() + 10  # buildx is ended before stackctl exits; its children may take a moment
    while _processes_naming(str(records)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_naming(str(records)) == []

    # what a run killed outright left (no handler ran): the next build clears it, and only it
    left = records / "e2e" / ".buildx.k1ll3d00"
    (left / "oci" / "blobs" / "sha256").mkdir(parents=True)
    (left / "oci" / "blobs" / "sha256" / "partial").write_bytes(b"\0" * 4096)
    (left / ".owner").touch()
    mine = records / "e2e" / "notes.buildx.txt"
    mine.write_text("kept\n")
    r = subprocess.run(argv[:-1], cwd=repo.root, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not left.exists() and list((records / "e2e").glob(".buildx.*")) == []
    assert mine.read_text() == "kept\n"
