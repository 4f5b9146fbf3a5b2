"""The lock: what `resolve` proved about every pin, per target, and the closure a real resolver chose.

A lock is JSON with sorted keys and a fixed order of entries, so two locks diff line by line in review.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.version import InvalidVersion

from stackctl.base.bounded import too_large
from stackctl.base.files import unsafe_component, write_atomic
from stackctl.base.jsonout import to_jsonable
from stackctl.errors import CheckFailed, InputError
from stackctl.profile.locate import StackRef, profile_file
from stackctl.profile.model import Stack
from stackctl.profile.versions import parse_version

LOCK_FORMAT = 1
DIGEST_KEY = "lock_digest"  # the lock file's own digest of its content: `Lock.digest()`


@dataclass(frozen=True)
class LockedFile:
    target: str  # "cp310-linux_x86_64"
    filename: str
    url: str  # never carries credentials
    sha256: str
    size: int | None = None
    upload_time: str | None = None  # ISO 8601, UTC
    upload_time_source: str = "none"  # "index" (PEP 700) | "last-modified" | "none"
    yanked: bool = False
    yanked_reason: str | None = None
    requires_python: str | None = None
    requires_dist: tuple[str, ...] | None = None  # None: unknown; (): the wheel declares none
    # True: stackctl downloaded the whole file and its sha256 matched; False: the index's word for it
    sha256_verified: bool = False


@dataclass(frozen=True)
class LockedPin:
    name: str
    version: str
    index: str
    files: tuple[LockedFile, ...]
    newest_in_line: str | None = None
    newest_upload_time: str | None = None
    other_lines: tuple[str, ...] = ()  # newer versions of another line (platform, local family)


@dataclass(frozen=True)
class ClosureEntry:
    """A distribution the resolver added under the pins, for one target."""

    target: str
    name: str
    version: str
    file: LockedFile | None = None
    hashes: tuple[str, ...] = ()  # "sha256:..." as a requirement file's --hash takes them


@dataclass(frozen=True)
class TrainReport:
    train: str
    members: tuple[str, ...]
    earliest: str | None
    latest: str | None
    spread_seconds: float | None
    trailing: tuple[str, ...] = ()


@dataclass(frozen=True)
class IndexOverride:
    """An index the lock was resolved from at a URL other than the profile's (or pip's), and who said so."""

    index: str
    url: str  # never carries credentials
    source: str  # "--index NAME" or the environment variable


@dataclass(frozen=True)
class Lock:
    stack: str
    profile_digest: str
    pins: tuple[LockedPin, ...]
    closure: tuple[ClosureEntry, ...] = ()
    trains: tuple[TrainReport, ...] = ()
    warnings: tuple[str, ...] = ()
    format: int = LOCK_FORMAT
    overrides: tuple[IndexOverride, ...] = ()

    def override_warning(self) -> str | None:
        """What `check` and `build` say about a lock made through an override: its files come from elsewhere
        than the profile says, and a build or a verify elsewhere may not find them."""
        if not self.overrides:
            return None
        said = "; ".join(f"{o.index} at {o.url} ({o.source})" for o in self.overrides)
        return (f"the lock for {self.stack} was resolved through an index override: {said}; "
                "resolve again without it for a lock of the profile's own indexes")

    def pin(self, name: str) -> LockedPin | None:
        from packaging.utils import canonicalize_name

        key = canonicalize_name(name)
        return next((p for p in self.pins if canonicalize_name(p.name) == key), None)

    def wheels_for(self, target: str) -> tuple[LockedFile, ...]:
        """Every wheel an install for `target` needs: the pins' files, then the closure's."""
        pinned = [f for p in self.pins for f in p.files if f.target == target]
        extra = [c.file for c in self.closure if c.target == target and c.file is not None]
        return tuple(pinned + extra)

    def digest(self) -> str:
        """What the lock pins, as evidence (ABI, build, publication records, image labels) names it, and as the
        lock file states it (`lock_digest`): every pin, file URL, sha256, size and closure entry. Whether
        stackctl hashed a file itself (`sha256_verified`) is left out: `resolve --verify` checks the pinned
        bytes and changes none of them, so it must not make the evidence of this lock stale."""
        def unflagged(f: LockedFile) -> LockedFile:
            return replace(f, sha256_verified=False) if f.sha256_verified else f

        pinned = replace(self, pins=tuple(replace(p, files=tuple(unflagged(f) for f in p.files)) for p in self.pins),
                         closure=tuple(replace(c, file=unflagged(c.file)) if c.file else c for c in self.closure))
        return "sha256:" + hashlib.sha256(_text(to_jsonable(pinned)).encode()).hexdigest()

    def index_origins(self) -> dict[str, str]:
        """Index name → the origin (`scheme://host[:port]/`) its pins' files were locked from."""
        from urllib.parse import urlsplit

        out: dict[str, str] = {}
        for p in self.pins:
            for f in p.files:
                u = urlsplit(f.url)
                out.setdefault(p.index, f"{u.scheme}://{u.netloc}/")
        return out

    def made_from(self, stack: Stack) -> bool:
        """Whether `resolve` made this lock from exactly this profile: its name and effective content."""
        return self.stack == stack.name and self.profile_digest == stack.digest()

    def require_made_from(self, stack: Stack) -> None:
        """What every step that installs or exports from a lock insists on."""
        if not self.made_from(stack):
            raise CheckFailed(f"the lock for {stack.name} was made from another version of the profile",
                              hint="run `stackctl resolve` again so the lock matches the profile")


