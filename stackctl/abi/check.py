"""The DT_NEEDED closure of a stack: which library every needed entry resolves to, and the symbol-version
ceilings. Pure: scanned wheels, an inventory and allow globs in; an `AbiReport` out.

Resolution order for each needed library of a checked file, first hit wins:
  1. the file's RUNPATH (or RPATH when it has no RUNPATH) with `$ORIGIN` expanded at its install path,
     looked up among every wheel's files as installed and, for absolute directories, in the image;
  2. any wheel of the stack that installs a file with that SONAME or file name;
  3. the base image's library inventory;
  4. the allow list (globs for driver libraries that exist only on the host).
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from stackctl.abi.inventory import FAMILIES, Inventory, highest, split_version
from stackctl.wheels.scan import ElfMember, WheelScan


class Where(str, Enum):
    RPATH = "rpath"
    WHEEL = "wheel"
    IMAGE = "image"
    ALLOW = "allow"
    UNRESOLVED = "unresolved"


class Severity(str, Enum):
    ERROR = "error"  # fails the check
    WARNING = "warning"


@dataclass(frozen=True)
class StackWheel:
    scan: WheelScan
    check: bool  # its files are checked; every wheel provides
    requires_dist: tuple[str, ...] | None = None  # from the lock; None: the scan's metadata, if read


@dataclass(frozen=True)
class Resolution:
    wheel: str
    file: str  # install path of the file that needs the library
    needed: str
    where: Where
    detail: str  # "torch-...whl torch/lib/libc10.so", "/lib/x86_64-linux-gnu/libc.so.6", "libmusa*.so*"
    image_path: str | None = None  # set when the library found is the image's (directly or by RUNPATH)
    provider_wheel: str | None = None  # set when the library found is a wheel's file ...
    provider_path: str | None = None  # ... installed at this path


@dataclass(frozen=True)
class Finding:
    severity: Severity
    kind: str  # unresolved | ceiling | foreign-machine | bad-elf | not-elf
    wheel: str
    file: str
    message: str


@dataclass(frozen=True)
class Ceiling:
    family: str  # GLIBC | GLIBCXX | CXXABI | GCC
    required: str | None  # highest version any checked file requires
    required_by: str | None
    provided: str | None  # highest version the image defines (None without an inventory)


@dataclass(frozen=True)
class AbiReport:
    arch: str | None
    wheels: tuple[str, ...]
    checked_files: int
    resolutions: tuple[Resolution, ...]
    findings: tuple[Finding, ...]
    ceilings: tuple[Ceiling, ...]
    inventory: str | None  # the image the inventory describes

    @property
    def ok(self) -> bool:
        return not any(f.severity is Severity.ERROR for f in self.findings)

    def unresolved(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(library, every file that needs it) for each unresolved library."""
        by_lib: dict[str, list[str]] = {}
        for r in self.resolutions:
            if r.where is Where.UNRESOLVED:
                by_lib.setdefault(r.needed, []).append(f"{r.wheel}:{r.file}")
        return tuple((lib, tuple(files)) for lib, files in sorted(by_lib.items()))

    def failure(self) -> str | None:
        """One line naming everything that failed, or None when the check passed."""
        parts = [f"{lib} (needed by {', '.join(files)})" for lib, files in self.unresolved()]
        msg = f"unresolved: {'; '.join(parts)}" if parts else ""
        others = [f.message for f in self.findings if f.severity is Severity.ERROR and f.kind != "unresolved"]
        if others:
            msg = "; ".join(x for x in (msg, *others) if x)
        return msg or None


@dataclass(frozen=True)
class _Provider:
    wheel: str
    path: str  # install path
    soname: str | None


def expand_origin(entry: str, installed: str) -> str:
    """A RUNPATH/RPATH entry with `$ORIGIN` replaced by the directory the file installs into."""
    origin = posixpath.dirname(installed) or "."
    out = entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
    return out if out.startswith("/") else posixpath.normpath(out)


