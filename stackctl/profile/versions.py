"""What kind of move one version to another is, in the words a reviewer uses."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

# Python refuses to turn more than 4300 digits into an int (ValueError, not InvalidVersion), and long
# numbers cost quadratic time before that: no real version, date or build number needs more than this.
MAX_DIGITS = 24
MAX_VERSION_LENGTH = 256
_LONG_NUMBER = re.compile(rf"\d{{{MAX_DIGITS + 1},}}")


def too_long_number(text: str) -> bool:
    """True when `text` (a version, a file name) holds a run of digits no version has."""
    return _LONG_NUMBER.search(text) is not None


def parse_version(text: str) -> Version:
    """`Version(text)`, with the bounds above: InvalidVersion for anything packaging would choke on."""
    if len(text) > MAX_VERSION_LENGTH:
        raise InvalidVersion(f"version longer than {MAX_VERSION_LENGTH} characters")
    if too_long_number(text):
        raise InvalidVersion(f"a number of more than {MAX_DIGITS} digits in {text[:40]!r}...")
    return Version(text)


def _post(v: Version) -> str:
    return f"post{v.post}" if v.post is not None else "no post"


def classify(old: str, new: str) -> str:
    """`minor`, `patch`, `post-release (post1 → post2)`, `local label (a → b)`, `downgrade: ...`."""
    a, b = Version(old), Version(new)
    if old == new:
        return "unchanged"
    prefix = "downgrade: " if b < a else ""
    if a.epoch != b.epoch:
        return prefix + "epoch"
    if a.release != b.release:
        width = max(len(a.release), len(b.release))
        ra = a.release + (0,) * (width - len(a.release))
        rb = b.release + (0,) * (width - len(b.release))
        first = next((i for i in range(width) if ra[i] != rb[i]), None)
        if first is not None:  # 2.2 and 2.2.0 are one release written two ways: compare what follows
            return prefix + ("major", "minor")[first] if first < 2 else prefix + "patch"
    if a.pre != b.pre:
        return prefix + "pre-release"
    if a.post != b.post:
        return prefix + f"post-release ({_post(a)} → {_post(b)})"
    if a.dev != b.dev:
        return prefix + "dev-release"
    if a.local != b.local:
        return f"local label ({a.local or 'none'} → {b.local or 'none'})"
    return "respelled"
