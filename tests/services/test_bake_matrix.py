"""`build --all` through BuildKit: one `docker buildx bake` per engine, on Docker 26's two image stores.

On the containerd store each cell's stages go to the loopback registry as BuildKit's own cache
(REPO:buildcache-STACK-TARGET), and a rebuild after the engine's build cache is pruned takes its steps from
there; on overlay2 the docker driver exports no cache, the bake builds all the same, and a cell whose gate fails
is that cell's failure while the others are built. The generated bake file is read back by `docker buildx bake
--print` itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from stackctl.engine.docker import DockerEngine
from stackctl.image.artefact import check_blobs, read_layout
from stackctl.image.bakefile import BakeTarget, bake_document, cache_ref
from stackctl.image.build import made_artefact
from tests.conftest import Result
from tests.support.cli import Cli
from tests.support.engine import Cleanup, unavailable, unique_tag
from tests.support.engines import EngineCase, engine_up
from tests.support.imagestack import TARGET, make_stack_repo

pytestmark = pytest.mark.integration

D26 = EngineCase("26-overlay2", os.environ.get("STACKCTL_TEST_ENGINE_D26") or "unix:///run/stackctl-d26.sock", False)
D26C = EngineCase("26-containerd", os.environ.get("STACKCTL_TEST_ENGINE_D26C") or "unix:///run/stackctl-d26c.sock",
                  True)


def _on(engine: EngineCase, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngineCase, Cleanup]]:
    if shutil.which("docker") is None:
        unavailable("the docker CLI with the buildx plugin is needed")
    engine_up(engine)
    monkeypatch.setenv("DOCKER_HOST", engine.host)
    monkeypatch.delenv("STACKCTL_BUILDER", raising=False)
    client = docker.DockerClient(base_url=engine.host, timeout=120)
    done = Cleanup(client)
    try:
        yield engine, done
    finally:
        done.run()
        client.close()


@pytest.fixture
def on_d26c(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngineCase, Cleanup]]:
    yield from _on(D26C, monkeypatch)


@pytest.fixture
def on_d26(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngineCase, Cleanup]]:
    yield from _on(D26, monkeypatch)


def two_stacks(tmp: Path, registry: str, cleanup: Cleanup, *, failing: bool = False) -> tuple[Path, str]:
    """s1 and its sibling s2 (toplib moves) in one repository; with `failing`, s3 whose gate fails (corelib
    imported before patcher)."""
    repo = cleanup.images(f"{registry}/stackctl-test/{unique_tag('bake')}")
    nonce = unique_tag("n")
    make_stack_repo(tmp, "s1", repo, nonce=nonce, commit=False)
    make_stack_repo(tmp, "s2", repo, {"toplib": "0.4.0"}, nonce=nonce, commit=not failing)
    if failing:
        make_stack_repo(tmp, "s3", cleanup.images(repo + "-bad"), nonce=nonce, orders={"patcher": 2, "corelib": 1})
    return tmp / "repo", repo


def build_all(cli: Cli, root: Path, tmp: Path, records: str, *args: str) -> Result:
    return cli("build", "--all", *args, "--wheelhouse", str(tmp / "wheelhouse"), "--record-dir", str(tmp / records),
               "--json", cwd=root)


def check_cell(cell: dict[str, object], tmp: Path, records: str, engine: EngineCase) -> dict[str, object]:
    """The cell was built through BuildKit and left what a single `build` leaves: the record, its gate's lines,
    the OCI layout the record names, the image in the engine."""
    assert cell["result"] == "built" and cell["builder"] == "buildkit", cell
    record = json.loads(Path(str(cell["record"])).read_text())
    assert Path(str(cell["record"])) == tmp / records / f"{cell['stack']}.build.json"
    assert record["builder"] == "buildkit" and record["image_id"] == cell["image_id"]
    assert record["wheels_how"] == "mounted into the install stages from each group's build context `wheels-GROUP`"
    assert record["gate"][-1].startswith("gate ok: "), record["gate"]
    assert "PASS import patcher version=1.0.0" in record["gate"]
    assert record["fingerprint_digest"] and record["labels"]
    if not engine.containerd_store:  # no exporter writes the layout: it is copied out of the engine when needed
        assert record["artefact"] is None
        assert Path(record["artefact_pending"]["layout"]) == tmp / records / f"{cell['stack']}.oci"
        made_artefact(Path(str(cell["record"])), DockerEngine(engine.host))
        record = json.loads(Path(str(cell["record"])).read_text())
    layout = read_layout(Path(record["artefact"]["layout"]))
    assert Path(record["artefact"]["layout"]) == tmp / records / f"{cell['stack']}.oci"
    assert layout.digest == record["artefact"]["digest"] and check_blobs(layout) == []
    if engine.containerd_store:  # BuildKit's exporter wrote the layout; the engine loaded that very image
        assert record["artefact"]["made_by"] == "BuildKit's OCI exporter" and layout.digest == cell["image_id"]
    client = docker.DockerClient(base_url=engine.host)
    try:
        assert client.images.get(str(cell["tag"])).id == cell["image_id"]
    finally:
        client.close()
    return record


def manifest_exists(registry: str, ref: str) -> bool:
    repository, _, tag = ref.removeprefix(registry + "/").rpartition(":")
    request = urllib.request.Request(f"http://{registry}/v2/{repository}/manifests/{tag}", method="HEAD",
                                     headers={"Accept": "application/vnd.oci.image.index.v1+json, "
                                                        "application/vnd.oci.image.manifest.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise


def test_build_all_bakes_two_cells_on_the_containerd_store_and_the_registry_cache_survives_a_prune(
        tmp_path: Path, cli: Cli, on_d26c: tuple[EngineCase, Cleanup], registry: str) -> None:
    engine, cleanup = on_d26c
    root, repo = two_stacks(tmp_path, registry, cleanup)
    r = build_all(cli, root, tmp_path, "build")
    assert r.code == 0, r.out + r.err
    cells = {c["stack"]: c for c in json.loads(r.out)["cells"]}
    assert set(cells) == {"s1", "s2"}
    assert "[default] engine: builder: buildkit" in r.err
    # one bake for the engine's whole queue: both cells were targets of its first and only round
    for name in ("s1", "s2"):
        assert f"[default] {name} {TARGET}: bake 1: 2 targets" in r.err, r.err
    assert "bake 2:" not in r.err
    records = {name: check_cell(cells[name], tmp_path, "build", engine) for name in ("s1", "s2")}
    assert records["s1"]["artefact"]["layers"][:3] == records["s2"]["artefact"]["layers"][:3]  # shared groups
    matrix = json.loads((tmp_path / "build" / "matrix.json").read_text())
    assert [(c["stack"], c["result"], c["builder"], c["record"]) for c in matrix["cells"]] == [
        (n, "built", "buildkit", cells[n]["record"]) for n in ("s1", "s2")]
    # publish --all takes the baked cells as it takes built ones: each cell's layout is what the registry gets
    pub = cli("publish", "--all", "--record-dir", str(tmp_path / "build"), "--json", cwd=tmp_path)
    assert pub.code == 0, pub.out + pub.err
    published = {c["stack"]: c for c in json.loads(pub.out)["cells"]}
    for name in ("s1", "s2"):
        assert published[name]["digest"] == records[name]["artefact"]["digest"], published[name]
    # each cell's stages went to the registry as BuildKit's cache
    refs = {n: cache_ref(repo, n, TARGET) for n in ("s1", "s2")}
    for name, ref in refs.items():
        assert cells[name]["cache_pushed"] == 1 and manifest_exists(registry, ref), ref
    # the engine's build cache gone (ours: a test engine), the rebuild takes its steps from the registry
    pruned = subprocess.run(["docker", "buildx", "prune", "-af"], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "DOCKER_HOST": engine.host}, check=False)
    assert pruned.returncode == 0, pruned.stderr
    again = build_all(cli, root, tmp_path, "build2")
    assert again.code == 0, again.out + again.err
    second = {c["stack"]: c for c in json.loads(again.out)["cells"]}
    for name in ("s1", "s2"):
        c = second[name]
        assert f"[default] {name} {TARGET}: cache: imported {refs[name]}" in again.err
        assert c["cache_pulled"] == 1 and c["steps_cached"] >= c["steps"] - 1, (c, again.err)  # all but the base's FROM
        record = check_cell(c, tmp_path, "build2", engine)
        assert record["artefact"]["digest"] == records[name]["artefact"]["digest"]  # the same image again


def test_build_all_bakes_on_overlay2_without_a_registry_cache_and_a_failing_gate_fails_only_its_cell(
        tmp_path: Path, cli: Cli, on_d26: tuple[EngineCase, Cleanup], registry: str) -> None:
    engine, cleanup = on_d26
    root, repo = two_stacks(tmp_path, registry, cleanup, failing=True)
    r = build_all(cli, root, tmp_path, "build")
    assert r.code == 1, r.out + r.err  # a gate failed; the engine failed no cell
    cells = {c["stack"]: c for c in json.loads(r.out)["cells"]}
    assert cells["s3"]["result"] == "gate failed" and "the gate failed" in cells["s3"]["error"], cells["s3"]
    assert cells["s3"]["builder"] == "buildkit" and not (tmp_path / "build" / "s3.build.json").exists()
    for name in ("s1", "s2"):
        # the docker driver on overlay2 exports no cache: none asked for, and the image copied out for its layout
        assert cells[name]["cache_pushed"] == 0 and "registry cache" not in r.err
        record = check_cell(cells[name], tmp_path, "build", engine)
        assert record["artefact"]["made_by"].startswith("a copy of the engine's image")
    assert "1 of 3 cells failed: s3 cp311-linux_x86_64 on default: gate failed" in r.err
    # buildx stops the other targets when one fails and writes no metadata: they are baked again, from its cache
    for name in ("s1", "s2"):
        assert f"[default] {name} {TARGET}: bake 2: 2 targets (buildx stopped them" in r.err, r.err
    assert not manifest_exists(registry, cache_ref(repo, "s1", TARGET))


def test_a_wheel_that_is_not_the_locks_fails_its_cell_by_name_and_the_other_cell_is_built(
        tmp_path: Path, cli: Cli, on_d26: tuple[EngineCase, Cleanup], registry: str) -> None:
    """The contexts leave the groups' wheels unread under BuildKit (each install stage checks its own): a cell
    whose wheel lies fails with the wheel named, as the context's check named it, and the other cell stands."""
    engine, cleanup = on_d26
    root, _ = two_stacks(tmp_path, registry, cleanup)
    wheel = next((tmp_path / "wheelhouse").glob("toplib-0.4.0-*.whl"))  # s2's alone
    data = wheel.read_bytes()
    wheel.unlink()
    wheel.write_bytes(data + b"\0")
    r = build_all(cli, root, tmp_path, "build")
    assert r.code == 1, r.out + r.err
    cells = {c["stack"]: c for c in json.loads(r.out)["cells"]}
    assert f"{wheel}: sha256 " in cells["s2"]["error"] and "does not match the lock's" in cells["s2"]["error"], cells
    assert not (tmp_path / "build" / "s2.build.json").exists()
    check_cell(cells["s1"], tmp_path, "build", engine)


