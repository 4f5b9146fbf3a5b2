"""The pull request body of an upgrade, from evidence already recorded: profiles, locks, the ABI record,
wheel diffs, the build record, the publication records and the stale-reference scan.

`build_report(Evidence) -> Report` is pure. A section whose evidence was never recorded says "not run",
one whose evidence was made for another lock (or other profiles) says "stale"; both name the command
that makes it. The report never runs a check itself, and never shows evidence made for another lock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from stackctl.base.evidence import Evidence, default_record, read_evidence
from stackctl.base.sizes import human_size
from stackctl.base.times import short_time
from stackctl.base.words import count
from stackctl.image.labels import LABEL_INSTALLED, diff_installed, installed_from_labels
from stackctl.profile.locate import StackRef
from stackctl.profile.model import Stack
from stackctl.publish.publication import Publication, read_records
from stackctl.resolve.lock import Lock
from stackctl.review.diff import diff_stacks, rendered_tag
from stackctl.review.sections import FAILED, NOT_APPLICABLE, NOT_RUN, OK, STALE, Section, Table

# the sections that compare with the old stack, for one that extends none and was given no --since
_NO_OLD = "{} extends nothing: no old stack to compare with (name one with --since)"


@dataclass(frozen=True)
class Report:
    stack: str
    since: str | None
    summary: str
    sections: tuple[Section, ...]

    def section(self, key: str) -> Section:
        return next(s for s in self.sections if s.key == key)


@dataclass(frozen=True)
class Recorded:
    """Everything the report reads, as values (see `gather`)."""

    new: Stack
    new_arg: str  # the profile as the user named it, for the commands a section suggests
    old: Stack | None = None
    old_arg: str | None = None
    lock: Lock | None = None
    lock_path: str = ""
    lock_time: str | None = None
    old_lock: Lock | None = None
    old_lock_path: str = ""
    abi: Evidence | None = None
    abi_path: str = ""
    wheel_diffs: Evidence | None = None
    wheel_diff_path: str = ""
    build: Mapping[str, Any] | None = None
    build_path: str = ""
    old_build: Mapping[str, Any] | None = None
    old_build_path: str = ""
    publications: tuple[Publication, ...] = ()
    publications_path: str = ""
    scan: Evidence | None = None
    scan_path: str = ""
    validation: Evidence | None = None  # `stackctl ab`'s record, and the build records of the stacks it ran
    validation_path: str = ""
    validation_builds: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    validation_pictures: frozenset[str] = frozenset()  # the SVG files beside the ab record
    bisect: Evidence | None = None  # `stackctl bisect`'s latest record for the candidate: a section only when there
    bisect_path: str = ""
    now: str = ""
    problems: tuple[str, ...] = field(default=())


def _size(n: int | None) -> str:
    return "—" if n is None else human_size(n)


def build_report(ev: Recorded) -> Report:
    new, lock = ev.new, ev.lock
    fresh_lock = lock if lock is not None and lock.made_from(new) else None
    digest = fresh_lock.digest() if fresh_lock else None
    resolve_cmd = f"stackctl resolve {ev.new_arg}"
    sections = [
        _profile_diff(ev),
        _files(ev, fresh_lock, resolve_cmd),
        _newest(ev, fresh_lock, resolve_cmd),
        _abi(ev, fresh_lock, digest),
        _wheel_diffs(ev, fresh_lock),
        _build(ev, digest),
        _publication(ev, digest),
        _image_diff(ev, digest),
        _scan(ev),
        _validation(ev),
    ]
    if ev.bisect is not None:
        from stackctl.review.bisect import bisect_section

        sections.append(bisect_section(ev.bisect, ev.bisect_path, new.digest()))
    return Report(new.name, ev.old.name if ev.old else None, _summary(ev, sections, digest), tuple(sections))


def _summary(ev: Recorded, sections: Sequence[Section], digest: str | None) -> str:
    moved = []
    if ev.old is not None:
        moved = [f"{c.package} {c.before or '—'} → {c.after or '—'}"
                 for c in diff_stacks(ev.old, ev.new).moved if c.before != c.after]
    head = (f"{ev.new.name}: {count(len(moved), 'pin')} move from {ev.old.name}"
            + (f" ({'; '.join(moved)})" if moved else "") if ev.old else f"{ev.new.name}")
    bad = [s.title for s in sections if s.status in (FAILED, NOT_RUN, STALE)]
    said = (f"{head}; {_image_said(ev, digest)}"
            + (f". Not proved here: {'; '.join(bad)}." if bad else ". Every section is proved."))
    warned = ev.lock.override_warning() if ev.lock is not None and digest is not None else None
    return said + (f" Warning: {warned}." if warned else "")


def _image_said(ev: Recorded, digest: str | None) -> str:
    """The image of this lock, as the publication and build sections find it: the image published (the
    repository it went to), the one built and not published, or where a build would put it."""
    pub = _latest_publication(ev, digest)
    b = ev.build if ev.build is not None and digest is not None and ev.build.get("lock_digest") == digest else None
    if pub is not None:
        if b is not None and _other_image(ev, digest) is not None and pub.time < str(b.get("time") or ""):
            return (f"image {pub.tag} @ {pub.digest} published for this lock, then built again as another image "
                    f"({b.get('image')}), not published")
        return f"image {pub.tag} @ {pub.digest}"
    if b is not None:
        return f"image {b.get('image')} built for this lock, not published"
    if ev.new.image is None:
        return "no image"
    return f"image {_repository(ev)}:{rendered_tag(ev.new)} neither built nor published for this lock"


def _repository(ev: Recorded) -> str:
    """Where this stack's images go: the repository its last build or publication used (a build with
    --repository names a registry the profile does not), else the profile's."""
    pubs = [p.tag for p in ev.publications if p.stack == ev.new.name]
    for image in (str((ev.build or {}).get("image") or ""), pubs[-1] if pubs else ""):
        if image:
            return _repository_of(image)
    return ev.new.image.repository if ev.new.image is not None else ev.new.name


