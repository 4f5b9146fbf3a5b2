"""A wheel read in place: its members, their bytes on demand, its metadata. Nothing is extracted.

Member streams read only what a reader asks for: a stored member is a window on the archive; a
deflated member is inflated forward as far as the reader has gone, never further. Over a remote file
that is what keeps listing a large wheel cheap. Every member name is checked before anything is read,
and sizes are capped so a zip bomb stops with a message instead of filling memory.
"""

from __future__ import annotations

import email.parser
import io
import os
import posixpath
import struct
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from stackctl.elf import ElfInfo
from stackctl.errors import InputError

DEFAULT_MAX_MEMBER = 8 << 30  # the largest single library seen in GPU wheels is ~2 GiB; 4x that
DEFAULT_MAX_TOTAL = 32 << 30
DEFAULT_MAX_RATIO = 1100  # deflate cannot do better than ~1032:1: a larger declared size is a lie

_LOCAL_HEADER = struct.Struct("<4s5H3L2H")
_INFLATE_CHUNK = 1 << 16


class WheelError(InputError):
    """The wheel cannot be read safely: corrupt archive, unsafe member name, over a size cap."""


@dataclass(frozen=True)
class Limits:
    max_member: int = DEFAULT_MAX_MEMBER
    max_total: int = DEFAULT_MAX_TOTAL
    max_ratio: int = DEFAULT_MAX_RATIO


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


def is_library_name(name: str) -> bool:
    """Shared objects by name (`x.so`, `x.so.1.2`, `x.cpython-310-...so`)."""
    base = posixpath.basename(name)
    return base.endswith(".so") or ".so." in base


def may_be_executable(name: str) -> bool:
    """Extension-less members of script and bin directories (`torch/bin/torch_shm_manager`)."""
    base = posixpath.basename(name)
    head, _, rest = name.partition("/")
    in_scripts = head.endswith(".data") and rest.startswith("scripts/")
    return bool(base) and "." not in base and (in_scripts or "/bin/" in f"/{name}")


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
        for info in self._zip.infolist():
            name = info.filename
            why = unsafe_reason(name)
            if why is not None:
                raise WheelError(f"{self.label}: member {name!r} is unsafe ({why}); refusing the wheel")
            if info.flag_bits & 0x1:
                raise WheelError(f"{self.label}: member {name!r} is encrypted; wheels never are")
            self._check_size(name, info.file_size,
                             info.compress_size if info.compress_type == zipfile.ZIP_DEFLATED else 0)
            total += info.file_size
            if total > self.limits.max_total:
                raise WheelError(f"{self.label}: members add up to more than the {_human(self.limits.max_total)} "
                                 "cap (zip bomb?); raise --max-size to read it")
            out.append(Member(name, info.file_size, info.compress_size, info.CRC, info.compress_type,
                              info.header_offset))
        return tuple(out)

    def _check_size(self, name: str, size: int, compressed: int) -> None:
        if size > self.limits.max_member:
            raise WheelError(f"{self.label}: member {name!r} declares {_human(size)}, over the "
                             f"{_human(self.limits.max_member)} cap (zip bomb?); raise --max-size to read it")
        if compressed and size > 1 << 20 and size / compressed > self.limits.max_ratio:
            raise WheelError(f"{self.label}: member {name!r} inflates {size // compressed}:1 from "
                             f"{_human(compressed)} to {_human(size)} (zip bomb?)")

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
        if m.compress_type == zipfile.ZIP_DEFLATED:
            return cast(IO[bytes], _Inflating(fh, start, m.compressed_size, m.size, self.label, name))
        # bzip2/lzma members are rare in wheels: read them whole through zipfile, under the same cap.
        try:
            with self._zip.open(name) as fh:
                data = fh.read(m.size + 1)
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, ValueError) as exc:
            raise WheelError(f"{self.label}: member {name!r} cannot be read ({exc})") from None
        if len(data) > m.size:
            raise WheelError(f"{self.label}: member {name!r} inflates past its declared size (zip bomb?)")
        return io.BytesIO(data)

    def read(self, name: str) -> bytes:
        with self.open(name) as fh:
            data = fh.read()
        m = self.member(name)
        if len(data) != m.size or zlib.crc32(data) != m.crc:
            raise WheelError(f"{self.label}: member {name!r} fails its CRC check (corrupt zip)")
        return data

    def head(self, name: str, n: int = 4) -> bytes:
        with self.open(name) as fh:
            return fh.read(n)

    def dist_info(self) -> str:
        dirs = sorted({m.name.split("/", 1)[0] for m in self.members
                       if m.name.split("/", 1)[0].endswith(".dist-info") and "/" in m.name})
        if not dirs:
            raise WheelError(f"{self.label}: no .dist-info directory; not a wheel")
        if len(dirs) > 1:
            raise WheelError(f"{self.label}: several .dist-info directories ({', '.join(dirs)})")
        return dirs[0]

    def metadata(self) -> WheelMetadata:
        name = f"{self.dist_info()}/METADATA"
        msg = email.parser.BytesParser().parsebytes(self.read(name), headersonly=True)
        if msg.get("Name") is None or msg.get("Version") is None:
            raise WheelError(f"{self.label}: {name} has no Name or Version")
        return WheelMetadata(
            name=str(msg["Name"]),
            version=str(msg["Version"]),
            requires_dist=tuple(str(r) for r in msg.get_all("Requires-Dist") or ()),
            requires_python=str(msg["Requires-Python"]) if msg.get("Requires-Python") else None,
        )


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


