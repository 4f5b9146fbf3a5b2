"""What a registry holds, proved and completed through its API: the reproducible manifest, the image
checked digest by digest against the build, and the SBOM and provenance pushed beside it.

Everything here talks to a registry through `RegistryApi` (`stackctl.image.protocols`; the one real adapter
is `stackctl.engine.registry.Registry`); the documents and the comparisons are values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from stackctl.base.words import count
from stackctl.errors import ServiceError
from stackctl.image.protocols import RegistryApi
from stackctl.image.render import SBOM_PATH
from stackctl.verify.sign import Layer, SigningKey

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY_CONFIG = "application/vnd.oci.empty.v1+json"
SBOM_TYPE = "application/vnd.cyclonedx+json"
STATEMENT_TYPE = "application/vnd.in-toto+json"
INSTALLED_PATH = "/opt/stackctl/installed.json"
SMALL_LAYER = 64 << 20  # layers read whole to find the image's own records; the stack's layers are larger


def iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


def canonical(doc: Mapping[str, Any]) -> bytes:
    """One byte form per document: the digest of a rewritten config or manifest must not depend on who wrote it."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def reproducible_config(config: Mapping[str, Any], epoch: int) -> dict[str, Any]:
    """The engine's config with every clock and build-host trace replaced: `created` and each history time
    become SOURCE_DATE_EPOCH; the build container's id and hostname, the parent image's id (itself a hash
    of earlier times) and the engine's version go. Layers, labels, environment and command stay."""
    out = {k: v for k, v in config.items() if k not in ("container", "container_config", "docker_version")}
    out["created"] = iso(epoch)
    out["history"] = [{**h, "created": iso(epoch)} for h in config.get("history") or []]
    inner = dict(config.get("config") or {})
    inner["Image"] = ""
    inner["Hostname"] = ""
    out["config"] = inner
    return out


@dataclass(frozen=True)
class Rewritten:
    digest: str  # the reproducible manifest's digest
    config_digest: str
    manifest: dict[str, Any]
    config: dict[str, Any]
    size: int  # bytes of the manifest
    media_type: str


def rewrite(registry: RegistryApi, repository: str, pushed: str, tag: str, epoch: int) -> Rewritten:
    """Upload the reproducible config, PUT a manifest naming it and the same layers under `tag`."""
    got = registry.manifest(repository, pushed)
    if got is None:
        raise ServiceError(f"{repository}@{pushed}: the registry does not have the manifest the engine pushed")
    manifest = json.loads(got[1])
    if "layers" not in manifest or "config" not in manifest:
        raise ServiceError(f"{repository}@{pushed}: not an image manifest")
    config = reproducible_config(json.loads(registry.blob(repository, manifest["config"]["digest"])), epoch)
    data = canonical(config)
    config_digest = registry.put_blob(repository, data)
    new = {"schemaVersion": 2, "mediaType": manifest.get("mediaType", DOCKER_MANIFEST),
           "config": {**manifest["config"], "digest": config_digest, "size": len(data)},
           "layers": manifest["layers"]}
    digest = registry.put_manifest(repository, tag, canonical(new), new["mediaType"])
    return Rewritten(digest, config_digest, new, config, len(canonical(new)), new["mediaType"])