def _repository_of(image: str) -> str:
    """`[HOST/]NAME` of an image reference `[HOST/]NAME:TAG`."""
    from stackctl.base.imageref import parse_image_ref

    ref = parse_image_ref(image)
    return f"{ref.host}/{ref.repository}" if ref.host else ref.repository


def _profile_diff(ev: Recorded) -> Section:
    cmd = f"stackctl diff {ev.old_arg} {ev.new_arg}" if ev.old_arg else f"stackctl show {ev.new_arg}"
    if ev.old is None:
        return Section("profile", "Profile diff", NOT_APPLICABLE, cmd, None, text=_NO_OLD.format(ev.new.name))
    d = diff_stacks(ev.old, ev.new)
    rows = tuple((c.package, c.before or "—", c.after or "—", c.note) for c in d.moved)
    fields = tuple((f"{f.section}: {f.key}", f.before or "—", f.after or "—") for f in d.fields)
    tables = [Table(("package", "before", "after", "note"), rows)]
    if fields:
        tables.append(Table(("setting", "before", "after"), fields, "other changes"))
    return Section("profile", "Profile diff", OK, cmd, ev.now, tuple(tables),
                   text=f"{count(len(rows), 'pin')} change, {len(ev.new.pins) - len(rows)} unchanged")


def _stale_lock(ev: Recorded, title: str, key: str, cmd: str) -> Section:
    if ev.lock is None:
        return Section(key, title, NOT_RUN, cmd, None, text=f"no lock at {ev.lock_path}; run `{cmd}`")
    return Section(key, title, STALE, cmd, ev.lock_time,
                   text=f"{ev.lock_path} was made from another version of {ev.new.name}; run `{cmd}`")


def _build_verified(ev: Recorded, digest: str | None) -> set[str]:
    """Targets whose every wheel a build copied into its context after checking its sha256 against this lock."""
    b = ev.build
    if b is None or digest is None or b.get("lock_digest") != digest:
        return set()
    return {str(b.get("target"))}


