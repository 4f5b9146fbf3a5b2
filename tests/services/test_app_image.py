"""The image a project ships, on the real engine and registry: examples/app's Dockerfile FROM the public example
stack, built, gated whole (with its app-phase entry), published and verified; `gate --image` on it and on an
image without the stack; the same app without its package failing the build with the FAIL line; a stack-phase
entry the lock does not install refused before anything is fetched."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, STACKS
from tests.support.cli import Cli
from tests.support.engine import unique_tag
from tests.support.gitrepo import git
from tests.support.imagetest import delete_from_registry, remove_images

pytestmark = [pytest.mark.integration, pytest.mark.network]



def _commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", message)


@pytest.fixture
def app_repo(tmp_path: Path, base_image: str, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository holding the public example stack, the app profile and examples/app, resolved and committed."""
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    text = (STACKS / "public-example.toml").read_text()
    (repo / "stacks" / "public-example.toml").write_text(text.replace('"stackctl-base:bookworm"', f'"{base_image}"'))
    shutil.copy(STACKS / "public-example-app.toml", repo / "stacks")
    shutil.copytree(REPO / "examples" / "app", repo / "examples" / "app")
    git(repo, "init", "-q", "-b", "main")
    _resolve(repo, cli)
    _commit(repo, "lock")
    return repo


def _resolve(repo: Path, cli: Cli) -> None:
    r = cli("resolve", "public-example-app", cwd=repo)
    if r.code == 3 and not os.environ.get("CI"):
        pytest.skip(f"public index unreachable: {r.err.strip()[:200]}")
    assert r.code == 0, r.err


