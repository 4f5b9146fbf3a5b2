"""resolve(stack) → Lock: every pin proved on its own index for every target, read from the index itself.

The network sits behind `IndexClient`; the choices (which wheel, which line, which train member trails)
are the pure functions of `targets`, `newest` and `trains`. Requests run concurrently in two waves:
project pages, then per chosen file its metadata and (HTML-only indexes) its Last-Modified. Each phase
of `resolve` is a function below it, in the order it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from packaging.utils import NormalizedName
from packaging.version import Version

from stackctl.base.concurrency import parallel
from stackctl.base.progress import Progress
from stackctl.base.times import utc_iso
from stackctl.base.words import count
from stackctl.errors import CheckFailed, Problems, StackctlError
from stackctl.index.client import IndexClient, NotCached
from stackctl.index.config import IndexEndpoint
from stackctl.index.pages import IndexedFile, ProjectListing
from stackctl.profile.model import Pin, Stack
from stackctl.resolve.lock import ClosureEntry, IndexOverride, Lock, LockedFile, LockedPin, TrainReport
from stackctl.resolve.newest import LineReport, newest_in_line
from stackctl.resolve.targets import best_wheel
from stackctl.resolve.trains import DEFAULT_WINDOW, train_reports

ClosureFn = Callable[[Stack, Lock], tuple[ClosureEntry, ...]]


@dataclass(frozen=True)
class ResolveOptions:
    train_window: float = DEFAULT_WINDOW
    closure: ClosureFn | None = None


@dataclass(frozen=True)
class FileFacts:
    requires_dist: tuple[str, ...] | None
    upload_time: datetime | None
    upload_time_source: str
    size: int | None = None
    warning: str | None = None  # why the upload time (or size) is unknown


def iso(t: datetime | None) -> str | None:
    return utc_iso(t) if t else None


def _head_warnings(lines: list[str], most: int = 3) -> list[str]:
    """One line per file a server refused HEAD for; beyond `most` files of one index and status, one line
    for them all (an index without HEAD would otherwise print a warning per file)."""
    groups: dict[str, list[str]] = {}
    for line in sorted(set(lines)):
        index, _, rest = line.partition(": ")
        filename, _, why = rest.partition(": ")
        groups.setdefault(f"{index}: {why}", []).append(filename if why else rest)
    out = []
    for key, files in groups.items():
        index, _, why = key.partition(": ")
        if len(files) <= most or not why:
            out += [f"{index}: {f}: {why}" if why else f"{index}: {f}" for f in files]
        else:
            of = count(len(files), "file")
            out.append(f"{index}: {why.replace('HEAD answered', f'HEAD of {of} answered', 1)} "
                       f"({', '.join(files[:most])}, ...)")
    return out


Listing = dict[tuple[str, NormalizedName], ProjectListing]  # (index, pin key) → its project page
Chosen = dict[tuple[NormalizedName, str], IndexedFile]  # (pin key, target label) → the file pip would pick
Wanted = dict[str, tuple[Pin, IndexedFile, bool]]  # url → (pin, file, whether its Requires-Dist is needed)


def resolve(stack: Stack, client: IndexClient, eps: dict[str, IndexEndpoint],
            options: ResolveOptions | None = None, progress: Progress | None = None) -> Lock:
    """The lock, or `Problems` naming every pin and target that failed (nothing is half-written)."""
    opts = options or ResolveOptions()
    listing, problems = _project_pages(stack, client, eps, progress)
    chosen, unpicked = _choose_files(stack, listing)
    ok_pins = [p for p in stack.pins if all((p.key, t.label) in chosen for t in p.targets(stack.targets))]
    lines = {p.key: newest_in_line(p.version, listing[(p.index, p.key)].files, p.targets(stack.targets))
             for p in ok_pins}
    wanted = _wanted_files(stack, ok_pins, chosen, lines)
    by_url, failed = _file_facts(client, eps, wanted, progress)
    if problems + unpicked + failed:
        raise Problems.of(problems + unpicked + failed)
    warnings = _head_warnings([fx.warning for fx in by_url.values() if fx.warning])
    locked, published = _locked_pins(stack, client, chosen, by_url, lines, warnings)
    trains = _trains(stack, published, opts.train_window, warnings)
    lock = Lock(stack=stack.name, profile_digest=stack.digest(), pins=tuple(locked), trains=trains,
                warnings=tuple(warnings),
                overrides=tuple(IndexOverride(e.name, e.url, e.source_label) for e in eps.values() if e.overridden))
    return _with_closure(stack, lock, opts.closure, progress) if opts.closure is not None else lock


def _project_pages(stack: Stack, client: IndexClient, eps: dict[str, IndexEndpoint], progress: Progress | None,
                   ) -> tuple[Listing, list[StackctlError]]:
    """Every pin's project page, all at once; a page that fails is one problem, and the other pins go on."""
    keys = list(dict.fromkeys((p.index, p.key) for p in stack.pins))
    pages = parallel(client.options.jobs, lambda k: client.project(eps[k[0]], k[1]), keys, progress, "pages")
    listing = {k: r for k, r in zip(keys, pages, strict=True) if isinstance(r, ProjectListing)}
    return listing, [r for r in pages if isinstance(r, StackctlError)]


