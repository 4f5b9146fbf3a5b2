"""A wheel read in place: its members, their bytes on demand, its metadata. Nothing is extracted.

Member streams read only what a reader asks for: a stored member is a window on the archive; a
deflated member is inflated forward as far as the reader has gone, never further. Over a remote file
that is what keeps listing a large wheel cheap. Every member name is checked before anything is read,
and sizes are capped so a zip bomb stops with a message instead of filling memory.
"""

from __future__ import annotations

import io
import posixpath
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from stackctl.base.sizes import human_size
from stackctl.errors import InputError
from stackctl.index.remote import MAX_METADATA, RangeStream

DEFAULT_MAX_MEMBER = 8 << 30  # the largest single library seen in GPU wheels is ~2 GiB; 4x that
DEFAULT_MAX_TOTAL = 32 << 30
DEFAULT_MAX_RATIO = 1100  # deflate cannot do better than ~1032:1: a larger declared size is a lie

# xz's largest preset (-9) uses a 64 MiB dictionary; a wheel tool writes 8 MiB (zipfile's default preset)
MAX_LZMA_DICT = 64 << 20
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")
_INFLATE_CHUNK = 1 << 16


class WheelError(InputError):
    """The wheel cannot be read safely: corrupt archive, unsafe member name, over a size cap."""


@dataclass(frozen=True)
class Limits:
    max_member: int = DEFAULT_MAX_MEMBER
    max_total: int = DEFAULT_MAX_TOTAL
    max_ratio: int = DEFAULT_MAX_RATIO

    @classmethod
    def capped(cls, max_size: int | None) -> Limits:
        """`--max-size BYTES`: the largest member read; the total never below it."""
        if max_size is None:
            return cls()
        if max_size <= 0:
            raise InputError(f"--max-size must be positive, not {max_size}")
        return cls(max_member=max_size, max_total=max(max_size, cls().max_total))


@dataclass(frozen=True)
class Member:
    name: str
    size: int
    compressed_size: int
    crc: int
    compress_type: int
    header_offset: int

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")


@dataclass(frozen=True)
class WheelMetadata:
    name: str
    version: str
    requires_dist: tuple[str, ...]
    requires_python: str | None


def unsafe_reason(name: str) -> str | None:
    """Why a member name could write outside the install directory, or None when it is safe."""
    if not name or "\0" in name:
        return "empty name or NUL byte"
    if "\\" in name:
        return "backslash in name"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    parts = name.rstrip("/").split("/")
    if any(p == ".." for p in parts):
        return "'..' component escapes the wheel"
    return None


def install_path(name: str) -> str:
    """Where a member lands relative to site-packages: `pkg.data/platlib/x` installs as `x`.

    Scripts, headers and data install outside site-packages; they get a `<scheme>/` prefix so no
    `$ORIGIN` path computed inside site-packages can reach them by accident.
    """
    head, _, rest = name.partition("/")
    if head.endswith(".data") and rest:
        scheme, _, tail = rest.partition("/")
        if scheme in ("purelib", "platlib"):
            return tail
        return f"<{scheme}>/{tail}"
    return name