def lock_summary(lock: Lock, path: Path | None) -> dict[str, Any]:
    """What `resolve --json` reports: one entry per locked file with its pin's fields beside it (the same
    fields as the lock's own, taken from its dataclasses), the trains, warnings and the closure."""
    files = [{"name": p.name, "version": p.version, "index": p.index, **to_jsonable(f),
              "newest_in_line": p.newest_in_line, "newest_upload_time": p.newest_upload_time,
              "other_lines": list(p.other_lines)}
             for p in lock.pins for f in p.files]
    return {"stack": lock.stack, "lock": str(path) if path else None, "profile_digest": lock.profile_digest,
            "overrides": to_jsonable(lock.overrides),
            "files": files, "trains": to_jsonable(lock.trains), "warnings": list(lock.warnings),
            "closure": [{"target": c.target, "name": c.name, "version": c.version,
                         "filename": c.file.filename if c.file else None, "hashes": list(c.hashes)}
                        for c in lock.closure]}


@dataclass(frozen=True)
class LockStatus:
    """`stackctl lock`: whether the lock was made from the profile as it is now."""

    lock: str
    stack: str
    current: bool
    profile_digest: str
    lock_digest: str
    pins: int
    closure: int


def lock_status(ref: StackRef, path: Path, *, check: bool = False) -> LockStatus:
    """The lock at `path` against the stack `ref` names; with `check`, a lock made from another profile fails. A
    missing lock, or one edited by hand, fails as `check` fails it (exit 1): the lock is what is checked, not an
    input of the check."""
    stack, profile_arg = ref.stack, ref.arg
    if not Path(path).exists():
        raise CheckFailed(missing_lock(path, profile_arg or stack.name))
    try:
        lk = read_lock(path, profile_arg or stack.name)
    except EditedLock as exc:
        raise CheckFailed(str(exc)) from None
    current = lk.made_from(stack)
    if check and not current:
        raise CheckFailed(f"{path} was made from another version of {stack.name} "
                          f"(lock {lk.profile_digest[:19]}, profile {stack.digest()[:19]})",
                          hint=f"run `stackctl resolve {profile_arg or stack.name}` and commit the lock")
    return LockStatus(str(path), lk.stack, current, lk.profile_digest, lk.digest(), len(lk.pins), len(lk.closure))


def missing_lock(path: str | Path, profile_arg: str) -> str:
    return f"{path}: no such lock; run `stackctl resolve {profile_arg}` first"


def dumps(lock: Lock) -> str:
    """The lock file's text: the lock and, beside it, its own digest (`lock_digest`), which every reader but
    `diff` recomputes, so a lock edited after `resolve` wrote it is refused instead of trusted."""
    return _text({**to_jsonable(lock), DIGEST_KEY: lock.digest()})


def _text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class EditedLock(InputError):
    """A lock file whose content is not what its `lock_digest` covers (edited after `resolve` wrote it), or one
    that states no digest (written before locks carried one): nothing in it can be trusted until resolved again.
    `check` and `lock --check` report it as a failed check; every command that installs from it, as bad input."""


