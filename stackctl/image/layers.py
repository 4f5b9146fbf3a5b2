"""Layer blobs made here, not by the engine: one deterministic gzip, and what this machine knows it pushed.

The manifest digest of a published image names its compressed layers, so it is only as reproducible as
the compressor. The engine's gzip ties it to the engine's version; here it is ISA-L (python-isal) at one
level, fed in fixed-size pieces (ISA-L's output depends on how its input is cut, zlib's does not; a fixed
cut makes it a function of the tar alone). `COMPRESSOR` names all three, and a blob known under another
name is compressed again rather than trusted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

GZIP_LEVEL = 1  # ISA-L's levels 1 and 2 give one size on layer tars; 3 is several times slower for ~1% less
PIECE = 4 << 20  # the compressor is always fed exactly this many bytes at a time (the last piece excepted)
LAYER_TYPE = "application/vnd.docker.image.rootfs.diff.tar.gzip"
CONFIG_TYPE = "application/vnd.docker.container.image.v1+json"


def _isal_version() -> str:
    from importlib.metadata import version

    return version("isal")


COMPRESSOR = f"isal-{_isal_version()}/gzip-{GZIP_LEVEL}/piece-{PIECE}"


class Gzip:
    """A gzip stream of a layer tar, fed in any cuts: the bytes out depend on the bytes in alone.
    The header carries no name and mtime 0. Hashes the tar (the diff_id) and the blob as they go."""

    def __init__(self) -> None:
        from isal import isal_zlib

        self._z = isal_zlib.compressobj(GZIP_LEVEL, isal_zlib.DEFLATED, 31)
        self._pending = bytearray()
        self.plain = hashlib.sha256()
        self.packed = hashlib.sha256()
        self.plain_size = 0
        self.size = 0

    def _out(self, data: bytes) -> bytes:
        self.packed.update(data)
        self.size += len(data)
        return data

    def feed(self, data: bytes) -> bytes:
        """Compressed bytes ready so far (often none)."""
        self.plain.update(data)
        self.plain_size += len(data)
        out = []
        if not self._pending and len(data) == PIECE:
            return self._out(self._z.compress(data))
        self._pending += data
        while len(self._pending) >= PIECE:
            out.append(self._z.compress(bytes(self._pending[:PIECE])))
            del self._pending[:PIECE]
        return self._out(b"".join(out))

    def finish(self) -> bytes:
        tail = self._z.compress(bytes(self._pending)) + self._z.flush()
        self._pending.clear()
        return self._out(tail)

    @property
    def diff_id(self) -> str:
        return "sha256:" + self.plain.hexdigest()

    @property
    def digest(self) -> str:
        return "sha256:" + self.packed.hexdigest()


def gzip_layer(pieces: Iterable[bytes]) -> Iterator[bytes]:
    g = Gzip()
    for p in pieces:
        out = g.feed(p)
        if out:
            yield out
    yield g.finish()


@dataclass(frozen=True)
class KnownBlob:
    """A layer this machine compressed: its tar (diff_id, bytes) and the blob (digest, bytes), and the
    repositories (host/name) it was pushed to or found in."""

    diff_id: str
    tar_size: int
    digest: str
    size: int
    compressor: str
    repositories: tuple[str, ...] = ()

    def seen_in(self, repository: str) -> KnownBlob:
        if repository in self.repositories:
            return self
        return replace(self, repositories=(*self.repositories[-15:], repository))


def parse_known(text: str) -> dict[str, KnownBlob]:
    """The cache file's entries under this compressor; anything unreadable or made otherwise is dropped
    (the cache only saves work: a lost entry costs one compression)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    out: dict[str, KnownBlob] = {}
    entries = data.get("layers") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        try:
            blob = KnownBlob(str(entry["diff_id"]), int(entry["tar_size"]), str(entry["digest"]), int(entry["size"]),
                             str(entry["compressor"]), tuple(str(r) for r in entry.get("repositories") or ()))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if blob.compressor == COMPRESSOR and blob.digest.startswith("sha256:") and blob.diff_id.startswith("sha256:"):
            out[blob.diff_id] = blob
    return out


def render_known(known: dict[str, KnownBlob]) -> str:
    rows: list[dict[str, Any]] = [
        {"diff_id": b.diff_id, "tar_size": b.tar_size, "digest": b.digest, "size": b.size,
         "compressor": b.compressor, "repositories": list(b.repositories)} for b in known.values()]
    return json.dumps({"layers": sorted(rows, key=lambda r: str(r["diff_id"]))}, indent=1) + "\n"


def default_known_file() -> Path:
    import os

    if os.environ.get("STACKCTL_CACHE_DIR"):
        return Path(os.environ["STACKCTL_CACHE_DIR"]) / "layers.json"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stackctl" / "layers.json"


def image_manifest(config: bytes, config_digest: str, layers: Iterable[KnownBlob]) -> dict[str, Any]:
    return {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": CONFIG_TYPE, "size": len(config), "digest": config_digest},
            "layers": [{"mediaType": LAYER_TYPE, "size": b.size, "digest": b.digest} for b in layers]}


def tar_files(tar_bytes: bytes, wanted: Iterable[str]) -> dict[str, bytes]:
    """The regular files of a layer's tar whose paths are in `wanted` (compared without a leading / or ./),
    keyed by their absolute path; tarfile.TarError when the bytes are not a tar."""
    import io
    import tarfile

    names = {w.lstrip("/") for w in wanted}
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        for m in tar:
            name = m.name.lstrip("./").lstrip("/")
            if name in names and m.isfile():
                f = tar.extractfile(m)
                if f is not None:
                    out["/" + name] = f.read()
    return out
