"""`resolve`, `lock`, `outdated`, `fetch`, `check`, `export`, `show` and `propose`: each PROFILE argument resolved
once (`StackRef`), its lock found by the one rule, the index client made from the options, and the stage's
function called with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stackctl.base.annotations import Annotation, Level
from stackctl.errors import CheckFailed

if TYPE_CHECKING:
    from stackctl.base.progress import Progress
    from stackctl.index.config import IndexEndpoint
    from stackctl.profile.model import Stack
    from stackctl.resolve.check import CheckReport
    from stackctl.resolve.export import ExportResult
    from stackctl.resolve.lock import LockStatus
    from stackctl.resolve.propose import Proposed
    from stackctl.resolve.run import OutdatedPin, Resolved


@dataclass(frozen=True)
class ClientOptions:
    """How the index client reaches the indexes: the shared options of `resolve` and `outdated`."""

    offline: bool = False
    cache_dir: Path | None = None
    no_cache: bool = False
    timeout: float = 30.0
    retries: int = 3
    jobs: int = 16


@dataclass(frozen=True)
class Locked:
    """`stackctl resolve`: the run's result and the lock file it went to."""

    run: Resolved
    path: Path


def resolve_profile(profile: str, lock: Path | None, overrides: Mapping[str, str], client: ClientOptions, *,
                    closure: bool = True, train_window: float = 3600.0, verify: bool = False,
                    progress: Progress | None = None) -> Locked:
    """Resolve the profile and write its lock (`lock`, else the one beside the profile)."""
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.lock import lock_path
    from stackctl.resolve.run import make_client, resolve_to

    ref = stack_ref(profile)
    path = lock_path(ref, lock)
    made = make_client(client.offline, client.cache_dir, client.no_cache, client.timeout, client.retries, client.jobs)
    run = resolve_to(ref.stack, made, path, overrides, closure=closure, train_window=train_window,
                     progress=progress, verify=verify)
    return Locked(run, path)


@dataclass(frozen=True)
class LockChecked:
    """`stackctl lock`: the lock's status against the stack, or why the check failed (a missing lock, or with
    --check one made from another profile); `path` the lock file, where CI shows a failure."""

    stack: str
    path: Path
    status: LockStatus | None
    failure: CheckFailed | None = None

    def annotations(self) -> tuple[Annotation, ...]:
        """For CI: the failure, at the lock file."""
        exc = self.failure
        if exc is None:
            return ()
        return (Annotation(Level.ERROR, f"{exc}; {exc.hint}" if exc.hint else str(exc), str(self.path)),)


def lock_of_profile(profile: str, lock: Path | None, *, check: bool = False) -> LockChecked:
    """Whether the profile's lock (`lock`, else the one beside it) was made from it; `check`: fail when not."""
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.lock import lock_path, lock_status

    ref = stack_ref(profile)
    path = lock_path(ref, lock)
    try:
        return LockChecked(ref.name, path, lock_status(ref, path, check=check))
    except CheckFailed as exc:
        return LockChecked(ref.name, path, None, exc)


@dataclass(frozen=True)
class Outdated:
    stack: str
    pins: tuple[OutdatedPin, ...]


def outdated_pins(profile: str, overrides: Mapping[str, str], client: ClientOptions, *,
                  from_lock: Path | None = None, progress: Progress | None = None) -> Outdated:
    """Is each pin of the profile the newest of its line: asked of the indexes, or read from `from_lock`."""
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.run import make_client, outdated

    ref = stack_ref(profile)
    made = (make_client(client.offline, client.cache_dir, client.no_cache, client.timeout, client.retries,
                        client.jobs) if from_lock is None else None)
    return Outdated(ref.name, outdated(ref, made, overrides, from_lock=from_lock, progress=progress))


def fetch_profile(profile: str, target: str, dest: Path, lock: Path | None, overrides: Mapping[str, str], *,
                  timeout: float = 30.0, retries: int = 3, progress: Progress | None = None) -> list[Path]:
    """The lock's wheels for `target` downloaded into `dest`, sha256-checked (`dest` checked first)."""
    from stackctl.base.files import check_output
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.lock import lock_path, read_lock
    from stackctl.resolve.run import make_client
    from stackctl.resolve.wheelhouse import fetch_wheelhouse

    check_output(dest, "--dest", directory=True)
    ref = stack_ref(profile)
    lk = read_lock(lock_path(ref, lock), profile)
    made = make_client(no_cache=True, timeout=timeout, retries=retries)
    return fetch_wheelhouse(lk, ref.stack, target, dest, client=made, overrides=overrides, progress=progress,
                            profile_arg=profile)


def check_profile(profile: str, lock: Path | None, requirements: Path | None, *, hashes: bool,
                  target: str | None = None, fmt: str = "requirements") -> CheckReport:
    """`stackctl check`: the lock against the profile, the requirement files against what export writes."""
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.check import check_stack
    from stackctl.resolve.lock import lock_path

    ref = stack_ref(profile)  # a profile that does not validate stops here, exit 2
    return check_stack(ref, lock_path(ref, lock), requirements, hashes=hashes, target=target, fmt=fmt)


@dataclass(frozen=True)
class Exported:
    """`stackctl export`: the result, and the PROFILE argument as given (for the fix a drift suggests)."""

    result: ExportResult
    profile: str


def export_profile(profile: str, out: Path, lock: Path | None, *, check: bool = False, target: str | None = None,
                   fmt: str = "requirements") -> Exported:
    """The profile's requirement files (or with `fmt` pylock, its lock's PEP 751 files: the lock beside the
    profile unless `lock`) written to `out`, or with `check` compared with those there."""
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.export import export_requirements
    from stackctl.resolve.lock import lock_path

    ref = stack_ref(profile)
    if fmt == "pylock" and lock is None:
        lock = lock_path(ref)
    return Exported(export_requirements(ref.stack, out, lock, check=check, target=target, fmt=fmt), profile)


@dataclass(frozen=True)
class Shown:
    """`stackctl show`: the effective stack, its indexes as a run would reach them, and its rendered tag."""

    stack: Stack
    indexes: tuple[IndexEndpoint, ...]
    tag: str | None


def show_profile(profile: str, overrides: Mapping[str, str]) -> Shown:
    from stackctl.profile.locate import load_profile
    from stackctl.resolve.run import indexes_in_force
    from stackctl.review.diff import rendered_tag

    stack = load_profile(profile)
    return Shown(stack, tuple(indexes_in_force(stack, overrides)), rendered_tag(stack))


def propose(profile: str, overrides: Mapping[str, str], *, window: float = 3600.0, allow_series: bool = False,
            only: Sequence[str] = (), name: str | None = None, dry_run: bool = False, force: bool = False,
            progress: Progress | None = None) -> Proposed:
    """The upgrade the indexes allow, written as NAME.toml beside the profile unless `dry_run` or held."""
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.propose import propose_profile
    from stackctl.resolve.run import make_client

    return propose_profile(stack_ref(profile), make_client(), overrides, window=window, allow_series=allow_series,
                           only=only, name=name, dry_run=dry_run, force=force, progress=progress)
