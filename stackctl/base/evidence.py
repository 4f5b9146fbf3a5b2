"""Evidence records: what a check found, for `stackctl report` to quote later without running it again.

A record is one JSON object: the kind of check, the command line that produced it, when, the digests of
the lock and profiles it was made for (a report shows a record made for another lock as stale), and the
check's own result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackctl.base.files import write_atomic
from stackctl.base.jsonout import to_jsonable
from stackctl.base.times import now_iso
from stackctl.errors import InputError

RECORD_DIR = Path("build")  # where build writes its record, and where every check records by default
WHEEL_DIFFS = "wheel-diffs.json"  # wheel-diff knows wheels, not stacks: one record for all, keyed by new wheel


def default_record(kind: str, stack: str | None, record_dir: Path = RECORD_DIR) -> Path:
    """Where a check records its evidence unless told otherwise, and where `report` looks for it."""
    if kind == "wheel-diff" and stack is None:
        return record_dir / WHEEL_DIFFS
    return record_dir / f"{stack}.{kind}.json"


@dataclass(frozen=True)
class Recorded:
    """Where `record_to` put a check's evidence (None: nowhere), and why not where it should have gone: a
    warning for the check to show (its own result stands)."""

    at: Path | None = None
    warning: str | None = None

    @property
    def warnings(self) -> tuple[str, ...]:
        return (self.warning,) if self.warning else ()


def record_to(explicit: Path | None, no_record: bool, kind: str, stack: str | None,
              write: Callable[[Path], object]) -> Recorded:
    """Record a check's evidence: at `explicit` when named (a failure there is an error), else where report
    looks for it (a failure there is a warning, returned: the check's own result stands), or nowhere."""
    from stackctl.errors import StackctlError

    if no_record:
        return Recorded()
    if explicit is not None:
        from stackctl.base.files import check_output

        check_output(explicit, "--record")
        write(explicit)
        return Recorded(explicit)
    at = default_record(kind, stack)
    try:
        write(at)
    except StackctlError as exc:
        return Recorded(None, f"not recorded for `stackctl report` ({exc}); --no-record skips it")
    return Recorded(at)


@dataclass(frozen=True)
class Evidence:
    kind: str  # "abi" | "scan" | "wheel-diff"
    command: str
    time: str  # ISO 8601 UTC
    stack: str
    lock_digest: str | None
    profile_digests: tuple[str, ...]
    result: Any  # the check's JSON report


def write_evidence(path: Path, kind: str, stack: str, result: Any, *, command: str, lock_digest: str | None = None,
                   profile_digests: tuple[str, ...] = ()) -> Evidence:
    ev = Evidence(kind, command, now_iso(), stack, lock_digest, profile_digests,
                  to_jsonable(result))
    try:
        write_atomic(path, json.dumps(to_jsonable(ev), indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot write the record ({exc.strerror or exc})") from None
    return ev


def read_record(path: Path, what: str) -> dict[str, Any] | None:
    """A JSON object written by an earlier run; None when the file is not there. Anything else is input
    the user must look at (exit 2), never evidence quietly skipped."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not a {what} ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a {what}")
    return data


def read_evidence(path: Path, kind: str) -> Evidence | None:
    """The record at `path`, None when there is none; a file that is not a record of `kind` is an input error."""
    data = read_record(path, "stackctl record")
    if data is None:
        return None
    if data.get("kind") != kind:
        raise InputError(f"{path}: not a {kind} record")
    try:
        return Evidence(kind, str(data["command"]), str(data["time"]), str(data["stack"]), data.get("lock_digest"),
                        tuple(data.get("profile_digests", ())), data.get("result"))
    except KeyError as exc:
        raise InputError(f"{path}: not a {kind} record (no {exc})") from None


def add_to_evidence(path: Path, kind: str, key: str, entry: dict[str, Any], *, command: str) -> Evidence:
    """Records of one kind that collect entries (a wheel diff per moved wheel): `entry` replaces the one
    with the same `key` value, the rest stay; the whole record is rewritten atomically."""
    old = read_evidence(path, kind)
    entries = [e for e in (old.result.get("entries", []) if old and isinstance(old.result, dict) else [])
               if isinstance(e, dict) and e.get("key") != key]
    entries.append({"key": key, "command": command, "time": now_iso(), **entry})
    return write_evidence(path, kind, old.stack if old else "", {"entries": entries}, command=command)