def _files(ev: Recorded, lock: Lock | None, cmd: str) -> Section:
    title = "Files per pin and target"
    if lock is None:
        return _stale_lock(ev, title, "files", cmd)
    built = _build_verified(ev, lock.digest())
    rows = []
    for p in lock.pins:
        for f in p.files:
            checked = f.sha256_verified or f.target in built
            uploaded = short_time(f.upload_time) + ("" if f.upload_time_source == "index" else
                                                f" ({f.upload_time_source})")
            rows.append((p.name, f.target, f.filename, f.sha256[:12], _size(f.size), uploaded, p.index,
                         "verified" if checked else "index-claimed"))
    verified = sum(1 for r in rows if r[-1] == "verified")
    warned = lock.override_warning()
    return Section("files", title, OK, cmd, ev.lock_time,
                   (Table(("package", "target", "file", "sha256", "size", "uploaded", "index", "sha256 is"),
                          tuple(rows)),),
                   text=f"{count(len(rows), 'file')}; {verified} sha256-checked by stackctl (resolve --verify, or "
                   "copied into a build of this lock), the rest as the index states them"
                   + (f"; warning: {warned}" if warned else ""))


def _newest(ev: Recorded, lock: Lock | None, cmd: str) -> Section:
    title = "Is this the newest? Release trains"
    if lock is None:
        return _stale_lock(ev, title, "newest", cmd)
    rows = tuple((p.name, p.version, p.newest_in_line or "—", short_time(p.newest_upload_time),
                  "yes" if p.newest_in_line in (None, p.version) else "no", "; ".join(p.other_lines) or "—")
                 for p in lock.pins)
    trains = tuple((t.train, ", ".join(t.members), short_time(t.earliest), short_time(t.latest),
                    f"{t.spread_seconds / 60:.0f} min" if t.spread_seconds is not None else "unknown",
                    ", ".join(t.trailing) or "none") for t in lock.trains)
    behind = [r[0] for r in rows if r[4] == "no"]
    trailing = [t.train for t in lock.trains if t.trailing]
    status = FAILED if behind or trailing else OK
    return Section("newest", title, status, cmd, ev.lock_time,
                   (Table(("package", "pinned", "newest in line", "published", "newest?", "other lines"), rows),
                    Table(("train", "members", "first", "last", "spread", "trailing"), trains, "release trains")),
                   text=(f"behind: {', '.join(behind)}; " if behind else "every pin is the newest of its line; ")
                   + (f"trains with a trailing member: {', '.join(trailing)}" if trailing else
                      "every train coherent"))


def _abi(ev: Recorded, lock: Lock | None, digest: str | None) -> Section:
    title = "ABI closure and unguarded pins"
    cmd = f"stackctl abi {ev.new_arg} --record {ev.abi_path}"
    unguarded: tuple[tuple[str, str, str], ...] = ()
    if lock is not None:
        unguarded = tuple((p.name, p.version, ", ".join(sorted({f.filename for f in p.files if f.requires_dist == ()})))
                          for p in lock.pins if any(f.requires_dist == () for f in p.files))
    guard = Table(("package", "version", "declares no Requires-Dist"), unguarded, "unguarded pins")
    rec = ev.abi
    if rec is None:
        return Section("abi", title, NOT_RUN, cmd, None, (guard,) if unguarded else (),
                       text=f"no ABI record at {ev.abi_path}; run `{cmd}`")
    if digest is None or rec.lock_digest != digest:
        # run again as it was run (its --inventory, --index, --target): the bare command checks something else
        return Section("abi", title, STALE, rec.command, rec.time, (guard,) if unguarded else (),
                       text=f"{ev.abi_path} was recorded for another lock; run `{rec.command or cmd}`")
    result = rec.result if isinstance(rec.result, dict) else {}
    tables = [guard] if unguarded else []
    for r in result.get("reports", []):
        rows = tuple((str(x.get("file")), str(x.get("needed")), str(x.get("detail")), str(x.get("where")))
                     for x in r.get("resolutions", []))
        tables.append(Table(("file", "needed", "resolved", "where"), rows, f"target {r.get('target')}"))
    failures = [str(f) for f in result.get("failures", [])]
    return Section("abi", title, FAILED if failures else OK, rec.command, rec.time, tuple(tables),
                   text="; ".join(failures) if failures else "every DT_NEEDED of the checked wheels resolves")


