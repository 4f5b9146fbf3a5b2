"""A build's artefact: an OCI image layout on disk, its manifest digest final when the build ends.

The build writes it (BuildKit's OCI exporter where the engine's store allows, else a copy of the engine's image);
publish copies it to a registry and asks no engine anything. This module only reads and checks a layout: it is
the one place that knows the layout's shape (image-spec's image-layout.md: `oci-layout`, `index.json`,
`blobs/<alg>/<hex>`), so the build and publish sides agree on it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackctl.errors import InputError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MANIFESTS = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEXES = (OCI_INDEX, "application/vnd.docker.distribution.manifest.list.v2+json")
# an index entry whose platform is unknown/unknown is an attestation manifest, not an image
_ATTESTATION = "attestation-manifest"

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Blob:
    digest: str  # sha256:...
    size: int
    media_type: str


@dataclass(frozen=True)
class Artefact:
    """One image in a layout: what a registry holds once the layout is copied with its digests kept."""

    layout: Path  # the layout directory
    manifest: Blob  # its digest is the image's digest in any registry it is copied to
    config: Blob
    layers: tuple[Blob, ...]
    made_by: str  # how the layout was written, in words ("BuildKit's OCI exporter", "a copy of the engine's image")

    @property
    def digest(self) -> str:
        return self.manifest.digest

    @property
    def size(self) -> int:
        """Bytes a registry stores for the image: manifest, config and compressed layers."""
        return self.manifest.size + self.config.size + sum(b.size for b in self.layers)

    def blob_path(self, digest: str) -> Path:
        return blob_path(self.layout, digest)

    def record(self) -> dict[str, Any]:
        """The build record's `artefact` entry (`from_record` reads it back)."""
        return {"layout": str(self.layout), "digest": self.digest, "config": self.config.digest,
                "layers": [b.digest for b in self.layers], "size": self.size, "made_by": self.made_by}


def blob_path(layout: Path, digest: str) -> Path:
    if not _DIGEST.match(digest):
        raise InputError(f"{layout}: {digest!r} is not a sha256 digest")
    return layout / "blobs" / "sha256" / digest.split(":", 1)[1]


def _json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{path}: no {what}; is {path.parent} an OCI image layout?") from None
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested past the parser's depth
        raise InputError(f"{path}: {what} unreadable: {type(exc).__name__}: {str(exc)[:200]}") from None


def _blob(raw: Any, where: str) -> Blob:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: a descriptor must be an object")
    digest, size, media = raw.get("digest"), raw.get("size"), raw.get("mediaType")
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise InputError(f"{where}: descriptor digest {digest!r} is not a sha256 digest")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise InputError(f"{where}: descriptor size {size!r} is not a byte count")
    if not isinstance(media, str):
        raise InputError(f"{where}: descriptor of {digest} has no mediaType")
    return Blob(digest, size, media)


def _loads(data: bytes, where: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where}: not a JSON document: {type(exc).__name__}") from None


def _read_blob(layout: Path, blob: Blob, where: str) -> bytes:
    """A small blob's bytes, checked against its descriptor (manifests and configs; layers are checked by
    `check_blobs`, which streams)."""
    path = blob_path(layout, blob.digest)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{where}: blob {blob.digest} missing from the layout: {exc.strerror or exc}") from None
    if len(data) != blob.size or "sha256:" + hashlib.sha256(data).hexdigest() != blob.digest:
        raise InputError(f"{path}: the blob's bytes are not {blob.digest} ({blob.size} bytes)")
    return data


