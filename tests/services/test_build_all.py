"""`build --all` on a real engine, the loopback registry as the cache engines share: three stacks in one command, a
cell whose gate fails while the others build; a sibling stack built by a second engine (.ci/engine2.sh's, with
its own bridge and data) from the first engine's layers through the registry; a single build between `build --all`
and `publish --all`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
import requests

from tests.conftest import Result
from tests.support.cli import Cli
from tests.support.engine import dangling_stage_images, remove_new_stage_images, unavailable, unique_tag
from tests.support.imagestack import make_stack_repo
from tests.support.imagetest import remove_images

pytestmark = pytest.mark.integration

ENGINE2 = os.environ.get("STACKCTL_TEST_ENGINE2") or "unix:///run/stackctl-engine2.sock"
FIRST = "unix:///var/run/docker.sock"


@pytest.fixture(scope="module")
def engine2(base_image: str, registry: str) -> Iterator[Any]:
    """A client of the second engine, which holds the base image (pulled from the loopback registry)."""
    try:
        client = docker.DockerClient(base_url=ENGINE2, timeout=120)
        client.ping()
        client.images.get(base_image)
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        unavailable(f"second engine at {ENGINE2} unusable ({exc}); start it with `bash .ci/engine2.sh`")
    before = dangling_stage_images(client)
    try:
        yield client
    finally:
        remove_new_stage_images(client, before)
        client.close()


def stacks(tmp: Path, registry: str) -> tuple[Path, str, str]:
    """s1 and its sibling s2 (toplib moves) share a repository; s3 imports corelib before patcher: its gate fails."""
    repo, nonce = f"{registry}/stackctl-test/{unique_tag('pool')}", unique_tag("n")
    make_stack_repo(tmp, "s1", repo, nonce=nonce, commit=False)
    make_stack_repo(tmp, "s2", repo, {"toplib": "0.4.0"}, nonce=nonce, commit=False)
    make_stack_repo(tmp, "s3", repo + "-bad", nonce=nonce, orders={"patcher": 2, "corelib": 1})
    return tmp / "repo", repo, repo + "-bad"


def build_all(cli: Cli, root: Path, tmp: Path, *args: str) -> Result:
    return cli("build", "--all", *args, "--wheelhouse", str(tmp / "wheelhouse"), "--record-dir",
               str(tmp / "build"), "--json", cwd=root)


def cleanup(clients: list[Any], *repositories: str) -> None:
    for client in clients:
        for repository in repositories:
            remove_images(client, repository)


def test_three_stacks_one_gate_failing_then_published(
        tmp_path: Path, cli: Cli, docker_client: Any, registry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root, repo, bad = stacks(tmp_path, registry)
    monkeypatch.setenv("DOCKER_HOST", FIRST)
    try:
        r = build_all(cli, root, tmp_path)
        assert r.code == 1, r.out + r.err  # a gate failed; the engine failed no cell
        doc = json.loads(r.out)
        cells = {c["stack"]: c for c in doc["cells"]}
        assert set(cells) == {"s1", "s2", "s3"} and doc["cluster"] is None
        assert cells["s3"]["result"] == "gate failed" and "gate" in cells["s3"]["error"]
        for name in ("s1", "s2"):
            c = cells[name]
            assert c["result"] == "built" and c["steps"] > 0 and c["seconds"] > 0, c
            assert docker_client.images.get(c["tag"]).id == c["image_id"]
        # the summary says which failed and why; every line is stamped for a CI log
        assert "1 of 3 cells failed: s3 cp311-linux_x86_64 on default: gate failed" in r.err
        events = [ln for ln in r.err.splitlines() if "] s" in ln]
        assert events and all(ln[:8].replace(":", "").isdigit() for ln in events)
        record = json.loads((tmp_path / "build" / "matrix.json").read_text())
        assert [c["result"] for c in record["cells"]] == [cells[s]["result"] for s in ("s1", "s2", "s3")]
        # publish --all pushes the built cells, from any directory
        pub = cli("publish", "--all", "--record-dir", str(tmp_path / "build"), "--json", cwd=tmp_path)
        assert pub.code == 0, pub.err
        published = {c["stack"]: c for c in json.loads(pub.out)["cells"]}
        assert set(published) == {"s1", "s2"}
        for name, c in published.items():
            assert c["digest"].startswith("sha256:") and c["tag"] == cells[name]["tag"]
    finally:
        cleanup([docker_client], repo, bad)


def test_the_sibling_on_the_second_engine_reuses_the_first_engines_layers_through_the_registry(
        tmp_path: Path, cli: Cli, docker_client: Any, engine2: Any, registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, repo, bad = stacks(tmp_path, registry)
    try:
        monkeypatch.setenv("DOCKER_HOST", FIRST)
        first = build_all(cli, root, tmp_path, "stacks/s1.toml")
        assert first.code == 0, first.err
        s1 = json.loads(first.out)["cells"][0]
        assert s1["cache_pushed"] == 4 and s1["cache_pulled"] == 0  # four layer groups, a cold registry
        monkeypatch.setenv("DOCKER_HOST", ENGINE2)
        second = build_all(cli, root, tmp_path, "stacks/s2.toml")
        assert second.code == 0, second.err
        s2 = json.loads(second.out)["cells"][0]
        # train-core, deps and patcher come from the registry; only toplib's group is installed again
        assert s2["cache_pulled"] == 3 and s2["cache_pushed"] == 1
        assert s2["steps_cached"] >= 7, s2
        la = docker_client.images.get(s1["tag"]).attrs["RootFS"]["Layers"]
        lb = engine2.images.get(s2["tag"]).attrs["RootFS"]["Layers"]
        assert len(set(la) & set(lb)) >= len(la) - 4  # the same bytes: only toplib's layer and above differ
    finally:
        cleanup([docker_client, engine2], repo, bad)


def registry_tags(repository: str) -> set[str]:
    host, _, name = repository.partition("/")
    r = requests.get(f"http://{host}/v2/{name}/tags/list", timeout=30)
    return set(r.json().get("tags") or ()) if r.status_code == 200 else set()


def test_a_single_build_between_build_all_and_publish_all_leaves_the_matrix_and_the_registry_alone(
        tmp_path: Path, cli: Cli, docker_client: Any, registry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A single build is a one-cell matrix that shares nothing: the matrix record `publish --all` reads stays
    the one `build --all` wrote, and no stage image goes to the registry the pool shares."""
    root, repo, bad = stacks(tmp_path, registry)
    try:
        monkeypatch.setenv("DOCKER_HOST", FIRST)
        first = build_all(cli, root, tmp_path, "stacks/s1.toml")
        assert first.code == 0, first.err
        record = tmp_path / "build" / "matrix.json"
        matrix, tags = record.read_bytes(), registry_tags(repo)
        assert len(tags) == 4  # s1's four layer-group stages: the registry is the engines' shared cache
        single = cli("build", "stacks/s2.toml", "--wheelhouse", str(tmp_path / "wheelhouse"), "--record-dir",
                     str(tmp_path / "build"), "--json", cwd=root)
        assert single.code == 0, single.err
        built = json.loads(single.out)
        assert built["stack"] == "s2" and docker_client.images.get(built["image"]).id == built["image_id"]
        assert (tmp_path / "build" / "s2.build.json").is_file()
        assert record.read_bytes() == matrix and registry_tags(repo) == tags
        pub = cli("publish", "--all", "--record-dir", str(tmp_path / "build"), "--json", cwd=tmp_path)
        assert pub.code == 0, pub.err
        assert [c["stack"] for c in json.loads(pub.out)["cells"]] == ["s1"]
    finally:
        cleanup([docker_client], repo, bad)
