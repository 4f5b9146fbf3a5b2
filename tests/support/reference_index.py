"""Loopback indexes holding every version the reference stacks (stacks/*.toml) pin: the vendor index
HTML-only (upload times only as Last-Modified), the public one PEP 691 JSON with PEP 700 times.

Stacks are released a month apart in the order of their torch; within a release every pin goes up a
minute after the one before, so a release train's members are minutes apart. A version pinned by several
stacks is published once, with the first of them.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from packaging.version import Version

from stackctl.profile.loader import load_stack
from stackctl.profile.model import Stack
from tests.support.index_server import IndexServer
from tests.support.wheels import build_wheel

REPO = Path(__file__).resolve().parents[2]
STACKS = REPO / "stacks"
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
VENDOR = ("torch-2.9-control", "torch-2.11-post1", "torch-2.11-post2")


def reference_stacks(names: tuple[str, ...] = VENDOR) -> list[Stack]:
    stacks = [load_stack(STACKS / f"{n}.toml") for n in names]

    def torch(s: Stack) -> Version:
        pin = s.pin("torch")
        return Version(pin.version) if pin else Version("0")

    return sorted(stacks, key=torch)


def populate_reference(musa: IndexServer, public: IndexServer, wheels: Path,
                       names: tuple[str, ...] = VENDOR) -> dict[str, datetime]:
    """Fill both servers; returns when each stack was released."""
    seen: set[tuple[str, str]] = set()
    released: dict[str, datetime] = {}
    for month, stack in enumerate(reference_stacks(names)):
        when = T0 + timedelta(days=30 * month)
        released[stack.name] = when
        for n, pin in enumerate(stack.pins):
            if (pin.key, pin.version) in seen:
                continue
            seen.add((pin.key, pin.version))
            server = musa if pin.index == "musa" else public
            w = build_wheel(wheels / pin.index, pin.name, pin.version,
                            files={f"{pin.key.replace('-', '_')}/__init__.py": f"__version__ = {pin.version!r}\n"})
            server.add(w, upload_time=when + timedelta(minutes=n))
    return released
