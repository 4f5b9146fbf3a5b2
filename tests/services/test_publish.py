"""Publish to the real local registry: the build's OCI layout copied by digest, checked, tagged last and
recorded, with no engine asked; inspect from the registry; a forger between publish and the registry is
caught before the tag moves."""

from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import requests

from stackctl.engine.docker import DockerEngine
from stackctl.engine.registry import Registry
from stackctl.image.build import made_artefact
from stackctl.image.labels import diff_installed
from stackctl.publish.publication import read_records
from stackctl.review.images import image_pins
from tests.support.cli import Cli
from tests.support.engine import Cleanup, unique_tag
from tests.support.fit import check_fits
from tests.support.gitrepo import git
from tests.support.imagestack import make_stack_repo
from tests.support.imagetest import remove_images
from tests.support.index_server import free_port

pytestmark = pytest.mark.integration


def built(tmp_path: Path, cli: Cli, registry: str, versions: dict[str, str] | None = None,
          repository: str | None = None) -> tuple[Path, str]:
    repository = repository or f"{registry}/stackctl-test/{unique_tag('pub')}"
    repo = make_stack_repo(tmp_path, "e2e", repository, versions, nonce=unique_tag("n"))
    r = cli("build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(tmp_path / "build"),
            "--json", cwd=repo.root)
    assert r.code == 0, r.out + r.err
    return repo.root, json.loads(r.out)["image"]


def pub_args(tmp_path: Path, record: Path | None = None) -> list[str]:
    """Where publish finds the build record `built` wrote, and the publication record."""
    return ["--record-dir", str(tmp_path / "build"), "--record", str(record or tmp_path / "publications.jsonl")]


