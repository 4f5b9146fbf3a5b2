"""Layer tars read from the engine's own store, not through its export: the same bytes, layer by layer.

The engine API has one way to a layer's tar: `GET /images/NAME/get`, which writes every layer of the
image to a temporary directory before its first byte (Debian's engine 20.10), so a publish after one pin
moved would wait for the whole image to push one small layer. The overlay2 store keeps what that export
assembles each layer from: the tar's headers and padding in `tar-split.json.gz` (vbatts/tar-split's
format, which the engine itself reads) and the files' bytes in the layer's diff directory. Assembled here
they give the layer tar the export would give; the caller still hashes every tar it sends against the
image's diff_id, so a store that says otherwise is found out, never published.

Only on the engine's own host, when this process may read its data root (root, or a CI runner's user
with read access): `open_store` says why not otherwise, and publish falls back to the export.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PIECE = 4 << 20
_FILE, _SEGMENT = 1, 2  # tar-split's entry types: a file's bytes (read from disk), raw tar bytes


def chain_ids(diff_ids: Iterable[str]) -> list[str]:
    """The OCI chain id of each layer: the first layer's diff_id, then sha256 of "PARENT_CHAIN DIFF_ID"."""
    out: list[str] = []
    for diff_id in diff_ids:
        out.append(diff_id if not out else
                   "sha256:" + hashlib.sha256(f"{out[-1]} {diff_id}".encode()).hexdigest())
    return out


@dataclass(frozen=True)
class Entry:
    raw: bytes = b""  # a segment: tar headers and padding, written as they are
    name: str = ""  # a file: its path in the layer, its bytes read from the diff directory
    size: int = 0


def parse_entries(lines: Iterable[str]) -> list[Entry]:
    """tar-split's JSON lines; ValueError on anything else (the caller then uses the export)."""
    out = []
    for n, line in enumerate(lines, 1):
        try:
            e = json.loads(line)
            kind = e["type"]
            if kind == _SEGMENT:
                out.append(Entry(raw=base64.b64decode(e.get("payload") or "", validate=True)))
            elif kind == _FILE:
                size = int(e.get("size") or 0)
                name = e["name"] if "name" in e else \
                    base64.b64decode(e["name_raw"], validate=True).decode("utf-8", "surrogateescape")
                if not isinstance(name, str) or size < 0:
                    raise ValueError
                out.append(Entry(name=name, size=size))
            else:
                raise ValueError
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise ValueError(f"line {n} is not a tar-split entry") from exc
    return out


def tar_size(entries: Iterable[Entry]) -> int:
    return sum(len(e.raw) + e.size for e in entries)


def _inside(root: Path, name: str) -> Path:
    """The file `name` of a layer, refused when it would be read from outside the layer's directory."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"{name!r} is not a path inside the layer")
    return root.joinpath(*parts)


def assemble(entries: Iterable[Entry], diff: Path) -> Iterator[bytes]:
    """The layer's tar, in pieces of at most PIECE bytes: segments as stored, files from `diff`, each
    exactly its recorded size (a file of another size makes it a different tar, found out by its hash)."""
    for e in entries:
        if e.raw:
            yield e.raw
        if not e.size:
            continue
        path = _inside(diff, e.name)
        # O_NOFOLLOW: the store holds the file itself; a link there would read bytes from elsewhere
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            left = e.size
            while left:
                piece = f.read(min(left, PIECE))
                if not piece:
                    raise ValueError(f"{e.name}: shorter than the {e.size} bytes its layer records")
                left -= len(piece)
                yield piece


@dataclass(frozen=True)
class LayerTar:
    diff_id: str
    size: int  # bytes of the tar
    entries: tuple[Entry, ...]
    diff: Path  # the layer's files

    def pieces(self) -> Iterator[bytes]:
        return assemble(self.entries, self.diff)


class LayerStore:
    """An overlay2 data root on this machine (`docker info`'s DockerRootDir)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._db = root / "image" / "overlay2"

    def config(self, image_id: str) -> bytes | None:
        """The image's config as the engine holds it; None unless it hashes to the id."""
        try:
            data = (self._db / "imagedb" / "content" / "sha256" / image_id.removeprefix("sha256:")).read_bytes()
        except (OSError, ValueError):
            return None
        return data if "sha256:" + hashlib.sha256(data).hexdigest() == image_id else None

    def layer(self, diff_ids: tuple[str, ...], index: int) -> LayerTar | None:
        """Layer `index` of an image with these diff_ids; None when the store has not got it as this
        image's (another parent chain, another driver, unreadable)."""
        chain = chain_ids(diff_ids[:index + 1])[-1]
        where = self._db / "layerdb" / "sha256" / chain.removeprefix("sha256:")
        try:
            if (where / "diff").read_text(encoding="ascii").strip() != diff_ids[index]:
                return None
            cache_id = (where / "cache-id").read_text(encoding="ascii").strip()
            if not cache_id or "/" in cache_id or cache_id.startswith("."):
                return None
            with gzip.open(where / "tar-split.json.gz", "rt", encoding="utf-8") as f:
                entries = tuple(parse_entries(f))
        except (OSError, ValueError, EOFError, gzip.BadGzipFile):
            return None
        diff = self.root / "overlay2" / cache_id / "diff"
        return LayerTar(diff_ids[index], tar_size(entries), entries, diff) if diff.is_dir() else None


def open_store(root: str, driver: str, local: bool) -> LayerStore | str:
    """The store at `root`, or why it cannot be read here, in words."""
    if not local:
        return "the engine is not on this machine"
    if driver != "overlay2":
        return f"the engine's storage driver is {driver or 'unknown'}, not overlay2"
    path = Path(root)
    if not os.access(path / "image" / "overlay2" / "layerdb", os.R_OK | os.X_OK):
        return f"cannot read the engine's data root {root} (not its host, or not root)"
    return LayerStore(path)

