"""propose(stack, listings) → Proposal: what an upgrade moves, decided from the indexes' own listings.

- A release train moves whole or not at all: to the newest release in which every member has a build in
  its line published within the train window. A newer build that has no company yet is named, with the
  member that holds the train back and when that member's newest build appeared.
- Other pins move to the newest version of their line (same local-label family, same series, a wheel for
  every target the pin is for, never a yanked file).
- A vendor build whose local label names the torch it was compiled against (`+musa5.2.0torch2.11.0.post2`)
  follows the torch the proposal picks, or the proposal says it cannot.
- A new series (2.9 → 2.11) is a decision, not an update: only with `allow_series`.

Pure: the listings and the upload times (HTML-only indexes give them as each file's Last-Modified, which
the caller fetched) come in as values.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from packaging.utils import NormalizedName
from packaging.version import Version

from stackctl.base.progress import Progress
from stackctl.base.times import utc_iso
from stackctl.base.words import count
from stackctl.errors import CheckFailed, InputError
from stackctl.index.client import IndexClient
from stackctl.index.config import IndexEndpoint
from stackctl.index.pages import IndexedFile, ProjectListing
from stackctl.profile.locate import StackRef
from stackctl.profile.model import Pin, Stack, Target
from stackctl.profile.versions import classify
from stackctl.resolve.targets import best_wheel, installable_everywhere
from stackctl.resolve.trains import DEFAULT_WINDOW


@dataclass(frozen=True)
class Candidate:
    """A version of a pin's project that could be installed for every target the pin is for."""

    version: Version
    published: datetime | None  # the latest upload time of the files the targets would get
    files: tuple[IndexedFile, ...]


@dataclass(frozen=True)
class Move:
    pin: str
    before: str
    after: str
    kind: str  # classify(): "post-release (post1 → post2)", "minor", "local label (a → b)", ...
    published: str | None  # ISO 8601 UTC
    why: str
    train: str | None = None

    @property
    def note(self) -> str:
        when = f"published {self.published}" if self.published else "upload time unknown"
        return f"{self.kind}; {when}; {self.why}"


@dataclass(frozen=True)
class Held:
    """Something newer exists that the proposal does not take, and why."""

    subject: str  # a pin name, or "train NAME"
    reason: str
    blocking: bool = False  # the proposal cannot be written consistently (a follower without a build)


@dataclass(frozen=True)
class Proposal:
    base: str  # the profile it extends
    name: str
    moves: tuple[Move, ...]
    held: tuple[Held, ...]
    window: float
    allow_series: bool

    @property
    def blocked(self) -> tuple[Held, ...]:
        return tuple(h for h in self.held if h.blocking)


def _series(v: Version) -> tuple[int, ...]:
    return (*v.release, 0, 0)[:2]


def pin_targets(stack: Stack, pin: Pin) -> tuple[Target, ...]:
    """The targets a pin is installed for."""
    return pin.targets(stack.targets)


def _published(files: Sequence[IndexedFile], targets: Sequence[Target],
               times: Mapping[str, datetime | None]) -> datetime | None:
    chosen = [best_wheel(files, t) for t in targets]
    stamps = [f.upload_time or times.get(f.url) for f in chosen if f is not None]
    if not stamps or any(s is None for s in stamps):
        return None
    return max(s for s in stamps if s is not None)


def candidates(pin: Pin, files: Iterable[IndexedFile], targets: Sequence[Target],
               times: Mapping[str, datetime | None]) -> tuple[Candidate, ...]:
    """Every version with a wheel that is not yanked for each target, newest first (pre-releases only for a
    pre-release pin)."""
    cur = Version(pin.version)
    by_version: dict[Version, list[IndexedFile]] = {}
    for f in files:
        if f.is_wheel and not f.yanked:
            by_version.setdefault(f.version, []).append(f)
    out = []
    for v, fs in by_version.items():
        if v.is_prerelease and not cur.is_prerelease:
            continue
        if installable_everywhere(fs, targets):
            out.append(Candidate(v, _published(fs, targets, times), tuple(fs)))
    return tuple(sorted(out, key=lambda c: c.version, reverse=True))


def in_line(v: Version, cur: Version, allow_series: bool) -> bool:
    """Same local-label family, and the same series unless a series change was asked for."""
    return v.local == cur.local and (allow_series or _series(v) == _series(cur))


def _line(pin: Pin, cands: Sequence[Candidate], allow_series: bool) -> list[Candidate]:
    cur = Version(pin.version)
    return [c for c in cands if in_line(c.version, cur, allow_series) and c.version >= cur]


def _when(t: datetime | None) -> str:
    return utc_iso(t) if t else "at an unknown time"


def _span(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600)):
        if seconds >= size:
            return f"{seconds / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{seconds / 60:.0f} min"


