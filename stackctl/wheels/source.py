"""A wheel named by location — a path, a file:// URL or an http(s) URL — opened once and read as often
as a check needs, with what reading it cost and how far its bytes were verified.

What can be verified depends on how the wheel was read, and the `WheelOrigin` says which:
- "sha256": every byte was hashed against the known sha256 (the lock's, or a URL's `#sha256=`): a local
  file, a remote wheel whose server ignored range requests and sent it whole, or one whose range reads
  happened to fetch every byte;
- "size": a remote wheel read with range requests: its size matched the lock's, and members read whole
  are CRC-checked, but the file as a whole was never seen, so it was not hash-checked;
- "none": not hash-checked: nothing to compare with (`hash_known` False), or range reads that did not
  see the whole file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from stackctl.base.files import sha256_file
from stackctl.errors import CheckFailed

if TYPE_CHECKING:
    from stackctl.index.client import IndexClient
    from stackctl.index.config import IndexEndpoint
    from stackctl.index.remote import RemoteFile
    from stackctl.wheels.archive import Limits, WheelReader
    from stackctl.wheels.scan import WheelScan


@dataclass(frozen=True)
class WheelOrigin:
    """Where a scanned wheel came from and what reading it cost."""

    wheel: str
    location: str
    size: int
    fetched: int | None  # bytes received over HTTP; None for a local file
    requests: int | None
    ranged: bool | None  # False: the server ignored range requests and the wheel was downloaded whole
    libraries_read: bool  # False: its libraries were listed by name from the central directory only
    headers_read: int  # libraries listed by name whose ELF header was read for their machine
    verified: str  # "sha256" | "size" | "none" (see the module docstring)
    hash_known: bool = False  # a sha256 to compare with was known (the lock's, or the URL's #sha256=)
    cached: bool = False  # its ELF facts came from the cache (kept per sha256): no byte of it was read

    @property
    def sha256_checked(self) -> bool:
        """The whole file was read and its sha256 compared."""
        return self.verified == "sha256"


class OpenedWheel:
    """One wheel, open until `close()`. A remote wheel keeps its fetched blocks between reads; it is read
    through `client` as a file of the index `ep` (by default a client of its own and an index of the URL's
    origin without credentials: a wheel named on the command line)."""

    def __init__(self, location: str, limits: Limits, *, sha256: str | None = None, size: int | None = None,
                 client: IndexClient | None = None, ep: IndexEndpoint | None = None) -> None:
        from stackctl.wheels.archive import WheelReader

        self.location = location
        parsed = urlparse(location)
        if sha256 is None and parsed.scheme in ("http", "https") and parsed.fragment.startswith("sha256="):
            sha256 = parsed.fragment.removeprefix("sha256=")  # as index pages carry it
        self._sha256 = sha256.removeprefix("sha256:").lower() if sha256 else None
        self._remote: RemoteFile | None = None
        self._libraries_read = False
        self._headers_read: set[str] = set()
        self.reader: WheelReader
        if parsed.scheme in ("http", "https"):
            from stackctl.index.client import IndexClient
            from stackctl.index.config import endpoint_of
            from stackctl.index.remote import RemoteFile

            self._remote = RemoteFile(client or IndexClient(), ep or endpoint_of(location), location, sha256=sha256,
                                      expected_size=size)
            try:
                self.reader = WheelReader(self._remote, label=unquote(parsed.path.rsplit("/", 1)[-1]), limits=limits)
            except BaseException:
                self._remote.close()
                raise
            if sha256 is not None and not self._remote.ranged:
                self._verified = "sha256"  # RemoteFile checked the whole download
            else:
                self._verified = "size" if size is not None else "none"
            self._size = self._remote.size
            return
        path = Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(location)
        self.reader = WheelReader(path, limits=limits)
        self._size = path.stat().st_size
        self._verified = "none"
        if sha256 is not None:
            if sha256_file(path) != sha256.removeprefix("sha256:").lower():
                self.close()
                raise CheckFailed(f"{path}: sha256 differs from the lock's")
            self._verified = "sha256"

    def scan(self, *, read_elves: bool = True, with_metadata: bool = False) -> WheelScan:
        from stackctl.wheels.scan import scan_wheel

        self._libraries_read |= read_elves
        return scan_wheel(self.reader, with_metadata=with_metadata, read_elves=read_elves)

    def read_machines(self, scan: WheelScan, paths: set[str]) -> WheelScan:
        from stackctl.wheels.scan import read_machines

        self._headers_read |= paths
        return read_machines(self.reader, scan, paths)

    def origin(self) -> WheelOrigin:
        r = self._remote
        if r is not None and self._sha256 is not None and self._verified != "sha256":
            # range reads that saw nearly all of it fetch the rest: then the whole is hashed, and said so
            seen = r.whole_sha256() if r.complete() else None
            if seen is not None and seen != self._sha256:
                from stackctl.errors import ServiceError

                raise ServiceError(f"{self.reader.filename}: the whole file read has sha256 {seen}, not the "
                                   f"expected {self._sha256}")
            if seen is not None:
                self._verified = "sha256"
        return WheelOrigin(self.reader.filename, self.location if r else str(self.reader.path), self._size,
                           r.fetched if r else None, r.requests if r else None, r.ranged if r else None,
                           self._libraries_read, len(self._headers_read), self._verified,
                           self._sha256 is not None)

    def close(self) -> None:
        self.reader.close()
        if self._remote is not None:
            self._remote.close()

    def __enter__(self) -> OpenedWheel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
