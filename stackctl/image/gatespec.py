"""The gate's JSON spec, rendered from a stack: what `gates/gate.py` checks, in order.

Pure: a `Stack` (and optionally the lock's closure) in, a JSON-ready dict out. `skip_import_if` is decided
here, against the exact pinned version, so the gate inside the image needs nothing beyond the stdlib.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from stackctl.errors import InputError
from stackctl.profile.model import GateCheck, GateEntry, GateMode, GatePhase, Stack
from stackctl.resolve.lock import Lock

SPEC_FORMAT = 1


def skip_import(stack: Stack, condition: str) -> bool:
    """True when `condition` (a requirement on another pin, e.g. `torch_musa<2.11`) holds for this stack."""
    try:
        req = Requirement(condition)
    except InvalidRequirement as exc:
        raise InputError(f"{stack.name}: skip_import_if {condition!r} is not a requirement: {exc}") from None
    pin = stack.pin(req.name)
    if pin is None:
        raise InputError(f"{stack.name}: skip_import_if {condition!r} names {req.name}, which this stack does not pin")
    try:
        version = Version(pin.version)
    except InvalidVersion:
        raise InputError(f"{stack.name}: pin {pin.name} {pin.version!r} is not a PEP 440 version") from None
    return req.specifier.contains(version, prereleases=True)


def version_prefix(stack: Stack, dist: str, prefix: str) -> str:
    """`1.26.`, `1.26` or `==1.26.*` → `1.26.`: the gate, stdlib only, matches it at a dot boundary."""
    text = prefix.strip()
    if text.startswith("==") and text.endswith(".*"):
        text = text[2:-2].strip()
    if not re.fullmatch(r"[0-9A-Za-z]+(?:[.+!][0-9A-Za-z]+)*\.?", text):
        raise InputError(f"{stack.name}: gate prefix {prefix!r} of {dist} is not a version prefix "
                         "(write 1.26. or ==1.26.*)")
    return text if text.endswith(".") else text + "."


def _entry(stack: Stack, e: GateEntry, device: bool = False) -> dict[str, Any]:
    mode, note = e.mode, ""
    if device and mode is GateMode.SPEC:
        mode, note = GateMode.IMPORT, "device phase: imported"
    if e.skip_import_if and mode is GateMode.IMPORT and skip_import(stack, e.skip_import_if):
        mode, note = GateMode.VERSION, f"import skipped: {e.skip_import_if}"
    expected = e.expected
    if e.check is GateCheck.PREFIX and expected is not None:
        expected = version_prefix(stack, e.dist, expected)
    return {"dist": e.dist, "module": e.module, "mode": mode.value, "check": e.check.value,
            "expected": expected, "note": note}


def _wheel_version(lock: Lock, name: str, target: str) -> str | None:
    """The version the installed metadata will carry: the wheel's own, which may spell the pin longer
    (`numpy==1.26` installs 1.26.0, and the gate compares the installed string)."""
    locked = lock.pin(name)
    for f in locked.files if locked else ():
        if f.target == target and f.filename.endswith(".whl"):
            try:
                return str(parse_wheel_filename(f.filename)[1])
            except InvalidWheelFilename:
                return None
    return None


def installed_pins(stack: Stack, lock: Lock | None, target: str | None) -> tuple[tuple[str, str], ...]:
    """Every distribution the image installs at an exact version: the pins, then the lock's closure."""
    tgt = stack.target(target) if target is not None else None
    out = {p.key: (p.name, p.version) for p in stack.image_pins if tgt is None or p.applies_to(tgt)}
    if lock is not None and target is not None:
        for p in stack.pins:
            if p.key in out:  # limited to other targets, or the installer: not in this image
                out[p.key] = (p.name, _wheel_version(lock, p.name, target) or p.version)
        for c in lock.closure:
            if c.target == target:
                out.setdefault(canonicalize_name(c.name), (c.name, c.version))
    return tuple(out.values())


def gate_spec(stack: Stack, preserve: Iterable[tuple[str, str]] | None = None,
              target: str | None = None, phase: GatePhase | None = None) -> dict[str, Any]:
    """The spec gate.py reads. `preserve` defaults to the stack's pins; for one `target` (an image's),
    a pin limited to other targets is neither gated nor preserved; for one `phase`, only its entries and
    probes (None: the whole gate, in its declared order, but for the device phase). The device phase is every
    entry, the `spec` ones imported for real (in the declared order, so an import that patches another still
    comes first), and the device probes: it runs only where a device is."""
    tgt = stack.target(target) if target is not None else None
    device = phase is GatePhase.DEVICE
    probes = [
        {k: v for k, v in (("name", p.name), ("kind", p.kind), ("package", p.package), ("glob", p.glob),
                           ("count", p.count), ("module", p.module), ("attr", p.attr), ("value", p.value),
                           ("expr", p.expr), ("modules", list(p.modules) or None), ("setup", p.setup),
                           ("op", p.op), ("device", p.device), ("atol", p.atol), ("rtol", p.rtol))
         if v is not None}
        for p in stack.probes
        if (p.phase is not GatePhase.DEVICE if phase is None else p.phase is phase)
    ]
    pins = preserve if preserve is not None else (
        (p.name, p.version) for p in stack.image_pins if tgt is None or p.applies_to(tgt))
    return {
        "format": SPEC_FORMAT,
        "stack": stack.name,
        "entries": [_entry(stack, e, device) for e in stack.gate_entries(tgt, None if device else phase)],
        "probes": probes,
        "preserve": [{"dist": d, "version": v} for d, v in pins],
    }


def dumps(spec: dict[str, Any]) -> str:
    return json.dumps(spec, indent=2, sort_keys=True) + "\n"


def left_for_app(stack: Stack, target: str | None = None) -> tuple[str, ...]:
    """The app-phase entries and probes: what a stack image alone is not gated on."""
    tgt = stack.target(target) if target is not None else None
    return (tuple(e.dist for e in stack.gate_entries(tgt, GatePhase.APP))
            + tuple(f"probe {p.name}" for p in stack.probes if p.phase is GatePhase.APP))