# --- release trains ---------------------------------------------------------------------------------

def _train_pick(members: Sequence[Pin], lines: Mapping[NormalizedName, list[Candidate]], window: float
                ) -> tuple[dict[NormalizedName, Candidate] | None, list[str]]:
    """The newest release with every member in its window, and why each newer build could not go."""
    anchors = sorted(((c.published, m, c) for m in members for c in lines[m.key] if c.published is not None),
                     key=lambda a: a[0], reverse=True)
    failures: list[str] = []
    for t, m, c in anchors:
        pick: dict[NormalizedName, Candidate] = {}
        missing = []
        for other in members:
            ok = [x for x in lines[other.key]
                  if x.published is not None and 0 <= (t - x.published).total_seconds() <= window]
            if other.key == m.key:
                ok = [x for x in ok if x.version <= c.version]
            if ok:
                pick[other.key] = max(ok, key=lambda x: x.version)
            else:
                missing.append(other)
        if not missing:
            return pick, failures
        if c.version > Version(m.version) and len(failures) < 5:
            held = "; ".join(_newest_of(o, lines[o.key]) for o in missing)
            failures.append(f"{m.name} {c.version} (published {_when(t)}) has no "
                            f"{', '.join(o.name for o in missing)} published within {_span(window)} before it: "
                            f"{held}")
    return None, failures


def _newest_of(pin: Pin, line: Sequence[Candidate]) -> str:
    if not line:
        return f"{pin.name} has no build in its line"
    top = line[0]
    return f"{pin.name}'s newest is {top.version}, published {_when(top.published)}"


def _spread(pick: Mapping[NormalizedName, Candidate]) -> float:
    times = [c.published for c in pick.values() if c.published is not None]
    return (max(times) - min(times)).total_seconds() if times else 0.0


# --- vendor builds against torch --------------------------------------------------------------------

def torch_in_label(label: str | None, torch_public: str) -> bool:
    """Whether a local label names this torch build (`musa5.2.0torch2.11.0.post2`), not a longer one
    (`...torch2.11.0.post20`)."""
    if not label:
        return False
    return re.search(re.escape("torch" + torch_public) + r"(?![0-9]|\.[0-9a-z])", label) is not None


_LABEL_TORCH = re.compile(r"torch(\d+(?:\.\d+)*(?:\.post\d+)?)")


def _label_torch(label: str | None) -> Version | None:
    """The torch a local label names (`musa5.2.0torch2.11.0.post2s5000` → 2.11.0.post2), if any."""
    m = _LABEL_TORCH.search(label or "")
    return Version(m.group(1)) if m else None


def _follow(pin: Pin, cands: Sequence[Candidate], old_torch: Version, new_torch: Version, allow_series: bool
            ) -> Candidate | None:
    cur = Version(pin.version)
    label = cur.local or ""
    prefix = label.split("torch" + old_torch.public, 1)[0]
    exact = label.replace("torch" + old_torch.public, "torch" + new_torch.public, 1)
    ok = [c for c in cands
          if torch_in_label(c.version.local, new_torch.public) and (c.version.local or "").startswith(prefix)
          and (allow_series or _series(c.version) == _series(cur))]
    if not ok:
        return None
    return max(ok, key=lambda c: (c.version.local == exact, c.version.release,
                                  c.published.timestamp() if c.published else 0.0))


# --- the proposal -----------------------------------------------------------------------------------

def _scope(stack: Stack, only: Collection[str]) -> set[NormalizedName]:
    """Pins `--only` names, each with its whole train (a train moves whole), or every pin."""
    if not only:
        return {p.key for p in stack.pins}
    trains = {p.train for p in stack.pins if p.train}
    keys: set[NormalizedName] = set()
    for item in only:
        pin = stack.pin(item)
        if pin is None and item not in trains:
            raise InputError(f"--only {item}: {stack.name} has no pin or release train of that name")
        train = pin.train if pin is not None else item
        keys |= {p.key for p in stack.pins if (train and p.train == train) or (pin is not None and p.key == pin.key)}
    return keys


