"""What kind of move one version to another is, in the words a reviewer uses."""

from __future__ import annotations

from packaging.version import Version


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
        first = next(i for i in range(width) if ra[i] != rb[i])
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
