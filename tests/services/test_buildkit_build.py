"""`stackctl build` through BuildKit (`docker buildx build`) on each engine: the gate in the build, its verdict
from the rawjson stream, the OCI layout the record names, one digest for two --no-cache builds on Docker 26, and
the classic builder as the fallback."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from stackctl.engine.docker import DockerEngine
from stackctl.image.artefact import check_blobs, read_layout
from stackctl.image.build import made_artefact
from tests.conftest import Result
from tests.services.test_app_image import app_repo  # noqa: F401  (fixture)
from tests.support.cli import Cli
from tests.support.engine import Cleanup, unavailable, unique_tag
from tests.support.engines import EngineCase, engine_up
from tests.support.imagestack import StackRepo, make_stack_repo

pytestmark = pytest.mark.integration


@pytest.fixture
def on_engine(any_engine: EngineCase, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngineCase, Cleanup]]:
    yield from _on(any_engine, monkeypatch)


@pytest.fixture
def on_engine26(engine26: EngineCase, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngineCase, Cleanup]]:
    yield from _on(engine26, monkeypatch)


@pytest.fixture
def on_2010(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngineCase, Cleanup]]:
    """Debian 12's engine 20.10, the one the classic builder is kept for."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    yield from _on(engine_up(EngineCase("20.10", host, False)), monkeypatch)


def _on(engine: EngineCase, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngineCase, Cleanup]]:
    if shutil.which("docker") is None or shutil.which("skopeo") is None:
        unavailable("the docker CLI (with buildx) and skopeo are needed")
    monkeypatch.setenv("DOCKER_HOST", engine.host)
    monkeypatch.delenv("STACKCTL_BUILDER", raising=False)
    client = docker.DockerClient(base_url=engine.host, timeout=120)
    done = Cleanup(client)
    try:
        yield engine, done
    finally:
        done.run()
        client.close()


def stack(tmp_path: Path, registry: str, cleanup: Cleanup, **kw: Any) -> StackRepo:
    repo = make_stack_repo(tmp_path, "e2e", f"{registry}/stackctl-test/{unique_tag('bk')}", nonce=unique_tag("n"),
                           **kw)
    cleanup.images(repo.stack.image.repository)  # type: ignore[union-attr]
    return repo


def build(cli: Cli, repo: StackRepo, record_dir: Path, *args: str) -> Result:
    return cli("build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(record_dir), *args,
               cwd=repo.root)


def artefact_of(build_record: Path, engine: EngineCase, stack_image: bool = False) -> dict[str, Any]:
    """The record's artefact; on overlay2, where no exporter writes the layout, made from the engine's image
    as publish makes it."""
    return made_artefact(build_record, DockerEngine(engine.host), stack_image).record()


def test_buildkit_build_gates_and_leaves_the_layout_its_record_names(
        tmp_path: Path, cli: Cli, on_engine: tuple[EngineCase, Cleanup], registry: str) -> None:
    engine, cleanup = on_engine
    repo = stack(tmp_path, registry, cleanup)
    r = build(cli, repo, tmp_path / "build", "--builder", "buildkit", "--json")
    assert r.code == 0, r.out + r.err
    record = json.loads(r.out)
    assert record["builder"] == "buildkit"
    assert "PASS import patcher version=1.0.0" in record["gate"]
    assert record["gate"][-1].startswith("gate ok: ")
    # the wheels were mounted into the install stages, never copied into a layer or the image
    assert record["wheels_how"].startswith("mounted into the install stages")
    assert (record["artefact"] is None) == (not engine.containerd_store)  # overlay2: copied out when needed
    entry = artefact_of(tmp_path / "build" / "e2e.build.json", engine)
    assert Path(entry["layout"]) == tmp_path / "build" / "e2e.oci"
    artefact = read_layout(Path(entry["layout"]))
    assert artefact.digest == entry["digest"] and check_blobs(artefact) == []
    assert [b.digest for b in artefact.layers] == entry["layers"]
    assert all(b.media_type.endswith("tar+gzip") for b in artefact.layers[1:])
    # the last layer is the gate's step, which installed the top group: that group and the stack's own files,
    # nothing of another group (a byte-code cache its python wrote), nothing of /tmp (its tmpfs, its mounts)
    with tarfile.open(artefact.blob_path(artefact.layers[-1].digest), "r:gz") as last:
        names = last.getnames()
    assert "opt/stack/pin-toplib/toplib/__init__.py" in names and "opt/stackctl/installed.json" in names
    assert all(n in ("opt", "opt/stack") or n.startswith(("opt/stack/pin-toplib", "opt/stackctl")) for n in names), \
        names
    # the engine holds the image for `docker run`; on the containerd store it is the layout's very image
    client = docker.DockerClient(base_url=engine.host)
    try:
        image = client.images.get(record["image"])
        assert image.id == record["image_id"]
        if engine.containerd_store:
            assert image.id == artefact.digest
        out = client.containers.run(record["image"], ["python", "-c", "import patcher, corelib; "
                                                      "print(corelib.__version__)"], remove=True)
        assert out.decode().strip() == "2.0.0+vendor1"
    finally:
        client.close()


