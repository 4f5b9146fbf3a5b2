"""What a registry holds, read and checked through its API: an image's manifest and config by digest, its own
records from its small top layers, the image compared digest by digest with the one built, and the SBOM and
signed statements kept beside it (cosign's tags, or the referrers API).

Everything here reads a registry through `RegistryApi` (`stackctl.image.protocols`; the one real adapter
is `stackctl.engine.registry.Registry`). `verify` reads an image with it, and publish checks its own copy
with the same reads and names what it pushes beside the image with `artifact_tag`; the writes are
`stackctl.publish.attest`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from stackctl.base.words import count
from stackctl.errors import NotInRegistry, ServiceError
from stackctl.image.protocols import RegistryApi
from stackctl.image.render import INSTALLED_PATH, SBOM_PATH

SBOM_TYPE = "application/vnd.cyclonedx+json"
STATEMENT_TYPE = "application/vnd.in-toto+json"
SMALL_LAYER = 64 << 20  # layers read whole to find the image's own records; the stack's layers are larger


def remote_image(registry: RegistryApi, repository: str, reference: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(manifest digest, manifest, config), each checked against the digest that names it."""
    got = registry.manifest(repository, reference)
    if got is None:
        raise NotInRegistry(repository, reference)
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