class _MemberStream(io.RawIOBase):
    def __init__(self, fh: IO[bytes], start: int, size: int, label: str, name: str) -> None:
        self._fh, self._start, self._size, self._label, self._name = fh, start, size, label, name
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    def read(self, n: int | None = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        if end <= self._pos:
            return b""
        data = self._range(self._pos, end)
        self._pos += len(data)
        return data

    def _range(self, start: int, end: int) -> bytes:
        raise NotImplementedError


class _Window(_MemberStream):
    """A stored member: bytes [start, start+size) of the archive."""

    def _range(self, start: int, end: int) -> bytes:
        self._fh.seek(self._start + start)
        data = self._fh.read(end - start)
        if len(data) != end - start:
            raise WheelError(f"{self._label}: member {self._name!r} is cut short (truncated zip)")
        return data


def _inflater() -> tuple[Any, tuple[type[Exception], ...]]:
    """ISA-L's inflate where installed (about twice zlib's speed on library code), else zlib's."""
    try:
        from isal import isal_zlib

        return isal_zlib, (zlib.error, cast(type[Exception], isal_zlib.error))
    except ImportError:  # a platform without isal wheels
        return zlib, (zlib.error,)


_INFLATE_MODULE, _INFLATE_ERRORS = _inflater()


def _decompressobj() -> Any:
    return _INFLATE_MODULE.decompressobj(-15)


class _Inflating(_MemberStream):
    """A deflated member, inflated forward only as far as it has been read.

    The front of the member (where ELF headers, string and version tables live) is kept; beyond it only
    the most recent output is kept, so reaching a dynamic section behind hundreds of MB of code costs
    inflating them, not holding them. A read behind what is kept starts inflating again from the top.
    """

    KEEP_HEAD = 4 << 20
    KEEP_RECENT = 4 << 20
    IN_CHUNK = 256 << 10

    def __init__(self, fh: IO[bytes], start: int, csize: int, size: int, label: str, name: str) -> None:
        super().__init__(fh, start, size, label, name)
        self._csize = csize
        self._head = bytearray()
        self._keep_recent = self.KEEP_RECENT
        self._restart()

    def _restart(self) -> None:
        self._cpos = 0
        self._z = _decompressobj()
        self._produced = 0  # bytes of output so far
        self._recent: list[tuple[int, bytes]] = []  # (offset, data) past the head, newest last
        self._recent_bytes = 0

    def _more(self, want: int) -> None:
        """Inflate one step; `want` is how much output the reader is still short of."""
        if self._cpos >= self._csize or self._z.eof:
            raise WheelError(f"{self._label}: member {self._name!r} ends before its declared size "
                             "(truncated or corrupt zip)")
        n = min(max(_INFLATE_CHUNK, min(want // 2, self.IN_CHUNK)), self._csize - self._cpos)
        self._fh.seek(self._start + self._cpos)
        chunk = self._fh.read(n)
        if not chunk:
            raise WheelError(f"{self._label}: member {self._name!r} is cut short (truncated zip)")
        self._cpos += len(chunk)
        try:
            out = self._z.decompress(chunk, self._size + 1 - self._produced)
        except _INFLATE_ERRORS as exc:
            raise WheelError(f"{self._label}: member {self._name!r} does not inflate ({exc}; corrupt zip)") \
                from None
        if self._produced + len(out) > self._size:
            raise WheelError(f"{self._label}: member {self._name!r} inflates past its declared "
                             f"{_human(self._size)} (zip bomb?)")
        offset = self._produced
        self._produced += len(out)
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
            self._restart()
        while self._produced < end:
            self._more(end - self._produced)
        kept = self._kept(start, end)
        if kept is None:
            # A single read longer than what is kept: inflate again, keeping enough this time.
            self._restart()
            self._keep_recent = end - start + (1 << 20)
            try:
                while self._produced < end:
                    self._more(end - self._produced)
                kept = self._kept(start, end)
            finally:
                self._keep_recent = self.KEEP_RECENT
        assert kept is not None
        return kept


# --- what a wheel holds, as values ---------------------------------------------------------------

@dataclass(frozen=True)
class ElfMember:
    path: str  # in the archive
    installed: str  # relative to site-packages (see install_path)
    info: ElfInfo | None
    problem: str | None = None  # why `info` is None: "not an ELF file", "truncated ELF (...)"
    unread: bool = False  # listed by name only (see scan_wheel's read_elves)


@dataclass(frozen=True)
class WheelScan:
    filename: str
    name: str
    version: str
    platforms: tuple[str, ...]  # from the filename's tags: ("linux_x86_64",), ("any",)
    members: tuple[Member, ...]
    elves: tuple[ElfMember, ...]
    metadata: WheelMetadata | None = None

    def arch(self) -> str | None:
        """The machine the platform tags name, or None for `any`."""
        return next((a for p in self.platforms if (a := platform_arch(p))), None)


_ARCHES = ("x86_64", "aarch64", "ppc64le", "s390x", "riscv64", "armv7l", "i686", "i386")


def platform_arch(platform: str) -> str | None:
    """"linux_x86_64", "manylinux_2_28_aarch64" -> the machine name elf.py reports; None for "any"."""
    arch = next((a for a in _ARCHES if platform.endswith(a)), None)
    return "i686" if arch == "i386" else arch


def scan_wheel(reader: WheelReader, *, with_metadata: bool = False, read_elves: bool = True,
               workers: int = min(4, os.cpu_count() or 1)) -> WheelScan:
    """Read every library member's dynamic information (only the front of each member is read).

    With `read_elves=False` library members are listed by name from the central directory alone: what a
    wheel that only provides libraries costs to list when it is remote.
    """
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    from stackctl.elf import NotElf, read_elf

    meta = reader.metadata() if with_metadata else None
    try:
        name, version, _build, tags = parse_wheel_filename(reader.filename)
        dist, ver, platforms = str(name), str(version), tuple(sorted({t.platform for t in tags}))
    except InvalidWheelFilename:
        meta = meta or reader.metadata()
        dist, ver, platforms = meta.name, meta.version, ()
    libs = [m for m in reader.members if not m.is_dir and is_library_name(m.name)]
    if not read_elves:
        elves = [ElfMember(m.name, install_path(m.name), None, None, unread=True) for m in libs]
        return WheelScan(reader.filename, dist, ver, platforms, reader.members, tuple(elves), meta)
    # Executables need their libraries too; a script among them is simply not ELF and is left out.
    libs += [m for m in reader.members if not m.is_dir and may_be_executable(m.name)]

    def one(m: Member, fh: IO[bytes] | None = None) -> ElfMember:
        try:
            with reader.open(m.name, fh) as stream:
                return ElfMember(m.name, install_path(m.name), read_elf(stream))
        except NotElf as exc:
            return ElfMember(m.name, install_path(m.name), None, str(exc))

    path = reader.path
    if path is None or len(libs) < 2 or workers < 2:
        elves = [one(m) for m in libs]
    else:
        # zlib inflates without the GIL: a local wheel's large libraries are read side by side,
        # each thread with its own handle on the file.
        def own(m: Member) -> ElfMember:
            with open(path, "rb") as fh:
                return one(m, fh)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            elves = list(pool.map(own, libs))
    elves = [e for e in elves if e.info is not None or is_library_name(e.path)
             or not (e.problem or "").startswith("not an ELF")]
    return WheelScan(reader.filename, dist, ver, platforms, reader.members, tuple(elves), meta)
