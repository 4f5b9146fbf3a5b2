"""A wheel's METADATA read over HTTP range requests, a block at a time.

The blocks come from a callable the index client supplies, so every range request keeps the client's
policy (credentials only to the index's own origin, redirects by hand, retries, the run's timeout).
`stackctl.wheels.remotezip.RemoteFile` reads whole libraries out of large wheels through a plain session;
this reader only needs the zip directory and one small member.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable

from stackctl.index.rangeio import RangeStream


def read_metadata(zf: zipfile.ZipFile) -> bytes:
    """The wheel's one `NAME.dist-info/METADATA`; ValueError when it has none or several."""
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(names) != 1:
        raise ValueError(f"{len(names)} .dist-info/METADATA files, not one")
    return zf.read(names[0])


class NoRanges(Exception):
    """The server answered a range request with something else: read the wheel another way."""


class RangeReader(RangeStream):
    """A seekable read-only file over HTTP range requests, fetched in blocks (zipfile seeks a lot)."""

    BLOCK = 256 * 1024

    def __init__(self, fetch: Callable[[int, int], bytes], size: int) -> None:
        super().__init__(size)
        self._fetch = fetch  # (first, last) byte, inclusive, as a Range header names them
        self._blocks: dict[int, bytes] = {}

    def _block(self, i: int) -> bytes:
        if i not in self._blocks:
            start = i * self.BLOCK
            self._blocks[i] = self._fetch(start, min(self.size, start + self.BLOCK) - 1)
        return self._blocks[i]

    def _range(self, start: int, end: int) -> bytes:
        out = bytearray()
        while start < end:
            i, off = divmod(start, self.BLOCK)
            chunk = self._block(i)[off:off + end - start]
            if not chunk:
                break
            out += chunk
            start += len(chunk)
        return bytes(out)