def test_a_failing_gate_fails_the_buildkit_build_with_its_fail_line(
        tmp_path: Path, cli: Cli, on_engine26: tuple[EngineCase, Cleanup], registry: str) -> None:
    _, cleanup = on_engine26
    extra = '\n[gate.extra.helperdep]\norder = 5\nmodule = "helperdep"\ncheck = "exact"\nexpect = "1.5"\n'
    repo = stack(tmp_path, registry, cleanup, extra_toml=extra)
    r = build(cli, repo, tmp_path / "build", "--builder", "buildkit")
    assert r.code == 1, r.out + r.err
    assert r.out.splitlines() == ["FAIL import helperdep version=1.4 expected=1.5"]
    assert "error: the gate failed: 1 check did not pass" in r.err
    assert not (tmp_path / "build" / "e2e.build.json").exists()


def test_a_wheel_that_is_not_the_locks_fails_the_buildkit_build_and_the_error_names_it(
        tmp_path: Path, cli: Cli, on_engine26: tuple[EngineCase, Cleanup], registry: str) -> None:
    """Under BuildKit the context leaves the groups' wheels unread (each install stage checks its own against the
    lock): a wheel that lies still fails the build, and the error names it as the context's own check did."""
    _, cleanup = on_engine26
    repo = stack(tmp_path, registry, cleanup)
    wheel = next(repo.wheelhouse.glob("toplib-*.whl"))
    data = wheel.read_bytes()
    wheel.unlink()  # a file of its own: the last context holds a hard link to the old one
    wheel.write_bytes(data + b"\0")
    r = build(cli, repo, tmp_path / "build", "--builder", "buildkit")
    assert r.code == 1, r.out + r.err
    assert f"error: {wheel}: sha256 " in r.err and "does not match the lock's" in r.err, r.err
    assert "Traceback" not in r.err and not (tmp_path / "build" / "e2e.build.json").exists()


def test_two_no_cache_builds_give_one_manifest_digest(
        tmp_path: Path, cli: Cli, on_engine26: tuple[EngineCase, Cleanup], registry: str) -> None:
    engine, cleanup = on_engine26
    repo = stack(tmp_path, registry, cleanup)
    digests = []
    for n in (1, 2):
        r = build(cli, repo, tmp_path / f"build{n}", "--builder", "buildkit", "--no-cache", "--json")
        assert r.code == 0, r.out + r.err
        digests.append(artefact_of(tmp_path / f"build{n}" / "e2e.build.json", engine)["digest"])
    assert digests[0] == digests[1]


def test_classic_builder_still_builds_on_2010(
        tmp_path: Path, cli: Cli, on_2010: tuple[EngineCase, Cleanup], registry: str) -> None:
    _, cleanup = on_2010
    repo = stack(tmp_path, registry, cleanup)
    r = build(cli, repo, tmp_path / "build", "--builder", "classic", "--json")
    assert r.code == 0, r.out + r.err
    record = json.loads(r.out)
    assert record["builder"] == "classic"
    assert record["gate"][-1].startswith("gate ok: ")
    # the classic builder writes no layout: the build leaves it to be copied out of the engine when first needed
    # (publish, verify --rebuild), from the image this build made
    assert record["artefact"] is None and record["artefact_pending"]["image_id"] == record["image_id"]
    record_path = tmp_path / "build" / f"{repo.stack.name}.build.json"
    made = made_artefact(record_path, DockerEngine(on_2010[0].host))
    artefact = read_layout(made.layout)
    record = json.loads(record_path.read_text())
    assert artefact.digest == record["artefact"]["digest"] == made.digest and "artefact_pending" not in record
    assert record["artefact"]["made_by"].startswith("a copy of the engine's image")
    assert check_blobs(artefact) == []
    assert made_artefact(record_path, DockerEngine(on_2010[0].host)).digest == made.digest  # made once


