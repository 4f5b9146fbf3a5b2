"""A read-only, seekable binary stream over bytes fetched by range: the one file-object shape shared by
wheel members read in place and remote wheels read over HTTP. Subclasses say how to get bytes
[start, end); reading, seeking and `readinto` live here once.
"""

from __future__ import annotations

import io


class RangeStream(io.RawIOBase):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self._pos = 0

    def _range(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the stream; 0 <= start < end <= size."""
        raise NotImplementedError

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    def read(self, n: int | None = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self._pos + n)
        if end <= self._pos:
            return b""
        data = self._range(self._pos, end)
        self._pos += len(data)
        return data
