"""`build --all --cluster` on a Ray cluster of build nodes on loopback, one per Docker engine `.ci/services.sh`
starts (20.10 with its classic builder, Docker 26 with BuildKit on the overlay2 and on the containerd store), the
loopback registry the only state they share: two stacks built on two nodes and published from here; a node killed
mid-build and its cell built again on another node; what travels to a node (no wheel, no credential)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.engine import unique_tag
from tests.support.imagestack import make_stack_repo
from tests.support.raycluster import LocalCluster, run, served

pytestmark = pytest.mark.integration


@pytest.fixture
def files(tmp_path: Path) -> Iterator[str]:
    """The test's wheelhouse over HTTP on loopback: where the locks say the wheels are, for the nodes to fetch."""
    with served(tmp_path / "wheelhouse") as url:
        yield url


def stacks(tmp: Path, registry: str, files: str) -> tuple[Path, str]:
    repo = f"{registry}/stackctl-test/{unique_tag('cluster')}"
    nonce = unique_tag("n")
    make_stack_repo(tmp, "s1", repo, nonce=nonce, commit=False, files=files)
    make_stack_repo(tmp, "s2", repo, {"toplib": "0.4.0"}, nonce=nonce, files=files)
    return tmp / "repo", repo


def tags(repository: str) -> dict[str, str]:
    host, _, name = repository.partition("/")
    listed = requests.get(f"http://{host}/v2/{name}/tags/list", timeout=30).json().get("tags") or []
    out = {}
    for tag in listed:
        accept = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
        r = requests.head(f"http://{host}/v2/{name}/manifests/{tag}", timeout=30, headers={"Accept": accept})
        out[tag] = r.headers.get("Docker-Content-Digest", "")
    return out


def test_two_stacks_built_on_two_nodes_then_published_here(
        build_cluster: LocalCluster, tmp_path: Path, registry: str, files: str) -> None:
    root, repo = stacks(tmp_path, registry, files)
    record = tmp_path / "build"
    built = run(build_cluster, "build", "--all", "--record-dir", str(record), "--json", cwd=root,
                env={"STACKCTL_TEST_VENDOR_PASSWORD": "hunter2-secret"})
    assert built.code == 0, built.err[-4000:] + built.out[-4000:]
    doc = json.loads(built.out)
    cells = {c["stack"]: c for c in doc["cells"]}
    assert set(cells) == {"s1", "s2"} and doc["cluster"] == build_cluster.address
    for c in cells.values():
        assert c["result"] == "built" and c["digest"].startswith("sha256:"), c
        assert c["node"] and c["host"] and c["versions"]["ray"] and c["versions"]["stackctl"]
        assert [a["outcome"] for a in c["attempts"]] == ["done"]
    assert cells["s1"]["node"] != cells["s2"]["node"]  # one engine slot a node: side by side on two nodes
    # each node said when it started and ended its cell
    for name in ("s1", "s2"):
        lines = [ln for ln in built.err.splitlines() if f"] {name} cp311-linux_x86_64: " in ln]
        assert any(ln.endswith(": started") for ln in lines) and any(": done in " in ln for ln in lines), lines
    # pushed by digest, no tag moved: the registry holds the stage caches at most, never the images' tags
    s1_tag = cells["s1"]["tag"].rpartition(":")[2]
    assert s1_tag not in tags(repo)
    matrix = json.loads((record / "matrix.json").read_text())
    assert [c["digest"] for c in matrix["cells"]] == [cells["s1"]["digest"], cells["s2"]["digest"]]
    assert "hunter2" not in (record / "matrix.json").read_text() and "hunter2" not in built.err
    # a single publish has no layout to copy here: it says where the image is and what publishes it
    single = run(None, "publish", "stacks/s1.toml", "--record-dir", str(record), cwd=root)
    assert single.code == 2 and "built on the cluster's node" in single.err and "publish --all" in single.err
    # publish --all here: each digest checked in the registry, then the tag moved
    pub = run(None, "publish", "--all", "--record-dir", str(record), "--json", cwd=tmp_path)
    assert pub.code == 0, pub.err[-3000:]
    published = {c["stack"]: c for c in json.loads(pub.out)["cells"]}
    now = tags(repo)
    for name, c in published.items():
        assert c["result"] == "published" and c["digest"] == cells[name]["digest"]
        assert now[c["tag"].rpartition(":")[2]] == cells[name]["digest"]
    records = [json.loads(ln) for ln in (record / "publications.jsonl").read_text().splitlines()]
    assert sorted(r["digest"] for r in records) == sorted(c["digest"] for c in cells.values())


