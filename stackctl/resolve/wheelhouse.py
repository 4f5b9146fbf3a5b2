"""A wheelhouse: every wheel a lock lists for one target, downloaded and sha256-checked.

Builds install from it offline (`pip install --no-index --find-links DIR --require-hashes`), so what
goes into an image is exactly what `resolve` proved.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from stackctl.base.concurrency import parallel
from stackctl.base.files import inside, sha256_file
from stackctl.base.progress import Progress
from stackctl.errors import CheckFailed, InputError, Problems, ServiceError, StackctlError
from stackctl.index.client import ClientOptions, HashMismatch, IndexClient
from stackctl.index.config import IndexEndpoint, endpoints, origin
from stackctl.profile.model import Stack
from stackctl.resolve.lock import Lock, LockedFile

BYTES = "bytes"  # the progress label whose counts are bytes, not items


def endpoint_for(f: LockedFile, index: str | None, eps: Mapping[str, IndexEndpoint], stack: Stack) -> IndexEndpoint:
    """The pin's own index; for closure files, the index on the file's origin, else the public one.

    The client sends credentials only to an endpoint's own origin, so the choice never leaks them.
    """
    if index is not None:
        return eps[index]
    for ep in eps.values():
        if ep.origin == origin(f.url):
            return ep
    public = [i.name for i in stack.indexes if i.from_pip]
    return eps[public[0] if public else stack.indexes[0].name]


def fetch_wheelhouse(lock: Lock, stack: Stack, target: str, dest: Path, *,
                     client: IndexClient | None = None, overrides: Mapping[str, str] | None = None,
                     progress: Progress | None = None, profile_arg: str | None = None) -> list[Path]:
    """Download every wheel `lock.wheels_for(target)` lists into `dest`; return their paths in lock order.

    Files already in `dest` with the right sha256 are kept; a download whose sha256 is not the lock's is an
    `InputError` naming the index, the file and both hashes (the lock no longer names what the index serves:
    resolving again fixes it, asking the index again does not), and no partial file stays behind.
    `profile_arg`: the profile as the user named it, for the command that says so.
    """
    labels = [t.label for t in stack.targets]
    if target not in labels:
        raise InputError(f"target {target!r} is not one of {stack.name}'s targets ({', '.join(labels)})")
    lock.require_made_from(stack)
    client = client or IndexClient(ClientOptions())
    eps = endpoints(stack, overrides, locked=lock.index_origins(), keep_in=client.options.cache_dir)
    pin_index = {f.url: p.index for p in lock.pins for f in p.files}
    wheels = list({f.filename: f for f in lock.wheels_for(target)}.values())
    if not wheels:
        raise CheckFailed(f"the lock for {stack.name} lists no wheels for {target}")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{dest}: cannot create the wheelhouse: {exc.strerror or exc}") from None

    # Bytes as they arrive (a torch wheel alone is gigabytes), from every worker; a wheel kept counts whole.
    total = sum(f.size or 0 for f in wheels)
    moved = [0]
    guard = threading.Lock()

    def advance(n: int) -> None:
        if progress is not None and total:
            with guard:  # reported under the lock too: counts from several workers never arrive out of order
                moved[0] += n
                progress(BYTES, min(moved[0], total), total)

    def one(f: LockedFile) -> Path:
        path = inside(dest, f.filename, f"the lock's file name {f.filename[:80]!r}")
        if path.is_file() and sha256_file(path) == f.sha256:
            advance(f.size or 0)
            return path
        try:
            client.download(endpoint_for(f, pin_index.get(f.url), eps, stack), f, path, advance)
        except HashMismatch as exc:
            raise InputError(f"{exc.where}: the lock's sha256 {exc.expected} differs from what the index serves "
                             f"(sha256 {exc.got}); the lock no longer names this file's bytes and must be resolved "
                             f"again: `stackctl resolve {profile_arg or stack.name} --verify` (which also checks the "
                             "bytes against the index's sha256), then review what changed") from None
        return path

    done = parallel(4, one, wheels, progress, "wheels")
    errors = [r for r in done if isinstance(r, StackctlError)]
    if errors:
        raise errors[0]
    return [r for r in done if isinstance(r, Path)]


@dataclass(frozen=True)
class Verified:
    lock: Lock  # every file marked sha256_verified
    files: int
    bytes: int


def verify_lock(lock: Lock, stack: Stack, client: IndexClient, eps: Mapping[str, IndexEndpoint], *,
                progress: Progress | None = None) -> Verified:
    """Download every file the lock names (pins and closure, every target) and check each sha256.

    Files download concurrently into a scratch directory that is removed afterwards; a mismatch or a
    failure is a problem each, all reported together, and no lock is returned.
    """
    pin_index = {f.url: p.index for p in lock.pins for f in p.files}
    files = list({f.url: f for t in stack.targets for f in lock.wheels_for(t.label)}.values())
    with tempfile.TemporaryDirectory(prefix="stackctl-verify-") as tmp:
        def one(item: tuple[int, LockedFile]) -> int:
            n, f = item
            if not f.sha256:
                raise ServiceError(f"{f.filename}: the lock has no sha256 to check it against")
            path = Path(tmp) / f"{n}-{f.filename}"
            client.download(endpoint_for(f, pin_index.get(f.url), eps, stack), f, path)
            size = path.stat().st_size
            path.unlink()
            return size

        done = parallel(client.options.jobs, one, list(enumerate(files)), progress, "verify")
    errors = [r for r in done if isinstance(r, StackctlError)]
    if errors:
        raise Problems.of(errors)
    verified = {f.url for f in files}

    def mark(f: LockedFile) -> LockedFile:
        return replace(f, sha256_verified=True) if f.url in verified else f

    pins = tuple(replace(p, files=tuple(mark(f) for f in p.files)) for p in lock.pins)
    closure = tuple(replace(c, file=mark(c.file)) if c.file else c for c in lock.closure)
    return Verified(replace(lock, pins=pins, closure=closure), len(files),
                    sum(r for r in done if isinstance(r, int)))