def _image_manifest(layout: Path, index: Any, where: str, ref: str | None) -> Blob:
    """The one image manifest an index names (following a nested index, skipping attestation manifests)."""
    entries = index.get("manifests") if isinstance(index, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{where}: names no manifest")
    images: list[Blob] = []
    for n, raw in enumerate(entries):
        blob = _blob(raw, f"{where}: manifests[{n}]")
        annotations = raw.get("annotations") or {}
        if ref is not None and annotations.get("org.opencontainers.image.ref.name") not in (None, ref):
            continue
        if annotations.get("vnd.docker.reference.type") == _ATTESTATION:
            continue
        if blob.media_type in INDEXES:
            inner = _loads(_read_blob(layout, blob, where), f"{where} -> {blob.digest}")
            images.append(_image_manifest(layout, inner, f"{where} -> {blob.digest}", None))
        elif blob.media_type in MANIFESTS:
            images.append(blob)
    if len(images) != 1:
        raise InputError(f"{where}: names {len(images)} image manifests; a build's layout holds exactly one")
    return images[0]


def read_layout(layout: Path, *, made_by: str = "", ref: str | None = None) -> Artefact:
    """The image of an OCI image layout, its manifest and config checked against their digests (layers are
    checked for presence and size here; `check_blobs` reads them all)."""
    version = _json(layout / "oci-layout", "oci-layout file")
    if not isinstance(version, dict) or version.get("imageLayoutVersion") != "1.0.0":
        raise InputError(f"{layout / 'oci-layout'}: not an image layout of version 1.0.0")
    index_file = layout / "index.json"
    manifest = _image_manifest(layout, _json(index_file, "index.json"), str(index_file), ref)
    body = _loads(_read_blob(layout, manifest, str(index_file)), f"{layout}: manifest {manifest.digest}")
    where = f"{layout}: manifest {manifest.digest}"
    if not isinstance(body, dict):
        raise InputError(f"{where}: not an object")
    config = _blob(body.get("config"), f"{where}: config")
    _read_blob(layout, config, where)
    raw_layers = body.get("layers")
    if not isinstance(raw_layers, list):
        raise InputError(f"{where}: no layers list")
    layers = tuple(_blob(raw, f"{where}: layers[{n}]") for n, raw in enumerate(raw_layers))
    for blob in layers:
        path = blob_path(layout, blob.digest)
        try:
            size = os.stat(path).st_size
        except OSError:
            raise InputError(f"{where}: layer {blob.digest} missing from the layout") from None
        if size != blob.size:
            raise InputError(f"{path}: {size} bytes, the manifest says {blob.size}")
    return Artefact(layout, manifest, config, layers, made_by)


def check_blobs(artefact: Artefact, chunk: int = 1 << 20) -> list[str]:
    """Each layer whose bytes are not its digest, in words (empty: the layout is intact)."""
    bad = []
    for blob in artefact.layers:
        h = hashlib.sha256()
        with open(artefact.blob_path(blob.digest), "rb") as f:
            while piece := f.read(chunk):
                h.update(piece)
        if "sha256:" + h.hexdigest() != blob.digest:
            bad.append(f"layer {blob.digest}: its bytes hash to sha256:{h.hexdigest()}")
    return bad


def from_record(entry: Any, where: str) -> Artefact:
    """The artefact a build record names (its `artefact` entry), re-read from disk and checked to be the same
    image the build ended with."""
    if not isinstance(entry, dict) or not isinstance(entry.get("layout"), str):
        raise InputError(f"{where}: no artefact; build the stack again with this version of stackctl")
    artefact = read_layout(Path(entry["layout"]), made_by=str(entry.get("made_by") or ""))
    if artefact.digest != entry.get("digest"):
        raise InputError(f"{where}: the layout at {entry['layout']} now holds {artefact.digest}, the build made "
                         f"{entry.get('digest')}; build again")
    return artefact


def settle_layout(layout: Path, digest: str, *, made_by: str = "") -> Artefact:
    """The layout reduced to the one image `digest`: index.json names only it, and every blob it does not
    reach is removed. A build exports into a layout seeded with the previous build's blobs (the exporter then
    skips each one it would write again), so what the previous image alone used goes here."""
    from stackctl.base.files import write_atomic

    index_file = layout / "index.json"
    index = _json(index_file, "index.json")
    entries = [raw for raw in (index.get("manifests") if isinstance(index, dict) else None) or []
               if isinstance(raw, dict) and raw.get("digest") == digest]
    if not entries:
        raise InputError(f"{index_file}: does not name the image built, {digest}")
    write_atomic(index_file, json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries[:1]},
                                        separators=(",", ":")))
    artefact = read_layout(layout, made_by=made_by)
    if artefact.digest != digest:  # an index (attestations beside the image): its blobs are not all known here
        return artefact
    keep = {artefact.digest, artefact.config.digest, *(b.digest for b in artefact.layers)}
    for path in (layout / "blobs" / "sha256").iterdir():
        if f"sha256:{path.name}" not in keep:
            path.unlink()
    return artefact