def test_publish_pull_back_record_and_inspect(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    root, image = built(tmp_path, cli, registry)
    repository = image.rsplit(":", 1)[0]
    record = tmp_path / "publications.jsonl"
    cleanup.images(repository)
    r = cli("publish", "e2e", *pub_args(tmp_path), "--json", cwd=root)
    assert r.code == 0, r.out + r.err
    pub = json.loads(r.out)
    cleanup.manifest(registry, repository, pub["digest"])
    head = git(root, "rev-parse", "HEAD").strip()
    assert pub["revision"] == head and pub["tag"] == image and pub["digest"].startswith("sha256:")
    assert [p.digest for p in read_records(record)] == [pub["digest"]]
    # the registry's manifest is the build's artefact, byte for byte: the digest the build recorded
    build = json.loads((tmp_path / "build" / "e2e.build.json").read_text())
    assert pub["digest"] == build["artefact"]["digest"] and pub["layout"] == build["artefact"]["layout"]
    assert pub["layers_pushed"] + pub["layers_present"] == len(build["artefact"]["layers"])
    assert pub["layers_present"] == 0 and pub["pushed_bytes"] > 0  # a new repository: every layer sent

    # Forget every local name of it, then pull it back by digest: the same layers under the reproducible
    # config (the id the record names), labels carry the revision.
    local = docker_client.images.get(image)
    assert pub["image_id"] == local.id and pub["config_digest"] != local.id
    remove_images(docker_client, repository)
    pulled = docker_client.images.pull(f"{repository}@{pub['digest']}")
    image_id = pub["config_digest"]
    assert pulled.id == image_id and pulled.attrs["RootFS"]["Layers"] == local.attrs["RootFS"]["Layers"]
    assert pulled.labels["org.opencontainers.image.revision"] == head

    # inspect reads manifest + config from the registry, without the engine.
    r = cli("inspect", image, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["source"] == "registry" and data["digest"] == pub["digest"] and data["image_id"] == image_id
    assert data["labels"]["org.opencontainers.image.revision"] == head
    assert data["installed"]["corelib"] == "2.0.0+vendor1"
    r = cli("inspect", f"{repository}@{pub['digest']}")
    assert r.code == 0 and "org.opencontainers.image.revision" in r.out and "helperdep" in r.out
    # one word per id: the registry's config digest is not the engine's id of the build that publish names
    assert f"  config   {image_id} (what a pull of the digest gives)" in r.out.splitlines()
    assert "image id" not in r.out

    # A second publish of the same image appends; the first record stays.
    r = cli("publish", "e2e", *pub_args(tmp_path), cwd=root)
    assert r.code == 0 and len(read_records(record)) == 2
    assert read_records(record)[1].digest == pub["digest"]
    # the human summary: every layer already there, and last the reference verify takes
    said = r.out.splitlines()
    assert said[-1] == f"{repository}@{pub['digest']}", r.out
    assert f"  config   {image_id} (what a pull of the digest gives)" in said
    assert f"  built as {pub['image_id']} (the build's id in its engine)" in said and "image id" not in r.out
    assert any(ln.startswith("  layers   0 sent (0 B), ") for ln in said), r.out


def test_image_diff_from_installed_labels(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repository = f"{registry}/stackctl-test/{unique_tag('diff')}"
    cleanup.images(repository)
    _, a = built(tmp_path / "a", cli, registry, repository=repository)
    root_b, b = built(tmp_path / "b", cli, registry, {"toplib": "0.4.0"}, repository=repository)
    assert cli("publish", "e2e", *pub_args(tmp_path / "b", tmp_path / "p.jsonl"), cwd=root_b).code == 0
    cleanup.manifest(registry, repository, read_records(tmp_path / "p.jsonl")[0].digest)
    docker_client.images.remove(b)  # from here on only the registry holds b
    rows = diff_installed(image_pins(a), image_pins(b))  # a from the engine, b from the registry
    assert [(r.package, r.before, r.after, r.change) for r in rows if r.change != "unchanged"] == [
        ("toplib", "0.3.0", "0.4.0", "changed")]
    assert len(rows) == 5
    r = cli("diff", a, b, "--markdown", "--changed-only")
    assert r.code == 0, r.err
    assert r.out.splitlines()[2:] == ["| toplib | 0.3.0 | 0.4.0 | minor |"]
    j = json.loads(cli("diff", a, b, "--json").out)
    assert {p["package"]: p["change"] for p in j["pins"]}["corelib"] == "unchanged"
    check_fits(cli, monkeypatch, ["diff", a, b], ["package", "before", "after"])
    # an image stackctl did not build records nothing: said so, not every package "added"
    r = cli("diff", base_image, a)
    assert r.code == 2 and "added" not in r.out
    assert r.err.splitlines()[0] == (f"error: {base_image} records no installed distributions (no "
                                     "io.stackctl.installed label): it was not built by `stackctl build`, "
                                     "so there is nothing to compare")


def test_registry_down_fails_publish_and_writes_no_record(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    root, image = built(tmp_path, cli, registry)
    down = f"127.0.0.1:{free_port()}/stackctl-test/down"
    record = tmp_path / "publications.jsonl"
    cleanup.images(image.rsplit(":", 1)[0])
    cleanup.images(down)
    r = cli("publish", "e2e", "--repository", down, *pub_args(tmp_path), cwd=root)
    assert r.code == 3, r.out + r.err
    assert len([ln for ln in r.err.splitlines() if ln.startswith("error:")]) == 1
    # checked before anything is tagged or pushed; the cause in words, with the URL tried
    host = down.split("/", 1)[0]
    assert r.err.splitlines()[0] == (f"error: registry {host} unreachable at http://{host}/v2/: "
                                     "connection refused: nothing listens there")
    assert not record.exists()
    assert not [t for i in docker_client.images.list() for t in i.tags if t.startswith(down)]
    r = cli("inspect", f"{down}:x")
    assert r.code == 3 and "unreachable" in r.err

    # The profile moved on (the tag did not: it names no description) and nothing was rebuilt: the
    # local image is stale, so nothing is pushed and nothing recorded.
    profile = root / "stacks" / "e2e.toml"
    profile.write_text(profile.read_text().replace('description = "stackctl image test stack"',
                                                   'description = "moved on"'))
    _relock(root)
    r = cli("publish", "e2e", *pub_args(tmp_path), cwd=root)
    assert r.code == 1, r.out + r.err
    assert "was built from another profile or lock: io.stackctl.profile-digest" in r.err
    assert not record.exists()
    name = image.rsplit(":", 1)[0].split("/", 1)[1]
    assert requests.get(f"http://{registry}/v2/{name}/tags/list", timeout=10).status_code == 404


def _relock(root: Path) -> None:
    from stackctl.profile.loader import load_stack
    from stackctl.resolve.lock import read_lock, write_lock

    lock = root / "stacks" / "e2e.lock"
    write_lock(lock, dataclasses.replace(read_lock(lock), profile_digest=load_stack(root / "stacks" / "e2e.toml")
                                         .digest()))
    git(root, "commit", "-qam", "profile moved on")


def test_publish_under_another_repository_pushes_the_current_build(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    # An older build left under the other name must not be what is pushed after a rebuild.
    root, image = built(tmp_path, cli, registry)
    other = f"{registry}/stackctl-test/{unique_tag('other')}"
    tag = image.rsplit(":", 1)[1]
    cleanup.images(image.rsplit(":", 1)[0])
    cleanup.images(other)
    r = cli("publish", "e2e", "--repository", other, *pub_args(tmp_path, tmp_path / "p.jsonl"), "--json", cwd=root)
    assert r.code == 0, r.out + r.err
    first = json.loads(r.out)
    cleanup.manifest(registry, other, first["digest"])
    profile = root / "stacks" / "e2e.toml"
    profile.write_text(profile.read_text().replace('description = "stackctl image test stack"',
                                                   'description = "rebuilt"'))
    _relock(root)
    r = cli("build", "e2e", "--wheelhouse", str(tmp_path / "wheelhouse"), "--record-dir", str(tmp_path / "build"),
            "--json", cwd=root)
    assert r.code == 0, r.out + r.err
    rebuilt = json.loads(r.out)["image_id"]
    assert rebuilt != first["image_id"]
    r = cli("publish", "e2e", "--repository", other, *pub_args(tmp_path, tmp_path / "p.jsonl"), "--json", cwd=root)
    assert r.code == 0, r.out + r.err
    second = json.loads(r.out)
    cleanup.manifest(registry, other, second["digest"])
    assert second["image_id"] == rebuilt and second["tag"] == f"{other}:{tag}"
    assert [p.image_id for p in read_records(tmp_path / "p.jsonl")] == [first["image_id"], rebuilt]
    # each record says how it was made: `report` names these commands to run again, options and all
    build = json.loads((tmp_path / "build" / "e2e.build.json").read_text())
    assert build["command"] == f"stackctl build e2e --wheelhouse {tmp_path / 'wheelhouse'} --record-dir " \
                               f"{tmp_path / 'build'} --json"
    assert read_records(tmp_path / "p.jsonl")[-1].command == (
        f"stackctl publish e2e --repository {other} --record-dir {tmp_path / 'build'} --record "
        f"{tmp_path / 'p.jsonl'} --json")


def test_a_record_that_cannot_be_written_stops_publish_before_any_push(
        tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "e2e", "127.0.0.1:5000/stackctl-test/never-pushed")
    for record in ("/proc/stackctl-nope/p.jsonl", str(tmp_path)):
        r = cli("publish", "e2e", "--record", record, cwd=repo.root)
        assert r.code == 2, r.out + r.err
        assert r.err.startswith(f"error: --record {record}: ") and "Traceback" not in r.err


class _PushRefusingRegistry(BaseHTTPRequestHandler):
    """Answers the API check (GET /v2/) and refuses every upload: a registry that is up but cannot take a push."""

    def do_GET(self) -> None:
        self._answer(200 if self.path == "/v2/" else 404)

    def do_HEAD(self) -> None:
        self._answer(404)

    def do_POST(self) -> None:
        self._answer(500)

    def _answer(self, code: int) -> None:
        body = b"{}"
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


def test_a_failed_publish_under_another_repository_leaves_no_tag(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    root, image = built(tmp_path, cli, registry)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PushRefusingRegistry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    other = f"127.0.0.1:{server.server_address[1]}/stackctl-test/refused"
    cleanup.images(image.rsplit(":", 1)[0])
    cleanup.images(other)
    try:
        r = cli("publish", "e2e", "--repository", other, *pub_args(tmp_path), cwd=root)
        assert r.code == 3, r.out + r.err
        errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and errors[0].startswith("error: skopeo: the copy to ") and "500" in errors[0]
        assert not (tmp_path / "publications.jsonl").exists() and "Traceback" not in r.err
        # nothing is tagged anywhere, in the engine either
        assert not [t for i in docker_client.images.list() for t in i.tags if t.startswith(other)]
    finally:
        server.shutdown()
        server.server_close()


class _StallingRegistry(_PushRefusingRegistry):
    """Takes an upload's start, then holds its first PATCH open: a push stuck on the network."""

    requests: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.requests.append(f"POST {self.path}")
        self.send_response(202)
        self.send_header("Location", "/v2/stackctl-test/stalled/blobs/uploads/u1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PATCH(self) -> None:
        self.requests.append(f"PATCH {self.path}")
        threading.Event().wait(60)

    def do_PUT(self) -> None:
        self.requests.append(f"PUT {self.path}")
        self._answer(500)


def test_ctrl_c_during_a_stalled_upload_exits_130_at_once_and_commits_nothing(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    root, image = built(tmp_path, cli, registry)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StallingRegistry)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    other = f"127.0.0.1:{server.server_address[1]}/stackctl-test/stalled"
    cleanup.images(image.rsplit(":", 1)[0])
    cleanup.images(other)
    proc = None
    try:
        proc = subprocess.Popen([sys.executable, "-m", "stackctl", "publish", "e2e", "--repository", other,
                                 *pub_args(tmp_path, tmp_path / "rec.jsonl")], cwd=root, env=dict(os.environ),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not any(r.startswith("PATCH") for r in _StallingRegistry.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(r.startswith("PATCH") for r in _StallingRegistry.requests), _StallingRegistry.requests
        interrupted = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, out + err
        assert time.monotonic() - interrupted < 5  # not after the stalled request's time-out
        assert "Traceback" not in err and not (tmp_path / "rec.jsonl").exists()
        assert not [r for r in _StallingRegistry.requests if r.startswith("PUT")]  # no blob, manifest or tag
        time.sleep(1)  # skopeo was ended with publish: it asks nothing more
        assert not [r for r in _StallingRegistry.requests if r.startswith("PUT")]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        server.shutdown()
        server.server_close()


def test_publish_of_an_image_not_built_names_the_build_record(tmp_path: Path, cli: Cli, registry: str) -> None:
    repository = f"{registry}/stackctl-test/{unique_tag('unbuilt')}"
    repo = make_stack_repo(tmp_path, "e2e", repository)
    r = cli("publish", "e2e", *pub_args(tmp_path), cwd=repo.root)
    assert r.code == 2 and "Traceback" not in r.err
    assert [ln for ln in r.err.splitlines() if ln.startswith(("error:", "hint:"))] == [
        f"error: {tmp_path / 'build' / 'e2e.build.json'}: no build record", "hint: run `stackctl build` first"]
    assert not (tmp_path / "publications.jsonl").exists()


def test_publish_needs_no_engine_and_verify_reads_the_registry_alone(
        tmp_path: Path, cli: Cli, cleanup: Cleanup, base_image: str, registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, image = built(tmp_path, cli, registry)
    repository = image.rsplit(":", 1)[0]
    cleanup.images(repository)
    gone = f"unix://{tmp_path / 'no-engine.sock'}"
    # the classic builder left the layout to be made when first needed: with the engine gone, publish says so
    with monkeypatch.context() as m:
        m.setenv("DOCKER_HOST", gone)
        r = cli("publish", "e2e", *pub_args(tmp_path), cwd=root)
    assert r.code == 3 and r.err.startswith(f"error: cannot reach the Docker engine at {gone}"), r.out + r.err
    assert Registry().manifest(repository, image.rsplit(":", 1)[1]) is None  # nothing was copied, no tag moved
    # once made (the first publish makes it; here by the engine that built the image), publish reads it alone
    made_artefact(tmp_path / "build" / "e2e.build.json", DockerEngine())
    monkeypatch.setenv("DOCKER_HOST", gone)
    r = cli("publish", "e2e", *pub_args(tmp_path), "--json", cwd=root)
    assert r.code == 0, r.out + r.err
    pub = json.loads(r.out)
    cleanup.manifest(registry, repository, pub["digest"])
    lock = root / "stacks" / "e2e.lock"
    r = cli("verify", pub["tag"].rsplit(":", 1)[0] + "@" + pub["digest"], "--lock", str(lock), "--json")
    assert r.code == 0, r.out + r.err
    assert Registry().manifest(repository, image.rsplit(":", 1)[1]) is not None


def _forger(kind: str) -> Any:
    """Edits the registry's answers about the image publish just copied: the manifest read back by digest,
    the config's size, or the first layer's size."""
    def edit(method: str, path: str, status: int, headers: dict[str, str], body: bytes) -> Any:
        if status == 0 or status >= 300:
            return status, headers, body
        if kind == "manifest" and method == "GET" and "/manifests/sha256:" in path:
            doc = json.loads(body)
            if doc.get("layers"):
                doc["annotations"] = {"forged": "yes"}
                body = json.dumps(doc).encode()  # no longer the digest it is served as
                headers = {k: v for k, v in headers.items() if k.lower() != "docker-content-digest"}
                return status, headers, body
        if kind in ("config", "layer") and method == "HEAD" and "/blobs/sha256:" in path:
            digest = path.rsplit("/", 1)[1]
            if digest in edit.targets:  # type: ignore[attr-defined]
                return status, {**headers, "Content-Length": str(int(headers.get("Content-Length", "0")) + 1)}, body
        return status, headers, body
    edit.targets = set()  # type: ignore[attr-defined]
    return edit


@pytest.mark.parametrize("kind", ["manifest", "config", "layer"])
def test_a_forged_copy_is_caught_and_the_tag_does_not_move(
        tmp_path: Path, cli: Cli, cleanup: Cleanup, base_image: str, registry: str, kind: str) -> None:
    from tests.support.regproxy import registry_proxy

    root, image = built(tmp_path, cli, registry)
    cleanup.images(image.rsplit(":", 1)[0])
    art = made_artefact(tmp_path / "build" / "e2e.build.json", DockerEngine()).record()  # what publish copies
    edit = _forger(kind)
    edit.targets.update({art["config"]} if kind == "config" else {art["layers"][-1]})
    with registry_proxy(registry, edit) as (host, seen):
        name = f"stackctl-test/{unique_tag('forged')}"
        r = cli("publish", "e2e", "--repository", f"{host}/{name}", *pub_args(tmp_path), cwd=root)
        assert r.code == 1, r.out + r.err
        errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in r.err, r.err
        assert "in the registry is not what was built" in errors[0], errors[0]
        assert ("does not hash to" if kind == "manifest" else "bytes in the registry") in errors[0], errors[0]
        assert not [s for s in seen if s.startswith("PUT") and "/manifests/" in s and "sha256" not in s]
    cleanup.manifest(registry, f"{registry}/{name}", art["digest"])
    assert Registry().manifest(f"{registry}/{name}", image.rsplit(":", 1)[1]) is None  # no tag
    assert not (tmp_path / "publications.jsonl").exists()


def test_a_registry_login_reaches_skopeo_and_nothing_else(
        tmp_path: Path, cli: Cli, cleanup: Cleanup, base_image: str, registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import base64

    from tests.support.regproxy import registry_proxy

    secret = "pr0xy-s3cret-" + unique_tag("p")
    root, image = built(tmp_path, cli, registry)
    cleanup.images(image.rsplit(":", 1)[0])
    config, scratch = tmp_path / "docker", tmp_path / "scratch"
    config.mkdir()
    scratch.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    monkeypatch.setenv("TMPDIR", str(scratch))  # where the private auth file lives while skopeo runs
    with registry_proxy(registry, login=("robot", secret)) as (host, seen):
        name = f"stackctl-test/{unique_tag('login')}"
        # no login for it: refused by the registry, one line, exit 3, no tag
        r = cli("publish", "e2e", "--repository", f"{host}/{name}", *pub_args(tmp_path), cwd=root)
        assert r.code == 3 and len([ln for ln in r.err.splitlines() if ln.startswith("error:")]) == 1, r.err
        auth = base64.b64encode(f"robot:{secret}".encode()).decode()
        (config / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
        r = cli("publish", "e2e", "--repository", f"{host}/{name}", *pub_args(tmp_path), "--json", cwd=root)
        assert r.code == 0, r.out + r.err
        digest = json.loads(r.out)["digest"]
        assert [s for s in seen if s.startswith("PATCH") or s.startswith("PUT")]  # skopeo logged in to send
    cleanup.manifest(registry, f"{registry}/{name}", digest)
    assert Registry().manifest(f"{registry}/{name}", image.rsplit(":", 1)[1]) is not None
    records = [tmp_path / "publications.jsonl", tmp_path / "build" / "e2e.build.json"]
    for text in [r.out, r.err, *(p.read_text() for p in records)]:
        assert secret not in text and auth not in text
    assert list(scratch.iterdir()) == []  # the auth file and its folder are gone