def test_auto_falls_back_to_classic_where_buildx_cannot_run(
        tmp_path: Path, cli: Cli, on_2010: tuple[EngineCase, Cleanup], registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, cleanup = on_2010
    # A machine that reaches the engine's socket but has no docker CLI (so no buildx plugin): only git and
    # skopeo (which copies the image into its layout) on PATH.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "skopeo"):
        found = shutil.which(tool)
        assert found is not None
        os.symlink(found, bin_dir / tool)
    repo = stack(tmp_path, registry, cleanup)
    monkeypatch.setenv("PATH", str(bin_dir))
    r = build(cli, repo, tmp_path / "build", "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["builder"] == "classic"
    assert "builder: classic (the engine API's): `docker buildx version` does not run here" in r.err
    r = build(cli, repo, tmp_path / "build2", "--builder", "buildkit")
    assert r.code == 2 and "error: --builder buildkit: `docker buildx version` does not run here" in r.err


@pytest.mark.network
def test_the_app_image_through_buildkit_records_the_final_images_layout(
        app_repo: Path,  # noqa: F811
        tmp_path: Path, cli: Cli, on_engine26: tuple[EngineCase, Cleanup], registry: str) -> None:
    engine, cleanup = on_engine26
    repository = cleanup.images(f"{registry}/stackctl-test/{unique_tag('bkapp')}")
    r = cli("build", "public-example-app", "--builder", "buildkit", "--repository", repository, "--record-dir",
            str(tmp_path / "build"), "--json", cwd=app_repo)
    assert r.code == 0, r.out + r.err
    record = json.loads(r.out)
    assert record["builder"] == "buildkit"
    assert "PASS import greeter version=0.1.0" in record["gate"] or record["gate_cached"]
    entry = artefact_of(tmp_path / "build" / "public-example-app.build.json", engine)
    final = read_layout(Path(entry["layout"]))
    assert Path(entry["layout"]) == tmp_path / "build" / "public-example-app.oci"
    assert final.digest == entry["digest"] and check_blobs(final) == []
    below = artefact_of(tmp_path / "build" / "public-example-app.build.json", engine, stack_image=True)
    stack = read_layout(Path(below["layout"]))
    assert stack.digest == below["digest"] != final.digest
    if engine.containerd_store:
        assert record["image_id"] == final.digest


def test_the_image_flow_on_docker_26_build_publish_verify_key_and_rebuild(
        tmp_path: Path, cli: Cli, on_engine26: tuple[EngineCase, Cleanup], registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a user of Docker 26 runs, on each image store: the build's layout is what the registry gets, the
    signed publication verifies, and the revision rebuilt from scratch gives the published manifest again."""
    from tests.services.test_trust import keypair

    engine, cleanup = on_engine26
    repo = stack(tmp_path, registry, cleanup)
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    records = tmp_path / "build"
    r = build(cli, repo, records, "--json")
    assert r.code == 0, r.out + r.err
    record = json.loads(r.out)
    assert record["builder"] == "buildkit"
    private, public = keypair(tmp_path, "release")
    monkeypatch.setenv("STACKCTL_SIGN_KEY", str(private))
    r = cli("publish", "e2e", "--record-dir", str(records), "--json", cwd=repo.root)
    monkeypatch.delenv("STACKCTL_SIGN_KEY")
    assert r.code == 0, r.out + r.err
    pub = json.loads(r.out)
    cleanup.manifest(registry, repository, pub["digest"])
    # the layout's manifest, unchanged by the copy (on overlay2 publish made the layout first)
    assert pub["digest"] == artefact_of(records / "e2e.build.json", engine)["digest"]
    # the provenance names what built it (the engine, BuildKit through buildx) and what copied it
    made_by = pub["provenance"]["predicate"]["runDetails"]["builder"]["version"]
    assert made_by["builder"] == "buildkit" and made_by["docker-engine"].startswith("26.") and made_by["buildx"]
    assert made_by["skopeo"] and made_by["stackctl"]

    r = cli("verify", f"{repository}@{pub['digest']}", "--key", str(public), "--lock", str(repo.lock), "--json")
    assert r.code == 0, r.out + r.err
    r = cli("verify", f"{repository}@{pub['digest']}", "--rebuild", "--source", str(repo.root),
            "--wheelhouse", str(repo.wheelhouse), "--json")
    assert r.code == 0, r.out + r.err
    rebuilt = json.loads(r.out)["rebuild"]
    assert rebuilt["rebuilt_digest"] == rebuilt["registry_digest"] == pub["digest"], engine.name