def remote_image(registry: RegistryApi, repository: str, reference: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(manifest digest, manifest, config), each checked against the digest that names it."""
    got = registry.manifest(repository, reference)
    if got is None:
        raise ServiceError(f"{repository}:{reference}: not in the registry")
    digest, raw = got
    manifest = json.loads(raw)
    if "manifests" in manifest:
        chosen = next((m for m in manifest["manifests"] if (m.get("platform") or {}).get("os") == "linux"
                       and (m.get("platform") or {}).get("architecture") == "amd64"), None)
        if chosen is None:
            raise ServiceError(f"{repository}:{reference}: the manifest list has no linux/amd64 image")
        return remote_image(registry, repository, chosen["digest"])
    config = json.loads(registry.blob(repository, manifest["config"]["digest"]))
    return digest, manifest, config


def compare_with_build(registry: RegistryApi, repository: str, digest: str, diff_ids: Sequence[str],
                       labels: Mapping[str, str], *, stream_layers: bool = True) -> list[str]:
    """What differs between the registry's image and the one built: diff_ids, labels, and (streamed,
    each blob hashed as sent and again uncompressed) every layer. Empty when they are the same image."""
    _, manifest, config = remote_image(registry, repository, digest)
    problems = []
    remote_ids = list((config.get("rootfs") or {}).get("diff_ids") or [])
    if remote_ids != list(diff_ids):
        problems.append(f"the registry's config lists {count(len(remote_ids), 'layer')} {_short(remote_ids)}, "
                        f"the build has {len(diff_ids)} {_short(diff_ids)}")
    remote_labels = (config.get("config") or {}).get("Labels") or {}
    for key in sorted(set(labels) | set(remote_labels)):
        if labels.get(key) != remote_labels.get(key):
            problems.append(f"label {key}: registry {remote_labels.get(key)!r}, build {labels.get(key)!r}")
    if len(manifest["layers"]) != len(remote_ids):
        problems.append(f"the manifest has {count(len(manifest['layers']), 'layer')}, its config {len(remote_ids)}")
    elif stream_layers:
        for n, (layer, want) in enumerate(zip(manifest["layers"], remote_ids, strict=True), 1):
            diff_id, size = registry.layer(repository, layer["digest"])
            if diff_id != want:
                problems.append(f"layer {n} ({layer['digest'][:19]}) unpacks to {diff_id[:19]}, not {want[:19]}")
            if size != layer.get("size"):
                problems.append(f"layer {n} ({layer['digest'][:19]}) is {size} bytes, the manifest says "
                                f"{layer.get('size')}")
    return problems


def _short(ids: Sequence[str]) -> str:
    return "[" + ", ".join(i.removeprefix("sha256:")[:12] for i in ids) + "]"


def image_files(registry: RegistryApi, repository: str, manifest: Mapping[str, Any],
                wanted: tuple[str, ...] = (SBOM_PATH, INSTALLED_PATH)) -> dict[str, bytes]:
    """The image's own records, read from its top small layers (the last write of a path wins)."""
    found: dict[str, bytes] = {}
    for layer in reversed(manifest.get("layers") or []):
        if int(layer.get("size") or 0) > SMALL_LAYER:
            break  # below the final stage's small layers: the stack itself
        left = tuple(w for w in wanted if w not in found)
        if not left:
            break
        found.update(registry.layer_files(repository, layer["digest"], left))
    return found


def artifact_tag(subject: str, kind: str) -> str:
    """The tag a registry without the referrers API keeps an artifact under (the cosign convention)."""
    return subject.replace(":", "-") + "." + kind


@dataclass(frozen=True)
class Artifact:
    kind: str  # "sbom" | "att"
    tag: str
    digest: str  # of the artifact's manifest
    blob: str  # of the document
    size: int  # bytes of the document


def push_artifact(registry: RegistryApi, repository: str, subject: tuple[str, int, str], kind: str,
                  document: bytes, media_type: str) -> Artifact:
    """An OCI manifest whose one layer is the document and whose `subject` is the image (the referrers
    API indexes it where the registry has one); tagged `sha256-<hex>.<kind>` for registries without."""
    digest, size, subject_type = subject
    blob = registry.put_blob(repository, document)
    empty = registry.put_blob(repository, b"{}")
    manifest = {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": media_type,
        "config": {"mediaType": EMPTY_CONFIG, "digest": empty, "size": 2},
        "layers": [{"mediaType": media_type, "digest": blob, "size": len(document)}],
        "subject": {"mediaType": subject_type, "digest": digest, "size": size},
        "annotations": {"io.stackctl.kind": kind},
    }
    tag = artifact_tag(digest, kind)
    pushed = registry.put_manifest(repository, tag, canonical(manifest), OCI_MANIFEST)
    return Artifact(kind, tag, pushed, blob, len(document))


def fetch_artifact(registry: RegistryApi, repository: str, subject: str, kind: str,
                   media_type: str) -> bytes | None:
    """An artifact's document: through the referrers API where offered, else the digest-derived tag."""
    candidates: list[str] = []
    found = registry.referrers(repository, subject)
    if found is not None:
        candidates += [m["digest"] for m in found if m.get("artifactType") == media_type and m.get("digest")]
    candidates.append(artifact_tag(subject, kind))
    for reference in candidates:
        got = registry.manifest(repository, reference)
        if got is None:
            continue
        manifest = json.loads(got[1])
        if (manifest.get("subject") or {}).get("digest") != subject:
            continue
        layers = [x for x in manifest.get("layers") or [] if x.get("mediaType") == media_type]
        if layers:
            return registry.blob(repository, layers[0]["digest"])
    return None


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


BUILD_TYPE = "urn:stackctl:build:docker-classic:v1"  # what externalParameters mean: a stackctl build
BUILDER_ID = "urn:stackctl:builder"


@dataclass(frozen=True)
class Material:
    """One resolvedDependency of the provenance: what went into the image, by digest."""

    name: str
    uri: str
    digest: tuple[tuple[str, str], ...]  # (algorithm, hex)
    annotations: tuple[tuple[str, Any], ...] = ()