class WheelReader:
    """An open wheel. `source` is a path or a seekable binary file object (for example a remote file)."""

    def __init__(self, source: str | Path | IO[bytes] | io.RawIOBase, *, label: str | None = None,
                 limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.label = label or (str(source) if isinstance(source, (str, Path)) else "wheel")
        self.filename = posixpath.basename(self.label.split("?", 1)[0].split("#", 1)[0])
        self._owned: IO[bytes] | None = None
        self._fh: IO[bytes]
        self.path = Path(source) if isinstance(source, (str, Path)) else None
        try:
            if isinstance(source, (str, Path)):
                self._owned = self._fh = open(source, "rb")  # noqa: SIM115  closed in close()
            else:
                self._fh = cast(IO[bytes], source)
            self._zip = zipfile.ZipFile(self._fh)
        except FileNotFoundError:
            raise WheelError(f"{self.label}: no such file") from None
        except IsADirectoryError:
            raise WheelError(f"{self.label}: is a directory, not a wheel") from None
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as exc:
            self.close()
            raise WheelError(f"{self.label}: not a readable wheel (truncated or corrupt zip: {exc})") from None
        except NotImplementedError as exc:  # "zip file version 12.7": a feature no wheel uses
            self.close()
            raise WheelError(f"{self.label}: not a readable wheel (unsupported zip: {exc})") from None
        self.members = self._check_members()
        self._by_name = {m.name: m for m in self.members}

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> WheelReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_members(self) -> tuple[Member, ...]:
        out: list[Member] = []
        total = 0
        self._fh.seek(0, io.SEEK_END)
        end = self._fh.tell()
        for info in self._zip.infolist():
            name = info.filename
            if not 0 <= info.header_offset < end:
                # zipfile computes offsets relative to where it believes the archive starts: a central
                # directory that lies about its own position yields offsets before the file's first byte
                raise WheelError(f"{self.label}: member {name[:200]!r} starts outside the file (corrupt zip)")
            why = unsafe_reason(name)
            if why is not None:
                raise WheelError(f"{self.label}: member {name!r} is unsafe ({why}); refusing the wheel")
            if info.flag_bits & 0x1:
                raise WheelError(f"{self.label}: member {name!r} is encrypted; wheels never are")
            self._check_size(name, info.file_size,
                             info.compress_size if info.compress_type == zipfile.ZIP_DEFLATED else 0)
            total += info.file_size
            if total > self.limits.max_total:
                raise WheelError(f"{self.label}: members add up to more than the {human_size(self.limits.max_total)} "
                                 "cap (zip bomb?); raise --max-size to read it")
            out.append(Member(name, info.file_size, info.compress_size, info.CRC, info.compress_type,
                              info.header_offset))
        return tuple(out)

    def _check_size(self, name: str, size: int, compressed: int) -> None:
        if size > self.limits.max_member:
            raise WheelError(f"{self.label}: member {name!r} declares {human_size(size)}, over the "
                             f"{human_size(self.limits.max_member)} cap (zip bomb?); raise --max-size to read it")
        if compressed and size > 1 << 20 and size / compressed > self.limits.max_ratio:
            raise WheelError(f"{self.label}: member {name!r} inflates {size // compressed}:1 from "
                             f"{human_size(compressed)} to {human_size(size)} (zip bomb?)")

    def member(self, name: str) -> Member:
        try:
            return self._by_name[name]
        except KeyError:
            raise WheelError(f"{self.label}: no member {name!r}") from None

    def open(self, name: str, fh: IO[bytes] | None = None) -> IO[bytes]:
        """A seekable stream over one member's bytes that reads lazily from the archive.

        `fh` is another handle on the same archive file, for reading members from several threads.
        """
        m = self.member(name)
        fh = fh or self._fh
        fh.seek(m.header_offset)
        raw = fh.read(_LOCAL_HEADER.size)
        if len(raw) != _LOCAL_HEADER.size or raw[:4] != b"PK\x03\x04":
            raise WheelError(f"{self.label}: member {name!r} has no local header (truncated or corrupt zip)")
        fields = _LOCAL_HEADER.unpack(raw)
        start = m.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
        if m.compress_type == zipfile.ZIP_STORED:
            if m.compressed_size != m.size:
                raise WheelError(f"{self.label}: stored member {name!r} has inconsistent sizes (corrupt zip)")
            return cast(IO[bytes], _Window(fh, start, m.size, self.label, name))
        if m.compress_type in _DECOMPRESSORS:
            # every method streams the same way, so a member that unpacks to GiBs from a few KiB (LZMA and
            # bzip2 reach ratios deflate cannot) is held a window at a time, never whole
            return cast(IO[bytes], _Inflating(fh, start, m.compressed_size, m.size, self.label, name,
                                              m.compress_type))
        raise WheelError(f"{self.label}: member {name!r} uses zip compression method {m.compress_type}, "
                         "which no wheel tool writes (corrupt or hostile zip)")

    def read(self, name: str) -> bytes:
        with self.open(name) as fh:
            data = fh.read()
        m = self.member(name)
        if len(data) != m.size or zlib.crc32(data) != m.crc:
            raise WheelError(f"{self.label}: member {name!r} fails its CRC check (corrupt zip)")
        return data

    def dist_info(self) -> str:
        dirs = sorted({m.name.split("/", 1)[0] for m in self.members
                       if m.name.split("/", 1)[0].endswith(".dist-info") and "/" in m.name})
        if not dirs:
            raise WheelError(f"{self.label}: no .dist-info directory; not a wheel")
        if len(dirs) > 1:
            raise WheelError(f"{self.label}: several .dist-info directories ({', '.join(dirs)})")
        return dirs[0]

    def metadata(self) -> WheelMetadata:
        import email.parser  # only here: `abi` on wheel files never reads metadata

        name = f"{self.dist_info()}/METADATA"
        if self.member(name).size > MAX_METADATA:
            # read whole, so bounded: the largest METADATA of a real wheel is a few hundred KiB
            raise WheelError(f"{self.label}: {name} declares {human_size(self.member(name).size)}, over the "
                             f"{human_size(MAX_METADATA)} a metadata file may have")
        msg = email.parser.BytesParser().parsebytes(self.read(name), headersonly=True)
        if msg.get("Name") is None or msg.get("Version") is None:
            raise WheelError(f"{self.label}: {name} has no Name or Version")
        return WheelMetadata(
            name=str(msg["Name"]),
            version=str(msg["Version"]),
            requires_dist=tuple(str(r) for r in msg.get_all("Requires-Dist") or ()),
            requires_python=str(msg["Requires-Python"]) if msg.get("Requires-Python") else None,
        )


class _MemberStream(RangeStream):
    def __init__(self, fh: IO[bytes], start: int, size: int, label: str, name: str) -> None:
        super().__init__(size)
        self._fh, self._start, self._label, self._name = fh, start, label, name


class _Window(_MemberStream):
    """A stored member: bytes [start, start+size) of the archive."""

    def _range(self, start: int, end: int) -> bytes:
        self._fh.seek(self._start + start)
        data = self._fh.read(end - start)
        if len(data) != end - start:
            raise WheelError(f"{self._label}: member {self._name!r} is cut short (truncated zip)")
        return data


def _fast_inflater() -> tuple[Any, tuple[type[Exception], ...]]:
    """ISA-L's inflate where installed (about 1.6x zlib's speed on library code), else zlib's."""
    try:
        from isal import isal_zlib

        return isal_zlib, (zlib.error, cast(type[Exception], isal_zlib.error))
    except ImportError:  # a platform without isal wheels
        return zlib, (zlib.error,)


# A member is inflated forward with ISA-L; only zlib's inflater can be copied mid-stream (a checkpoint), so a
# member read behind what is kept is inflated again with zlib, which keeps checkpoints from then on.
_FAST_MODULE, _INFLATE_ERRORS = _fast_inflater()


class _Decompressor:
    """One zip compression method behind one interface: `decompress(data, max_length)` that keeps the
    input it has not used yet, `needs_input`, `eof`."""

    def __init__(self, method: int, fast: bool = False) -> None:
        self._method = method
        self._tail = b""
        self._z: Any = None
        self._copyable = not fast or _FAST_MODULE is zlib
        if method == zipfile.ZIP_DEFLATED:
            self._z = (zlib if self._copyable else _FAST_MODULE).decompressobj(-15)
        elif method == zipfile.ZIP_BZIP2:
            import bz2

            self._z = bz2.BZ2Decompressor()

    @property
    def eof(self) -> bool:
        return self._z is not None and bool(self._z.eof)

    def copy(self) -> _Decompressor | None:
        """The inflater as it is now, to resume from later (zlib's `zran` idea); None for a method whose
        state cannot be copied."""
        if self._method != zipfile.ZIP_DEFLATED or not self._copyable:
            return None
        twin = _Decompressor.__new__(_Decompressor)
        twin._method, twin._tail, twin._z, twin._copyable = self._method, self._tail, self._z.copy(), True
        return twin

    @property
    def needs_input(self) -> bool:
        if self._method == zipfile.ZIP_DEFLATED:
            return not self._tail
        return self._z is None or bool(self._z.needs_input)

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._method == zipfile.ZIP_DEFLATED:
            out = self._z.decompress(self._tail + data, max_length)
            self._tail = self._z.unconsumed_tail
            return bytes(out)
        if self._z is None:  # LZMA: a 4-byte header (version, properties size), the properties, the stream
            self._tail += data
            if len(self._tail) < 4:
                return b""
            (psize,) = struct.unpack("<H", self._tail[2:4])
            if len(self._tail) < 4 + psize:
                return b""
            import lzma

            decode = lzma._decode_filter_properties  # type: ignore[attr-defined]  # what zipfile uses for method 14
            props, data, self._tail = self._tail[4:4 + psize], self._tail[4 + psize:], b""
            if len(props) == 5 and (dict_size := struct.unpack("<I", props[1:5])[0]) > MAX_LZMA_DICT:
                # liblzma allocates the declared dictionary up front: refused here, not as a MemoryError
                raise ValueError(f"an LZMA dictionary of {-(-dict_size >> 20)} MiB, over the "
                                 f"{MAX_LZMA_DICT >> 20} MiB any xz preset writes")
            self._z = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[decode(lzma.FILTER_LZMA1, props)])
        return bytes(self._z.decompress(data, max_length))


