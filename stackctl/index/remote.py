"""A file on an index read as a seekable file: HTTP range requests where the server honours them,
otherwise one full download verified against the index's sha256.

Every request goes through the `IndexClient` (credentials only to the index's own origin, redirects
followed by hand, retries, the run's timeout, `--offline`): the one HTTP path for every byte from an index.

Range reads never see the whole file, so they cannot be hash-checked; the size the server reports is
compared with the expected size instead, when one is given.

`RemoteFile` is what `WheelReader` opens, so listing a remote wheel costs its central directory and
the front of each library, not the wheel; the resolver reads METADATA out of a wheel the same way.
`fetched` counts every body byte received.
"""

from __future__ import annotations

import hashlib
import io
import re
import tempfile
import zipfile
from typing import IO, TYPE_CHECKING, Protocol

from stackctl.base.neterrors import cause_in_words
from stackctl.base.urls import strip_userinfo
from stackctl.errors import ServiceError

if TYPE_CHECKING:
    import requests

    from stackctl.index.config import IndexEndpoint


class Transport(Protocol):
    """What a remote file needs of the index client: one streamed GET with the client's policy."""

    # URLs whose whole bytes were hashed and matched the index's sha256 (the lock's sha256_verified)
    verified: set[str]

    def get(self, ep: IndexEndpoint, url: str, what: str, headers: dict[str, str],
            allow: tuple[int, ...] = ()) -> requests.Response: ...

BLOCK = 64 << 10  # one range request fetches at least this much: zip headers are small and scattered
TAIL = 64 << 10  # the first request: the end of the file, where the central directory lives
MAX_AHEAD = 128  # 8 MiB: the most fetched past what a sequential read asked for (never past `advise`'s end)
# Range reads that saw at least this share of the file fetch the rest, so the whole is hashed against the
# index's sha256: at most 5% more bytes for a wheel whose every library is read to its dynamic section.
COMPLETE_AT = 0.95

# A range reply whose connection broke off mid-body is asked again this many times: a range is idempotent
# and small, and a flaky mirror cuts one reply, not every one.
RANGE_RETRIES = 2

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


class RangeStream(io.RawIOBase):
    """A read-only, seekable binary stream over bytes fetched by range: the one file-object shape shared by
    wheel members read in place and remote files. Subclasses say how to get bytes [start, end)."""

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


# The largest METADATA of a real wheel is a few hundred KiB; one is read whole, so it is bounded.
MAX_METADATA = 16 << 20


def read_metadata(zf: zipfile.ZipFile) -> bytes:
    """The wheel's one `NAME.dist-info/METADATA`; ValueError when it has none or several, or one that
    declares more than MAX_METADATA bytes (zipfile never reads past the declared size)."""
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(names) != 1:
        raise ValueError(f"{len(names)} .dist-info/METADATA files, not one")
    size = zf.getinfo(names[0]).file_size
    if size > MAX_METADATA:
        raise ValueError(f"{names[0]} declares {size} bytes, over the {MAX_METADATA >> 20} MiB a METADATA may have")
    return zf.read(names[0])


