"""The base image's library inventory: what its dynamic loader would find, and which symbol versions its
libc and libstdc++ define. Collected once through the Docker engine (`stackctl.engine.inventory`), saved as
JSON, read by `abi` without one.

The file (`stackctl inventory IMAGE --out FILE`, referenced by a profile's `[abi] inventory = "FILE"`):

    {"format": 1, "image": "stackctl-base:bookworm", "image_id": "sha256:...", "arch": "x86_64",
     "search_dirs": ["/usr/local/lib", "/lib/x86_64-linux-gnu", ...],
     "libraries": [{"soname": "libc.so.6", "path": "/lib/x86_64-linux-gnu/libc.so.6", "arch": "x86_64"}, ...],
     "versions": {"libc.so.6": ["GLIBC_2.2.5", ..., "GLIBC_2.36"], "libstdc++.so.6": ["GLIBCXX_3.4", ...]},
     "glibc": "2.36", "glibcxx": "3.4.30", "cxxabi": "1.3.13", "ld_library_path": ["/usr/local/musa/lib"]}

`ld_library_path` (optional) is the image's LD_LIBRARY_PATH, which the loader searches after RPATH.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackctl.base.files import write_atomic
from stackctl.errors import InputError
from stackctl.profile.versions import too_long_number

if TYPE_CHECKING:
    from packaging.version import Version

INVENTORY_FORMAT = 1

# The symbol-version families a ceiling is kept for: glibc's, libstdc++'s two, libgcc_s's.
FAMILIES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC")

# The libraries whose version definitions set the ceiling a wheel may require.
VERSIONED_LIBRARIES = ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1")

_LDCONFIG_ARCH = {"x86-64": "x86_64", "AArch64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x",
                  "riscv64": "riscv64"}
_VERSION_NAME = re.compile(r"([A-Z][A-Z0-9]*?)_(\d+(?:\.\d+)*)")


@dataclass(frozen=True)
class Library:
    soname: str
    path: str
    arch: str | None = None


@dataclass(frozen=True)
class Inventory:
    image: str
    image_id: str
    arch: str
    search_dirs: tuple[str, ...]
    libraries: tuple[Library, ...]
    versions: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (soname, version definitions)
    format: int = INVENTORY_FORMAT
    ld_library_path: tuple[str, ...] = ()  # the image's LD_LIBRARY_PATH, in order

    def find(self, name: str) -> Library | None:
        """A library the loader would find by this name (its SONAME or its file name)."""
        same_arch = [lib for lib in self.libraries if lib.arch in (None, self.arch)]
        return next((lib for lib in same_arch if lib.soname == name), None) or next(
            (lib for lib in same_arch if posixpath.basename(lib.path) == name), None)

    def find_path(self, path: str) -> Library | None:
        return next((lib for lib in self.libraries if lib.path == path), None)

    def defs(self, soname: str) -> tuple[str, ...] | None:
        return next((v for s, v in self.versions if s == soname), None)

    def ceiling(self, family: str) -> str | None:
        """The highest numbered version of `family` (GLIBC, GLIBCXX, CXXABI, GCC) the image defines."""
        found = [v for _, defs in self.versions for v in defs
                 if (sv := split_version(v)) is not None and sv[0] == family]
        return highest(found)


def split_version(name: str) -> tuple[str, Version] | None:
    """"GLIBCXX_3.4.30" -> ("GLIBCXX", Version("3.4.30")); None for GLIBC_PRIVATE and the like."""
    from packaging.version import Version

    m = _VERSION_NAME.fullmatch(name)
    if m is None or too_long_number(name):  # a crafted ELF's version name is no version at all
        return None
    return m.group(1), Version(m.group(2))


def highest(names: list[str] | tuple[str, ...]) -> str | None:
    keyed = [(sv[1], n) for n in names if (sv := split_version(n))]
    return max(keyed)[1] if keyed else None


# --- the file ------------------------------------------------------------------------------------

def dumps(inv: Inventory) -> str:
    d: dict[str, Any] = {
        "format": inv.format, "image": inv.image, "image_id": inv.image_id, "arch": inv.arch,
        "search_dirs": list(inv.search_dirs),
        "libraries": [{"soname": lib.soname, "path": lib.path, "arch": lib.arch} for lib in inv.libraries],
        "versions": {s: list(v) for s, v in inv.versions},
    }
    if inv.ld_library_path:
        d["ld_library_path"] = list(inv.ld_library_path)
    for key, family in (("glibc", "GLIBC"), ("glibcxx", "GLIBCXX"), ("cxxabi", "CXXABI")):
        top = inv.ceiling(family)
        d[key] = top.split("_", 1)[1] if top else None
    return json.dumps(d, indent=2, sort_keys=True) + "\n"


def loads(text: str, origin: str = "inventory") -> Inventory:
    try:
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("format") != INVENTORY_FORMAT:
            found = d.get("format") if isinstance(d, dict) else None
            what = "no format field" if found is None else f"format {found!r} is not {INVENTORY_FORMAT}"
            raise InputError(f"{origin}: not a stackctl inventory ({what}); "
                             f"re-run `stackctl inventory IMAGE --out {origin}`")
        return Inventory(
            image=str(d["image"]), image_id=str(d.get("image_id", "")), arch=str(d["arch"]),
            search_dirs=tuple(str(x) for x in d.get("search_dirs", ())),
            libraries=tuple(Library(str(x["soname"]), str(x["path"]), x.get("arch")) for x in d["libraries"]),
            versions=tuple((str(s), tuple(str(v) for v in vs)) for s, vs in sorted(d.get("versions", {}).items())),
            ld_library_path=tuple(str(x) for x in d.get("ld_library_path", ())),
        )
    except InputError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{origin}: not a stackctl inventory ({type(exc).__name__}: {exc})") from None


def read_inventory(path: str | Path) -> Inventory:
    p = Path(path)
    try:
        return loads(p.read_text(encoding="utf-8"), str(p))
    except FileNotFoundError:
        raise InputError(f"{p}: no such inventory; make one with `stackctl inventory IMAGE --out {p}`") from None
    except (UnicodeDecodeError, IsADirectoryError) as exc:
        raise InputError(f"{p}: not a stackctl inventory ({exc})") from None


def write_inventory(path: str | Path, inv: Inventory) -> None:
    try:
        write_atomic(path, dumps(inv))
    except OSError as exc:
        raise InputError(f"{path}: cannot write the inventory: {exc.strerror or exc}") from None


# --- parsing what the image's ldconfig prints ------------------------------------------------------

def parse_ldconfig_cache(text: str) -> tuple[Library, ...]:
    """`ldconfig -p`: "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1"."""
    out = []
    for line in text.splitlines():
        m = re.match(r"\s+(\S+) \(([^)]*)\)(?: OS ABI: [^=]*)? => (\S+)\s*$", line)
        if m:
            flags = m.group(2).split(",")
            arch = next((_LDCONFIG_ARCH[f] for f in flags if f in _LDCONFIG_ARCH), None)
            if arch is None and flags == ["libc6"]:
                arch = "i686"  # ldconfig marks 32-bit x86 libraries with the bare libc6 flag
            out.append(Library(m.group(1), m.group(3), arch))
    return tuple(out)


def parse_ldconfig_dirs(text: str) -> tuple[tuple[str, ...], tuple[Library, ...]]:
    """`ldconfig -v -N -X`: "/dir: (from ...)" lines, then "\tsoname -> file" lines under each."""
    dirs: list[str] = []
    libs: list[Library] = []
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("/") and ":" in line:
            current = line.split(":", 1)[0]
            if current not in dirs:
                dirs.append(current)
        elif current is not None and (m := re.match(r"\s+(\S+) -> (\S+)", line)):
            libs.append(Library(m.group(1), posixpath.join(current, m.group(1))))
    return tuple(dirs), tuple(libs)


def merge(image: str, image_id: str, arch: str, cache: tuple[Library, ...], dirs: tuple[str, ...],
          scanned: tuple[Library, ...], versions: dict[str, tuple[str, ...]],
          first: tuple[str, ...] = ()) -> Inventory:
    """One inventory in the loader's search order: libraries in `first` (LD_LIBRARY_PATH) directories,
    then the cache's, then the rest of the directory scan. A library is listed once."""
    ordered = [lib for lib in scanned if posixpath.dirname(lib.path) in first] + list(cache) + list(scanned)
    seen: set[tuple[str, str]] = set()
    libs = []
    for lib in ordered:
        if (lib.soname, lib.path) not in seen:
            seen.add((lib.soname, lib.path))
            libs.append(lib if lib.arch else Library(lib.soname, lib.path, arch))
    return Inventory(image, image_id, arch, dirs, tuple(libs), tuple(sorted(versions.items())),
                     ld_library_path=first)
