"""What changed between two builds of a wheel: members by CRC and size, the dynamic section of changed
libraries, and the metadata a resolver reads. `diff_wheels` is pure: two `WheelScan`s in, a `WheelDiff` out;
`diff_wheel_files` reads the two wheels first.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from stackctl.abi.inventory import FAMILIES, highest, split_version
from stackctl.base.progress import Progress
from stackctl.wheels.archive import Limits, Member
from stackctl.wheels.elf import ElfInfo
from stackctl.wheels.scan import WheelScan
from stackctl.wheels.source import WheelOrigin


@dataclass(frozen=True)
class MemberChange:
    path: str
    size_before: int
    size_after: int
    crc_before: str
    crc_after: str


@dataclass(frozen=True)
class ElfChange:
    path: str
    needed_added: tuple[str, ...]
    needed_removed: tuple[str, ...]
    soname_before: str | None
    soname_after: str | None
    runpath_before: tuple[str, ...]
    runpath_after: tuple[str, ...]
    ceiling_before: tuple[str, ...]  # highest required version per family, e.g. ("GLIBC_2.17", ...)
    ceiling_after: tuple[str, ...]
    machine_before: str | None
    machine_after: str | None
    problem: str | None = None  # one side is not a readable ELF

    def tokens(self) -> list[str]:
        out = [f"+{n}" for n in self.needed_added] + [f"\u2212{n}" for n in self.needed_removed]
        if self.soname_before != self.soname_after:
            out.append(f"SONAME {self.soname_before or '(none)'}\u2192{self.soname_after or '(none)'}")
        if self.runpath_before != self.runpath_after:
            out.append(f"RUNPATH {':'.join(self.runpath_before) or '(none)'}\u2192"
                       f"{':'.join(self.runpath_after) or '(none)'}")
        before = {v.split("_", 1)[0]: v for v in self.ceiling_before}
        after = {v.split("_", 1)[0]: v for v in self.ceiling_after}
        for fam in FAMILIES:
            if before.get(fam) != after.get(fam):
                out.append(f"{before.get(fam) or '(no ' + fam + ')'}\u2192{after.get(fam) or '(no ' + fam + ')'}")
        if self.machine_before != self.machine_after:
            out.append(f"machine {self.machine_before}\u2192{self.machine_after}")
        if self.problem:
            out.append(self.problem)
        return out


@dataclass(frozen=True)
class WheelDiff:
    old: str
    new: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[MemberChange, ...]
    unchanged: int
    elf: tuple[ElfChange, ...]
    requires_dist_added: tuple[str, ...]
    requires_dist_removed: tuple[str, ...]
    requires_python_before: str | None
    requires_python_after: str | None
    summary: str


def _key(name: str) -> str:
    """Member names with the versioned .dist-info/.data directory made comparable across versions."""
    head, sep, rest = name.partition("/")
    if sep and head.endswith(".dist-info"):
        return f"<dist-info>/{rest}"
    if sep and head.endswith(".data"):
        return f"<data>/{rest}"
    return name


def _ceiling(info: ElfInfo | None) -> tuple[str, ...]:
    if info is None:
        return ()
    versions = [v for _, v in info.required_versions()]
    tops = [highest([v for v in versions if (s := split_version(v)) is not None and s[0] == fam])
            for fam in FAMILIES]
    return tuple(t for t in tops if t)


def diff_wheels(old: WheelScan, new: WheelScan) -> WheelDiff:
    a: dict[str, Member] = {_key(m.name): m for m in old.members if not m.is_dir}
    b: dict[str, Member] = {_key(m.name): m for m in new.members if not m.is_dir}
    added = tuple(sorted(set(b) - set(a)))
    removed = tuple(sorted(set(a) - set(b)))
    changed = tuple(
        MemberChange(k, a[k].size, b[k].size, f"{a[k].crc:08x}", f"{b[k].crc:08x}")
        for k in sorted(set(a) & set(b)) if (a[k].crc, a[k].size) != (b[k].crc, b[k].size)
    )
    unchanged = len(set(a) & set(b)) - len(changed)

    elf_a = {_key(e.path): e for e in old.elves}
    elf_b = {_key(e.path): e for e in new.elves}
    elf: list[ElfChange] = []
    for c in changed:
        ea, eb = elf_a.get(c.path), elf_b.get(c.path)
        if ea is None or eb is None:
            continue
        ia, ib = ea.info, eb.info
        problem = None
        if ia is None or ib is None:
            problem = "; ".join(p for p in (ea.problem and f"old: {ea.problem}", eb.problem and f"new: {eb.problem}")
                                if p)
        na, nb = (ia.needed if ia else ()), (ib.needed if ib else ())
        elf.append(ElfChange(
            path=c.path,
            needed_added=tuple(n for n in nb if n not in na),
            needed_removed=tuple(n for n in na if n not in nb),
            soname_before=ia.soname if ia else None, soname_after=ib.soname if ib else None,
            runpath_before=(ia.runpath or ia.rpath) if ia else (),
            runpath_after=(ib.runpath or ib.rpath) if ib else (),
            ceiling_before=_ceiling(ia), ceiling_after=_ceiling(ib),
            machine_before=ia.machine if ia else None, machine_after=ib.machine if ib else None,
            problem=problem,
        ))

    ma, mb = old.metadata, new.metadata
    rd_a = ma.requires_dist if ma else ()
    rd_b = mb.requires_dist if mb else ()
    rd_added = tuple(r for r in rd_b if r not in rd_a)
    rd_removed = tuple(r for r in rd_a if r not in rd_b)
    rp_a = ma.requires_python if ma else None
    rp_b = mb.requires_python if mb else None

    d = WheelDiff(old.filename, new.filename, added, removed, changed, unchanged, tuple(elf),
                  rd_added, rd_removed, rp_a, rp_b, "")
    return WheelDiff(**{**d.__dict__, "summary": summarize(d)})


def summarize(d: WheelDiff) -> str:
    """One line a reviewer can paste: Python sources, then the other members, then the metadata."""
    def py(k: str) -> bool:
        return k.endswith(".py") and not k.startswith("<dist-info>/")

    py_moved = [c.path for c in d.changed if py(c.path)] + [k for k in d.added + d.removed if py(k)]
    names = ", ".join(posixpath.basename(p) for p in py_moved[:5]) + (", ..." if len(py_moved) > 5 else "")
    parts = ["Python sources byte-identical" if not py_moved else
             f"1 Python source differs ({names})" if len(py_moved) == 1 else
             f"{len(py_moved)} Python sources differ ({names})"]
    elf = {e.path: e for e in d.elf}

    def describe(path: str, verb: str) -> str:
        e = elf.get(path)
        tokens = " ".join(e.tokens()) if e else ""
        return f"{posixpath.basename(path)} {verb}" + (f": {tokens}" if tokens else "")

    def other(k: str) -> bool:
        return not py(k) and not k.startswith("<dist-info>/")

    others = [describe(c.path, "differs") for c in d.changed if other(c.path)]
    others += [describe(k, "added") for k in d.added if other(k)]
    others += [describe(k, "removed") for k in d.removed if other(k)]
    # the dist-info's own members (METADATA, RECORD, ...) are said too: RECORD differs whenever any member does
    dist = [(verb, [k.removeprefix("<dist-info>/") for k in keys if k.startswith("<dist-info>/")])
            for verb, keys in (("differ", [c.path for c in d.changed]), ("added", d.added), ("removed", d.removed))]
    dist_said = [f"{', '.join(names)} {verb if verb != 'differ' or len(names) > 1 else 'differs'}"
                 for verb, names in dist if names]
    # "only" would deny what is listed beside it: said only when nothing else, dist-info included, differs
    if len(others) == 1:
        parts.append(f"{'besides them, ' if py_moved else '' if dist_said else 'only '}{others[0]}")
    elif others:
        parts.append(f"{len(others)} other members differ: " + "; ".join(others))
    elif not dist_said:
        parts.append("no other member differs")
    if dist_said:
        parts.append("dist-info " + "; ".join(dist_said))
    meta = [f"+{r}" for r in d.requires_dist_added] + [f"\u2212{r}" for r in d.requires_dist_removed]
    if meta:
        parts.append("Requires-Dist " + " ".join(meta))
    if d.requires_python_before != d.requires_python_after:
        parts.append(f"Requires-Python {d.requires_python_before or '(none)'}\u2192"
                     f"{d.requires_python_after or '(none)'}")
    return "; ".join(parts)


@dataclass(frozen=True)
class WheelDiffRun:
    """`stackctl wheel-diff`: the diff, what reading each wheel cost, and the rows a report quotes."""

    diff: WheelDiff
    origins: tuple[WheelOrigin, ...]
    rows: tuple[tuple[str, str, str, str, str], ...]  # member, size before, size after, crc before, crc after
    elf_rows: tuple[tuple[str, str], ...]  # library, dynamic section changes
    warnings: tuple[str, ...] = ()
    recorded: Path | None = None  # where it was recorded for `stackctl report`


def diff_wheel_files(old: str, new: str, limits: Limits, *, record: Path | None = None, no_record: bool = False,
                     command: str = "", progress: Progress | None = None) -> WheelDiffRun:
    """Read both wheels (files or URLs) and compare them; the diff is added (one entry per new wheel) to the
    evidence `stackctl report` reads (build/wheel-diffs.json, or `record`), unless `no_record`."""
    from stackctl.wheels.source import OpenedWheel

    scans, origins = [], []
    for n, location in enumerate((old, new), 1):
        with OpenedWheel(location, limits) as w:
            scans.append(w.scan(with_metadata=True))
            origins.append(w.origin())
        if progress:
            progress("reading wheels", n, 2)
    d = diff_wheels(scans[0], scans[1])
    rows = [(c.path, str(c.size_before), str(c.size_after), c.crc_before, c.crc_after) for c in d.changed]
    rows += [(k, "—", "added", "", "") for k in d.added] + [(k, "removed", "—", "", "") for k in d.removed]
    elf_rows = tuple((e.path, " ".join(e.tokens()) or "(dynamic section unchanged)") for e in d.elf)
    from stackctl.base.evidence import add_to_evidence, record_to
    from stackctl.base.jsonout import to_jsonable

    done = record_to(record, no_record, "wheel-diff", None, lambda at: add_to_evidence(
        at, "wheel-diff", d.new, {"diff": to_jsonable(d), "rows": to_jsonable(rows),
                                  "elf_rows": to_jsonable(elf_rows)}, command=command))
    return WheelDiffRun(d, tuple(origins), tuple(rows), elf_rows, done.warnings, done.at)
