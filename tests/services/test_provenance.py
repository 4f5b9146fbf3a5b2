"""Reproducible layers and digest, SBOM and provenance beside the image, and `verify` from the registry."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import requests

from stackctl.engine.registry import Registry
from stackctl.image.layout import canonical
from stackctl.publish.attest import OCI_MANIFEST
from stackctl.verify.remote import SBOM_TYPE, artifact_tag
from tests.support.cli import Cli
from tests.support.engine import unique_tag
from tests.support.imagestack import StackRepo, make_stack_repo
from tests.support.imagetest import delete_from_registry, remove_images

pytestmark = pytest.mark.integration


def build(cli: Cli, repo: StackRepo, out: Path, *args: str) -> dict[str, Any]:
    r = cli("build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(out), "--json", *args,
            cwd=repo.root)
    assert r.code == 0, r.out + r.err
    return dict(json.loads(r.out))


def layers(client: Any, image_id: str) -> list[str]:
    return list(client.api.inspect_image(image_id)["RootFS"]["Layers"])


def publish(cli: Cli, repo: StackRepo, record: Path, builds: Path) -> dict[str, Any]:
    """Publish the build whose record is in `builds`."""
    r = cli("publish", "e2e", "--record-dir", str(builds), "--record", str(record), "--json", cwd=repo.root)
    assert r.code == 0, r.out + r.err
    return dict(json.loads(r.out))


def drop(registry: str, repository: str, digests: list[str]) -> None:
    for digest in digests:
        for kind in ("sbom", "att"):
            got = Registry().manifest(repository, artifact_tag(digest, kind))
            if got is not None:
                delete_from_registry(registry, repository, got[0])
        delete_from_registry(registry, repository, digest)


def test_two_clean_builds_publish_one_digest_and_verify_from_the_registry(
        tmp_path: Path, cli: Cli, docker_client: Any, base_image: str, registry: str) -> None:
    repository = f"{registry}/stackctl-test/{unique_tag('repro')}"
    repo = make_stack_repo(tmp_path, "e2e", repository, nonce=unique_tag("n"))
    record = tmp_path / "publications.jsonl"
    published: list[str] = []
    try:
        first = build(cli, repo, tmp_path / "b1")  # whatever the cache holds: the layers are the same
        first_layers = layers(docker_client, first["image_id"])
        pub1 = publish(cli, repo, record, tmp_path / "b1")
        published.append(pub1["digest"])
        # the classic builder writes no layout: publish made it, from the image the build made, and recorded it
        made = json.loads((tmp_path / "b1" / "e2e.build.json").read_text())["artefact"]
        assert first["artefact"] is None and first["artefact_pending"]["image_id"] == first["image_id"]
        assert pub1["source_date_epoch"] > 0 and pub1["digest"] == made["digest"]
        assert "byte for byte the layout's" in pub1["verified"][0] and "hashed in the layout" in pub1["verified"][1]
        # every layer is in the registry: sent now, or found there; this stack's own are new
        assert pub1["layers_pushed"] + pub1["layers_present"] == len(first_layers)
        assert pub1["layers_pushed"] > 0 and pub1["pushed_bytes"] > 0
        mats = {m["name"]: m for m in pub1["provenance"]["predicate"]["buildDefinition"]["resolvedDependencies"]}
        assert mats["source"]["annotations"]["dirty"] is False and mats["lock"]["digest"]["sha256"]
        assert mats["base-image"]["digest"]["sha256"] and {m for m in mats if m.endswith(".whl")} == {
            p.name for p in repo.wheelhouse.glob("*.whl")}

        # A clean engine: the image gone, every step built afresh (no cache), not a layer reused.
        remove_images(docker_client, repository)
        second = build(cli, repo, tmp_path / "b2", "--no-cache")
        assert second["cached_steps"] == 0
        assert second["image_id"] != first["image_id"]  # the engine's config times differ...
        assert layers(docker_client, second["image_id"]) == first_layers  # ...its layers do not
        assert first["fingerprint_digest"] == second["fingerprint_digest"]
        # the second build's artefact is the first's: one manifest digest from two clean builds
        pub2 = publish(cli, repo, record, tmp_path / "b2")
        assert json.loads((tmp_path / "b2" / "e2e.build.json").read_text())["artefact"]["digest"] == made["digest"]
        assert pub2["digest"] == pub1["digest"] and pub2["config_digest"] == pub1["config_digest"]
        # Every blob is in the registry already: none is sent again.
        assert pub2["layers_pushed"] == 0 and pub2["pushed_bytes"] == 0

        # Anyone can re-check it from the registry alone, against the lock.
        remove_images(docker_client, repository)
        r = cli("verify", f"{repository}@{pub1['digest']}", "--lock", str(repo.lock), "--layers", "--json")
        assert r.code == 0, r.out + r.err
        report = json.loads(r.out)
        assert report["ok"] and {f["check"] for f in report["findings"]} == {
            "labels", "sbom", "installed", "provenance", "base", "reproducible", "layers"}
        assert report["sbom_components"] == 5
        r = cli("inspect", f"{repository}:{repo_tag(repo)}", "--json")
        attached = json.loads(r.out)["attached"]
        assert attached["sbom_tag"] == artifact_tag(pub1["digest"], "sbom") and len(attached["sbom_components"]) == 5
        assert attached["predicate"] == "https://slsa.dev/provenance/v1"

        # Another lock: the labels, the SBOM and the installed distributions all disagree with it.
        other = make_stack_repo(tmp_path / "other", "e2e", repository, {"toplib": "0.4.0"}, nonce="x")
        r = cli("verify", f"{repository}@{pub1['digest']}", "--lock", str(other.lock), "--json")
        assert r.code == 1, r.out + r.err
        failed = {f["check"]: f["detail"] for f in json.loads(r.out)["findings"] if not f["ok"]}
        assert set(failed) == {"labels", "sbom", "installed", "provenance"}
        assert "toplib is 0.3.0 in the image, expected 0.4.0" in failed["installed"]
        assert "error: " in r.err and "toplib" in r.err

        # An SBOM beside the image that is not the one inside it.
        reg = Registry()
        forged = json.dumps({"bomFormat": "CycloneDX", "components": []}).encode()
        blob, empty = reg.put_blob(repository, forged), reg.put_blob(repository, b"{}")
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": SBOM_TYPE,
                    "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": empty, "size": 2},
                    "layers": [{"mediaType": SBOM_TYPE, "digest": blob, "size": len(forged)}],
                    "subject": {"mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                                "digest": pub1["digest"], "size": 1}}
        reg.put_manifest(repository, artifact_tag(pub1["digest"], "sbom"), canonical(manifest), OCI_MANIFEST)
        r = cli("verify", f"{repository}@{pub1['digest']}", "--lock", str(repo.lock))
        assert r.code == 1 and "the SBOM beside the image is not the one inside it" in r.err, r.out + r.err
    finally:
        remove_images(docker_client, repository)
        drop(registry, repository, published)


def repo_tag(repo: StackRepo) -> str:
    from stackctl.image.labels import image_ref

    return image_ref(repo.stack).tag


def test_a_pin_change_moves_only_the_layers_above_it_and_a_tampered_image_fails_verify(
        tmp_path: Path, cli: Cli, docker_client: Any, base_image: str, registry: str) -> None:
    repository = f"{registry}/stackctl-test/{unique_tag('pin')}"
    nonce = unique_tag("n")
    a = make_stack_repo(tmp_path / "a", "e2e", repository, nonce=nonce)
    b = make_stack_repo(tmp_path / "b", "e2e", repository, {"toplib": "0.4.0"}, nonce=nonce)
    published: list[str] = []
    tampered = f"{repository}:tampered"
    try:
        la = layers(docker_client, build(cli, a, tmp_path / "ba")["image_id"])
        lb = layers(docker_client, build(cli, b, tmp_path / "bb", "--no-cache")["image_id"])
        # base, the venv's files and the venv, train-core, deps, pin-patcher | pin-toplib, then the stack's
        # own files and the gate's record
        assert la[:6] == lb[:6] and la[6] != lb[6] and len(la) == len(lb) == 9

        pub = publish(cli, b, tmp_path / "p.jsonl", tmp_path / "bb")
        published.append(pub["digest"])
        # An image on top that claims other installed distributions, under the same labels.
        context = tmp_path / "tamper"
        context.mkdir()
        (context / "Dockerfile").write_text(
            f"FROM {repository}@{pub['digest']}\n"
            "RUN echo '{\"toplib\": \"0.2.0\"}' > /opt/stackctl/installed.json\n")
        docker_client.images.build(path=str(context), tag=tampered, rm=True)
        for line in docker_client.images.push(repository, tag="tampered", stream=True, decode=True):
            assert "error" not in line, line
        got = Registry().manifest(repository, "tampered")
        assert got is not None
        published.append(got[0])
        r = cli("verify", tampered, "--lock", str(b.lock), "--json")
        assert r.code == 1, r.out + r.err
        failed = {f["check"]: f["detail"] for f in json.loads(r.out)["findings"] if not f["ok"]}
        assert "toplib is 0.2.0 in the image, expected 0.4.0" in failed["installed"]
        assert "no SBOM beside the image" in failed["sbom"] and "reproducible" in failed
        # The tampered layer is the image's own: it is read from the registry, not from the engine.
        assert _top_layer_file(registry, repository, got[0]) == {"toplib": "0.2.0"}
    finally:
        remove_images(docker_client, repository)
        drop(registry, repository, published)


def _top_layer_file(registry: str, repository: str, digest: str) -> Any:
    name = repository.removeprefix(registry + "/")
    manifest = requests.get(f"http://{registry}/v2/{name}/manifests/{digest}", timeout=10, headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"}).json()
    blob = requests.get(f"http://{registry}/v2/{name}/blobs/{manifest['layers'][-1]['digest']}", timeout=30)
    with tarfile.open(fileobj=io.BytesIO(blob.content)) as tar:
        member = tar.extractfile("opt/stackctl/installed.json")
        assert member is not None
        return json.loads(member.read())