# The lock's schema, checked before any value is used: every field's type, and the names that become file
# names or requirement lines (a number where a name belongs, a `../` in a file name) refused as they enter.
_OPT_STR: tuple[type, ...] = (str, type(None))
_STRS = ("strings", str)
_FILE_FIELDS: dict[str, Any] = {
    "target": str, "filename": "filename", "url": "url", "sha256": "sha256", "size": (int, type(None)),
    "upload_time": _OPT_STR, "upload_time_source": str, "yanked": bool, "yanked_reason": _OPT_STR,
    "requires_python": _OPT_STR, "requires_dist": ("strings", str, "or null"), "sha256_verified": bool,
}
_PIN_FIELDS: dict[str, Any] = {
    "name": "name", "version": "version", "index": str, "files": ("tables", _FILE_FIELDS),
    "newest_in_line": ("version", "or null"), "newest_upload_time": _OPT_STR, "other_lines": _STRS,
}
_CLOSURE_FIELDS: dict[str, Any] = {
    "target": str, "name": "name", "version": "version", "file": (_FILE_FIELDS, "or null"), "hashes": _STRS,
}
_TRAIN_FIELDS: dict[str, Any] = {
    "train": str, "members": _STRS, "earliest": _OPT_STR, "latest": _OPT_STR,
    "spread_seconds": (int, float, type(None)), "trailing": _STRS,
}
_OVERRIDE_FIELDS: dict[str, Any] = {"index": str, "url": "url", "source": str}
_LOCK_FIELDS: dict[str, Any] = {
    "format": int, "stack": str, "profile_digest": str, "pins": ("tables", _PIN_FIELDS),
    "closure": ("tables", _CLOSURE_FIELDS), "trains": ("tables", _TRAIN_FIELDS), "warnings": _STRS,
    "overrides": ("tables", _OVERRIDE_FIELDS),
}
_REQUIRED = {"stack", "profile_digest", "pins", "name", "version", "index", "files", "target", "filename",
             "url", "sha256", "train", "members", "earliest", "latest", "spread_seconds", "source"}
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _url_problem(value: Any) -> str | None:
    """Why a lock's file URL is not one stackctl may fetch. A lock arrives in a pull request under review: a
    `file://` URL would read any local file, and a URL that does not parse fails every command that uses it."""
    if not isinstance(value, str):
        return f"must be str, not {type(value).__name__}"
    shown = repr(value[:120])
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  raises on a port that is not one
    except ValueError as exc:
        return f"{shown} is not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{shown} is not an http(s) URL"
    if parts.username is not None or parts.password is not None:
        return "a URL with credentials in it; a lock never carries them"
    if any(c in value for c in "\0\r\n\t "):
        return f"{shown} has whitespace or a control character in it"
    return None


def _check(value: Any, spec: Any, where: str) -> str | None:
    """What is wrong with `value` against `spec` (see the tables above), or None."""
    if spec == "name":
        ok = isinstance(value, str) and _NAME.fullmatch(value) is not None
        return None if ok else f"{where}: {str(value)[:80]!r} is not a distribution name"
    if spec == "version":
        try:
            parse_version(value if isinstance(value, str) else "!")
        except InvalidVersion:
            return f"{where}: {str(value)[:80]!r} is not a PEP 440 version"
        return None
    if spec == "sha256":
        return None if isinstance(value, str) and _SHA256.fullmatch(value) else f"{where}: not a hex sha256"
    if spec == "url":
        why = _url_problem(value)
        return f"{where}: {why}" if why else None
    if spec == "filename":
        why = unsafe_component(value)
        return f"{where}: {why}" if why else None
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return f"{where}: must be an object, not {type(value).__name__}"
        for key in spec.keys() & _REQUIRED:
            if key not in value:
                return f"{where}: no {key!r} entry"
        for key, sub in value.items():
            if key not in spec:
                return f"{where}: unknown entry {str(key)[:40]!r}"
            if (why := _check(sub, spec[key], f"{where}.{key}")) is not None:
                return why
        return None
    if isinstance(spec, tuple) and spec and spec[-1] == "or null":
        return None if value is None else _check(value, spec[0] if len(spec) == 2 else spec[:-1], where)
    if isinstance(spec, tuple) and spec and spec[0] in ("tables", "strings"):
        if not isinstance(value, list):
            return f"{where}: must be a list, not {type(value).__name__}"
        for i, item in enumerate(value):
            if (why := _check(item, spec[1], f"{where}[{i}]")) is not None:
                return why
        return None
    types = spec if isinstance(spec, tuple) else (spec,)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        return f"{where}: must be {' or '.join(t.__name__ for t in types)}, not {type(value).__name__}"
    return None


def _file(d: dict[str, Any]) -> LockedFile:
    rd = d.get("requires_dist")
    return LockedFile(**{**d, "requires_dist": tuple(rd) if rd is not None else None})


