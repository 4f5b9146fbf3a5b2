"""A build's edges on the containerd-store engine: what an interrupted build leaves behind, which registries a
build asks about its base, and where a failed step's output is kept."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.services.test_buildkit_build import _on, build, stack
from tests.support.cli import Cli
from tests.support.engine import DEFAULT_BASE_IMAGE, Cleanup, unavailable, unique_tag
from tests.support.engines import EngineCase, _engines, engine_up
from tests.support.gitrepo import git
from tests.support.imagestack import refresh_lock

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


ENGINE_LOG = os.environ.get("STACKCTL_TEST_ENGINE_D26C_LOG") or "/var/log/stackctl-d26c.log"  # .ci/engine26.sh's
REGISTRY_LOG = os.environ.get("STACKCTL_TEST_REGISTRY_LOG") or "/var/log/stackctl-registry.log"  # .ci/services.sh's


def _tail(path: str) -> tuple[Path, int]:
    """A log and its size now: what is written to it from here on is read by `_since`."""
    try:
        return Path(path), Path(path).stat().st_size
    except OSError as exc:
        unavailable(f"the log {path} cannot be read: {exc}")


def _since(mark: tuple[Path, int]) -> list[str]:
    with mark[0].open("rb") as f:
        f.seek(mark[1])
        return f.read().decode(errors="replace").splitlines()


def test_a_build_asks_no_registry_about_a_base_the_containerd_store_holds(
        tmp_path: Path, cli: Cli, on_containerd: tuple[EngineCase, Cleanup], registry: str) -> None:
    """A base pulled from a registry and tagged with a short name (as .ci/services.sh makes stackctl-base): BuildKit
    on the containerd store asked Docker Hub about it on every build (`trying next host ... lookup
    registry-1.docker.io`, a DNS timeout a build where there is no DNS), though the engine holds it. The engine's
    log, from a mark to the build's end, shows no registry asked about it, neither the one its name names nor the
    one it came from."""
    import docker

    engine, cleanup = on_containerd
    _tail(ENGINE_LOG)
    name = unique_tag("edgebase")
    hosted, short = f"{registry}/stackctl-test/{name}:bookworm", f"{name}:bookworm"
    client = docker.DockerClient(base_url=engine.host, timeout=120)
    try:
        client.images.get(os.environ.get("STACKCTL_TEST_BASE_IMAGE") or DEFAULT_BASE_IMAGE).tag(hosted)
        client.images.push(hosted)
        client.images.remove(hosted)  # a name only: the image stays under its others
        client.images.pull(hosted)  # now the store records the test registry as this image's source
        client.images.get(hosted).tag(short)
        digest = client.images.get_registry_data(hosted).id
        cleanup.manifest(registry, f"{registry}/stackctl-test/{name}", digest)
        repo = stack(tmp_path, registry, cleanup)
        text = repo.profile.read_text(encoding="utf-8")
        repo.profile.write_text(text.replace('base = "stackctl-base:bookworm"', f'base = "{short}"'), encoding="utf-8")
        refresh_lock(repo)
        git(repo.root, "commit", "-q", "-am", "a base under a short name")
        marks = _tail(ENGINE_LOG), _tail(REGISTRY_LOG)
        r = build(cli, repo, tmp_path / "build", "--builder", "buildkit")
        said, served = _since(marks[0]), _since(marks[1])
        assert r.code == 0, r.out + r.err
    finally:
        for ref in (short, hosted):
            with contextlib.suppress(docker.errors.NotFound):
                client.images.remove(ref)
        client.close()
    asked = [line for line in said if name in line and ("trying next host" in line or "lookup " in line
                                                         or "/v2/" in line)]
    assert asked == [], asked
    assert [line for line in served if f"stackctl-test/{name}/" in line] == []  # nor the registry it came from


def test_a_failed_install_step_keeps_its_whole_output_and_the_error_names_it(
        tmp_path: Path, cli: Cli, on_containerd: tuple[EngineCase, Cleanup], registry: str) -> None:
    """An install step that failed showed its last 15 lines and lost the rest (an installer says what went wrong
    above its last words): the step's whole output goes to RECORD_DIR/STACK.failed-step.log, which the error
    names; no build record is written."""
    _, cleanup = on_containerd
    # a wheel member that would land outside the install prefix: pip refuses the wheel, the install step fails
    repo = stack(tmp_path, registry, cleanup, toplib_files={"../../outside.py": "X = 1\n"})
    records = tmp_path / "build"
    r = build(cli, repo, records, "--builder", "buildkit")
    assert r.code == 1, r.out + r.err
    kept = records / "e2e.failed-step.log"
    assert f"the step's whole output is in {kept}" in r.err, r.err
    assert not (records / "e2e.build.json").exists()
    text = kept.read_text(encoding="utf-8").splitlines()
    assert text[0].startswith("stackctl build of ") and " failed at " in text[0]
    step = next(line for line in text if line.startswith("step: "))
    assert " RUN " in step and "toplib" in step, step
    assert any("outside.py" in line for line in text), text
    # what the error showed is there, after the head (the step's whole output: tests/unit/test_rawjson.py)
    shown = [line for line in r.out.splitlines() if line.strip()]
    assert shown and text[text.index("") + 1:][-len(shown):] == shown, (shown, text)


def test_a_builds_output_fits_a_log_and_an_80_column_terminal(
        tmp_path: Path, on_containerd: tuple[EngineCase, Cleanup], registry: str) -> None:
    """A real build piped, as a CI log takes it: every line within a few hundred characters (a progress line was
    1,845), each step by its stage and first words, the phases after the last step said as phases; then again in
    an 80-column terminal: nothing past its edge."""
    from tests.support.fit import in_terminal

    engine, cleanup = on_containerd
    repo = stack(tmp_path, registry, cleanup)
    env = {**os.environ, "DOCKER_HOST": engine.host, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    args = ["build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(tmp_path / "build"),
            "--builder", "buildkit"]
    r = subprocess.run([sys.executable, "-m", "stackctl", *args], cwd=repo.root, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stderr.splitlines() + r.stdout.splitlines()
    assert all(len(line) <= 240 for line in lines), max(lines, key=len)
    steps = [line for line in r.stderr.splitlines() if " build step " in line]
    phases = [line for line in r.stderr.splitlines() if " build phase: " in line]
    assert steps and phases and r.stderr.splitlines().index(phases[0]) > r.stderr.splitlines().index(steps[-1])
    assert any(": layer01-train-core: RUN python -m pip install" in line for line in steps), steps
    assert not any("--mount" in line for line in steps), steps
    assert any("build phase: the build record " in line for line in phases), phases
    out = in_terminal(args, repo.root, 80, env={k: v for k, v in env.items() if k != "COLUMNS"})
    # the live display's frames overwrite one another (tests/unit/test_output_fits.py fits them to the width);
    # what stays is the result, each line within the width but a value longer than it (the image's long ref,
    # pytest's record path), which stands alone on its line
    kept = [line for line in out.splitlines() if "━" not in line]
    assert "gate ok: 11 passed, 0 failed" in kept, out
    over = [line for line in kept if len(line) > 80 and " " in line.strip()]
    assert over == [], over