def statement(*, subject: str, digest: str, parameters: Mapping[str, Any], internal: Mapping[str, Any],
              materials: Sequence[Material], builder: Mapping[str, str], invocation: str, started: str | None,
              finished: str, byproducts: Sequence[Material] = ()) -> dict[str, Any]:
    """An in-toto Statement v1 carrying a SLSA Provenance v1 predicate (written from the two specs: the
    documents are plain JSON, and their reference Python bindings would bring protobuf for ~40 lines)."""

    def rd(m: Material) -> dict[str, Any]:
        out: dict[str, Any] = {"name": m.name, "uri": m.uri, "digest": dict(m.digest)}
        if m.annotations:
            out["annotations"] = dict(m.annotations)
        return out

    metadata = {"invocationId": invocation, "finishedOn": finished}
    if started:
        metadata["startedOn"] = started
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": subject, "digest": {"sha256": digest.removeprefix("sha256:")}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {"buildType": BUILD_TYPE, "externalParameters": dict(parameters),
                                "internalParameters": dict(internal),
                                "resolvedDependencies": [rd(m) for m in materials]},
            "runDetails": {"builder": {"id": BUILDER_ID, "version": dict(builder)}, "metadata": metadata,
                           "byproducts": [rd(m) for m in byproducts]},
        },
    }


def statement_materials(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    deps = ((doc.get("predicate") or {}).get("buildDefinition") or {}).get("resolvedDependencies")
    return [d for d in deps or [] if isinstance(d, dict)]


def push_attestations(registry: RegistryApi, repository: str, subject: tuple[str, int, str],
                      layers: Sequence[Layer]) -> Artifact:
    """The `.att` manifest as cosign lays it out: one layer per DSSE envelope (`sign.Layer`), each with
    the predicate type in its annotations, under `sha256-<hex>.att`; `subject` also names the image
    for registries that index referrers."""
    from stackctl.verify.sign import COSIGN_CONFIG, ENVELOPE_TYPE

    digest, size, subject_type = subject
    blobs = [registry.put_blob(repository, layer.data) for layer in layers]
    config = canonical({"architecture": "", "os": "", "config": {},
                        "rootfs": {"type": "layers", "diff_ids": blobs}})
    config_digest = registry.put_blob(repository, config)
    manifest = {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": COSIGN_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": ENVELOPE_TYPE, "digest": blob, "size": len(layer.data),
                    "annotations": layer.annotations} for blob, layer in zip(blobs, layers, strict=True)],
        "subject": {"mediaType": subject_type, "digest": digest, "size": size},
    }
    tag = artifact_tag(digest, "att")
    pushed = registry.put_manifest(repository, tag, canonical(manifest), OCI_MANIFEST)
    return Artifact("att", tag, pushed, blobs[0] if blobs else "", sum(len(x.data) for x in layers))


def fetch_attestations(registry: RegistryApi, repository: str, subject: str) -> list[tuple[str, bytes]] | None:
    """(predicate type, envelope bytes) of every DSSE layer under the image's `.att` tag; None when there is
    no such manifest. The tag is derived from the digest verify was given, so the manifest found is the one
    published for this image (or a forger's copy, which the envelopes' subjects and signatures expose)."""
    from stackctl.verify.sign import ENVELOPE_TYPE, PREDICATE_ANNOTATION

    got = registry.manifest(repository, artifact_tag(subject, "att"))
    if got is None:
        return None
    try:
        manifest = json.loads(got[1])
        layers = [x for x in manifest.get("layers") or [] if isinstance(x, dict)]
    except (ValueError, RecursionError, AttributeError):
        return []
    return [(str((x.get("annotations") or {}).get(PREDICATE_ANNOTATION, "")), registry.blob(repository, x["digest"]))
            for x in layers if x.get("mediaType") == ENVELOPE_TYPE and x.get("digest")]


def attach(registry: RegistryApi, repository: str, subject: tuple[str, int, str], sbom: bytes,
           statement: Callable[[Material], dict[str, Any]],
           key: SigningKey | None = None) -> tuple[Artifact, dict[str, Any], Artifact]:
    """Everything published beside an image once the image itself is in place and checked: the SBOM as the
    `.sbom` artifact; then, under `.att`, two DSSE envelopes (signed with `key` when given): the provenance
    statement (`statement` makes it, given the SBOM as a byproduct) and the SBOM as an in-toto statement
    with a CycloneDX predicate. Returns the SBOM's artifact, the provenance statement and the `.att`
    artifact."""
    from stackctl.verify.sign import attestation_layers, sbom_statement

    sbom_art = push_artifact(registry, repository, subject, "sbom", sbom, SBOM_TYPE)
    doc = statement(Material("sbom", f"oci://{repository}@{sbom_art.digest}",
                             (("sha256", sha256(sbom).removeprefix("sha256:")),)))
    sbom_doc = sbom_statement(repository, subject[0], json.loads(sbom))
    layers = attestation_layers((canonical(doc), canonical(sbom_doc)), key)
    return sbom_art, doc, push_attestations(registry, repository, subject, layers)
