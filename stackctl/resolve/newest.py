"""Is this the newest? The newest version in the pin's own line, and newer versions of other lines.

A line is what an upgrade may move within without changing what the stack is built on: the same
release series (major.minor), the same local label (`+musa5.2.0`; deep_ep's label names the torch build
it was compiled against, so a different label is a different build), and wheels for every target of the
stack (an aarch64-only `+musa5.2.1mp22` build is another platform line). Pre-releases count only when
the pin is one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

from packaging.version import Version

from stackctl.index.pages import IndexedFile
from stackctl.profile.model import Target
from stackctl.resolve.targets import installable_everywhere


@dataclass(frozen=True)
class LineReport:
    newest_in_line: Version | None
    newest_files: tuple[IndexedFile, ...]
    other_lines: tuple[str, ...]  # "VERSION (why)": the newest of each newer line, newest first


def _series(v: Version) -> tuple[int, ...]:
    return (*v.release, 0, 0)[:2]


def _platforms(files: Sequence[IndexedFile]) -> str:
    plats = sorted({t.platform for f in files for t in f.tags} - {"any"})
    return ", ".join(plats) or "any"


def why_other(v: Version, pin: Version, files: Sequence[IndexedFile], targets: Sequence[Target]) -> str | None:
    """Why `v` is not in `pin`'s line, or None when it is: every way it differs (label, platform, series)."""
    why = []
    if v.local != pin.local:
        why.append(f"local label +{v.local}" if v.local else "no local label")
    missing = [t.label for t in targets if not installable_everywhere(files, [t])]
    if missing:
        why.append(f"platform {_platforms(files)}" if len(missing) == len(targets)
                   else "no wheel for " + ", ".join(missing))
    if _series(v) != _series(pin):
        why.append("series " + ".".join(map(str, _series(v))))
    return "; ".join(why) or None


def newest_in_line(pin_version: str, files: Iterable[IndexedFile], targets: Sequence[Target],
                   max_other: int = 5) -> LineReport:
    """The newest version of the pin's line, and the newest build of each other line.

    A build of another local-label family or platform line of the pin's own series is listed whatever
    PEP 440 says of its order (`+musa5.2.1mp22` sorts below `+musa5.2.0` as a local label, yet is a later
    aarch64 build); another series only when it is newer (torch 2.1.2's platform set differs from 2.11.0's,
    and it is still no line to move to).
    """
    pin = Version(pin_version)
    by_version = sorted(files, key=lambda f: f.version, reverse=True)
    newest: Version | None = None
    newest_files: tuple[IndexedFile, ...] = ()
    others: list[str] = []
    seen: set[str] = set()  # one entry per other line: its newest version
    for v, group in groupby(by_version, key=lambda f: f.version):
        fs = [f for f in group if not f.yanked]
        if v == pin or not fs or (v.is_prerelease and not pin.is_prerelease):
            continue
        why = why_other(v, pin, fs, targets)
        if why is None:
            if newest is None and v > pin:
                newest, newest_files = v, tuple(fs)
            continue
        # another build of the pin's own series (a local label, another platform) whatever its order; an
        # older release of another series is no line to move to
        another_build = (v.local != pin.local or "platform " in why) and _series(v) == _series(pin)
        if (v > pin or another_build) and why not in seen and len(others) < max_other:
            seen.add(why)
            others.append(f"{v} ({why})")
    if newest is None:
        own = tuple(f for f in files if f.version == pin and not f.yanked)
        newest, newest_files = (pin, own) if own else (None, ())
    return LineReport(newest, newest_files, tuple(others))
