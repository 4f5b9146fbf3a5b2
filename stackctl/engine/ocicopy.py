"""A copy of an engine's image into an OCI image layout: the engine's export (`docker save`, through the SDK),
gzipped into the layout by skopeo (`oci:` to `oci:`).

The engine hands the image over through its own API, so this works against any engine, local or remote,
whatever its store; nothing reads the engine's data root. skopeo writes gzip layers with its own compressor:
two copies of one image give one manifest digest, and a layer it compressed once is the same blob when kept
from the previous layout (the copy of a rebuild compresses only the layers that moved).

The export is read through the SDK, which negotiates the API version: Debian 12's skopeo speaks engine API
1.22, which Docker 25 and later refuse. An export whose layers are not plain tars (the containerd store's
keeps them compressed) goes to skopeo whole (`docker-archive:`), which decompresses and gzips each layer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import IO

from stackctl.engine.skopeo import run_skopeo
from stackctl.errors import InputError, ServiceError
from stackctl.image.artefact import OCI_MANIFEST, Artefact, Blob, read_layout
from stackctl.image.layout import canonical_manifest

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"

MADE_BY = "a copy of the engine's image (its export, gzipped into a layout by skopeo)"


def _save(image: str, host: str | None, out: Path) -> None:
    """The engine's export of `image` (`docker save`) into `out`, through the SDK."""
    import docker
    import docker.errors
    import requests

    try:
        client = docker.DockerClient(base_url=host, version="auto", timeout=600) if host else \
            docker.from_env(version="auto", timeout=600)
        try:
            with open(out, "wb") as fh:
                for chunk in client.api.get_image(image, chunk_size=1 << 20):
                    fh.write(chunk)
        finally:
            client.close()
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise ServiceError(f"the engine's export of {image} failed: {exc}") from None


def daemon_host(host: str | None) -> str | None:
    """The engine skopeo reads from: `host`, else DOCKER_HOST; None for the default socket."""
    return host or os.environ.get("DOCKER_HOST") or None


def copy_to_layout(image: str, dest: Path, *, host: str | None = None) -> Artefact:
    """`image` (a name or id the engine knows) copied into the OCI image layout `dest`, which is replaced
    whole or not at all: skopeo writes a directory beside it, renamed over it once read back.

    The engine's export is read into a layout of uncompressed layers, in which each layer the previous layout
    at `dest` already holds (by diff_id) is that layout's gzip blob instead; skopeo then compresses only the
    others. A rebuild after one pin moved compresses the moved layers, not the whole image again."""
    dest = dest.absolute()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _save(image, daemon_host(host), tmp / "image.tar")
        made_by = MADE_BY
        try:
            with tarfile.open(tmp / "image.tar") as export:
                reused = export_layout(export, tmp / "source", gzipped_layers(dest))
        except (tarfile.TarError, UnexpectedExport):
            reused = None
        if reused is None:  # an export whose layers are not plain tars (the containerd store's): skopeo reads it
            shutil.rmtree(tmp / "source", ignore_errors=True)
            run_skopeo(["copy", "--quiet", f"docker-archive:{tmp / 'image.tar'}", f"oci:{tmp / 'layout'}"],
                       what=f"copy of {image} from the engine's export")
        else:
            (tmp / "image.tar").unlink()
            run_skopeo(["copy", "--quiet", f"oci:{tmp / 'source'}", f"oci:{tmp / 'layout'}"],
                       what=f"copy of {image} from the engine's export")
            if reused:
                made_by = f"{MADE_BY}, {reused} layers kept from the previous layout"
        canonical_manifest(read_layout(tmp / "layout", made_by=made_by))  # a bad copy never replaces a good one
        old = None
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            os.rename(dest, old / "layout")
        os.rename(tmp / "layout", dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        raise ServiceError(f"{dest}: cannot write the image layout: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return read_layout(dest, made_by=made_by)


class UnexpectedExport(Exception):
    """The export is not `docker save`'s shape with plain tar layers: skopeo reads it whole instead."""


def gzipped_layers(layout: Path) -> dict[str, tuple[Blob, Path]]:
    """The previous layout's gzip layers by diff_id (none where there is no layout, or it does not read)."""
    try:
        artefact = read_layout(layout)
        config = json.loads(artefact.blob_path(artefact.config.digest).read_bytes())
        diff_ids = config["rootfs"]["diff_ids"]
    except (InputError, OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(diff_ids, list) or len(diff_ids) != len(artefact.layers):
        return {}
    return {str(d): (b, artefact.blob_path(b.digest)) for d, b in zip(diff_ids, artefact.layers, strict=True)
            if b.media_type.endswith("+gzip")}


def export_layout(export: tarfile.TarFile, out: Path, gzipped: dict[str, tuple[Blob, Path]]) -> int | None:
    """`docker save`'s export (manifest.json naming the config and the layer tars, in either format: the
    legacy one or Docker 25's OCI layout) written as an OCI layout at `out`: the config as it is, each layer
    either the previous layout's gzip blob (hard-linked) or the export's tar, checked against its diff_id.
    The layers kept, or None where a layer is not a plain tar (skopeo then reads the export itself)."""
    def member(name: object) -> IO[bytes]:
        try:
            got = export.extractfile(name) if isinstance(name, str) else None
        except KeyError:  # manifest.json names a file the export lacks
            got = None
        if got is None:
            raise UnexpectedExport(f"{name!r}: not a file of the export")
        return got

    try:
        entries = json.loads(member("manifest.json").read())
        config_bytes = member(entries[0]["Config"]).read()
        layer_names = list(entries[0]["Layers"])
        diff_ids = list(json.loads(config_bytes)["rootfs"]["diff_ids"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise UnexpectedExport(str(exc)) from None
    if len(entries) != 1 or len(layer_names) != len(diff_ids):
        raise UnexpectedExport("not one image")
    for name in layer_names:  # whether kept or not: the same export always takes the same way
        with member(name) as head:
            if head.read(2) == b"\x1f\x8b":  # gzip: the containerd store's export
                return None
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        (blobs / digest.removeprefix("sha256:")).write_bytes(data)
        return digest

    layers, kept = [], 0
    for name, diff_id in zip(layer_names, diff_ids, strict=True):
        if diff_id in gzipped:
            blob, path = gzipped[diff_id]
            target = blobs / blob.digest.removeprefix("sha256:")
            if not target.exists():
                try:
                    os.link(path, target)
                except OSError:  # another file system, or links refused: the bytes, copied
                    shutil.copyfile(path, target)
            layers.append({"mediaType": OCI_LAYER_GZIP, "digest": blob.digest, "size": blob.size})
            kept += 1
            continue
        h, size = hashlib.sha256(), 0
        part = blobs / f".{len(layers)}.part"
        with member(name) as src, open(part, "wb") as fh:
            while piece := src.read(1 << 20):
                h.update(piece)
                size += len(piece)
                fh.write(piece)
        if "sha256:" + h.hexdigest() != diff_id:
            raise UnexpectedExport(f"{name} is not the layer {diff_id}")
        os.replace(part, blobs / h.hexdigest())
        layers.append({"mediaType": OCI_LAYER_TAR, "digest": diff_id, "size": size})
    config_digest = put(config_bytes)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                           "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config_bytes)},
                           "layers": layers}).encode()
    (out / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (out / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": put(manifest), "size": len(manifest)}]}))
    return kept