def _elf_wheels(ev: Recorded) -> set[str]:
    """Wheels the ABI record saw carrying ELF files (a file that needs a library, or one that provides it)."""
    out: set[str] = set()
    result = ev.abi.result if ev.abi is not None and isinstance(ev.abi.result, dict) else {}
    for r in result.get("reports", []):
        for x in r.get("resolutions", []):
            out.add(str(x.get("wheel")))
            if x.get("provider_wheel"):
                out.add(str(x.get("provider_wheel")))
    return out


def _wheel_diffs(ev: Recorded, lock: Lock | None) -> Section:
    title = "Wheel diffs of moved wheels that carry ELF"
    cmd = f"stackctl wheel-diff OLD NEW --record {ev.wheel_diff_path}"
    # the moved wheels are read from both locks, and which of them carry ELF from the ABI record: a section
    # that cannot be made names the command that makes what it lacks
    if lock is None:
        need = f"stackctl resolve {ev.new_arg}"
        return Section("wheel-diff", title, NOT_RUN, need, None,
                       text=f"no lock of {ev.new.name} made from it at {ev.lock_path}; run `{need}`")
    if ev.old is None or ev.old_arg is None:
        return Section("wheel-diff", title, NOT_APPLICABLE, cmd, None, text=_NO_OLD.format(ev.new.name))
    if ev.old_lock is None:
        need = f"stackctl resolve {ev.old_arg}"
        return Section("wheel-diff", title, NOT_RUN, need, None,
                       text=f"no lock of {ev.old.name} made from it at {ev.old_lock_path or 'its .lock'}; run "
                       f"`{need}` (or name one with --since-lock)")
    if ev.abi is None:
        need = f"stackctl abi {ev.new_arg} --record {ev.abi_path}"
        return Section("wheel-diff", title, NOT_RUN, need, None,
                       text=f"which wheels carry ELF comes from the ABI record; run `{need}` first")
    elf = _elf_wheels(ev)
    old = {canonicalize_name(p.name): p for p in ev.old_lock.pins}
    pairs = []
    for p in lock.pins:
        q = old.get(canonicalize_name(p.name))
        if q is None or q.version == p.version:
            continue
        for f in p.files:
            prev = next((g for g in q.files if g.target == f.target), None)
            if prev is not None and f.filename in elf:
                pairs.append((p.name, prev, f))
    entries = {}
    if ev.wheel_diffs is not None and isinstance(ev.wheel_diffs.result, dict):
        entries = {str(e.get("key")): e for e in ev.wheel_diffs.result.get("entries", []) if isinstance(e, dict)}
    if not pairs:
        return Section("wheel-diff", title, OK, "stackctl report", ev.now, text="no moved wheel carries ELF")
    rows, tables, missing, commands = [], [], [], []
    latest = None
    for name, prev, f in pairs:
        e = entries.get(f.filename)
        if e is None:
            missing.append(f"stackctl wheel-diff {prev.url} {f.url} --record {ev.wheel_diff_path}")
            rows.append((name, f.target, prev.filename, f.filename, NOT_RUN))
            continue
        diff = e.get("diff", {})
        latest = max(latest or "", str(e.get("time", "")))
        commands.append(str(e.get("command", "stackctl wheel-diff")))
        rows.append((name, f.target, prev.filename, f.filename, str(diff.get("summary", ""))))
        if e.get("elf_rows"):
            tables.append(Table(("library", "dynamic section changes"),
                                tuple(tuple(map(str, r)) for r in e["elf_rows"]), f"{f.filename}"))
    status = NOT_RUN if missing else OK  # one wheel not compared leaves the section unproved
    source = "; ".join(dict.fromkeys(commands)) if commands else cmd
    return Section("wheel-diff", title, status, source, latest,
                   (Table(("package", "target", "before", "after", "summary"), tuple(rows)), *tables),
                   lines=tuple(missing),
                   text=(f"{len(missing)} of {len(pairs)} not recorded; run the commands below" if missing else
                         f"{count(len(pairs), 'wheel')} compared"))


