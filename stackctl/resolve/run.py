"""`stackctl resolve` and `outdated` as one call: the client for this run's flags, the endpoints with their
overrides, the closure through uv, and the lock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackctl.base.progress import Progress
from stackctl.errors import CheckFailed, InputError
from stackctl.index.client import ClientOptions, IndexClient
from stackctl.index.config import IndexEndpoint
from stackctl.profile.locate import StackRef
from stackctl.profile.model import Stack
from stackctl.resolve.lock import Lock


def make_client(offline: bool = False, cache_dir: Path | None = None, no_cache: bool = False, timeout: float = 30.0,
                retries: int = 3, jobs: int = 16) -> IndexClient:
    """The index client for one run's network flags (`--offline`, `--cache-dir`, `--no-cache`, ...)."""
    from stackctl.index.cache import default_cache_dir

    if offline and no_cache:
        raise InputError("--offline needs the cache; drop --no-cache")
    if timeout <= 0 or retries < 0 or jobs < 1:
        raise InputError("--timeout must be > 0, --retries >= 0, --jobs >= 1")
    cache = None if no_cache else (cache_dir or default_cache_dir())
    return IndexClient(ClientOptions(cache_dir=cache, offline=offline, timeout=timeout, retries=retries,
                                     jobs=jobs))


def indexes_in_force(stack: Stack, overrides: Mapping[str, str] | None = None,
                     keep_in: Path | None = None) -> tuple[IndexEndpoint, ...]:
    """Each index of the stack at the URL this run uses, with where that URL came from (the profile, pip's
    configuration, `--index`, or `STACKCTL_INDEX_<NAME>_URL`): what every command that reads an index says."""
    from stackctl.index.config import endpoints

    return tuple(endpoints(stack, overrides, keep_in=keep_in).values())


@dataclass(frozen=True)
class Resolved:
    """`stackctl resolve`: the lock, whether the file changed, and the index URLs the run used."""

    lock: Lock
    written: bool
    indexes: tuple[IndexEndpoint, ...]


def resolve_to(stack: Stack, client: IndexClient, path: Path, overrides: Mapping[str, str] | None = None, *,
               closure: bool = True, train_window: float = 3600.0, progress: Progress | None = None,
               verify: bool = False) -> Resolved:
    """The lock, written to `path` (left alone when it holds these bytes already), and what the run used."""
    from stackctl.resolve.lock import write_lock

    lock = resolve_stack(stack, client, overrides, closure=closure, train_window=train_window, progress=progress,
                         verify=verify)
    return Resolved(lock, write_lock(path, lock), indexes_in_force(stack, overrides, client.options.cache_dir))


def resolve_stack(stack: Stack, client: IndexClient, overrides: Mapping[str, str] | None = None, *,
                  closure: bool = True, train_window: float = 3600.0, progress: Progress | None = None,
                  verify: bool = False, write_to: Path | None = None) -> Lock:
    """The lock; with `verify`, every file it names downloaded and its sha256 checked first; with `write_to`,
    also written there (atomically, and left alone when it holds these bytes already)."""
    from stackctl.index.config import endpoints
    from stackctl.resolve.resolver import ResolveOptions, resolve

    if train_window < 0:
        raise InputError(f"--train-window {train_window:g}: seconds must be 0 or more")
    eps = endpoints(stack, overrides, keep_in=client.options.cache_dir)
    closure_fn = None
    if closure:
        from stackctl.resolve.closure import compute

        # inside the cache directory the user named, never beside it (its hex-named entries never say "uv")
        uv_cache = client.options.cache_dir / "uv" if client.options.cache_dir else None

        def closure_fn(s: Stack, lk: Lock) -> Any:
            if client.options.offline:  # uv reads its own cache only
                return compute(s, lk, eps, offline=True, cache_dir=uv_cache)
            from stackctl.resolve.mirror import IndexMirror

            # uv reads the named indexes through stackctl: the pages of this run, answers uv cannot take
            # from some servers (a refused HEAD) given in a form it can
            named = {i.name for i in s.indexes if not i.from_pip}
            with IndexMirror(client, {n: e for n, e in eps.items() if n in named}) as mirror:
                return compute(s, lk, eps, cache_dir=uv_cache, mirror={n: mirror.url(n) for n in named},
                               unmirror=mirror.original)

    lock = resolve(stack, client, eps, ResolveOptions(train_window=train_window, closure=closure_fn), progress)
    if verify:
        from stackctl.resolve.wheelhouse import verify_lock

        lock = verify_lock(lock, stack, client, eps, progress=progress).lock
    if write_to is not None:
        from stackctl.resolve.lock import write_lock

        write_lock(write_to, lock)
    return lock


@dataclass(frozen=True)
class OutdatedPin:
    """One row of `stackctl outdated`."""

    artifact: str
    pinned: str
    published: str | None  # the pinned version's own upload (its first file); the newest's is newest_published
    newest_in_line: str | None
    newest_published: str | None
    is_newest: bool
    other_lines: tuple[str, ...]
    held_by: str | None = None  # "torch==2.11.0": another pin (or the closure) requires the pinned version


def held_by(lk: Lock, name: str, newer: str) -> str | None:
    """Which locked distribution's Requires-Dist forbids `newer` of `name` (torch 2.11.0 requires
    `nvidia-cudnn-cu13==9.19.0.56`): an upgrade the lock could never take while that one stays."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion

    from stackctl.profile.versions import parse_version

    key = canonicalize_name(name)
    try:
        # bounded: packaging's Version() raises ValueError, not InvalidVersion, on a 4,301-digit number
        version = parse_version(newer)
    except InvalidVersion:
        return None
    owners = [(p.name, p.version, f) for p in lk.pins for f in p.files]
    owners += [(c.name, c.version, c.file) for c in lk.closure if c.file is not None]
    for owner, owner_version, f in owners:
        for text in f.requires_dist or ():
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) != key:
                continue
            try:
                allowed = req.specifier.contains(version, prereleases=True)
            except ValueError:  # a bound packaging cannot read as a version (a number of over 4,300 digits)
                continue
            if not allowed:
                return f"{owner}=={owner_version}"
    return None


def outdated(ref: StackRef, client: IndexClient | None, overrides: Mapping[str, str] | None = None, *,
             from_lock: Path | None = None, progress: Progress | None = None) -> tuple[OutdatedPin, ...]:
    """Is each pin the newest of its line: asked of the indexes through `client`, or read from `from_lock`
    (which must have been made from this profile)."""
    stack, profile_arg = ref.stack, ref.arg
    if from_lock is not None:
        from stackctl.resolve.lock import read_lock

        lk = read_lock(from_lock)
        if not lk.made_from(stack):
            raise CheckFailed(f"{from_lock} was made from another version of {stack.name}",
                              hint=f"run `stackctl resolve {profile_arg or stack.name}`, or drop --from-lock to ask "
                              "the indexes")
    else:
        if client is None:
            raise InputError("outdated: no index client and no --from-lock")
        lk = resolve_stack(stack, client, overrides, closure=False, progress=progress)
    return tuple(OutdatedPin(p.name, p.version, min((f.upload_time for f in p.files if f.upload_time), default=None),
                             p.newest_in_line, p.newest_upload_time, p.newest_in_line in (None, p.version),
                             p.other_lines,
                             None if p.newest_in_line in (None, p.version)
                             else held_by(lk, p.name, str(p.newest_in_line)))
                 for p in lk.pins)