def test_buildx_reads_the_generated_bake_file_back(tmp_path: Path, on_d26: tuple[EngineCase, Cleanup]) -> None:
    """`docker buildx bake --print` resolves the file as bake will build it: targets, contexts, outputs, cache."""
    for name in ("a", "b"):
        (tmp_path / name / "groups").mkdir(parents=True)
        (tmp_path / name / "Dockerfile").write_text("FROM stackctl-base:bookworm\n")
    ref = "127.0.0.1:5000/r/x:buildcache-s-t"
    targets = [
        BakeTarget("s1-cp311-linux_x86_64", tmp_path / "a", "127.0.0.1:5000/r/x:one", args={"SOURCE_DATE_EPOCH": "1"},
                   contexts={"wheels": tmp_path / "a" / "groups"}, layout=tmp_path / "a.oci",
                   cache_from=(f"type=registry,ref={ref}",), cache_to=(f"type=registry,ref={ref},mode=max",)),
        BakeTarget("s2-cp311-linux_x86_64", tmp_path / "b", "127.0.0.1:5000/r/x:two", no_cache=True),
    ]
    bake_file = tmp_path / "bake.json"
    exporters = (f"type=oci,dest={tmp_path / 'oci'},tar=false,compression=gzip,oci-mediatypes=true",
                 "type=image,name=127.0.0.1:5000/r/x:one,compression=gzip,oci-mediatypes=true")
    bake_file.write_text(json.dumps(bake_document(targets, {targets[0].name: exporters})))
    done = subprocess.run(["docker", "buildx", "bake", "--print", "--file", str(bake_file)], capture_output=True,
                          text=True, timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["group"]["default"]["targets"] == [t.name for t in targets]
    one, two = printed["target"][targets[0].name], printed["target"][targets[1].name]
    assert one["context"] == str(tmp_path / "a") and one["dockerfile"] == "Dockerfile"
    assert one["contexts"] == {"wheels": str(tmp_path / "a" / "groups")}
    assert one["args"] == {"SOURCE_DATE_EPOCH": "1"} and one["tags"] == ["127.0.0.1:5000/r/x:one"]
    assert one["output"] == list(exporters)
    assert one["cache-from"] == [f"type=registry,ref={ref}"]
    assert one["cache-to"] == [f"type=registry,ref={ref},mode=max"]
    assert two["output"] == ["type=docker"] and two["no-cache"] is True and "cache-to" not in two