def _choose_files(stack: Stack, listing: Listing) -> tuple[Chosen, list[StackctlError]]:
    """The file pip would pick for every pin and each target it is for; a pin not on its index, or with no
    wheel for a target, is a problem."""
    chosen: Chosen = {}
    problems: list[StackctlError] = []
    for pin in stack.pins:
        lst = listing.get((pin.index, pin.key))
        if lst is None:
            continue
        want = Version(pin.version)
        files = [f for f in lst.files if f.version == want]
        if not files:
            near = sorted({f.version for f in lst.files}, reverse=True)[:3]
            problems.append(CheckFailed(
                f"pin {pin.name} {pin.version}: not on index {pin.index} "
                f"(newest there: {', '.join(map(str, near)) or 'none'})"))
            continue
        for t in pin.targets(stack.targets):
            f = best_wheel(files, t)
            if f is None:
                problems.append(CheckFailed(
                    f"pin {pin.name} {pin.version}: no wheel for {t.label} on index {pin.index} "
                    f"(files: {', '.join(sorted(x.filename for x in files))[:300]})",
                    hint="if the vendor does not build it for every target, limit the pin "
                         "(python = [...], platforms = [...] or marker = '...')"))
            else:
                chosen[(pin.key, t.label)] = f
    return chosen, problems


def _wanted_files(stack: Stack, pins: list[Pin], chosen: Chosen, lines: dict[NormalizedName, LineReport]) -> Wanted:
    """Every file the lock names (its Requires-Dist too), then the newest in line's files (their upload time)."""
    wanted: Wanted = {}
    for pin in pins:
        for t in pin.targets(stack.targets):
            f = chosen[(pin.key, t.label)]
            wanted[f.url] = (pin, f, True)
        line = lines[pin.key]
        if line.newest_in_line is not None and line.newest_in_line != Version(pin.version):
            for f in line.newest_files:
                wanted.setdefault(f.url, (pin, f, False))
    return wanted


def _facts(item: tuple[Pin, IndexedFile, bool], eps: dict[str, IndexEndpoint], via: IndexClient) -> FileFacts:
    """Requires-Dist (when needed), upload time and size of one file: from its page, else a HEAD request."""
    pin, f, need_rd = item
    ep = eps[pin.index]
    rd = via.requires_dist(ep, f) if need_rd else None
    if f.upload_time is not None and f.size is not None:
        return FileFacts(rd, f.upload_time, "index", f.size)
    head = via.head(ep, f)
    if f.upload_time is not None:
        return FileFacts(rd, f.upload_time, "index", f.size or head.size, head.warning)
    lm = head.last_modified
    return FileFacts(rd, lm, "last-modified" if lm else "none", f.size or head.size, head.warning)


def _file_facts(client: IndexClient, eps: dict[str, IndexEndpoint], wanted: Wanted, progress: Progress | None,
                ) -> tuple[dict[str, FileFacts], list[StackctlError]]:
    """The facts of every wanted file, in the order of `wanted`, and the files that failed.

    What the cache alone answers (a warm run: metadata files checked against the page's digest, HEAD answers
    of published files) is read here on this thread; worker threads, whose start-up and turns at the
    interpreter lock cost more than these reads, take only what needs the index."""
    local = client.cache_only()

    def from_cache(item: tuple[Pin, IndexedFile, bool]) -> FileFacts | None:
        try:
            return _facts(item, eps, local)
        except (NotCached, StackctlError):
            return None  # asked again below, the ordinary way, which reports any problem

    by_url = {url: fx for url, item in wanted.items() if (fx := from_cache(item)) is not None}
    rest = [url for url in wanted if url not in by_url]
    cached = len(by_url)
    if progress and cached:
        progress("files", cached, len(wanted))

    def counted(label: str, done: int, total: int) -> None:
        assert progress is not None
        progress(label, cached + done, cached + total)

    results = parallel(client.options.jobs, lambda url: _facts(wanted[url], eps, client), rest,
                       counted if progress else None, "files")
    by_url |= {url: r for url, r in zip(rest, results, strict=True) if isinstance(r, FileFacts)}
    return ({url: by_url[url] for url in wanted if url in by_url},
            [r for r in results if isinstance(r, StackctlError)])


