"""Whether the lock installs what the gate's stack phase checks: a stack-phase entry nothing installs would
fail the stack image's own gate, after every wheel was fetched and installed. Pure: a stack and its lock in,
one message per entry out, each naming the fix."""

from __future__ import annotations

from packaging.utils import canonicalize_name

from stackctl.errors import InputError, Problems
from stackctl.profile.model import GatePhase, Stack
from stackctl.resolve.lock import Lock


def installs(stack: Stack, lock: Lock, target: str) -> set[str]:
    """The canonical names of every distribution an install of `target` takes from the lock."""
    tgt = stack.target(target)
    names = {p.key for p in stack.image_pins if tgt is None or p.applies_to(tgt)}
    return names | {canonicalize_name(c.name) for c in lock.closure if c.target == target}


def outside_lock(stack: Stack, lock: Lock, targets: tuple[str, ...]) -> list[str]:
    """One line per stack-phase gate entry whose distribution the lock does not install for some of `targets`."""
    missing: dict[tuple[str, int], list[str]] = {}
    for target in targets:
        have = installs(stack, lock, target)
        for e in stack.gate_entries(stack.target(target), GatePhase.STACK):
            if canonicalize_name(e.dist) not in have:
                missing.setdefault((e.dist, e.order), []).append(target)
    return [f"{stack.name}: gate entry {dist} (order {order}) runs in the stack phase, but the lock installs "
            f"no {dist} for {', '.join(where)}: pin it ([pins.{dist}]), or mark it phase = \"app\" when the "
            "project's own build installs it"
            for (dist, order), where in missing.items()]


def require_installable(stack: Stack, lock: Lock, targets: tuple[str, ...]) -> None:
    """Raise (exit 2) one error per stack-phase entry outside the lock."""
    lines = outside_lock(stack, lock, targets)
    if lines:
        raise Problems.of([InputError(line) for line in lines])