def _build_cmd(ev: Recorded) -> str:
    """How to build again: the recorded build's own command line (its --repository, --lock, --target), else
    the plain one."""
    return str((ev.build or {}).get("command") or f"stackctl build {ev.new_arg}")


def _publish_cmd(ev: Recorded) -> str:
    """How to publish again: the last publication's own command line; without one, the plain command with the
    repository the build record's image was built for, when that is not the profile's (a build with
    --repository is published with it, or publish names no registry host)."""
    said = next((p.command for p in reversed(ev.publications) if p.stack == ev.new.name and p.command), "")
    if said:
        return said
    cmd = f"stackctl publish {ev.new_arg}"
    image = str((ev.build or {}).get("image") or "")
    if image and ev.new.image is not None:
        repo = _repository_of(image)
        if repo != ev.new.image.repository:
            cmd += f" --repository {repo}"
    return cmd


def _build(ev: Recorded, digest: str | None) -> Section:
    title = "Build: gate log, tag, labels"
    cmd = _build_cmd(ev)
    b = ev.build
    if b is None:
        return Section("build", title, NOT_RUN, cmd, None, text=f"no build record at {ev.build_path}; run `{cmd}`")
    if digest is None or b.get("lock_digest") != digest:
        return Section("build", title, STALE, cmd, b.get("time"),
                       text=f"{ev.build_path} is a build of another lock; run `{cmd}`")
    other = _other_image(ev, digest)
    pub = _latest_publication(ev, digest)
    if other is not None and pub is not None and str(b.get("time") or "") < pub.time:
        return Section("build", title, STALE, cmd, b.get("time"),
                       text=f"{other}: the build record is the older; run `{cmd}` (and publish what it builds)")
    labels = {k: v for k, v in dict(b.get("labels", {})).items() if k != LABEL_INSTALLED}
    rows: tuple[tuple[str, str], ...] = (("image", str(b.get("image"))), ("engine id", str(b.get("image_id"))),
            ("target", str(b.get("target"))), ("fingerprint", str(b.get("fingerprint_digest"))),
            ("steps (cached)", f"{b.get('steps')} ({b.get('cached_steps')})"),
            ("gate", "from the cache: these very layers passed it before" if b.get("gate_cached") else "ran"))
    rows += _app_rows(b)
    gate = tuple(str(x) for x in b.get("gate", []))
    failed = any(x.startswith("FAIL ") for x in gate)
    return Section("build", title, FAILED if failed else OK, cmd, b.get("time"),
                   (Table(("", ""), rows), Table(("label", "value"), tuple(sorted(labels.items())), "labels")),
                   lines=gate, text=f"{sum(x.startswith('PASS ') for x in gate)} gate checks passed")