def propose(stack: Stack, files: Mapping[NormalizedName, Sequence[IndexedFile]], *,
            times: Mapping[str, datetime | None] | None = None, window: float = DEFAULT_WINDOW,
            allow_series: bool = False, only: Collection[str] = (), name: str | None = None) -> Proposal:
    """`files`: each pin's project listing on the pin's own index, by pin key; `times`: upload times by file
    URL for files the listing gives none (HTML-only indexes: Last-Modified)."""
    stamps = times or {}
    scope = _scope(stack, only)
    cands = {p.key: candidates(p, files.get(p.key, ()), pin_targets(stack, p), stamps) for p in stack.pins}
    chosen: dict[NormalizedName, tuple[Candidate, str]] = {}
    held: list[Held] = []

    trains: dict[str, list[Pin]] = {}
    for p in stack.pins:
        if p.train and p.key in scope:
            trains.setdefault(p.train, []).append(p)
    for train, members in sorted(trains.items()):
        lines = {m.key: _line(m, cands[m.key], allow_series) for m in members}
        pick, failures = _train_pick(members, lines, window)
        held += [Held(f"train {train}", f) for f in failures]
        if pick is None:
            if not failures:
                held.append(Held(f"train {train}", "no release in which every member was published within "
                                 f"{_span(window)} of the others (or an upload time is unknown)"))
            continue
        why = (f"release train {train} moves whole: {len(members)} members published within "
               f"{_span(_spread(pick))}")
        for m in members:
            chosen[m.key] = (pick[m.key], why)
        if not allow_series:
            wide = {m.key: _line(m, cands[m.key], True) for m in members}
            further, _ = _train_pick(members, wide, window)
            if further is not None and any(further[k].version > pick[k].version for k in further):
                lead = max(members, key=lambda m: further[m.key].version > pick[m.key].version)
                held.append(Held(f"train {train}", f"another series is out: {lead.name} "
                                 f"{further[lead.key].version} (published {_when(further[lead.key].published)}) "
                                 "with the whole train; a series change needs --allow-series"))

    torch = stack.pin("torch")
    old_torch = Version(torch.version) if torch else None
    new_torch = chosen[torch.key][0].version if torch and torch.key in chosen else old_torch
    for p in stack.pins:
        if p.train:
            continue
        cur = Version(p.version)
        follows = old_torch is not None and torch_in_label(cur.local, old_torch.public)
        # a build against torch goes where torch goes, whatever --only named
        if p.key not in scope and not (follows and new_torch != old_torch):
            continue
        if follows and new_torch is not None and old_torch is not None and new_torch != old_torch:
            c = _follow(p, cands[p.key], old_torch, new_torch, allow_series)
            if c is None:
                labels = sorted({str(x.version) for x in cands[p.key]}, reverse=True)[:4]
                held.append(Held(p.name, f"its local label names torch {old_torch.public}, and index {p.index} "
                                 f"has no {p.name} built against torch {new_torch.public} "
                                 f"(builds there: {', '.join(labels) or 'none'})", blocking=True))
                continue
            chosen[p.key] = (c, f"built against torch {new_torch}, which the proposal picks")
            continue
        line = _line(p, cands[p.key], allow_series)
        if line:
            chosen[p.key] = (line[0], "newest in its line" + (
                f" (+{cur.local}, series {'.'.join(map(str, _series(cur)))})" if cur.local else
                f" (series {'.'.join(map(str, _series(cur)))})"))
        newer = [c for c in cands[p.key] if c.version > cur and c.version.local == cur.local
                 and _series(c.version) != _series(cur)]
        if newer and not allow_series:
            held.append(Held(p.name, f"{newer[0].version} (published {_when(newer[0].published)}) is another "
                             "series; a series change needs --allow-series"))

    moves = []
    for p in stack.pins:
        if p.key not in chosen:
            continue
        c, why = chosen[p.key]
        if c.version == Version(p.version):
            continue
        moves.append(Move(p.name, p.version, str(c.version), classify(p.version, str(c.version)),
                          utc_iso(c.published) if c.published else None, why, p.train))
    return Proposal(stack.name, name or f"{stack.name}-next", tuple(moves), tuple(held), window, allow_series)


# --- the profile it writes --------------------------------------------------------------------------

def render_profile(proposal: Proposal, description: str | None = None) -> str:
    """The new profile: `extends` the old one and overrides only what moves, each pin with its note.

    tomli-w writes the TOML (quoting a key or escaping a value as TOML, not JSON, wants); the two comment
    lines on top are the only text written here."""
    import tomli_w

    doc: dict[str, Any] = {"stack": {
        "name": proposal.name,
        "extends": proposal.base,
        "description": description or proposal.base + " with " + _moved_names(proposal),
    }}
    if proposal.moves:
        doc["pins"] = {m.pin: {"version": m.after, "note": m.note} for m in proposal.moves}
    head = (f"# Proposed by `stackctl propose {proposal.base}`: {count(len(proposal.moves), 'pin')} move; "
            f"everything else is\n# inherited from {proposal.base}.\n\n")
    return head + tomli_w.dumps(doc)


def _moved_names(proposal: Proposal) -> str:
    if not proposal.moves:
        return "nothing moved"
    return ", ".join(f"{m.pin} {m.after}" for m in proposal.moves)


# --- from the indexes -------------------------------------------------------------------------------