def test_a_cell_whose_node_dies_mid_build_is_built_on_another_node(
        build_cluster: LocalCluster, tmp_path: Path, registry: str, files: str) -> None:
    root, _repo = stacks(tmp_path, registry, files)
    record = tmp_path / "build"
    argv = [sys.executable, "-m", "stackctl", "build", "--all", "stacks/s1.toml", "--record-dir", str(record),
            "--json", "--cluster", build_cluster.address]
    proc = subprocess.Popen(argv, cwd=root, env=build_cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    killed, err = "", []
    assert proc.stderr is not None
    deadline = time.monotonic() + 300
    for line in proc.stderr:
        err.append(line)
        if not killed and line.rstrip().endswith("s1 cp311-linux_x86_64: started"):
            node = line.split("[", 1)[1].split("]", 1)[0].split("/", 1)[1]
            killed = build_cluster.name_of(node)
            args = build_cluster.envs[killed]
            build_cluster.kill(killed)
            build_cluster.add(killed, **args)  # the engine comes back as a new node, for the tests after
        assert time.monotonic() < deadline, "".join(err)
    out = proc.stdout.read() if proc.stdout else ""
    proc.wait(timeout=60)
    text = "".join(err)
    assert killed, text
    assert proc.returncode == 0 and out.startswith("{"), text[-4000:] + out[:3000]
    (cell,) = json.loads(out)["cells"]
    attempts = cell["attempts"]
    assert [a["outcome"] for a in attempts] == ["lost", "done"], attempts
    assert attempts[0]["node"] != attempts[1]["node"] and attempts[1]["node"] == cell["node"]
    assert "lost: its node or worker died; running it again" in text
    assert cell["result"] == "built" and cell["digest"].startswith("sha256:")


def test_what_travels_to_a_node_is_small_and_holds_no_credential_or_wheel(
        tmp_path: Path, registry: str, files: str) -> None:
    """The task's arguments, as Ray pickles them, from the use case itself: kilobytes, no wheel's bytes, no
    password from the environment, no user info of an index URL."""
    import cloudpickle

    from stackctl.image.matrix import matrix_cells
    from stackctl.image.order import BuildOrder
    from stackctl.usecases.matrix import CellJob, _for_the_wire

    root, _repo = stacks(tmp_path, registry, files)
    env: dict[str, Any] = {**os.environ, "STACKCTL_TEST_VENDOR_PASSWORD": "hunter2-secret"}
    order = BuildOrder(("stacks/s1.toml",), every=True, record_dir=tmp_path / "build",
                       overrides={"vendor": "http://user:hunter2-secret@127.0.0.1:9/simple/"})
    old = Path.cwd()
    os.chdir(root)
    try:
        (cell,) = matrix_cells(order, env)
        job = CellJob(cell, cell.lock.read_text(), _for_the_wire(order), "auto")
    finally:
        os.chdir(old)
    sent = cloudpickle.dumps(job)
    assert len(sent) < 256 << 10, len(sent)
    assert b"hunter2" not in sent
    wheel = next((tmp_path / "wheelhouse").glob("toplib-*.whl")).read_bytes()
    assert wheel[-4096:] not in sent
