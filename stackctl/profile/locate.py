"""What a PROFILE argument names: a path, `PATH@GITREV`, or a bare stack name found in ./stacks/."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stackctl.base.words import did_you_mean
from stackctl.errors import InputError

if TYPE_CHECKING:
    from stackctl.profile.model import Stack


def resolve_profile_arg(spec: str) -> str:
    """A path, `PATH@REV`, or a bare stack name found in ./stacks/."""
    # a link that leads nowhere (to itself) is there all the same: reading it says why it cannot be read
    if Path(spec).exists() or Path(spec).is_symlink() or "@" in spec:
        return spec
    if "/" not in spec and not spec.endswith(".toml"):
        candidate = Path("stacks") / f"{spec}.toml"
        if candidate.exists() or candidate.is_symlink():
            return str(candidate)
        if not Path("stacks").is_dir():
            raise InputError(f"unknown stack {spec!r}: no {candidate}",
                             hint=f"a bare stack name is looked for in stacks/ of the current directory "
                             f"({Path.cwd()}), which has none: run from the repository's top, or give the "
                             "profile's path")
        known = sorted(p.stem for p in Path("stacks").glob("*.toml"))
        raise InputError(f"unknown stack {spec!r}: no {candidate}", hint=did_you_mean(spec, known) or (
            f"stacks/ here has {', '.join(known)}" if known else "stacks/ here holds no profile"))
    raise InputError(f"{spec}: no such file")


def profile_file(spec: str) -> Path:
    """The profile's file in the working tree: for `PATH@REV`, PATH."""
    path = resolve_profile_arg(spec)
    if "@" in path and not Path(path).exists():
        path = path.rsplit("@", 1)[0]
    return Path(path)


def load_profile(spec: str) -> Stack:
    """Load and validate the profile a PROFILE argument names (a file, `PATH@REV`, or a stack name)."""
    from stackctl.profile.loader import load_stack
    from stackctl.profile.sources import split_ref

    source, name = split_ref(resolve_profile_arg(spec))
    return load_stack(name, source)


@dataclass(frozen=True)
class StackRef:
    """A PROFILE argument resolved once: the argument as given (what a record says to run again), the stack it
    names, and its file in the working tree (beside which its lock is, for `PATH@REV` beside PATH)."""

    arg: str
    stack: Stack
    file: Path

    @property
    def name(self) -> str:
        return self.stack.name


def stack_ref(spec: str) -> StackRef:
    """The profile a PROFILE argument names, loaded and validated once, with where it came from."""
    return StackRef(spec, load_profile(spec), profile_file(spec))


def load_profiles(specs: list[str] | tuple[str, ...]) -> tuple[Stack, ...]:
    """`stackctl validate`: every profile loaded, or one error listing every problem of all of them."""
    from stackctl.errors import Problem, ProfileError

    stacks: list[Stack] = []
    problems: list[Problem] = []
    for spec in specs:
        try:
            stacks.append(load_profile(spec))
        except ProfileError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ProfileError(tuple(problems))
    return tuple(stacks)


def key_position(stack: Stack, path: tuple[str, ...]) -> tuple[str, int | None]:
    """Where a profile writes `path` (`("pins", "torch")`): the file of the stack's chain, child first, that
    writes the deepest part of it, and that line; the stack's own file, no line, when none can be read (a
    profile at another git revision is not in the working tree)."""
    from stackctl.profile.tomlpos import key_lines

    best: tuple[str, int | None] = (stack.sources[0] if stack.sources else stack.name, None)
    depth = 0
    for display in stack.sources:
        try:
            lines = key_lines(Path(display).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        for d in range(len(path), depth, -1):
            if path[:d] in lines:
                best, depth = (display, lines[path[:d]]), d
                break
    return best
