"""Which wheel pip would install for a target: the tags a target interpreter accepts, best first.

The tag list is built for the target (cp310 on linux_x86_64, say), never for the running interpreter;
manylinux tags go down from the target's glibc, as pip on that machine would accept them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.version import Version

from stackctl.errors import InputError
from stackctl.index.pages import IndexedFile
from stackctl.profile.model import Stack, Target
from stackctl.profile.versions import too_long_number

# The oldest glibc among the images stackctl builds for (Ubuntu 22.04: 2.35; Debian bookworm: 2.36).
# A wheel needing more would not install there, so the resolver must not pick it.
DEFAULT_GLIBC = (2, 35)
_LEGACY = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}


def platform_tags(platform: str, glibc: tuple[int, int] = DEFAULT_GLIBC) -> list[str]:
    """`linux_x86_64` → manylinux_2_35_x86_64 ... manylinux1_x86_64, linux_x86_64 (pip's order)."""
    if not platform.startswith("linux_"):
        return [platform]
    arch = platform.removeprefix("linux_")
    out: list[str] = []
    for minor in range(glibc[1], 4, -1):
        out.append(f"manylinux_{glibc[0]}_{minor}_{arch}")
        if (glibc[0], minor) in _LEGACY and arch in ("x86_64", "i686", "aarch64", "ppc64le", "s390x"):
            out.append(f"{_LEGACY[(glibc[0], minor)]}_{arch}")
    return [*out, platform]


@cache
def ranked_tags(target: Target, glibc: tuple[int, int] = DEFAULT_GLIBC) -> dict[Tag, int]:
    """Tag → rank (0 is best) for `target`."""
    major, minor = (int(x) for x in target.python.split(".")[:2])
    plats = platform_tags(target.platform, glibc)
    tags = [*cpython_tags((major, minor), abis=[target.interpreter], platforms=plats),
            *compatible_tags((major, minor), target.interpreter, plats)]
    ranks: dict[Tag, int] = {}
    for i, t in enumerate(tags):
        ranks.setdefault(t, i)
    return ranks


def python_ok(requires_python: str | None, target: Target) -> bool:
    if not requires_python or too_long_number(requires_python):
        return True  # as for a malformed one, below
    try:
        return SpecifierSet(requires_python).contains(Version(target.python + ".0"), prereleases=True)
    except InvalidSpecifier:
        return True  # pip ignores a malformed Requires-Python too


def best_wheel(files: Iterable[IndexedFile], target: Target) -> IndexedFile | None:
    """The wheel pip would choose among `files` (one version's files) for `target`, or None."""
    ranks = ranked_tags(target)
    best: tuple[bool, int, tuple[int, str] | tuple[()], str] | None = None
    chosen = None
    for f in files:
        if not f.is_wheel or not python_ok(f.requires_python, target):
            continue
        rank = min((ranks[t] for t in f.tags if t in ranks), default=None)
        if rank is None:
            continue
        # pip's order: a file that is not yanked, then the better tag, then the higher build number;
        # the name breaks ties stably
        key = (not f.yanked, -rank, f.build, f.filename)
        if best is None or key > best:
            best, chosen = key, f
    return chosen


def installable_everywhere(files: Sequence[IndexedFile], targets: Sequence[Target]) -> bool:
    return all(best_wheel(files, t) is not None for t in targets)


def one_target(stack: Stack, label: str) -> Target:
    """`--target LABEL`: one of the stack's targets, or an input error naming them."""
    found = stack.target(label)
    if found is None:
        raise InputError(f"--target {label}: not one of {stack.name}'s targets "
                         f"({', '.join(t.label for t in stack.targets) or 'none'})")
    return found
