"""Verification a forger cannot pass, on the real engine and registry.

A signed publication verifies with its public key. A forged image (a layer added on top of the published
one that changes an installed module, the labels kept, the config times set to the epoch, the SBOM and the
signed statements copied beside it with the subject digest rewritten) fails `verify --key` and
`verify --rebuild`. Credential helpers that fail or lie cost one line and leak nothing.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from stackctl.engine.registry import Registry
from stackctl.image.layout import canonical, reproducible_config
from stackctl.publish import attest
from stackctl.verify.remote import SBOM_TYPE, artifact_tag, fetch_artifact, fetch_attestations
from stackctl.verify.sign import Layer
from tests.support.cli import Cli, Result
from tests.support.engine import unique_tag
from tests.support.gitrepo import git
from tests.support.imagestack import make_stack_repo
from tests.support.imagetest import delete_from_registry, remove_images

pytestmark = pytest.mark.integration

SECRET = "s3cret-from-the-helper"


@pytest.fixture
def run(cli_fd: Cli) -> Cli:
    return cli_fd


def keypair(tmp: Path, name: str, kind: str = "p256") -> tuple[Path, Path]:
    key: Any = ec.generate_private_key(ec.SECP256R1()) if kind == "p256" else ed25519.Ed25519PrivateKey.generate()
    private, public = tmp / f"{name}.key", tmp / f"{name}.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def failed(r: Result) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in json.loads(r.out)["findings"]:
        if not f["ok"]:
            out[f["check"]] = (out.get(f["check"], "") + " | " + f["detail"]).strip(" |")
    return out


@pytest.fixture
def cleanup(docker_client: Any, registry: str) -> Iterator[list[tuple[str, str]]]:
    pushed: list[tuple[str, str]] = []  # (repository, manifest digest)
    yield pushed
    reg = Registry()
    for repository, digest in pushed:
        for kind in ("sbom", "att"):
            got = reg.manifest(repository, artifact_tag(digest, kind))
            if got is not None:
                delete_from_registry(registry, repository, got[0])
        delete_from_registry(registry, repository, digest)
    for repository in {r for r, _ in pushed}:
        remove_images(docker_client, repository)


def reproducible_copy(reg: Registry, repository: str, pushed: str, tag: str, epoch: int) -> tuple[str, int, str]:
    """The engine's pushed image under `tag` with its config times set to `epoch`, as the build's layout
    sets them, its layers left as they are: (manifest digest, size, media type)."""
    got = reg.manifest(repository, pushed)
    assert got is not None
    manifest = json.loads(got[1])
    config = reproducible_config(json.loads(reg.blob(repository, manifest["config"]["digest"])), epoch)
    data = canonical(config)
    new = {"schemaVersion": 2, "mediaType": manifest["mediaType"],
           "config": {**manifest["config"], "digest": reg.put_blob(repository, data), "size": len(data)},
           "layers": manifest["layers"]}
    return reg.put_manifest(repository, tag, canonical(new), new["mediaType"]), len(canonical(new)), new["mediaType"]


def forge(reg: Registry, repository: str, original: str, forged_engine: str, epoch: int,
          rewrite_subject: bool) -> str:
    """What a forger does through the registry API: the config times set to the epoch, the SBOM and the
    `.att` envelopes of the original copied beside the forged image (the subject rewritten inside the
    envelopes' payloads, or left alone). The signatures cannot be made again; they are copied as they are."""
    subject = reproducible_copy(reg, repository, forged_engine, "forged", epoch)
    forged = subject[0]
    sbom = fetch_artifact(reg, repository, original, "sbom", SBOM_TYPE)
    assert sbom is not None
    attest.push_artifact(reg, repository, subject, "sbom", sbom, SBOM_TYPE)
    layers = []
    for predicate, data in fetch_attestations(reg, repository, original) or []:
        env = json.loads(data)
        if rewrite_subject:
            payload = base64.b64decode(env["payload"]).replace(original.removeprefix("sha256:").encode(),
                                                               forged.removeprefix("sha256:").encode())
            env["payload"] = base64.b64encode(payload).decode()
        layers.append(Layer(json.dumps(env).encode(), predicate))
    assert len(layers) == 2
    attest.push_attestations(reg, repository, subject, layers)
    return forged


def test_signed_publication_verifies_and_a_forged_image_fails_key_and_rebuild(
        tmp_path: Path, run: Cli, docker_client: Any, base_image: str, registry: str,
        cleanup: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    repository = f"{registry}/stackctl-test/{unique_tag('trust')}"
    repo = make_stack_repo(tmp_path, "e2e", repository, nonce=unique_tag("n"))
    git(repo.root, "remote", "add", "origin", "https://robot:t0ken-in-url@example.invalid/team/stack.git")
    private, public = keypair(tmp_path, "release")
    _, other = keypair(tmp_path, "other", "ed25519")
    records = tmp_path / "records"
    reg = Registry()

    r = run("build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(records), "--json",
            cwd=repo.root)
    assert r.code == 0, r.out + r.err
    build = json.loads((records / "e2e.build.json").read_text())
    monkeypatch.setenv("STACKCTL_SIGN_KEY", str(private))  # the key named by the environment
    r = run("publish", "e2e", "--record-dir", str(records), "--json")
    assert r.code == 0, r.out + r.err
    monkeypatch.delenv("STACKCTL_SIGN_KEY")
    pub = json.loads(r.out)
    digest = pub["digest"]
    cleanup.append((repository, digest))
    assert pub["signed_by"] and private.read_text() not in r.out + r.err and "t0ken-in-url" not in r.out + r.err

    # The statement: the build's own times and id, the remote without its credentials, the base by its
    # manifest digest, and the SBOM's dependencies from the lock's Requires-Dist.
    doc = pub["provenance"]
    meta = doc["predicate"]["runDetails"]["metadata"]
    assert (meta["startedOn"], meta["finishedOn"], meta["invocationId"]) == (
        build["started"], build["time"], build["invocation"])
    mats = {m["name"]: m for m in doc["predicate"]["buildDefinition"]["resolvedDependencies"]}
    assert mats["source"]["uri"] == f"git+https://example.invalid/team/stack.git@{pub['revision']}"
    base = docker_client.images.get(base_image)  # .ci/services.sh pushed it: it has a manifest digest
    assert mats["base-image"]["uri"] == f"oci://{sorted(base.attrs['RepoDigests'])[0]}"
    sbom = json.loads(fetch_artifact(reg, repository, digest, "sbom", SBOM_TYPE) or b"{}")
    deps = {d["ref"]: d.get("dependsOn", []) for d in sbom["dependencies"]}
    assert deps["pkg:pypi/toplib@0.3.0"] == ["pkg:pypi/helperdep@1.4"] and deps["pkg:pypi/patcher@1.0.0"] == []

    # The `.att` manifest is laid out as cosign lays out attestations: DSSE envelopes, predicate annotated.
    got = reg.manifest(repository, artifact_tag(digest, "att"))
    assert got is not None
    layers = json.loads(got[1])["layers"]
    assert [(x["mediaType"], x["annotations"]["predicateType"]) for x in layers] == [
        ("application/vnd.dsse.envelope.v1+json", "https://slsa.dev/provenance/v1"),
        ("application/vnd.dsse.envelope.v1+json", "https://cyclonedx.org/bom")]

    # A signed publication verifies with its public key, and not with another.
    r = run("verify", f"{repository}@{digest}", "--key", str(public), "--lock", str(repo.lock), "--json")
    assert r.code == 0, r.out + r.err
    checks = {f["check"]: f for f in json.loads(r.out)["findings"]}
    assert checks["signature"]["ok"] and checks["base"]["ok"] and "the image starts with its " in checks["base"][
        "detail"]
    r = run("verify", f"{repository}@{digest}", "--key", str(other), "--json")
    assert r.code == 1 and "the provenance statement is wrongly signed" in failed(r)["signature"], r.out + r.err

    # Published again without a key: the same digest, its statements now unsigned; --key refuses them.
    # Then signed again, with the key given as an option this time.
    r = run("publish", "e2e", "--record-dir", str(records), "--json")
    assert r.code == 0 and json.loads(r.out)["digest"] == digest and json.loads(r.out)["signed_by"] is None
    r = run("verify", f"{repository}@{digest}", "--key", str(public), "--json")
    assert r.code == 1 and "the provenance statement is unsigned" in failed(r)["signature"], r.out + r.err
    r = run("publish", "e2e", "--record-dir", str(records), "--sign-key", str(private), "--json")
    assert r.code == 0 and json.loads(r.out)["signed_by"] == pub["signed_by"], r.out + r.err

    # The forge: a layer that changes an installed module, on top of the published image, labels kept.
    context = tmp_path / "forge"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {repository}@{digest}\n"
        "RUN /opt/venv/bin/python -c \"import pathlib, toplib; p = pathlib.Path(toplib.__file__); "
        "p.write_text(p.read_text() + 'INJECTED = True')\"\n")
    docker_client.images.build(path=str(context), tag=f"{repository}:forged", rm=True)
    for line in docker_client.api.push(repository, tag="forged", stream=True, decode=True):
        assert "error" not in line, line
    engine_digest = (reg.manifest(repository, "forged") or ("", b""))[0]
    cleanup.append((repository, engine_digest))
    epoch = int(json.loads(reg.blob(repository, json.loads(got[1])["config"]["digest"]) or b"{}") and
                pub["source_date_epoch"])
    forged = forge(reg, repository, digest, engine_digest, epoch, rewrite_subject=True)
    cleanup.append((repository, forged))

    # The subject rewritten inside the envelopes: the signatures no longer verify.
    r = run("verify", f"{repository}@{forged}", "--key", str(public), "--json")
    assert r.code == 1, r.out + r.err
    assert "the provenance statement is wrongly signed" in failed(r)["signature"]
    assert "the SBOM statement is wrongly signed" in failed(r)["signature"]
    assert r.err.count("error:") == 1 and "wrongly signed" in r.err

    # The envelopes copied unchanged: signed, but about another image.
    forge(reg, repository, digest, engine_digest, epoch, rewrite_subject=False)
    r = run("verify", f"{repository}@{forged}", "--key", str(public), "--json")
    assert r.code == 1, r.out + r.err
    assert "signature" not in failed(r) and "the provenance statement is re-targeted" in failed(r)["provenance"]

    # Without a key: the rebuild of the revision and lock the labels name is not the forged image. Every
    # layer the lock builds comes out the same; the forger's is the one too many.
    remove_images(docker_client, repository)
    r = run("verify", f"{repository}@{forged}", "--rebuild", "--source", str(repo.root),
            "--wheelhouse", str(repo.wheelhouse), "--json")
    assert r.code == 1, r.out + r.err
    report = json.loads(r.out)
    rebuilt = report["rebuild"]
    assert rebuilt["revision"] == pub["revision"] and rebuilt["seconds"] > 0 and rebuilt["compared"]
    assert rebuilt["rebuilt_config"] == pub["config_digest"]  # the original's config, made again
    assert rebuilt["rebuilt_layers"] == rebuilt["registry_layers"][:-1]
    # the check is the manifest digest: the rebuilt layout's is the original's, not the forged image's
    assert rebuilt["rebuilt_digest"] == digest and rebuilt["registry_digest"] == forged
    diffs = [d for d in rebuilt["differences"]]
    assert len(diffs) == 3 and diffs[0] == f"the rebuilt manifest is {digest}, the registry's {forged}"
    assert diffs[1].startswith("the rebuilt config is") and diffs[2].startswith(
        f"layer {len(rebuilt['registry_layers'])}: registry sha256:")
    assert "rebuild" in failed(r)
    # Nothing of the rebuild stays behind in the engine.
    assert not [t for i in docker_client.images.list() for t in i.tags if t.startswith("stackctl-rebuild/")]


def helper(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / f"docker-credential-{name}"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_credential_helpers_during_publish_leak_nothing(
        tmp_path: Path, run: Cli, docker_client: Any, base_image: str, registry: str,
        cleanup: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    repository = f"{registry}/stackctl-test/{unique_tag('creds')}"
    repo = make_stack_repo(tmp_path, "e2e", repository)
    records = tmp_path / "records"
    r = run("build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(records), "--json",
            cwd=repo.root)
    assert r.code == 0, r.out + r.err
    bin_dir, config = tmp_path / "bin", tmp_path / "docker"
    config.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    # Fails, writing its secret to stderr, and says on stdout it has nothing: the push goes without a
    # login (the registry needs none), and the secret is seen nowhere.
    helper(bin_dir, "leaky", f"echo '{SECRET}' >&2\necho 'credentials not found in native keychain'\nexit 1\n")
    # credsStore is asked before auths (whose entry here would be refused by a registry that checked).
    wrong = base64.b64encode(b"robot:wrong").decode()
    (config / "config.json").write_text(json.dumps({"auths": {registry: {"auth": wrong}}, "credsStore": "leaky"}))
    r = run("publish", "e2e", "--record-dir", str(records), "--json")
    assert r.code == 0, r.out + r.err
    cleanup.append((repository, json.loads(r.out)["digest"]))
    assert SECRET not in r.out + r.err and wrong not in r.out + r.err

    # The registry asks for no login, so publish (which pushes through the registry API, logging in only when
    # a registry answers 401) never runs the helper: a helper that lies or fails is one error line, exit 3,
    # where a registry does ask (tests/loopback/test_credentials.py), and here it is not even started.
    ran = tmp_path / "ran"
    helper(bin_dir, "liar", f"touch {ran}\necho '{SECRET}' >&2\necho 'not json {SECRET}'\n")
    (config / "config.json").write_text(json.dumps({"credHelpers": {registry: "liar"}, "credsStore": "leaky"}))
    r = run("publish", "e2e", "--record-dir", str(records))
    assert r.code == 0, r.out + r.err
    assert not ran.exists()
    assert SECRET not in r.out + r.err and "Traceback" not in r.err and "lost the engine" not in r.err