def test_app_image_builds_gates_publishes_and_verifies(app_repo: Path, tmp_path: Path, cli: Cli, docker_client: Any,
                                                       base_image: str, registry: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    repository = f"{registry}/stackctl-test/{unique_tag('app')}"
    digests: list[str] = []
    try:
        b = cli("build", "public-example-app", "--repository", repository, "--record-dir", str(tmp_path / "build"),
                "--json", cwd=app_repo)
        assert b.code == 0, b.out + b.err
        record = json.loads(b.out)
        tag = "py3.11_cffi_1.17.1"
        assert record["image"] == f"{repository}:{tag}"
        stack = record["stack_image"]
        assert stack["image"] == f"{repository}:{tag}-stack"
        # the stack image gates the stack phase only; the final image the whole gate, in its declared order (a
        # step an earlier build of the same layers passed comes from the engine's cache: `gate --image` below
        # runs the gate in any case)
        if not stack["gate_cached"]:
            assert [ln for ln in stack["gate"] if ln.startswith(("PASS import", "FAIL"))] == [
                "PASS import pycparser version=2.22", "PASS import cffi version=1.17.1"]
        if not record["gate_cached"]:
            assert [ln for ln in record["gate"] if ln.startswith(("PASS import", "FAIL"))] == [
                "PASS import pycparser version=2.22", "PASS import cffi version=1.17.1",
                "PASS import greeter version=0.1.0"]
        final = docker_client.images.get(record["image"])
        labels = final.labels
        assert labels["org.opencontainers.image.base.name"] == stack["image"]
        assert labels["org.opencontainers.image.base.digest"] == stack["image_id"]
        assert labels["io.stackctl.lock-digest"] == docker_client.images.get(stack["image"]).labels[
            "io.stackctl.lock-digest"]
        assert json.loads(labels["io.stackctl.installed"]) == {"cffi": "1.17.1", "greeter": "0.1.0",
                                                               "pycparser": "2.22"}
        # the gate's step is the final image's last: its history's top is the labels, then the gate's RUN
        history = [h["CreatedBy"] for h in final.history()]
        assert "gate.py" in next(h for h in history if "LABEL" not in h)
        sbom = json.loads(Path(record["app"]["sbom"]).read_text())
        by_name = {c["name"]: c for c in sbom["components"]}
        assert set(by_name) == {"pycparser", "cffi", "greeter"}
        assert {"name": "stackctl:source", "value": "app phase (not from the lock)"} in by_name["greeter"]["properties"]
        assert record["app"]["installed_by_app"] == {"greeter": "0.1.0"}
        # what the app's container runs, on the stack's cffi
        out = docker_client.containers.run(final.id, ["tester"], remove=True, network_disabled=True).decode()
        assert out.startswith("hello tester (6 bytes, cffi 1.17.1)")

        g = cli("gate", "public-example-app", "--image", record["image"], "--json", cwd=app_repo)
        assert g.code == 0, g.out + g.err
        assert [r["line"] for r in json.loads(g.out)["results"]][:3] == [
            "PASS import pycparser version=2.22", "PASS import cffi version=1.17.1",
            "PASS import greeter version=0.1.0"]
        assert json.loads(g.out)["failed"] == 0 and json.loads(g.out)["passed"] == 6
        g = cli("gate", "public-example-app", "--image", base_image, cwd=app_repo)
        assert g.code == 1
        assert "FAIL import cffi: ModuleNotFoundError: No module named 'cffi'" in g.out
        assert "FAIL import greeter: ModuleNotFoundError: No module named 'greeter'" in g.out
        g = cli("gate", "public-example-app", "--image", stack["image"], "--phase", "stack", cwd=app_repo)
        assert g.code == 0, g.out + g.err

        p = cli("publish", "public-example-app", "--repository", repository, "--record-dir", str(tmp_path / "build"),
                "--json", cwd=app_repo)
        assert p.code == 0, p.out + p.err
        pub = json.loads(p.out)
        digests += [pub["digest"], pub["stack_image"]["digest"]]
        assert pub["tag"] == f"{repository}:{tag}" and pub["stack_image"]["tag"] == f"{repository}:{tag}-stack"
        v = cli("verify", f"{repository}:{tag}", "--lock", "stacks/public-example-app.lock", cwd=app_repo)
        assert v.code == 0, v.out + v.err
        i = cli("inspect", f"{repository}:{tag}", "--json", cwd=app_repo)
        assert i.code == 0, i.out + i.err
        materials = dict(json.loads(i.out)["attached"]["materials"])
        assert materials["app-dockerfile"] == record["app"]["dockerfile_digest"]
        assert materials["stack-image"] == stack["image_id"]
        assert "app-context" in materials
    finally:
        remove_images(docker_client, repository)
        for digest in digests:
            delete_from_registry(registry, repository, digest)


def test_the_same_app_without_its_package_fails_the_build_with_the_fail_line(
        app_repo: Path, tmp_path: Path, cli: Cli, docker_client: Any, registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    dockerfile = app_repo / "examples" / "app" / "Dockerfile"
    repository = f"{registry}/stackctl-test/{unique_tag('app-broken')}"
    try:
        dockerfile.write_text(dockerfile.read_text().replace("COPY src/ /opt/app/\n", ""))
        b = cli("build", "public-example-app", "--repository", repository, "--record-dir", str(tmp_path / "build"),
                "--allow-dirty", cwd=app_repo)
        assert b.code == 1, b.out + b.err
        assert "FAIL import greeter: ModuleNotFoundError: No module named 'greeter'" in b.out.splitlines()
        assert not docker_client.images.list(name=repository, filters={"label": "io.stackctl.app.dockerfile-digest"})
    finally:
        remove_images(docker_client, repository)


def test_a_stack_phase_entry_the_lock_does_not_install_is_refused_before_anything_is_fetched(
        app_repo: Path, tmp_path: Path, cli: Cli) -> None:
    profile = app_repo / "stacks" / "public-example-app.toml"
    profile.write_text(profile.read_text().replace('phase = "app"\n', ""))  # greeter in the stack image's gate
    _resolve(app_repo, cli)
    b = cli("build", "public-example-app", "--record-dir", str(tmp_path / "build"), "--allow-dirty", cwd=app_repo)
    assert b.code == 2, b.out + b.err
    assert b.err.splitlines()[0].startswith("error: public-example-app: gate entry greeter (order 3) runs in the "
                                            "stack phase, but the lock installs no greeter for cp311-linux_x86_64")
    assert not (tmp_path / "build").exists()  # nothing fetched, no context written
