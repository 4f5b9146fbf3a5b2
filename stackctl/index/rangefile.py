"""A wheel's METADATA read over HTTP range requests, a block at a time.

The blocks come from a callable the index client supplies, so every range request keeps the client's
policy (credentials only to the index's own origin, redirects by hand, retries, the run's timeout).
`stackctl.remotezip.RemoteFile` reads whole libraries out of large wheels through a plain session;
this reader only needs the zip directory and one small member.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from typing import Any


def read_metadata(zf: zipfile.ZipFile) -> bytes:
    """The wheel's one `NAME.dist-info/METADATA`; ValueError when it has none or several."""
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(names) != 1:
        raise ValueError(f"{len(names)} .dist-info/METADATA files, not one")
    return zf.read(names[0])


class NoRanges(Exception):
    """The server answered a range request with something else: read the wheel another way."""


class RangeReader(io.RawIOBase):
    """A seekable read-only file over HTTP range requests, read in blocks (zipfile seeks a lot)."""

    BLOCK = 256 * 1024

    def __init__(self, fetch: Callable[[int, int], bytes], size: int) -> None:
        self._fetch = fetch
        self._size = size
        self._pos = 0
        self._blocks: dict[int, bytes] = {}

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _block(self, i: int) -> bytes:
        if i not in self._blocks:
            start = i * self.BLOCK
            self._blocks[i] = self._fetch(start, min(self._size, start + self.BLOCK) - 1)
        return self._blocks[i]

    def read(self, n: int = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        out = bytearray()
        while self._pos < end:
            i, off = divmod(self._pos, self.BLOCK)
            chunk = self._block(i)[off:off + end - self._pos]
            if not chunk:
                break
            out += chunk
            self._pos += len(chunk)
        return bytes(out)

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)