def _locked_pins(stack: Stack, client: IndexClient, chosen: Chosen, by_url: dict[str, FileFacts],
                 lines: dict[NormalizedName, LineReport], warnings: list[str],
                 ) -> tuple[list[LockedPin], dict[str, datetime | None]]:
    """Each pin as the lock records it, and when each was published (its latest file); yanked files and
    files without a sha256 are added to `warnings`."""
    locked: list[LockedPin] = []
    published: dict[str, datetime | None] = {}
    for pin in stack.pins:
        lfs = []
        for t in pin.targets(stack.targets):
            f = chosen[(pin.key, t.label)]
            fx = by_url[f.url]
            lfs.append(LockedFile(
                target=t.label, filename=f.filename, url=f.url, sha256=f.sha256 or "", size=fx.size,
                upload_time=iso(fx.upload_time), upload_time_source=fx.upload_time_source,
                yanked=f.yanked, yanked_reason=f.yanked_reason, requires_python=f.requires_python,
                requires_dist=fx.requires_dist, sha256_verified=f.url in client.verified))
        # A wheel that declares no Requires-Dist is a hazard only when its libraries need another pin's:
        # `stackctl abi` reads the ELF and says so (a pure package that needs nothing is no hazard).
        for fname in sorted({lf.filename for lf in lfs if lf.yanked}):
            warnings.append(f"{pin.name} {pin.version}: {fname} is yanked on index {pin.index}")
        for fname in sorted({lf.filename for lf in lfs if not lf.sha256}):
            warnings.append(f"{pin.name} {pin.version}: index {pin.index} gives no sha256 for {fname}")
        times = [by_url[chosen[(pin.key, t.label)].url].upload_time for t in pin.targets(stack.targets)]
        known = [x for x in times if x is not None]
        published[pin.name] = max(known) if known else None
        line = lines[pin.key]
        newest_time = None
        if line.newest_in_line is not None:
            nt = [by_url[f.url].upload_time for f in line.newest_files if f.url in by_url]
            newest_time = iso(max((x for x in nt if x), default=None))
        locked.append(LockedPin(
            name=pin.name, version=pin.version, index=pin.index, files=tuple(lfs),
            newest_in_line=str(line.newest_in_line) if line.newest_in_line else None,
            newest_upload_time=newest_time, other_lines=line.other_lines))
    return locked, published


def _trains(stack: Stack, published: dict[str, datetime | None], window: float,
            warnings: list[str]) -> tuple[TrainReport, ...]:
    """Each release train's spread; a member with no known upload time, or one that trails, is a warning."""
    members: dict[str, list[str]] = {}
    for pin in stack.pins:
        if pin.train:
            members.setdefault(pin.train, []).append(pin.name)
    trains = train_reports(members, published, window)
    for tr in trains:
        for name in tr.members:
            if published[name] is None:
                warnings.append(f"train {tr.train}: {name} has no known upload time; whether it trails is unchecked")
        for name in tr.trailing:
            warnings.append(f"train {tr.train}: {name} was published more than {window:g}s after "
                            f"the train's first member ({tr.earliest} → {iso(published[name])})")
    return trains


def _with_closure(stack: Stack, lock: Lock, closure_fn: ClosureFn, progress: Progress | None) -> Lock:
    """The lock with the dependency closure a real resolver chose under the pins."""
    if progress:
        progress("closure", 0, 1)
    closure = closure_fn(stack, lock)
    sdist_only = [f"closure: {c.name} {c.version} has no wheel for {c.target}; a wheelhouse cannot hold it"
                  for c in closure if c.file is None]
    lock = replace(lock, closure=closure, warnings=lock.warnings + tuple(sdist_only))
    if progress:
        progress("closure", 1, 1)
    return lock
