"""`stackctl resolve` and `outdated` as one call: the client for this run's flags, the endpoints with their
overrides, the closure through uv, and the lock."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stackctl.base.progress import Progress
from stackctl.errors import InputError
from stackctl.index.client import ClientOptions, IndexClient
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


def resolve_stack(stack: Stack, client: IndexClient, overrides: Mapping[str, str] | None = None, *,
                  closure: bool = True, train_window: float = 3600.0, progress: Progress | None = None,
                  verify: bool = False) -> Lock:
    """The lock; with `verify`, every file it names downloaded and its sha256 checked first."""
    from stackctl.index.config import endpoints
    from stackctl.resolve.resolver import ResolveOptions, resolve

    if train_window < 0:
        raise InputError(f"--train-window {train_window:g}: seconds must be 0 or more")
    eps = endpoints(stack, overrides)
    closure_fn = None
    if closure:
        from stackctl.resolve.closure import compute

        uv_cache = client.options.cache_dir.parent / "uv" if client.options.cache_dir else None

        def closure_fn(s: Stack, lk: Lock) -> Any:
            return compute(s, lk, eps, offline=client.options.offline, cache_dir=uv_cache)

    lock = resolve(stack, client, eps, ResolveOptions(train_window=train_window, closure=closure_fn), progress)
    if verify:
        from stackctl.resolve.wheelhouse import verify_lock

        lock = verify_lock(lock, stack, client, eps, progress=progress).lock
    return lock