def check_abi(wheels: Sequence[StackWheel], inventory: Inventory | None = None, allow: Sequence[str] = (),
              arch: str | None = None) -> AbiReport:
    arch = arch or (inventory.arch if inventory else None) or next(
        (a for w in wheels if (a := w.scan.arch())), None)
    by_path: dict[str, _Provider] = {}
    by_name: dict[str, list[_Provider]] = {}
    findings: list[Finding] = []
    for w in wheels:
        wheel = w.scan.filename
        tagged = w.scan.arch()
        if arch and tagged and tagged != arch:
            findings.append(Finding(Severity.ERROR, "foreign-machine", wheel, "",
                                    f"{wheel} is tagged for {tagged}, not for this {arch} stack"))
        for e in w.scan.elves:
            machine = e.known_machine()
            if e.problem is not None or (e.info is None and not e.unread):
                continue  # a library the loader could not use provides nothing
            if arch and machine and machine != arch:
                if not w.check:  # a checked file of another machine is an error below
                    findings.append(Finding(Severity.WARNING, "foreign-machine", wheel, e.installed,
                                            f"{wheel}:{e.path} is a {machine} ELF in a {arch} stack; "
                                            "it provides nothing"))
                continue
            p = _Provider(wheel, e.installed, e.info.soname if e.info else None)
            by_path.setdefault(e.installed, p)
            for key in {posixpath.basename(e.installed), p.soname}:
                if key:
                    by_name.setdefault(key, []).append(p)

    resolutions: list[Resolution] = []
    top: dict[str, tuple[str, str]] = {}  # family -> (version, file)
    checked = 0
    for w in wheels:
        if not w.check:
            continue
        wheel = w.scan.filename
        for e in w.scan.elves:
            if e.unread:
                continue
            if e.info is None:
                not_elf = (e.problem or "").startswith("not an ELF")
                findings.append(Finding(Severity.WARNING if not_elf else Severity.ERROR,
                                        "not-elf" if not_elf else "bad-elf", wheel, e.installed,
                                        f"{wheel}:{e.path}: {e.problem}"))
                continue
            checked += 1
            if arch and e.info.machine != arch:
                findings.append(Finding(Severity.ERROR, "foreign-machine", wheel, e.installed,
                                        f"{wheel}:{e.path} is a {e.info.machine} ELF in a {arch} stack"))
            where_of: dict[str, Resolution] = {}
            for needed in e.info.needed:
                r = _resolve(wheel, e, needed, by_path, by_name, inventory, allow)
                where_of[needed] = r
                resolutions.append(r)
                if r.where is Where.UNRESOLVED:
                    findings.append(Finding(Severity.ERROR, "unresolved", wheel, e.installed,
                                            f"{needed} needed by {wheel}:{e.path} is not found"))
            for lib, version in e.info.required_versions():
                sv = split_version(version)
                if sv is None:
                    continue
                if sv[0] in FAMILIES and (sv[0] not in top or split_version(top[sv[0]][0]) < sv):  # type: ignore[operator]
                    top[sv[0]] = (version, f"{wheel}:{e.path}")
                f = _ceiling(wheel, e, lib, version, where_of.get(lib), inventory)
                if f is not None:
                    findings.append(f)

    findings += coupling(wheels, resolutions)
    ceilings = tuple(
        Ceiling(fam, top[fam][0] if fam in top else None, top[fam][1] if fam in top else None,
                inventory.ceiling(fam) if inventory else None)
        for fam in FAMILIES
    )
    return AbiReport(arch, tuple(w.scan.filename for w in wheels), checked, tuple(resolutions),
                     tuple(findings), ceilings, inventory.image if inventory else None)