class RemoteFile(RangeStream):
    """Random access to `url`, a file of the index `ep`, through `client`."""

    def __init__(self, client: Transport, ep: IndexEndpoint, url: str, *, sha256: str | None = None,
                 expected_size: int | None = None, block: int = BLOCK, max_download: int | None = None) -> None:
        self.url = url
        self._client = client
        self._ep = ep
        self._what = "file " + url.rsplit("/", 1)[-1].split("#", 1)[0]
        self._where = f"index {ep.name}, {self._what}"
        self._sha256 = sha256.removeprefix("sha256:").lower() if sha256 else None
        self._block = block
        self._max_download = max_download
        # Every block fetched is kept in a spool file (sparse; never fetched twice, whatever a reader jumps
        # back to); `_have` says which blocks it holds.
        self._spool: IO[bytes] | None = None
        self._have: set[int] = set()
        self._advised: tuple[int, int] | None = None
        self.fetched = 0
        self.requests = 0
        self.ranged = True
        self._local: IO[bytes] | None = None
        self._tail: tuple[int, bytes] = (0, b"")
        self._next_block = -1  # the block after the last fetch: reading on from there is sequential
        self._ahead = 1  # blocks fetched past a sequential miss; doubles while reading on
        size = self._open()
        if expected_size is not None and size != expected_size:
            self.close()
            raise ServiceError(f"{self._where}: the server has {size} bytes, the lock says {expected_size}; "
                               "not the locked file")
        super().__init__(size)

    # --- the network edge ------------------------------------------------------------------------
    def _get(self, headers: dict[str, str], *, ranged: bool = True) -> requests.Response:
        self.requests += 1
        resp = self._client.get(self._ep, self.url, self._what, headers, allow=(416,) if ranged else ())
        if resp.status_code == 416:
            # some servers refuse a suffix range longer than the file instead of sending it whole
            resp.close()
            return self._whole()
        if resp.status_code not in (200, 206):
            resp.close()
            raise ServiceError(f"{self._where}: HTTP {resp.status_code} from {_safe(resp.url)}")
        return resp

    def _whole(self) -> requests.Response:
        """A plain GET of the whole file: what a range reply that cannot be trusted falls back to."""
        self.ranged = False
        return self._get({"Accept-Encoding": "identity"}, ranged=False)

    def _open(self) -> int:
        for attempt in range(1 + RANGE_RETRIES):
            resp = self._get({"Range": f"bytes=-{TAIL}", "Accept-Encoding": "identity"})
            if resp.status_code != 206:
                break
            m = _CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
            start, end, total = (int(g) for g in m.groups()) if m else (0, -1, 0)
            if m and start <= end == total - 1:  # a suffix range ends at the file's last byte
                data = self._body(resp, last=attempt == RANGE_RETRIES)
                if data is None:
                    continue
                if len(data) == end - start + 1:
                    self._tail = (start, data)
                    return total
            else:
                resp.close()
            # A missing or malformed Content-Range, or a body of another length: the reply cannot be
            # placed in the file. Read it whole instead, checked against the index's sha256.
            resp = self._whole()
            break
        # The server ignored the range: keep the whole body (it is coming anyway) and verify it.
        self.ranged = False
        return self._download(resp)

    def _body(self, resp: requests.Response, *, last: bool) -> bytes | None:
        """The whole body of a range reply; None when the connection broke off before its end and `last` is
        False (a range is asked again as it was: nothing of the cut reply is kept)."""
        try:
            data = resp.raw.read(decode_content=False)
        except _broken() as exc:
            if not last:
                return None
            raise self._broke(exc) from None
        finally:
            resp.close()
        self.fetched += len(data)
        return bytes(data)

    def _broke(self, exc: BaseException) -> ServiceError:
        return ServiceError(f"{self._where}: {cause_in_words(exc)} from {_safe(self.url)}")

    def _download(self, resp: requests.Response) -> int:
        spool = tempfile.TemporaryFile()  # noqa: SIM115  owned by this object, closed in close()
        digest = hashlib.sha256()
        try:
            for chunk in resp.raw.stream(1 << 20, decode_content=False):
                self.fetched += len(chunk)
                if self._max_download is not None and self.fetched > self._max_download:
                    raise ServiceError(f"{self._where}: the server ignores range requests and the wheel "
                                       f"is over the {self._max_download} byte download cap")
                digest.update(chunk)
                spool.write(chunk)
        except _broken() as exc:
            # the whole file is not asked again: a server that cut it once is cutting a large body
            spool.close()
            raise self._broke(exc) from None
        except BaseException:
            spool.close()
            raise
        finally:
            resp.close()
        if self._sha256 is not None and digest.hexdigest() != self._sha256:
            spool.close()
            raise ServiceError(f"{self._where}: downloaded sha256 {digest.hexdigest()} does not match the index's "
                               f"{self._sha256}")
        if self._sha256 is not None:
            self._client.verified.add(self.url)
        self._local = spool
        return spool.tell()

    def _fetch(self, first: int, last: int) -> None:
        """Fetch blocks first..last (inclusive) in one request."""
        start = first * self._block
        end = min(self.size, (last + 1) * self._block) - 1
        data: bytes | None = None
        for attempt in range(1 + RANGE_RETRIES):
            resp = self._get({"Range": f"bytes={start}-{end}", "Accept-Encoding": "identity"})
            m = _CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
            if resp.status_code != 206 or not m or (int(m.group(1)), int(m.group(2))) != (start, end):
                self._switch_to_whole(resp if resp.status_code == 200 else None)
                raise _Whole
            data = self._body(resp, last=attempt == RANGE_RETRIES)
            if data is not None:
                break
        assert data is not None
        if len(data) != end - start + 1:
            self._switch_to_whole(None)
            raise _Whole
        self._next_block = last + 1
        if self._spool is None:
            self._spool = tempfile.TemporaryFile()  # noqa: SIM115  owned by this object, closed in close()
        self._spool.seek(start)
        self._spool.write(data)
        self._have.update(range(first, last + 1))

    def advise(self, start: int, end: int) -> None:
        """The next reads are sequential within [start, end) (a member's compressed bytes): read-ahead stops
        at `end`, so inflating a member never fetches the next member's bytes it will not read."""
        self._advised = (start, end)

    def _blocks(self, first: int, last: int) -> bytes:
        assert self._spool is not None
        self._spool.seek(first * self._block)
        return self._spool.read((last - first + 1) * self._block)

    def _switch_to_whole(self, resp: requests.Response | None) -> None:
        """The server stopped answering ranges as asked: download the file once (sha256-checked), same size."""
        if resp is None:
            resp = self._whole()
        else:
            self.ranged = False
        size = self._download(resp)
        if size != self.size:
            self.close()
            raise ServiceError(f"{self._where}: the whole file is {size} bytes, its ranges said {self.size}")

    # --- the stream ----------------------------------------------------------------------------------
    def _range(self, start: int, end: int) -> bytes:
        if self._local is None:
            try:
                return self._ranged(start, end)
            except _Whole:
                pass
        assert self._local is not None
        self._local.seek(start)
        return self._local.read(end - start)

    def _ranged(self, start: int, end: int) -> bytes:
        tail_start, tail = self._tail
        if start >= tail_start:
            return tail[start - tail_start:end - tail_start]
        if end > tail_start:
            return self._ranged(start, tail_start) + tail[:end - tail_start]
        first, last = start // self._block, (end - 1) // self._block
        missing = [b for b in range(first, last + 1) if b not in self._have]
        if missing and missing[0] == self._next_block:
            # Reading on (inflating a member): fetch ahead, more each time, so a long member costs a
            # few large requests instead of hundreds of small ones.
            self._ahead = min(self._ahead * 2, MAX_AHEAD)
            limit = (self.size - 1) // self._block
            if self._advised is not None and self._advised[0] <= start < self._advised[1]:
                limit = min(limit, (self._advised[1] - 1) // self._block)
            extra = [b for b in range(missing[-1] + 1, min(limit, missing[-1] + self._ahead) + 1)
                     if b not in self._have and b * self._block < self._tail[0]]
            missing += extra
        elif missing:
            self._ahead = 1
        self._fetch_runs(missing)
        joined = self._blocks(first, last)
        offset = first * self._block
        return joined[start - offset:end - offset]

    def complete(self, at: float = COMPLETE_AT) -> bool:
        """Fetch the blocks range reads left out when they are fewer than (1 - at) of the file, so the whole
        can be hashed; True when every byte is now held."""
        if self._local is not None:
            return True
        missing = self._missing()
        if missing and len(missing) * self._block > (1 - at) * self.size:
            return False
        self._fetch_runs(missing)
        return True

    def _missing(self) -> list[int]:
        """The blocks before the tail that no read has fetched yet."""
        return [b for b in range(-(-self._tail[0] // self._block)) if b not in self._have]

    def _fetch_runs(self, blocks: list[int]) -> None:
        """One request per contiguous run of `blocks` (ascending)."""
        run: list[int] = []
        for b in blocks:
            if run and b != run[-1] + 1:
                self._fetch(run[0], run[-1])
                run = []
            run.append(b)
        if run:
            self._fetch(run[0], run[-1])

    def whole_sha256(self) -> str | None:
        """The sha256 of the file when range reads fetched every byte of it (a small wheel's first read is all
        of it; see `complete`), else None. A file downloaded whole was checked as it came."""
        if self._local is not None:
            return None
        if self._missing():
            return None
        tail_start, tail = self._tail
        digest = hashlib.sha256()
        if tail_start:
            assert self._spool is not None
            self._spool.seek(0)
            left = tail_start
            while left > 0:
                chunk = self._spool.read(min(left, 1 << 20))
                if not chunk:
                    return None
                digest.update(chunk)
                left -= len(chunk)
        digest.update(tail)
        return digest.hexdigest()

    def close(self) -> None:
        for f in (self._local, self._spool):
            if f is not None:
                f.close()
        self._local = self._spool = None
        super().close()


def _broken() -> tuple[type[BaseException], ...]:
    """What a body read raises when the connection breaks off: urllib3 raises its own ProtocolError
    (IncompleteRead) from `raw.read`/`raw.stream`, outside requests' hierarchy."""
    import requests
    import urllib3.exceptions

    return (requests.RequestException, urllib3.exceptions.HTTPError, OSError)


class _Whole(Exception):
    """Raised mid-read once the file was downloaded whole: read the rest from the local copy."""


def _safe(url: str) -> str:
    """The URL without any user:password@ part, for messages."""
    return strip_userinfo(url)