def propose_from_indexes(stack: Stack, client: IndexClient, eps: Mapping[str, IndexEndpoint], *,
                         window: float = DEFAULT_WINDOW, allow_series: bool = False, only: Collection[str] = (),
                         name: str | None = None, progress: Progress | None = None) -> Proposal:
    """Each pin's project page from its own index, then the Last-Modified of every file that could be a
    move and has no PEP 700 upload time (HTML-only indexes), then `propose`."""
    from stackctl.base.concurrency import parallel
    from stackctl.errors import Problems, StackctlError

    if window < 0:
        raise InputError(f"--train-window {window:g}: seconds must be 0 or more")
    keys = list(dict.fromkeys((p.index, p.key) for p in stack.pins))
    pages = parallel(client.options.jobs, lambda k: client.project(eps[k[0]], k[1]), keys, progress, "pages")
    errors = [r for r in pages if isinstance(r, StackctlError)]
    if errors:
        raise Problems.of(errors)
    by_key = {k: r.files for k, r in zip(keys, pages, strict=True) if isinstance(r, ProjectListing)}
    files = {p.key: by_key[(p.index, p.key)] for p in stack.pins}
    want: dict[str, tuple[str, IndexedFile]] = {}  # url → (index, file)
    torch = stack.pin("torch")
    torch_public = Version(torch.version).public if torch else None
    for p in stack.pins:
        cur = Version(p.version)
        follows = torch_public is not None and torch_in_label(cur.local, torch_public)
        for f in files[p.key]:
            if f.upload_time is not None or f.yanked or not f.is_wheel:
                continue
            # a HEAD request each: only for files that could be this pin's move (its own label family,
            # or for a build against torch any build naming a torch), never the index's whole history
            mine = f.version.local == cur.local and f.version >= cur
            named = _label_torch(f.version.local)
            built_for_torch = follows and named is not None and named >= Version(torch_public or "0")
            if mine or built_for_torch:
                want.setdefault(f.url, (p.index, f))
    stamps = parallel(client.options.jobs, lambda item: client.last_modified(eps[item[0]], item[1]),
                      list(want.values()), progress, "upload times")
    errors = [r for r in stamps if isinstance(r, StackctlError)]
    if errors:
        raise Problems.of(errors)
    times = {url: t if isinstance(t, datetime) else None for url, t in zip(want, stamps, strict=True)}
    return propose(stack, files, times=times, window=window, allow_series=allow_series, only=only, name=name)


def write_proposal(proposal: Proposal, old_file: Path, *, force: bool = False) -> tuple[Path, Stack]:
    """Write NAME.toml beside the old profile, after the new profile validated with everything it extends."""
    from stackctl.base.files import write_atomic
    from stackctl.profile.loader import load_stack
    from stackctl.profile.sources import DirSource, PendingSource

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", proposal.name):
        raise InputError(f"--name {proposal.name!r}: a stack name is letters, digits, '.', '_' and '-'")
    path = old_file.parent / f"{proposal.name}.toml"
    if path.resolve() == old_file.resolve():
        raise InputError(f"--name {proposal.name}: the new profile cannot replace the one it extends")
    if path.exists() and not force:
        raise InputError(f"{path}: exists; pick another --name or pass --force to replace it")
    text = render_profile(proposal)
    stack = load_stack(path.name, PendingSource(DirSource(path.parent), path.name, text))
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the proposal ({exc.strerror or exc})") from None
    return path, stack


@dataclass(frozen=True)
class Proposed:
    """`stackctl propose`: the proposal, and where it was written (None: a dry run, or blocked)."""

    proposal: Proposal
    written: Path | None

    def failure(self) -> CheckFailed | None:
        blocked = self.proposal.blocked
        if not blocked:
            return None
        return CheckFailed("; ".join(f"{h.subject}: {h.reason}" for h in blocked),
                           hint="nothing was written; wait for the build, or leave the train with --only")


def propose_profile(ref: StackRef, client: IndexClient, overrides: Mapping[str, str] | None = None,
                    *, window: float = 3600.0, allow_series: bool = False, only: Sequence[str] = (),
                    name: str | None = None, dry_run: bool = False, force: bool = False,
                    progress: Progress | None = None) -> Proposed:
    """Ask the indexes what the stack's pins could move to; unless `dry_run` or a pin is held, write the
    proposal as NAME.toml beside the profile."""
    from stackctl.index.config import endpoints

    stack = ref.stack
    eps = endpoints(stack, overrides, keep_in=client.options.cache_dir)
    proposal = propose_from_indexes(stack, client, eps, window=window,
                                    allow_series=allow_series, only=only, name=name, progress=progress)
    written: Path | None = None
    if not dry_run and not proposal.blocked:
        written, _ = write_proposal(proposal, ref.file, force=force)
    return Proposed(proposal, written)