def _decompress_errors() -> tuple[type[Exception], ...]:
    import lzma

    # bz2 reports bad data as OSError, a finished stream fed again as EOFError; lzma bad properties as
    # LZMAError or ValueError
    return (*_INFLATE_ERRORS, lzma.LZMAError, OSError, EOFError, ValueError)


_DECOMPRESSORS = (zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


class _Inflating(_MemberStream):
    """A compressed member, inflated forward only as far as it has been read.

    The front of the member (where ELF headers, string and version tables live) is kept; beyond it only
    the most recent output is kept, so reaching a dynamic section behind hundreds of MB of code costs
    inflating them, not holding them. The first pass inflates with ISA-L, which cannot be copied; a read
    behind what is kept inflates the member again with zlib, and from then on every CHECKPOINT bytes of
    output a copy of the inflater is kept (zlib's `zran` way): a later jump back resumes from the checkpoint
    before it, re-inflating at most CHECKPOINT bytes and re-reading only the compressed bytes after it. Most
    libraries are read front, .dynamic, then back once to their version tables, so the fast pass does the
    bulk and the one jump back costs the tables' offset in zlib. Other methods start again from the top.
    """

    KEEP_HEAD = 4 << 20
    KEEP_RECENT = 4 << 20
    CHECKPOINT = 4 << 20  # ~40 KiB each (zlib's 32 KiB window and state): 10 MiB for a 1 GiB library
    IN_CHUNK = 256 << 10
    OUT_STEP = 2 << 20  # most output one step makes, whatever the method's ratio

    def __init__(self, fh: IO[bytes], start: int, csize: int, size: int, label: str, name: str,
                 method: int = zipfile.ZIP_DEFLATED) -> None:
        super().__init__(fh, start, size, label, name)
        self._csize = csize
        self._method = method
        self._head = bytearray()
        self._keep_recent = self.KEEP_RECENT
        self._checkpoints: list[tuple[int, int, _Decompressor]] = []  # (output offset, input offset, inflater)
        self.restarts = 0
        self._fast = True  # until the first jump back: then zlib, with checkpoints
        self._restart()

    def _restart(self, at: int = 0) -> None:
        """Inflate again from the last checkpoint at or before output offset `at` (the top without one)."""
        cp = next((c for c in reversed(self._checkpoints) if c[0] <= at), None)
        if cp is not None and (z := cp[2].copy()) is not None:
            self._produced, self._cpos, self._z = cp[0], cp[1], z
        else:
            self._cpos = 0
            self._z = _Decompressor(self._method, fast=self._fast)
            self._produced = 0  # bytes of output so far
        self._recent: list[tuple[int, bytes]] = []  # (offset, data) past the head, newest last
        self._recent_bytes = 0

    def _checkpoint(self) -> None:
        last = self._checkpoints[-1][0] if self._checkpoints else 0
        if self._produced - last >= self.CHECKPOINT and not self._z.eof:
            z = self._z.copy()
            if z is not None:
                self._checkpoints.append((self._produced, self._cpos, z))

    def _more(self, want: int) -> None:
        """Inflate one step; `want` is how much output the reader is still short of."""
        chunk = b""
        if self._z.eof or (self._z.needs_input and self._cpos >= self._csize):
            raise WheelError(f"{self._label}: member {self._name!r} ends before its declared size "
                             "(truncated or corrupt zip)")
        if self._z.needs_input:
            n = min(max(_INFLATE_CHUNK, min(want // 2, self.IN_CHUNK)), self._csize - self._cpos)
            advise = getattr(self._fh, "advise", None)
            if advise is not None:  # a remote file reads ahead, but never past this member
                advise(self._start + self._cpos, self._start + self._csize)
            self._fh.seek(self._start + self._cpos)
            chunk = self._fh.read(n)
            if not chunk:
                raise WheelError(f"{self._label}: member {self._name!r} is cut short (truncated zip)")
            self._cpos += len(chunk)
        try:
            out = self._z.decompress(chunk, min(self.size + 1 - self._produced, self.OUT_STEP))
        except _decompress_errors() as exc:
            raise WheelError(f"{self._label}: member {self._name!r} does not inflate ({exc}; corrupt zip)") \
                from None
        if self._produced + len(out) > self.size:
            raise WheelError(f"{self._label}: member {self._name!r} inflates past its declared "
                             f"{human_size(self.size)} (zip bomb?)")
        offset = self._produced
        self._produced += len(out)
        self._checkpoint()
        if len(self._head) < self.KEEP_HEAD and offset == len(self._head):
            take = self.KEEP_HEAD - len(self._head)
            self._head += out[:take]
            out, offset = out[take:], offset + take
        if out:
            self._recent.append((offset, out))
            self._recent_bytes += len(out)
            while len(self._recent) > 1 and self._recent_bytes - len(self._recent[0][1]) >= self._keep_recent:
                self._recent_bytes -= len(self._recent.pop(0)[1])

    def _kept(self, start: int, end: int) -> bytes | None:
        """Bytes [start, end) if still held (end <= produced), else None."""
        h = len(self._head)
        if end <= h:
            return bytes(self._head[start:end])
        first = self._recent[0][0] if self._recent else self._produced
        if start >= first:
            return self._from_recent(start, end)
        if first == h:  # head and recent output still follow each other
            return bytes(self._head[start:]) + self._from_recent(h, end)
        return None

    def _from_recent(self, start: int, end: int) -> bytes:
        return b"".join(d[max(0, start - off):end - off] for off, d in self._recent
                        if off < end and off + len(d) > start)

    def _range(self, start: int, end: int) -> bytes:
        if start < self._produced and self._kept(start, min(end, self._produced)) is None:
            self.restarts += 1
            self._fast = False
            self._restart(start)
        # keep what this read asks for, however long: output before `start` is let go as it comes
        self._keep_recent = max(self.KEEP_RECENT, end - start + self.OUT_STEP)
        try:
            while self._produced < end:
                self._more(end - self._produced)
        finally:
            self._keep_recent = self.KEEP_RECENT
        kept = self._kept(start, end)
        assert kept is not None
        return kept
