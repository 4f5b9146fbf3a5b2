"""Compare two stacks the way a reviewer reads an upgrade: package / before / after / note."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.utils import canonicalize_name

from stackctl.profile.model import GateEntry, Pin, Stack
from stackctl.profile.tag import TagTemplateError, stack_tag
from stackctl.profile.versions import classify
from stackctl.resolve.lock import Lock


@dataclass(frozen=True)
class PinChange:
    package: str
    before: str | None
    after: str | None
    change: str  # "added" | "removed" | "changed" | "unchanged"
    move: str | None  # "minor", "post-release (post1 → post2)", ...
    details: tuple[str, ...]  # other fields that moved: index, file, train, gate, abi
    pin_note: str

    @property
    def note(self) -> str:
        head = self.move if self.change == "changed" and self.move else self.change
        if self.pin_note.startswith(f"{head};"):  # a note `stackctl propose` wrote names the move already
            head = ""
        return "; ".join(x for x in (head, *self.details, self.pin_note) if x)


@dataclass(frozen=True)
class FieldChange:
    section: str  # "indexes" | "targets" | "gate" | "image" | "abi"
    key: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class StackDiff:
    before: str
    after: str
    pins: tuple[PinChange, ...]
    fields: tuple[FieldChange, ...]

    @property
    def moved(self) -> tuple[PinChange, ...]:
        return tuple(p for p in self.pins if p.change != "unchanged")


def _pin_details(a: Pin, b: Pin) -> tuple[str, ...]:
    out = []
    for attr in ("index", "file", "train", "abi"):
        x, y = getattr(a, attr), getattr(b, attr)
        if x != y:
            out.append(f"{attr} {getattr(x, 'value', x) or '-'} → {getattr(y, 'value', y) or '-'}")
    return tuple(out)


def diff_stacks(a: Stack, b: Stack, before: str | None = None, after: str | None = None) -> StackDiff:
    rows: list[PinChange] = []
    b_by_key = {p.key: p for p in b.pins}
    for p in a.pins:
        q = b_by_key.pop(p.key, None)
        if q is None:
            rows.append(PinChange(p.name, p.version, None, "removed", None, (), p.note))
            continue
        details = _pin_details(p, q)
        if p.version == q.version:
            rows.append(PinChange(q.name, p.version, q.version, "changed" if details else "unchanged",
                                  None, details, q.note))
        else:
            rows.append(PinChange(q.name, p.version, q.version, "changed", classify(p.version, q.version),
                                  details, q.note))
    rows += [PinChange(q.name, None, q.version, "added", None, (), q.note) for q in b_by_key.values()]
    fields = _index_changes(a, b) + _target_changes(a, b) + _gate_changes(a, b) + _image_changes(a, b)
    fields += _abi_changes(a, b)
    return StackDiff(before or a.name, after or b.name, tuple(rows), tuple(fields))


def _keyed_changes(section: str, x: dict[str, str], y: dict[str, str]) -> list[FieldChange]:
    keys = list(dict.fromkeys([*x, *y]))
    return [FieldChange(section, k, x.get(k), y.get(k)) for k in keys if x.get(k) != y.get(k)]


def _index_changes(a: Stack, b: Stack) -> list[FieldChange]:
    def desc(s: Stack) -> dict[str, str]:
        return {i.name: (i.url or "from pip configuration") for i in s.indexes}

    return _keyed_changes("indexes", desc(a), desc(b))


def _target_changes(a: Stack, b: Stack) -> list[FieldChange]:
    x, y = [t.label for t in a.targets], [t.label for t in b.targets]
    return [] if x == y else [FieldChange("targets", "targets", ", ".join(x), ", ".join(y))]


def _gate_desc(e: GateEntry) -> str:
    parts = [f"import {e.module}" if e.mode.value == "import" else f"{e.mode.value} {e.module}", e.check.value]
    if e.expected and not (e.pinned and e.check.value == "exact"):
        parts.append(repr(e.expected))
    if e.skip_import_if:
        parts.append(f"skip import if {e.skip_import_if}")
    return " ".join(parts)


def _gate_changes(a: Stack, b: Stack) -> list[FieldChange]:
    ea, eb = a.gate_entries(), b.gate_entries()
    out: list[FieldChange] = []
    seq_a = [canonicalize_name(e.dist) for e in ea]
    seq_b = [canonicalize_name(e.dist) for e in eb]
    common = [d for d in seq_a if d in seq_b]
    if common != [d for d in seq_b if d in seq_a] or seq_a != seq_b:
        out.append(FieldChange("gate", "order", ", ".join(e.dist for e in ea), ", ".join(e.dist for e in eb)))
    out += _keyed_changes("gate", {e.dist: _gate_desc(e) for e in ea}, {e.dist: _gate_desc(e) for e in eb})
    out += _keyed_changes("gate", {f"probe {p.name}": p.describe() for p in a.probes},
                          {f"probe {p.name}": p.describe() for p in b.probes})
    return out


def rendered_tag(s: Stack) -> str | None:
    if s.image is None:
        return None
    try:
        return stack_tag(s)
    except TagTemplateError as exc:
        return f"<{exc}>"


def _image_desc(s: Stack) -> dict[str, str]:
    if s.image is None:
        return {}
    i = s.image
    d = {"base": i.base, "repository": i.repository, "tag template": i.tag, "tag": rendered_tag(s) or "",
         "python": i.python}
    d.update({f"var {k}": v for k, v in i.vars})
    d.update({f"label {k}": v for k, v in i.labels})
    return d


def _image_changes(a: Stack, b: Stack) -> list[FieldChange]:
    return _keyed_changes("image", _image_desc(a), _image_desc(b))


def _abi_changes(a: Stack, b: Stack) -> list[FieldChange]:
    x = {"allow": ", ".join(a.abi.allow), "inventory": a.abi.inventory or ""}
    y = {"allow": ", ".join(b.abi.allow), "inventory": b.abi.inventory or ""}
    return _keyed_changes("abi", x, y)


# --- locks ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LockChange:
    package: str
    target: str  # "" for a change of the whole pin (added, removed, version)
    field: str  # "pin" | "version" | "index" | "file" | "sha256" | "upload_time" | "yanked" | "size" | "closure"
    before: str | None
    after: str | None


@dataclass(frozen=True)
class LockDiff:
    before: str
    after: str
    changes: tuple[LockChange, ...]


def diff_locks(a: Lock, b: Lock, before: str | None = None, after: str | None = None) -> LockDiff:
    """What a reviewer must see between two locks: new files, changed hashes, moved upload times."""
    out: list[LockChange] = []
    pins_b = {canonicalize_name(p.name): p for p in b.pins}
    for p in a.pins:
        q = pins_b.pop(canonicalize_name(p.name), None)
        if q is None:
            out.append(LockChange(p.name, "", "pin", p.version, None))
            continue
        if p.version != q.version:
            out.append(LockChange(q.name, "", "version", p.version, q.version))
        if p.index != q.index:
            out.append(LockChange(q.name, "", "index", p.index, q.index))
        fa = {f.target: f for f in p.files}
        fb = {f.target: f for f in q.files}
        for t in dict.fromkeys([*fa, *fb]):
            x, y = fa.get(t), fb.get(t)
            if x is None or y is None:
                out.append(LockChange(q.name, t, "file", x.filename if x else None, y.filename if y else None))
                continue
            for attr in ("filename", "sha256", "size", "upload_time", "yanked"):
                vx, vy = getattr(x, attr), getattr(y, attr)
                if vx != vy:
                    out.append(LockChange(q.name, t, "file" if attr == "filename" else attr,
                                          None if vx is None else str(vx), None if vy is None else str(vy)))
    out += [LockChange(q.name, "", "pin", None, q.version) for q in pins_b.values()]
    ca = {(c.target, c.name): c for c in a.closure}
    cb = {(c.target, c.name): c for c in b.closure}
    for key in sorted(set(ca) | set(cb)):
        x2, y2 = ca.get(key), cb.get(key)
        va = x2.version if x2 else None
        vb = y2.version if y2 else None
        if va != vb:
            out.append(LockChange(key[1], key[0], "closure", va, vb))
        elif x2 and y2 and x2.hashes != y2.hashes:
            out.append(LockChange(key[1], key[0], "closure hashes", ", ".join(x2.hashes)[:80],
                                  ", ".join(y2.hashes)[:80]))
    return LockDiff(before or a.stack, after or b.stack, tuple(out))


# --- images, and which of the three two arguments name ----------------------------------------------

@dataclass(frozen=True)
class InstalledChange:
    package: str
    before: str | None
    after: str | None
    change: str  # "added" | "removed" | "changed" | "unchanged"
    note: str  # the kind of move for a changed PEP 440 version, else the change


@dataclass(frozen=True)
class ImageDiff:
    """What two images say they have installed."""

    before: str
    after: str
    pins: tuple[InstalledChange, ...]

    @property
    def moved(self) -> tuple[InstalledChange, ...]:
        return tuple(p for p in self.pins if p.change != "unchanged")


def diff_images(before: str, after: str) -> ImageDiff:
    from stackctl.image.labels import diff_installed
    from stackctl.review.images import image_pins

    def note(before_v: str | None, after_v: str | None, change: str) -> str:
        if change != "changed" or before_v is None or after_v is None:
            return change
        try:
            return classify(before_v, after_v)
        except ValueError:  # an installed version that is not PEP 440: say only that it moved
            return change

    rows = diff_installed(image_pins(before), image_pins(after))
    return ImageDiff(before, after, tuple(InstalledChange(r.package, r.before, r.after, r.change,
                                                          note(r.before, r.after, r.change)) for r in rows))


def kind_of(spec: str) -> str:
    """"lock", "image" or "profile": what `stackctl diff` takes an argument for."""
    from stackctl.base.imageref import looks_like_image
    from stackctl.resolve.lock import is_lock_ref

    return "lock" if is_lock_ref(spec) else "image" if looks_like_image(spec) else "profile"


def compare(before: str, after: str) -> StackDiff | LockDiff | ImageDiff:
    """`stackctl diff A B`: two profiles, two locks (either may be PATH@GITREV) or two images."""
    from stackctl.errors import InputError

    kinds = [kind_of(x) for x in (before, after)]
    if kinds[0] != kinds[1]:
        raise InputError(f"cannot compare a {kinds[0]} ({before}) with a {kinds[1]} ({after}): "
                         "give two profiles, two locks or two images")
    if kinds[0] == "lock":
        from stackctl.resolve.lock import read_lock_ref

        return diff_locks(read_lock_ref(before), read_lock_ref(after), before, after)
    if kinds[0] == "image":
        return diff_images(before, after)
    from stackctl.profile.locate import load_profile

    return diff_stacks(load_profile(before), load_profile(after), before, after)
