"""A wheelhouse: every wheel a lock lists for one target, downloaded and sha256-checked.

Builds install from it offline (`pip install --no-index --find-links DIR --require-hashes`), so what
goes into an image is exactly what `resolve` proved.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from stackctl.base.concurrency import parallel
from stackctl.base.files import sha256_file
from stackctl.base.progress import Progress
from stackctl.errors import CheckFailed, InputError, StackctlError
from stackctl.index.client import ClientOptions, IndexClient
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
                     progress: Progress | None = None) -> list[Path]:
    """Download every wheel `lock.wheels_for(target)` lists into `dest`; return their paths in lock order.

    Files already in `dest` with the right sha256 are kept; a mismatch is a `ServiceError` naming the
    index, the file and both hashes, and no partial file stays behind.
    """
    labels = [t.label for t in stack.targets]
    if target not in labels:
        raise InputError(f"target {target!r} is not one of {stack.name}'s targets ({', '.join(labels)})")
    lock.require_made_from(stack)
    client = client or IndexClient(ClientOptions())
    eps = endpoints(stack, overrides)
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
            with guard:
                moved[0] += n
                now = min(moved[0], total)
            progress(BYTES, now, total)

    def one(f: LockedFile) -> Path:
        path = dest / f.filename
        if path.is_file() and sha256_file(path) == f.sha256:
            advance(f.size or 0)
            return path
        client.download(endpoint_for(f, pin_index.get(f.url), eps, stack), f, path, advance)
        return path

    done = parallel(4, one, wheels, progress, "wheels")
    errors = [r for r in done if isinstance(r, StackctlError)]
    if errors:
        raise errors[0]
    return [r for r in done if isinstance(r, Path)]