def _app_rows(b: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """[image.app]: the stack image beneath the final one, the project's Dockerfile, what its build installed."""
    stack, app = b.get("stack_image"), b.get("app")
    if not isinstance(stack, dict) or not isinstance(app, dict):
        return ()
    installed = dict(app.get("installed_by_app") or {})
    return (("stack image", f"{stack.get('image')} ({stack.get('image_id')})"),
            ("app Dockerfile", f"{app.get('dockerfile')} ({app.get('dockerfile_digest')})"),
            ("installed by the app", ", ".join(f"{k}=={v}" for k, v in sorted(installed.items())) or "—"))


def _other_image(ev: Recorded, digest: str | None) -> str | None:
    """How the build record and the latest publication of this lock are of two images, or None when they are
    of one (or either is missing). Each may be right on its own: only one of them is about what is here."""
    b, pub = ev.build, _latest_publication(ev, digest)
    if b is None or pub is None or b.get("lock_digest") != digest or b.get("image_id") == pub.image_id:
        return None
    revision = str(dict(b.get("labels") or {}).get("org.opencontainers.image.revision") or "?")
    return (f"the build record is of image {str(b.get('image_id'))[:19]} (revision {revision[:12]}), the "
            f"publication of image {pub.image_id[:19]} (revision {pub.revision[:12]})")


def _latest_publication(ev: Recorded, digest: str | None) -> Publication | None:
    mine = [p for p in ev.publications if p.stack == ev.new.name and digest is not None and p.lock_digest == digest]
    return mine[-1] if mine else None


def _publication(ev: Recorded, digest: str | None) -> Section:
    title = "Publication"
    cmd = _publish_cmd(ev)
    pub = _latest_publication(ev, digest)
    if pub is None:
        others = [p for p in ev.publications if p.stack == ev.new.name]
        if others:
            return Section("publication", title, STALE, cmd, others[-1].time,
                           text=f"{ev.publications_path} has {ev.new.name} published only from another lock; "
                           f"run `{cmd}`")
        return Section("publication", title, NOT_RUN, cmd, None,
                       text=f"no publication of {ev.new.name} in {ev.publications_path}; run `{cmd}`")
    other = _other_image(ev, digest)
    if other is not None and pub.time < str((ev.build or {}).get("time") or ""):
        return Section("publication", title, STALE, cmd, pub.time,
                       text=f"{other}: published before that build; run `{cmd}`")
    rows: tuple[tuple[str, str], ...] = (
        ("tag", pub.tag), ("digest", pub.digest), ("pull by digest", pub.pinned_ref),
        ("config digest", pub.config_digest or "—"), ("built as (engine id)", pub.image_id),
        ("revision", pub.revision), ("lock digest", pub.lock_digest or "—"))
    from stackctl.image.app import STACK_SUFFIX

    below = next((p for p in reversed(ev.publications) if p.tag == pub.tag + STACK_SUFFIX
                  and p.lock_digest == pub.lock_digest), None)
    if below is not None:  # [image.app]: the stack image was published beneath it
        rows += (("stack image", f"{below.tag}@{below.digest}"),)
    if pub.reproducible:  # published with its SBOM and provenance, checked digest by digest in the registry
        rows += (("reproducible", pub.reproducible), ("sbom", pub.sbom or "—"),
                 ("provenance", pub.provenance_ref or "—"))
        return Section("publication", title, OK, cmd, pub.time, (Table(("", ""), rows),),
                       text="pushed; " + "; ".join(pub.verified))
    return Section("publication", title, OK, cmd, pub.time, (Table(("", ""), rows),),
                   text="pushed, pulled back by digest: same image id and labels")


def _image_diff(ev: Recorded, digest: str | None) -> Section:
    title = "Installed distributions, old image → new image"
    old_cmd = f"stackctl build {ev.old_arg}" if ev.old_arg else "stackctl build OLD"
    b, a = ev.build, ev.old_build
    if b is None or digest is None or b.get("lock_digest") != digest:
        return Section("image-diff", title, NOT_RUN if b is None else STALE, _build_cmd(ev),
                       None, text=f"needs a build record of the new lock; run `{_build_cmd(ev)}`")
    if ev.old is None:
        return Section("image-diff", title, NOT_APPLICABLE, old_cmd, None, text=_NO_OLD.format(ev.new.name))
    if a is None:
        return Section("image-diff", title, NOT_RUN, old_cmd, None,
                       text=f"no build record of the old stack at {ev.old_build_path}; run `{old_cmd}`")
    rows = tuple((r.package, r.before or "—", r.after or "—", r.change)
                 for r in diff_installed(installed_from_labels(dict(a.get("labels", {}))),
                                         installed_from_labels(dict(b.get("labels", {}))))
                 if r.change != "unchanged")
    return Section("image-diff", title, OK, f"{old_cmd}; {_build_cmd(ev)}",
                   max(str(a.get("time") or ""), str(b.get("time") or "")) or None,
                   (Table(("package", "before", "after", "change"), rows),),
                   text=f"{count(len(rows), 'distribution')} differ between {a.get('image')} and {b.get('image')}")


def _scan(ev: Recorded) -> Section:
    title = "Stale references"
    old = ev.old_arg or "OLD"
    cmd = f"stackctl scan . --stack {ev.new_arg} --since {old} --record {ev.scan_path}"
    rec = ev.scan
    if ev.old is None:
        return Section("scan", title, NOT_APPLICABLE, cmd, None, text=_NO_OLD.format(ev.new.name))
    if rec is None:
        return Section("scan", title, NOT_RUN, cmd, None, text=f"no scan record at {ev.scan_path}; run `{cmd}`")
    want = (ev.new.digest(), ev.old.digest()) if ev.old else None
    if want is None or tuple(rec.profile_digests) != want:
        return Section("scan", title, STALE, rec.command, rec.time,
                       text=f"{ev.scan_path} was recorded for other versions of the profiles; run `{cmd}`")
    result = rec.result if isinstance(rec.result, dict) else {}
    refs = tuple((str(r.get("path")), str(r.get("line")), ", ".join(r.get("packages", [])),
                  ", ".join(r.get("old", [])), str(r.get("text"))) for r in result.get("references", []))
    return Section("scan", title, FAILED if refs else OK, rec.command, rec.time,
                   (Table(("file", "line", "packages", "superseded", "text"), refs),) if refs else (),
                   text=f"{count(len(refs), 'stale reference')} in {_files_read(result.get('files_read'))}")


def _files_read(n: object) -> str:
    return count(n, "file") if isinstance(n, int) else "? files"


def _validation(ev: Recorded) -> Section:
    from stackctl.review.validation import validation_section

    if ev.validation is None and ev.old is None:  # ab compares a control with a candidate: here there is none
        return Section("validation", "Validation summary", NOT_APPLICABLE, f"stackctl ab CONTROL {ev.new_arg}", None,
                       text=_NO_OLD.format(ev.new.name))
    return validation_section(ev.validation, ev.validation_path, ev.validation_builds, ev.new_arg,
                              ev.validation_pictures)


# --- reading the records ------------------------------------------------------------------------

def _read_json(path: Path) -> Mapping[str, Any] | None:
    from stackctl.base.evidence import read_record

    return read_record(path, "build record")


def _merged(*records: Evidence | None) -> Evidence | None:
    """Wheel-diff entries of several records, keyed by the new wheel; a later record's entry wins."""
    present = [r for r in records if r is not None]
    if len(present) <= 1:
        return present[0] if present else None
    entries: dict[str, Any] = {}
    for r in present:
        for e in (r.result.get("entries", []) if isinstance(r.result, dict) else []):
            if isinstance(e, dict):
                entries[str(e.get("key"))] = e
    return dataclasses.replace(present[-1], result={"entries": list(entries.values())})


def gather(new_ref: StackRef, lock_path: Path, *, old_ref: StackRef | None = None, old_lock_path: Path | None = None,
           record_dir: Path = Path("build"), now: str = "") -> Recorded:
    """Read every record there is; nothing is run, nothing is fetched."""
    from datetime import datetime, timezone

    from stackctl.base.times import utc_iso
    from stackctl.errors import StackctlError
    from stackctl.resolve.lock import read_lock

    new, new_arg = new_ref.stack, new_ref.arg
    old, old_arg = (old_ref.stack, old_ref.arg) if old_ref is not None else (None, None)

    def mtime(p: Path) -> str | None:
        """When resolve wrote the lock, as near as the tree says: the file's mtime, or its commit's time when
        the work tree holds the committed lock and the commit is the earlier. resolve leaves a lock holding the
        same bytes alone, so the mtime is the resolve's own time in the tree it ran in (a commit comes later);
        a checkout or a clone moves the mtime past the commit, whose time then bounds the resolve."""
        from stackctl.base.git import committed_at

        try:
            written = int(p.stat().st_mtime)
            seconds = committed_at(p)
            return utc_iso(datetime.fromtimestamp(min(written, seconds or written), timezone.utc))
        except OSError:
            return None

    lock = read_lock(lock_path) if lock_path.exists() else None
    old_lock = None
    if old is not None and old_lock_path is not None and old_lock_path.exists():
        try:
            candidate = read_lock(old_lock_path)
            old_lock = candidate if candidate.made_from(old) else None
        except StackctlError:
            old_lock = None
    paths = {
        "abi": default_record("abi", new.name, record_dir),
        "wheel": default_record("wheel-diff", new.name, record_dir),  # an older spelling, still read
        "wheels": default_record("wheel-diff", None, record_dir),
        "build": record_dir / f"{new.name}.build.json",
        "old_build": record_dir / f"{old.name}.build.json" if old else record_dir / "OLD.build.json",
        "pubs": record_dir / "publications.jsonl",
        "scan": default_record("scan", new.name, record_dir),
        "ab": default_record("ab", new.name, record_dir),
        "bisect": default_record("bisect", new.name, record_dir),
    }
    validation = read_evidence(paths["ab"], "ab")
    legs = validation.result if validation is not None and isinstance(validation.result, dict) else {}
    builds = {str(leg["stack"]): _read_json(record_dir / f"{leg['stack']}.build.json")
              for leg in (legs.get("control"), legs.get("candidate")) if isinstance(leg, dict) and "stack" in leg}
    return Recorded(
        new=new, new_arg=new_arg, old=old, old_arg=old_arg, lock=lock, lock_path=str(lock_path),
        lock_time=mtime(lock_path), old_lock=old_lock, old_lock_path=str(old_lock_path or ""),
        abi=read_evidence(paths["abi"], "abi"), abi_path=str(paths["abi"]),
        wheel_diffs=_merged(read_evidence(paths["wheels"], "wheel-diff"), read_evidence(paths["wheel"], "wheel-diff")),
        wheel_diff_path=str(paths["wheels"]),
        build=_read_json(paths["build"]), build_path=str(paths["build"]),
        old_build=_read_json(paths["old_build"]) if old else None, old_build_path=str(paths["old_build"]),
        publications=tuple(read_records(paths["pubs"])), publications_path=str(paths["pubs"]),
        scan=read_evidence(paths["scan"], "scan"), scan_path=str(paths["scan"]),
        validation=validation, validation_path=str(paths["ab"]), validation_builds=builds,
        validation_pictures=frozenset(str(p) for p in paths["ab"].parent.glob(paths["ab"].stem + ".*.svg")),
        bisect=read_evidence(paths["bisect"], "bisect"), bisect_path=str(paths["bisect"]), now=now)


def report_for(ref: StackRef, lock: Path | None = None, *, since: str | None = None,
               since_lock: Path | None = None, record_dir: Path = Path("build")) -> Report:
    """`stackctl report`: the old profile is `since`, else the one `new` extends (by stack name for a bare
    name, else beside the profile file); every record read, nothing run."""
    from stackctl.base.times import now_iso
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.lock import lock_path

    new, profile_arg = ref.stack, ref.arg
    old_arg = since
    if old_arg is None and new.extends:
        bare = "/" not in profile_arg and "@" not in profile_arg and not profile_arg.endswith(".toml")
        old_arg = new.extends if bare else str(ref.file.parent / f"{new.extends}.toml")
    old = stack_ref(old_arg) if old_arg else None
    ev = gather(ref, lock_path(ref, lock), old_ref=old,
                old_lock_path=lock_path(old, since_lock) if old else None, record_dir=record_dir,
                now=now_iso())
    return build_report(ev)