def coupling(wheels: Sequence[StackWheel], resolutions: Sequence[Resolution]) -> list[Finding]:
    """A checked wheel whose libraries need another distribution's, with no Requires-Dist on it.

    deep_ep's extension needs libtorch_python.so from torch, yet deep_ep declares nothing: no resolver
    keeps the two in step, only the profile does. A wheel whose Requires-Dist is unknown is not judged.
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    by_file = {w.scan.filename: w for w in wheels}
    needs: dict[tuple[str, str], list[str]] = {}  # (wheel, provider distribution) → libraries
    for r in resolutions:
        if r.provider_wheel is None or r.provider_wheel == r.wheel or r.provider_wheel not in by_file:
            continue
        # the file name spells the distribution as it was built (torch_musa), which reads like the profile
        needs.setdefault((r.wheel, r.provider_wheel.split("-", 1)[0]), []).append(r.needed)
    out = []
    for (wheel, provider), libs in needs.items():
        w = by_file[wheel]
        declared = w.requires_dist
        if declared is None and w.scan.metadata is not None:
            declared = w.scan.metadata.requires_dist
        if declared is None:
            continue
        names = set()
        for req in declared:
            try:
                names.add(canonicalize_name(Requirement(req).name))
            except InvalidRequirement:
                continue
        if canonicalize_name(provider) in names or canonicalize_name(provider) == canonicalize_name(w.scan.name):
            continue
        what = "declares no Requires-Dist" if not declared else "declares no Requires-Dist on it"
        out.append(Finding(Severity.WARNING, "coupling", wheel, "",
                           f"{wheel.split('-', 1)[0]}: {wheel} needs {', '.join(sorted(set(libs)))} from {provider}, "
                           f"and {what}: no resolver guards that pin"))
    return out


def _resolve(wheel: str, e: ElfMember, needed: str, by_path: dict[str, _Provider],
             by_name: dict[str, list[_Provider]], inventory: Inventory | None, allow: Sequence[str]) -> Resolution:
    assert e.info is not None
    # The loader ignores RPATH when RUNPATH is present.
    search = e.info.runpath or e.info.rpath
    for entry in search:
        d = expand_origin(entry, e.installed)
        candidate = posixpath.normpath(posixpath.join(d, needed))
        if d.startswith("/"):
            if inventory is not None and inventory.find_path(candidate) is not None:
                return Resolution(wheel, e.installed, needed, Where.RPATH, f"{entry} → image {candidate}", candidate)
            continue
        p = by_path.get(candidate)
        if p is not None and p.path != e.installed:
            return Resolution(wheel, e.installed, needed, Where.RPATH, f"{entry} → {p.wheel} {p.path}",
                              provider_wheel=p.wheel, provider_path=p.path)
    providers = [p for p in by_name.get(needed, ()) if not (p.wheel == wheel and p.path == e.installed)]
    if providers:
        # Prefer the file's own wheel, then the first wheel in stack order.
        p = next((q for q in providers if q.wheel == wheel), providers[0])
        return Resolution(wheel, e.installed, needed, Where.WHEEL, f"{p.wheel} {p.path}", provider_wheel=p.wheel,
                          provider_path=p.path)
    if inventory is not None:
        lib = inventory.find(needed)
        if lib is not None:
            return Resolution(wheel, e.installed, needed, Where.IMAGE, lib.path, lib.path)
    for rule in allow:
        if fnmatch.fnmatchcase(needed, rule):
            return Resolution(wheel, e.installed, needed, Where.ALLOW, rule)
    return Resolution(wheel, e.installed, needed, Where.UNRESOLVED, "UNRESOLVED")


def _ceiling(wheel: str, e: ElfMember, lib: str, version: str, r: Resolution | None,
             inventory: Inventory | None) -> Finding | None:
    """A required symbol version the image's copy of `lib` does not define.

    Only a library found in the image is compared: a copy a wheel ships brings its own versions, and an
    allow rule names a library that comes from the host. The inventory holds the version definitions of
    libc, libm, libstdc++ and libgcc_s; for another image library (libpthread.so.0, libdl.so.2: glibc's
    too) a version of a known family is compared with the highest the image defines for that family.
    """
    if inventory is None or r is None or r.image_path is None:
        return None
    sv = split_version(version)
    family = sv[0] if sv else ""
    image_lib = inventory.find_path(r.image_path)
    defs = inventory.defs(image_lib.soname) if image_lib else None
    if defs is not None:
        if version in defs:
            return None
        top = highest([d for d in defs if (s := split_version(d)) is not None and s[0] == family])
    else:
        top = inventory.ceiling(family) if sv and family in FAMILIES else None
        top_v = split_version(top) if top else None
        if sv is None or top_v is None or sv[1] <= top_v[1]:
            return None  # not a family the image's versions speak for: nothing to compare with
    return Finding(Severity.ERROR, "ceiling", wheel, e.installed,
                   f"{wheel}:{e.path} requires {version} from {lib}; {inventory.image} provides up to "
                   f"{top or 'none of that family'}")
