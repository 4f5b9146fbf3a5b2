"""What a wheel holds, as values: its ELF members (what each needs from the loader) and the machine its
tags name. `scan_wheel` reads an open `WheelReader`; only the front of each library is read.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import IO

from stackctl.wheels.archive import Member, WheelMetadata, WheelReader, install_path
from stackctl.wheels.elf import ElfInfo


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

@dataclass(frozen=True)
class ElfMember:
    path: str  # in the archive
    installed: str  # relative to site-packages (see install_path)
    info: ElfInfo | None
    problem: str | None = None  # why `info` is None: "not an ELF file", "truncated ELF (...)"
    unread: bool = False  # listed by name only (see scan_wheel's read_elves)
    machine: str | None = None  # of a member listed by name whose header was read (see read_machines)

    def known_machine(self) -> str | None:
        return self.info.machine if self.info is not None else self.machine


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

    from stackctl.wheels.elf import NotElf, read_elf

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


def read_machines(reader: WheelReader, scan: WheelScan, paths: Collection[str]) -> WheelScan:
    """`scan` with the ELF header of each listed-by-name member in `paths` (archive paths) read.

    The header is the member's first 64 bytes: for a remote wheel one small range request per library,
    so the libraries a checked file resolved to are known to be for the right machine without reading
    their dynamic sections.
    """
    from stackctl.wheels.elf import NotElf, read_machine

    def one(e: ElfMember) -> ElfMember:
        if not e.unread or e.path not in paths:
            return e
        try:
            with reader.open(e.path) as stream:
                return replace(e, machine=read_machine(stream))
        except NotElf as exc:
            return replace(e, problem=str(exc))

    return replace(scan, elves=tuple(one(e) for e in scan.elves))
