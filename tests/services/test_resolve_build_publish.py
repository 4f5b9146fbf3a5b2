"""The whole chain on real parts: wheels served by loopback indexes → resolve (closure by uv) → build on the
engine with the gate → publish to the local registry → pull back by digest."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from stackctl.resolve.lock import read_lock
from tests.support.cli import Cli
from tests.support.engine import Cleanup, unique_tag
from tests.support.gitrepo import git
from tests.support.imagestack import VERSIONS, make_stack_repo
from tests.support.imagetest import remove_images
from tests.support.index_server import IndexServer

pytestmark = pytest.mark.integration
SECRET = "vendor-s3cr3t-e2e"
T0 = datetime(2026, 9, 1, 8, 0, tzinfo=timezone.utc)


def test_served_stack_resolves_builds_gates_and_publishes(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_TEST_VENDOR_USER", "robot")
    monkeypatch.setenv("STACKCTL_TEST_VENDOR_PASSWORD", SECRET)
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache"))
    repository = f"{registry}/stackctl-test/{unique_tag('chain')}"
    repo = make_stack_repo(tmp_path, "e2e", repository, nonce=unique_tag("n"), commit=False)
    repo.lock.unlink()  # this time the lock comes from resolve
    vendor = IndexServer(html_only=True, auth=("robot", SECRET)).start()
    public = IndexServer().start()
    cleanup.images(repository)
    try:
        for i, name in enumerate(VERSIONS):
            wheel = next(repo.wheelhouse.glob(f"{name.replace('-', '_')}-{VERSIONS[name]}-*.whl"))
            (vendor if name.startswith("corelib") else public).add(wheel, upload_time=T0 + timedelta(minutes=i))
        indexes = ("--index", f"vendor={vendor.url}", "--index", f"public={public.url}")

        r = cli("resolve", "e2e", *indexes, "--json", cwd=repo.root)
        assert r.code == 0, r.out + r.err
        resolved = json.loads(r.out)
        closure = {(c["name"], c["version"]) for c in resolved["closure"]}
        assert ("helperdep", "1.4") in closure  # toplib's dependency, found by the resolver
        assert SECRET not in repo.lock.read_text()
        git(repo.root, "add", "-A")
        git(repo.root, "commit", "-q", "-m", "lock")

        # No --wheelhouse: build fetches every wheel from the indexes and checks each sha256.
        r = cli("build", "e2e", *indexes, "--record-dir", str(tmp_path / "build"), "--json", cwd=repo.root)
        assert r.code == 0, r.out + r.err
        record = json.loads(r.out)
        verdicts = [line for line in record["gate"] if line.startswith(("PASS", "FAIL"))]
        assert verdicts[:2] == ["PASS import patcher version=1.0.0", "PASS import corelib version=2.0.0+vendor1"]
        assert not [line for line in verdicts if line.startswith("FAIL")]
        assert any(p.startswith("/files/corelib-") for _, p, _ in vendor.log)
        image = record["image"]

        r = cli("publish", "e2e", "--record", str(tmp_path / "pub.jsonl"), "--record-dir", str(tmp_path / "build"),
                "--json", cwd=repo.root)
        assert r.code == 0, r.out + r.err
        pub = json.loads(r.out)
        digest = pub["digest"]
        cleanup.manifest(registry, repository, digest)
        built_layers = docker_client.images.get(image).attrs["RootFS"]["Layers"]
        remove_images(docker_client, repository)
        pulled = docker_client.images.pull(f"{repository}@{digest}")
        # The tag names the reproducible manifest: the same layers under a config with fixed times.
        assert pulled.id == pub["config_digest"] and pulled.attrs["RootFS"]["Layers"] == built_layers
        head = git(repo.root, "rev-parse", "HEAD").strip()
        assert pulled.labels["org.opencontainers.image.revision"] == head
        assert pulled.labels["io.stackctl.lock-digest"] == read_lock(repo.lock).digest()
        history = json.dumps([h for h in pulled.history()])
        assert SECRET not in history and SECRET not in json.dumps(pulled.attrs)
        # The credential was used to fetch the vendor wheels: it reached no layer, and no file stackctl
        # wrote (lock, cache, context, build and publication records).
        assert SECRET.encode() not in b"".join(pulled.save(named=False))
        for path in [*tmp_path.rglob("*")]:
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path
    finally:
        vendor.stop()
        public.stop()