def loads(text: str, origin: str = "lock", *, sealed: bool = True) -> Lock:
    """The lock `text` holds, checked against its schema; with `sealed` (every reader but `diff`, which shows
    what an edit changed), its `lock_digest` must be its content's: `EditedLock` otherwise."""
    if (size := too_large(text)) is not None:
        raise InputError(f"{origin}: not a stackctl lock ({size})")
    try:
        d = json.loads(text)
    except RecursionError:
        raise InputError(f"{origin}: not a stackctl lock (JSON nested too deeply)") from None
    except ValueError as exc:
        raise InputError(f"{origin}: not a stackctl lock ({type(exc).__name__}: {exc})") from None
    if not isinstance(d, dict):
        raise InputError(f"{origin}: not a stackctl lock (a JSON {type(d).__name__}, not an object)")
    if d.get("format") != LOCK_FORMAT:
        raise InputError(f"{origin}: lock format {str(d.get('format'))[:20]!r} is not {LOCK_FORMAT}; re-run resolve")
    stated = d.pop(DIGEST_KEY, None)
    if (why := _check(d, _LOCK_FIELDS, "lock")) is not None:
        raise InputError(f"{origin}: not a stackctl lock ({why})")
    lock = Lock(
        stack=d["stack"],
        profile_digest=d["profile_digest"],
        pins=tuple(
            LockedPin(**{**p, "files": tuple(_file(f) for f in p["files"]),
                         "other_lines": tuple(p.get("other_lines", ()))})
            for p in d["pins"]
        ),
        closure=tuple(
            ClosureEntry(**{**c, "file": _file(c["file"]) if c.get("file") else None,
                            "hashes": tuple(c.get("hashes", ()))})
            for c in d.get("closure", ())
        ),
        trains=tuple(TrainReport(**{**t, "members": tuple(t["members"]), "trailing": tuple(t.get("trailing", ()))})
                     for t in d.get("trains", ())),
        warnings=tuple(d.get("warnings", ())),
        overrides=tuple(IndexOverride(**o) for o in d.get("overrides", ())),
    )
    if sealed and (why := _unsealed(stated, lock)) is not None:
        raise EditedLock(f"{origin}: {why}; resolve it again")
    return lock


def _unsealed(stated: Any, lock: Lock) -> str | None:
    """Why the digest a lock file states does not vouch for its content, or None when it does."""
    if stated is None:
        return (f"states no {DIGEST_KEY} (written by a stackctl from before locks carried one), so an edit by "
                "hand cannot be told from resolve's work")
    actual = lock.digest()
    if stated != actual:
        shown = f"says {stated[:19]}…" if isinstance(stated, str) else f"is {str(stated)[:19]}, not a digest"
        return (f"edited by hand since `stackctl resolve` wrote it (its content's digest is {actual[:19]}…, its "
                f"{DIGEST_KEY} {shown})")
    return None


def read_lock(path: str | Path, profile_arg: str | None = None, *, sealed: bool = True) -> Lock:
    """The lock at `path`; a missing one says which resolve makes it: of `profile_arg` when the caller knows the
    profile, else of the profile beside the lock (where resolve writes it), as every command says it; so does
    one edited by hand (`EditedLock`)."""
    p = Path(path)
    beside = p.with_suffix(".toml")

    def named() -> str | None:
        return profile_arg or (str(beside) if p.suffix == ".lock" and beside.is_file() else None)

    try:
        return loads(p.read_text(encoding="utf-8"), str(p), sealed=sealed)
    except FileNotFoundError:
        said = named()
        raise InputError(missing_lock(p, said) if said else f"{p}: no such lock; run `stackctl resolve PROFILE` "
                         "first") from None
    except EditedLock as exc:
        raise EditedLock(f"{exc}: `stackctl resolve {named() or 'PROFILE'}`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read the lock ({getattr(exc, 'strerror', None) or exc})") from None


def write_lock(path: str | Path, lock: Lock) -> bool:
    """Write the lock atomically; a lock that already holds exactly these bytes is left as it is (a warm run
    that proved nothing new neither rewrites it nor touches its time). True when it was written."""
    data = dumps(lock).encode("utf-8")
    try:
        if Path(path).read_bytes() == data:
            return False
    except OSError:
        pass  # missing or unreadable: written below, where a real problem is reported
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the lock ({exc.strerror or exc})") from None
    return True


def lock_path(profile: str | StackRef, explicit: Path | None = None) -> Path:
    """The one rule for where a stack's lock is: `--lock` when given, else the `.lock` beside the profile in
    the working tree (for `PATH@GITREV`, beside PATH; for a bare stack name, `stacks/NAME.lock`)."""
    if explicit is not None:
        return explicit
    return (profile.file if isinstance(profile, StackRef) else profile_file(profile)).with_suffix(".lock")


def is_lock_ref(spec: str) -> bool:
    """`x.lock` or `x.lock@REV`: what `stackctl diff` hands to the lock diff."""
    return spec.endswith(".lock") or spec.rpartition("@")[0].endswith(".lock")


def read_lock_ref(spec: str) -> Lock:
    """A lock file, or `PATH.lock@GITREV` read from git, for `diff`: as it is, an edit by hand included (what it
    changed is what the diff is for)."""
    from stackctl.profile.sources import split_ref

    if spec.endswith(".lock"):
        return read_lock(spec, sealed=False)
    source, name = split_ref(spec)
    return loads(source.read(name), source.display(name), sealed=False)
