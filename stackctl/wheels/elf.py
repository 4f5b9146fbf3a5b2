"""What the dynamic loader reads from an ELF file, and nothing more: the one module that calls pyelftools.

Files are read, never executed. The dynamic information is reached through the program headers
(PT_LOAD, PT_DYNAMIC) rather than the section headers, because the section headers sit at the very end
of the file: through the program headers a library inside a compressed or remote wheel is understood
from the front of the file alone, and a stripped library without section headers still reads.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, TypeVar

# A library needs at most a few hundred dynamic entries; a bound keeps a corrupt file from looping.
_MAX_DYN_ENTRIES = 1 << 16
# libc.so.6 defines ~40 versions and a large library needs ~100: the bound is for the whole file, so a
# chain that repeats itself costs linear work, not entries x auxiliaries.
_MAX_VERSION_ENTRIES = 1 << 12
_MAX_STRING = 1 << 16
# The largest .dynstr seen (libtorch_cuda.so's C++ names) is tens of MB; one above this is read name by name.
_MAX_TABLE = 64 << 20

_MACHINES = {
    "EM_X86_64": "x86_64",
    "EM_386": "i686",
    "EM_AARCH64": "aarch64",
    "EM_ARM": "armv7l",
    "EM_PPC64": "ppc64le",
    "EM_S390": "s390x",
    "EM_RISCV": "riscv64",
}

ELF_MAGIC = b"\x7fELF"

_T = TypeVar("_T")


class NotElf(Exception):
    """The bytes are not an ELF file, or not one this module can read (the reason says which)."""


@dataclass(frozen=True)
class VersionNeed:
    """Symbol versions one file requires from one library (`.gnu.version_r`)."""

    library: str
    versions: tuple[str, ...]


@dataclass(frozen=True)
class ElfInfo:
    machine: str  # "x86_64", "aarch64", ... or the raw e_machine name when unknown
    bits: int  # 32 or 64
    elf_type: str  # "ET_DYN", "ET_EXEC", "ET_REL", ...
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[str, ...]  # what the file itself defines (libc.so.6: GLIBC_2.2.5 ... GLIBC_2.36)

    def required_versions(self) -> tuple[tuple[str, str], ...]:
        """(library, version) for every required symbol version."""
        return tuple((n.library, v) for n in self.version_needs for v in n.versions)


def looks_like_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def read_elf(stream: IO[bytes]) -> ElfInfo:
    """Read the dynamic information of the ELF file in `stream` (seekable, binary).

    Raises NotElf with a one-line reason for anything that is not a readable ELF file: wrong magic,
    a truncated header, tables pointing outside the file.
    """
    return _guarded(_read, stream)


def read_machine(stream: IO[bytes]) -> str:
    """The machine an ELF file is built for, from its header alone (its first 64 bytes): what tells a
    library listed by name whether the loader could use it, at the cost of one small read."""
    return _guarded(lambda s: _machine(_open(s)), stream)


def read_elf_bytes(data: bytes) -> ElfInfo:
    return read_elf(io.BytesIO(data))


def _guarded(fn: Callable[[IO[bytes]], _T], stream: IO[bytes]) -> _T:
    from elftools.common.exceptions import ELFError

    try:
        return fn(stream)
    except NotElf:
        raise
    except ELFError as exc:
        raise NotElf(_reason(exc)) from None
    except (EOFError, ValueError, OverflowError, KeyError) as exc:
        # Construct and the stream wrappers raise these on short or nonsensical data.
        raise NotElf(f"truncated or corrupt ELF ({type(exc).__name__}: {exc})") from None


def _open(stream: IO[bytes]) -> Any:
    from elftools.elf.elffile import ELFFile

    stream.seek(0)
    if not looks_like_elf(stream.read(4)):
        raise NotElf("not an ELF file (no ELF magic)")
    stream.seek(0)
    return ELFFile(stream)  # reads the header only; everything else on demand


def _machine(elf: Any) -> str:
    name = str(elf.header["e_machine"])
    return _MACHINES.get(name, name)


def _reason(exc: Exception) -> str:
    text = str(exc)
    if "Magic number does not match" in text:
        return "not an ELF file (no ELF magic)"
    return f"truncated or corrupt ELF ({text.strip() or type(exc).__name__})"


@dataclass(frozen=True)
class _Load:
    vaddr: int
    offset: int
    filesz: int


class _Dynamic:
    """The dynamic segment of one ELF file, read on demand: its entries, the strings they point at (each
    read once), and the symbol-version tables, every count and offset bounded."""

    def __init__(self, stream: IO[bytes], structs: Any, loads: list[_Load], offset: int, size: int) -> None:
        from elftools.common.utils import struct_parse

        self._parse = struct_parse
        self.stream, self.structs, self.loads = stream, structs, loads
        self.entries: list[tuple[str, int]] = []
        entsize = structs.Elf_Dyn.sizeof()
        for i in range(min(size // entsize, _MAX_DYN_ENTRIES)):
            d: Any = struct_parse(structs.Elf_Dyn, stream, offset + i * entsize)
            tag = str(d["d_tag"])
            if tag == "DT_NULL":
                break
            self.entries.append((tag, int(d["d_val"])))
        self.values = dict(self.entries)
        if "DT_STRTAB" not in self.values:
            raise NotElf("corrupt ELF (dynamic segment without a string table)")
        self.strtab = self.offset_of(self.values["DT_STRTAB"])
        self.strsz = self.values.get("DT_STRSZ", _MAX_STRING)
        self.strings: dict[int, str] = {}
        self.budget = _MAX_VERSION_ENTRIES
        self.table: bytes | None = None
        if self.strsz <= _MAX_TABLE:
            # The string table whole, in one read: names are then looked up in memory, whatever order the
            # version tables point into it, so a deflated library is inflated through it once.
            stream.seek(self.strtab)
            self.table = stream.read(self.strsz)
            if len(self.table) < self.strsz:
                raise NotElf("truncated ELF (the dynamic string table runs past the end of the file)")

    def offset_of(self, vaddr: int) -> int:
        for seg in self.loads:
            if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                return seg.offset + (vaddr - seg.vaddr)
        if not self.loads:  # no PT_LOAD: addresses are file offsets (seen in hand-made files)
            return vaddr
        raise NotElf(f"corrupt ELF (address {vaddr:#x} is in no loaded segment)")

    def string(self, off: int) -> str:
        if off in self.strings:
            return self.strings[off]
        if off >= self.strsz:
            raise NotElf("corrupt ELF (string offset beyond the string table)")
        if self.table is not None:
            end = self.table.find(b"\0", off, off + _MAX_STRING)
            if end < 0:
                raise NotElf("truncated ELF (unterminated string in the dynamic string table)")
            self.strings[off] = self.table[off:end].decode("utf-8", "replace")
            return self.strings[off]
        limit, want, raw = min(_MAX_STRING, self.strsz - off), 256, b""
        while True:  # names are short: read a little, more only when the end is not in sight
            self.stream.seek(self.strtab + off)
            raw = self.stream.read(min(want, limit))
            end = raw.find(b"\0")
            if end >= 0:
                break
            if want >= limit or len(raw) < min(want, limit):
                raise NotElf("truncated ELF (unterminated string in the dynamic string table)")
            want *= 16
        self.strings[off] = raw[:end].decode("utf-8", "replace")
        return self.strings[off]

    def strings_of(self, tag: str) -> list[str]:
        return [self.string(o) for t, o in self.entries if t == tag]

    def paths(self, tag: str) -> tuple[str, ...]:
        return tuple(p for v in self.strings_of(tag) for p in v.split(":") if p)

    def _spend(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise NotElf(f"corrupt ELF (more than {_MAX_VERSION_ENTRIES} symbol version entries)")

    def _struct(self, kind: str, pos: int) -> Any:
        return self._parse(getattr(self.structs, kind), self.stream, pos)

    def _chain(self, kind: str, pos: int, count: int, next_field: str) -> Iterator[tuple[int, Any]]:
        """The entries of one symbol-version list (DT_VERNEED, DT_VERDEF, or one entry's auxiliaries) with
        their offsets: `count` at most, each `next_field` bytes after the one before, a zero ending the list.
        Every entry read is spent from the file's budget, so a looping list is a NotElf, never a hang."""
        for _ in range(min(count, _MAX_VERSION_ENTRIES)):
            self._spend()
            entry = self._struct(kind, pos)
            yield pos, entry
            if not entry[next_field]:
                return
            pos += int(entry[next_field])

    def version_needs(self) -> tuple[VersionNeed, ...]:
        """DT_VERNEED: each library and the symbol versions wanted from it."""
        if "DT_VERNEED" not in self.values:
            return ()
        needs: list[VersionNeed] = []
        start, count = self.offset_of(self.values["DT_VERNEED"]), self.values.get("DT_VERNEEDNUM", 0)
        for pos, vn in self._chain("Elf_Verneed", start, count, "vn_next"):
            auxes = self._chain("Elf_Vernaux", pos + int(vn["vn_aux"]), int(vn["vn_cnt"]), "vna_next")
            versions = tuple(self.string(int(aux["vna_name"])) for _, aux in auxes)
            needs.append(VersionNeed(self.string(int(vn["vn_file"])), versions))
        return tuple(needs)

    def version_defs(self) -> tuple[str, ...]:
        """DT_VERDEF: the symbol versions the file defines (not the one naming the file itself)."""
        if "DT_VERDEF" not in self.values:
            return ()
        defs: list[str] = []
        start, count = self.offset_of(self.values["DT_VERDEF"]), self.values.get("DT_VERDEFNUM", 0)
        for pos, vd in self._chain("Elf_Verdef", start, count, "vd_next"):
            # The first auxiliary entry names the version; later ones name its parents.
            if int(vd["vd_cnt"]) and not int(vd["vd_flags"]) & 0x1:  # VER_FLG_BASE names the file itself
                da = self._struct("Elf_Verdaux", pos + int(vd["vd_aux"]))
                defs.append(self.string(int(da["vda_name"])))
        return tuple(defs)

def _segments(stream: IO[bytes], elf: Any) -> tuple[list[_Load], tuple[int, int] | None]:
    """The PT_LOAD segments and the PT_DYNAMIC one (offset, size). Sizes are checked against the file length
    without reading: a cut-off file is caught even where the part that is missing is never read."""
    from elftools.common.utils import struct_parse

    header: Any = elf.header
    size = elf.stream_len
    shoff, shnum, shentsize = int(header["e_shoff"]), int(header["e_shnum"]), int(header["e_shentsize"])
    if shoff and shoff + shnum * shentsize > size:
        raise NotElf("truncated ELF (section headers beyond the end of the file)")
    loads: list[_Load] = []
    dynamic: tuple[int, int] | None = None
    phoff, phnum, phentsize = int(header["e_phoff"]), int(header["e_phnum"]), int(header["e_phentsize"])
    if phnum and phoff + phnum * phentsize > size:
        raise NotElf("truncated ELF (program headers beyond the end of the file)")
    for i in range(phnum):
        ph: Any = struct_parse(elf.structs.Elf_Phdr, stream, phoff + i * phentsize)
        if ph["p_type"] == "PT_LOAD":
            seg = _Load(int(ph["p_vaddr"]), int(ph["p_offset"]), int(ph["p_filesz"]))
            if seg.offset + seg.filesz > size:
                raise NotElf("truncated ELF (a loaded segment runs past the end of the file)")
            loads.append(seg)
        elif ph["p_type"] == "PT_DYNAMIC":
            dynamic = (int(ph["p_offset"]), int(ph["p_filesz"]))
    if dynamic is not None and dynamic[0] + dynamic[1] > size:
        raise NotElf("truncated ELF (dynamic segment beyond the end of the file)")
    return loads, dynamic


def _read(stream: IO[bytes]) -> ElfInfo:
    elf = _open(stream)
    machine, bits, elf_type = _machine(elf), int(elf.elfclass), str(elf.header["e_type"])
    loads, dynamic = _segments(stream, elf)
    if dynamic is None:
        # A static executable or an object file: it needs nothing from the loader.
        return ElfInfo(machine, bits, elf_type, None, (), (), (), (), ())
    dyn = _Dynamic(stream, elf.structs, loads, *dynamic)
    # the two version tables in the order they lie in the file: a deflated member is read forward
    if dyn.values.get("DT_VERDEF", 0) < dyn.values.get("DT_VERNEED", 0):
        defs = dyn.version_defs()
        needs = dyn.version_needs()
    else:
        needs = dyn.version_needs()
        defs = dyn.version_defs()
    sonames = dyn.strings_of("DT_SONAME")
    return ElfInfo(
        machine=machine,
        bits=bits,
        elf_type=elf_type,
        soname=sonames[0] if sonames else None,
        needed=tuple(dyn.strings_of("DT_NEEDED")),
        rpath=dyn.paths("DT_RPATH"),
        runpath=dyn.paths("DT_RUNPATH"),
        version_needs=needs,
        version_defs=defs,
    )
