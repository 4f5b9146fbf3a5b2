"""Publish order on the real registry: the layout's blobs and manifest by digest (skopeo), the check, SBOM
and provenance, and only then the tag. A proxy in front of the registry fails one kind of request per
run: the tag stays where it was, no record is written; the run after the last failure moves it."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stackctl.engine.registry import Registry
from stackctl.image.layout import canonical
from stackctl.publish.attest import EMPTY_CONFIG, OCI_MANIFEST
from tests.conftest import Result
from tests.support.engine import unique_tag
from tests.support.imagestack import make_stack_repo
from tests.support.imagetest import delete_from_registry, remove_images
from tests.support.regproxy import registry_proxy

pytestmark = pytest.mark.integration

# Each kind of request publish makes, in the order it makes them: (name, method, path pattern)
STEPS = [
    ("start a layer upload", "POST", r"/blobs/uploads/$"),  # not a mount attempt (`?mount=`): skopeo falls back
    ("send a layer's bytes", "PATCH", r"/blobs/uploads/"),
    ("close a layer's upload", "PUT", r"/blobs/uploads/"),
    ("put the manifest by digest", "PUT", r"/manifests/sha256:"),
    ("read the manifest back", "GET", r"/manifests/sha256:"),
    ("read the config back", "GET", r"/blobs/sha256:"),
    ("push the SBOM", "PUT", r"/manifests/sha256-[0-9a-f]+\.sbom$"),
    ("push the provenance", "PUT", r"/manifests/sha256-[0-9a-f]+\.att$"),
    ("move the tag", "PUT", r"/manifests/(?!sha256)[^/]+$"),
]


INJECTED = b'{"errors":[{"code":"UNKNOWN","message":"injected"}]}'


class Faults:
    def __init__(self) -> None:
        self.fail: tuple[str, str] | None = None  # (method, pattern): the next such request gets a 500
        self.lock = threading.Lock()

    def edit(self, method: str, path: str, status: int, headers: dict[str, str], body: bytes) -> Any:
        with self.lock:  # asked before forwarding (status 0): a failed request never reaches the registry
            if status == 0 and self.fail and method == self.fail[0] and re.search(self.fail[1], path):
                self.fail = None
                return 500, {"Content-Type": "application/json"}, INJECTED
        return status, headers, body


@pytest.fixture
def faulty(registry: str) -> Iterator[tuple[str, Faults, list[str]]]:
    faults = Faults()
    with registry_proxy(registry, faults.edit) as (host, seen):
        yield host, faults, seen


def tag_digest(registry: str, name: str, tag: str) -> str | None:
    got = Registry().manifest(f"{registry}/{name}", tag)
    return got[0] if got else None


def test_each_failing_step_leaves_the_tag_where_it_was(
        tmp_path: Path, cli: Callable[..., Result], docker_client: Any, base_image: str, registry: str,
        faulty: tuple[str, Faults, list[str]]) -> None:
    host, faults, seen = faulty
    name = f"stackctl-test/{unique_tag('order')}"
    repo = make_stack_repo(tmp_path, "e2e", f"{host}/{name}", nonce=unique_tag("n"))
    r = cli("build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(tmp_path / "b"), "--json",
            cwd=repo.root)
    assert r.code == 0, r.out + r.err
    image = json.loads(r.out)["image"]
    tag = image.rsplit(":", 1)[1]
    # The tag names an earlier image before the publish: it must still name it after every failure.
    reg = Registry()
    empty = reg.put_blob(f"{registry}/{name}", b"{}")
    earlier = reg.put_manifest(f"{registry}/{name}", tag, canonical({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": EMPTY_CONFIG, "digest": empty,
                                                                  "size": 2}, "layers": []}), OCI_MANIFEST)
    record = tmp_path / "publications.jsonl"
    published: list[str] = [earlier]
    try:
        for step, method, pattern in STEPS:
            faults.fail = (method, pattern)
            seen.clear()
            r = cli("publish", "e2e", "--record-dir", str(tmp_path / "b"), "--record", str(record), cwd=repo.root)
            assert faults.fail is None, f"{step}: publish made no such request: {seen}"
            assert r.code == 3, f"{step}: {r.out}{r.err}"
            last = r.err.strip().splitlines()[-1]  # after the progress lines
            assert last.startswith("error: ") and "500" in last and "Traceback" not in r.err, r.err
            assert tag_digest(registry, name, tag) == earlier, f"{step} failed, yet the tag moved"
            assert not record.exists()
        faults.fail = None
        seen.clear()
        r = cli("publish", "e2e", "--record-dir", str(tmp_path / "b"), "--record", str(record), "--json",
                cwd=repo.root)
        assert r.code == 0, r.out + r.err
        pub = json.loads(r.out)
        published.append(pub["digest"])
        assert tag_digest(registry, name, tag) == pub["digest"]
        # The tag is the last write of the publish: after the image, its check and both attachments.
        writes = [s for s in seen if s.startswith("PUT /v2/") and "/manifests/" in s]
        assert writes[-1] == f"PUT /v2/{name}/manifests/{tag}" and len(writes) == 4, writes
        # Every layer was uploaded by the failed runs already: this one sent none again.
        assert pub["layers_pushed"] == 0 and not [s for s in seen if s.startswith("PATCH")]
    finally:
        remove_images(docker_client, f"{host}/{name}")
        for digest in published:
            delete_from_registry(registry, f"{registry}/{name}", digest)
