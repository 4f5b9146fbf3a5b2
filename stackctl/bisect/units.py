"""The moves between two profiles, grouped into the units that must move together, and the profile of an
intermediate stack: the control with some units moved.

Pure: stacks in, values and TOML text out.

- A pin that changes, is added or is removed is one move.
- A release train moves whole: the moves of the pins of one train (the candidate's `train`, else the
  control's) are one unit.
- A pin whose new local label names another moving pin's new version (deep_ep
  `1.1.0+musa5.2.0torch2.11.0.post2` names torch 2.11.0.post2) was built against that pin: it moves with it.
- Nothing else is coupled here: each intermediate stack's closure is resolved again by the resolver, never
  merged by hand, and an intermediate that cannot resolve is a skip of the search.

Differences that are not pin moves (the gate's probes, the image, indexes, targets) are not bisected: every
intermediate keeps the control's, and only the candidate itself has the candidate's (`Units.kept`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stackctl.profile.model import GateRole, Index, Pin, Stack


@dataclass(frozen=True)
class PinMove:
    pin: str
    before: str | None  # None: the candidate adds the pin
    after: str | None  # None: the candidate removes it

    @property
    def change(self) -> str:
        return "added" if self.before is None else "removed" if self.after is None else "changed"

    def words(self) -> str:
        return f"{self.pin} {self.before or '—'} → {self.after or '—'}"


@dataclass(frozen=True)
class Unit:
    """Moves that go together; `why` says what couples them (empty for a pin that moves alone)."""

    name: str
    pins: tuple[str, ...]  # the distributions it moves, as `moves` names them
    moves: tuple[PinMove, ...]
    why: tuple[str, ...] = ()

    def words(self) -> str:
        return "; ".join(m.words() for m in self.moves)


@dataclass(frozen=True)
class Units:
    control: str
    candidate: str
    units: tuple[Unit, ...]
    kept: tuple[str, ...] = ()  # differences that are not pin moves: only the candidate has them


def _moved(a: Pin | None, b: Pin | None) -> bool:
    """A move: the pin is added, removed, or its version changes (a change of its other fields alone, its gate
    role say, is not a move: `Units.kept` names it)."""
    if a is None or b is None:
        return a is not b
    return a.version != b.version


def label_names(label: str | None, name: str, version: str) -> bool:
    """Whether a local label names `name` at `version`'s public part (`musa5.2.0torch2.11.0.post2` names torch
    2.11.0.post2), not a longer version (`...post20`)."""
    if not label:
        return False
    try:
        public = Version(version).public
    except InvalidVersion:
        return False
    key = canonicalize_name(name)
    spellings = {key.replace("-", ""), key.replace("-", ".")}
    return any(re.search(re.escape(s + public) + r"(?![0-9]|\.[0-9a-z])", label) is not None for s in spellings)


def _local(version: str | None) -> str | None:
    if version is None:
        return None
    try:
        return Version(version).local
    except InvalidVersion:
        return None


def plan_units(control: Stack, candidate: Stack) -> Units:
    """The candidate's pin moves from the control, grouped into units, in the control's pin order (added pins
    after, in the candidate's)."""
    before: dict[str, Pin] = {str(p.key): p for p in control.pins}
    after: dict[str, Pin] = {str(p.key): p for p in candidate.pins}
    order = list(dict.fromkeys([*before, *after]))
    keys = [k for k in order if _moved(before.get(k), after.get(k))]
    moves = {k: PinMove((after.get(k) or before[k]).name, before[k].version if k in before else None,
                        after[k].version if k in after else None) for k in keys}
    parent = {k: k for k in keys}
    why: dict[str, list[str]] = {k: [] for k in keys}

    def find(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def join(a: str, b: str, reason: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            first, second = sorted((ra, rb), key=keys.index)
            parent[second] = first
            why[first] += why.pop(second)
        root = find(a)
        if reason not in why[root]:
            why[root].append(reason)

    trains: dict[str, list[str]] = {}
    for k in keys:
        pin = after.get(k) or before[k]
        if pin.train:
            trains.setdefault(pin.train, []).append(k)
    for train, members in trains.items():
        for k in members:
            join(members[0], k, f"release train {train} moves whole")
    for k in keys:
        label = _local(moves[k].after)
        for other in keys:
            other_after = moves[other].after
            if other != k and other_after is not None and label_names(label, moves[other].pin, other_after):
                join(other, k, f"{moves[k].pin} {moves[k].after} is built against {moves[other].pin} {other_after}")
    groups: dict[str, list[str]] = {}
    for k in keys:
        groups.setdefault(find(k), []).append(k)
    units = []
    for root, members in groups.items():
        train_of = {k: (after.get(k) or before[k]).train for k in members}
        parts = [f"train {t}" for t in dict.fromkeys(t for t in train_of.values() if t)]
        parts += [moves[k].pin for k in members if not train_of[k]]
        units.append(Unit(" + ".join(parts), tuple(moves[k].pin for k in members), tuple(moves[k] for k in members),
                          tuple(why.get(root, ()))))
    return Units(control.name, candidate.name, tuple(units), _kept(control, candidate, before, after, keys))


def _kept(control: Stack, candidate: Stack, before: dict[str, Pin], after: dict[str, Pin],
          moved: list[str]) -> tuple[str, ...]:
    out = []
    fields = [after[k].name for k in after if k in before and k not in moved
              and replace(before[k], note="") != replace(after[k], note="")]
    if fields:
        out.append("other fields of pins that keep their version (" + ", ".join(fields) + ")")
    for attr, what in (("targets", "targets"), ("indexes", "indexes"), ("gate_extra", "gate entries that are "
                       "not pins"), ("probes", "gate probes"), ("image", "image"), ("abi", "ABI policy"),
                       ("devices", "devices")):
        if getattr(control, attr) != getattr(candidate, attr):
            out.append(what)
    return tuple(out)


# --- the intermediate profile ---------------------------------------------------------------------------

_PIN_FIELDS = ("index", "file", "train", "note", "abi", "python", "platforms", "marker")


def _gate_table(role: GateRole) -> dict[str, Any]:
    table: dict[str, Any] = {"order": role.order, "module": role.module, "check": role.check.value,
                             "mode": role.mode.value, "phase": role.phase.value}
    if role.prefix:
        table["prefix"] = role.prefix
    if role.skip_import_if:
        table["skip_import_if"] = role.skip_import_if
    if role.before:
        table["before"] = list(role.before)
    return table


def _index_table(index: Index) -> dict[str, Any]:
    table: dict[str, Any] = {"url": index.url} if index.url else {"from_pip": True}
    for key in ("username_env", "password_env"):
        if getattr(index, key):
            table[key] = getattr(index, key)
    if not index.netrc:
        table["netrc"] = False
    return table


def _value(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    return getattr(v, "value", v)


def pin_table(old: Pin | None, new: Pin | None) -> dict[str, Any]:
    """What an extending profile writes under [pins.NAME] to turn `old` into `new`."""
    if new is None:
        return {"remove": True}
    table: dict[str, Any] = {"version": new.version}
    for attr in _PIN_FIELDS:
        value = getattr(new, attr)
        if (old is None or getattr(old, attr) != value) and value not in (None, (), ""):
            table[attr] = _value(value)
    if new.gate is not None and (old is None or old.gate != new.gate):
        table["gate"] = _gate_table(new.gate)
    return table


def intermediate_profile(control: Stack, candidate: Stack, chosen: Sequence[Unit], name: str,
                         tag: str | None = None) -> str:
    """A profile that extends the control and moves the pins of `chosen` as the candidate has them; `tag` (a
    literal tag) keeps its image apart from every other intermediate's."""
    import tomli_w

    before = {p.key: p for p in control.pins}
    after = {p.key: p for p in candidate.pins}
    pins: dict[str, Any] = {}
    for unit in chosen:
        for move in unit.moves:
            key = canonicalize_name(move.pin)
            old, new = before.get(key), after.get(key)
            pins[old.name if old is not None else move.pin] = pin_table(old, new)
    # a moved pin from an index only the candidate declares brings that index's table along (never its secrets:
    # a profile names the variables that hold them)
    needed = {after[canonicalize_name(m.pin)].index for u in chosen for m in u.moves
              if m.after is not None and canonicalize_name(m.pin) in after}
    indexes = {i.name: _index_table(i) for i in candidate.indexes
               if i.name in needed and control.index(i.name) is None}
    doc: dict[str, Any] = {"stack": {
        "name": name, "extends": control.name,
        "description": f"{control.name} with " + ("; ".join(u.words() for u in chosen) or "nothing moved"),
    }}
    if indexes:
        doc["indexes"] = indexes
    if pins:
        doc["pins"] = pins
    if tag is not None and control.image is not None:
        doc["image"] = {"tag": tag}
    head = (f"# Written by `stackctl bisect {control.name} {candidate.name}`: an intermediate stack, the\n"
            f"# control with {len(chosen)} of the candidate's units of moves. Not a profile to keep.\n\n")
    return head + tomli_w.dumps(doc)
