"""The build's artefact made reproducible: the image's layout with its config's clocks set to
SOURCE_DATE_EPOCH (`reproducible_config`) and the manifest rewritten to name it.

An engine's copy of an image carries the build's own times and host traces in its config; the layers are
already the same for the same lock, base and revision. With the config rewritten here, the manifest digest
in the layout is the one any rebuild gets again, and the one publish puts in the registry unchanged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from stackctl.base.files import write_atomic
from stackctl.errors import InputError
from stackctl.image.artefact import Artefact, blob_path, read_layout
from stackctl.image.labels import LABEL_EPOCH


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


class LayoutEngine(Protocol):
    def layout(self, image: str, dest: Path) -> Artefact: ...  # the engine's image copied into an OCI layout


def _put(layout: Path, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    write_atomic(blob_path(layout, digest), data)
    return digest


def reproducible(artefact: Artefact, epoch: int) -> Artefact:
    """The layout's image with its config rewritten for `epoch`; the index names only the new manifest."""
    layout = artefact.layout
    config = json.loads(blob_path(layout, artefact.config.digest).read_bytes())
    data = canonical(reproducible_config(config, epoch))
    config_digest = _put(layout, data)
    manifest: dict[str, Any] = json.loads(blob_path(layout, artefact.digest).read_bytes())
    manifest["config"] = {**manifest["config"], "digest": config_digest, "size": len(data)}
    body = canonical(manifest)
    digest = _put(layout, body)
    media = str(manifest.get("mediaType") or artefact.manifest.media_type)
    index = {"schemaVersion": 2, "manifests": [{"mediaType": media, "digest": digest, "size": len(body)}]}
    write_atomic(layout / "index.json", canonical(index))
    for old in {artefact.digest, artefact.config.digest} - {digest, config_digest}:
        blob_path(layout, old).unlink(missing_ok=True)
    return read_layout(layout, made_by=artefact.made_by)


def canonical_manifest(artefact: Artefact) -> Artefact:
    """The layout's manifest in its one byte form (`canonical`): skopeo writes the manifest it was given when
    it changed no layer and its own when it compressed one, so two copies of one image could differ in bytes."""
    layout = artefact.layout
    manifest = json.loads(blob_path(layout, artefact.digest).read_bytes())
    body = canonical(manifest)
    digest = _put(layout, body)
    if digest == artefact.digest:
        return artefact
    media = str(manifest.get("mediaType") or artefact.manifest.media_type)
    write_atomic(layout / "index.json", canonical(
        {"schemaVersion": 2, "manifests": [{"mediaType": media, "digest": digest, "size": len(body)}]}))
    blob_path(layout, artefact.digest).unlink(missing_ok=True)
    return read_layout(layout, made_by=artefact.made_by)


def build_artefact(engine: LayoutEngine, image: str, dest: Path, labels: dict[str, str]) -> Artefact:
    """The built image copied out of the engine into `dest`, its config reproducible."""
    epoch = labels.get(LABEL_EPOCH, "")
    if not epoch.isdigit():
        raise InputError(f"{image}: has no {LABEL_EPOCH} label; the build's layout cannot be made reproducible")
    return reproducible(engine.layout(image, dest), int(epoch))
