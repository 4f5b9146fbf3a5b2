"""What reading a wheel found (its members and every library's dynamic information), kept per wheel
sha256 so that a second `abi` of the same lock reads no wheel bytes at all.

A wheel's sha256 names its bytes, so the facts never go stale; the file's `reader` field names the reader
that wrote them, and facts of another reader are read again. Entries are written atomically; a torn or
foreign file is a miss, never an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stackctl.base.jsonout import to_jsonable
from stackctl.wheels.archive import Member, WheelMetadata
from stackctl.wheels.elf import ElfInfo, VersionNeed
from stackctl.wheels.scan import ElfMember, WheelScan

# what wrote the facts: a change to what the scan reads or how gives another number, and old facts are misses
READER = 2


def facts_dir() -> Path:
    from stackctl.index.cache import default_cache_dir

    return default_cache_dir().parent / "abi-facts"


def _path(root: Path, sha256: str, full: bool) -> Path:
    return root / f"{sha256.removeprefix('sha256:').lower()}.{'full' if full else 'listed'}.json"


def load_facts(sha256: str, full: bool, root: Path | None = None) -> tuple[WheelScan, str] | None:
    """The scan kept for this wheel (libraries read, or listed by name), and how its bytes were verified."""
    try:
        d = json.loads(_path(root or facts_dir(), sha256, full).read_text(encoding="utf-8"))
        if d.get("reader") != READER:
            return None
        return _scan(d["scan"]), str(d["verified"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_facts(sha256: str, full: bool, scan: WheelScan, verified: str, root: Path | None = None) -> None:
    from stackctl.base.files import write_atomic

    path = _path(root or facts_dir(), sha256, full)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"reader": READER, "verified": verified, "scan": to_jsonable(scan)}))
    except OSError:
        pass  # a cache that cannot be written is only a miss next time


def _scan(d: dict[str, Any]) -> WheelScan:
    meta = d.get("metadata")
    return WheelScan(
        d["filename"], d["name"], d["version"], tuple(d["platforms"]),
        tuple(Member(**m) for m in d["members"]),
        tuple(_elf(e) for e in d["elves"]),
        WheelMetadata(meta["name"], meta["version"], tuple(meta["requires_dist"]), meta["requires_python"])
        if meta else None,
    )


def _elf(e: dict[str, Any]) -> ElfMember:
    i = e.get("info")
    info = None if i is None else ElfInfo(
        i["machine"], i["bits"], i["elf_type"], i["soname"], tuple(i["needed"]), tuple(i["rpath"]),
        tuple(i["runpath"]), tuple(VersionNeed(v["library"], tuple(v["versions"])) for v in i["version_needs"]),
        tuple(i["version_defs"]))
    return ElfMember(e["path"], e["installed"], info, e.get("problem"), bool(e.get("unread")), e.get("machine"))
