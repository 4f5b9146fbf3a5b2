"""Which engine of the pool builds which cell (one stack for one target): values in, an assignment out.

A cell goes to an engine whose cache is warm for it (it holds images of the cell's layer-group stages, or
it builds earlier in the same run a cell that shares them), otherwise to the least-loaded engine. Warmth
never piles the whole matrix onto one engine: a warm engine wins only while its queue is at most one cell
longer than the shortest, so a warm cell waits for at most one build it would not otherwise wait for.
An engine of another machine (an aarch64 target on an x86_64 engine) never gets the cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SLACK = 1  # cells a warm engine's queue may run ahead of the shortest one


@dataclass(frozen=True)
class Cell:
    stack: str
    target: str  # cp311-linux_x86_64
    machine: str  # x86_64: what `uname -m` says on an engine that can run the target's wheels
    cache_keys: tuple[str, ...] = ()  # one per layer-group stage, most stable first

    @property
    def name(self) -> str:
        return f"{self.stack} {self.target}"


@dataclass(frozen=True)
class Slot:
    """An engine as the scheduler sees it."""

    name: str
    machine: str
    warm: frozenset[str] = frozenset()  # cache keys whose stage images the engine already holds


@dataclass(frozen=True)
class Placement:
    cell: Cell
    engine: str
    warm: int  # how many of the cell's stages the engine holds, or builds earlier in the run


@dataclass(frozen=True)
class Assignment:
    placements: tuple[Placement, ...]  # in the order each engine builds them
    unplaced: tuple[tuple[Cell, str], ...] = ()  # cells no engine of the pool can build, and why

    def queue(self, engine: str) -> tuple[Placement, ...]:
        return tuple(p for p in self.placements if p.engine == engine)


def warmth(cell: Cell, warm: frozenset[str] | set[str]) -> int:
    return sum(1 for k in cell.cache_keys if k in warm)


def schedule(cells: Sequence[Cell], slots: Sequence[Slot]) -> Assignment:
    """Place every cell; the warmest cells choose first, then the input order decides (deterministic)."""
    warm = {s.name: set(s.warm) for s in slots}
    load = {s.name: 0 for s in slots}
    order = sorted(range(len(cells)), key=lambda i: -max((warmth(cells[i], warm[s.name]) for s in slots), default=0))
    placed: list[Placement] = []
    unplaced: list[tuple[Cell, str]] = []
    for i in order:
        cell = cells[i]
        able = [s for s in slots if s.machine == cell.machine]
        if not able:
            machines = sorted({s.machine for s in slots})
            unplaced.append((cell, f"no engine of the pool runs {cell.machine} (the pool has "
                                   f"{', '.join(machines) or 'no engine'})"))
            continue
        shortest = min(load[s.name] for s in able)
        # max() keeps the first of equals: among as-warm engines the shorter queue, then the pool's order
        best = max(able, key=lambda s: (warmth(cell, warm[s.name]) if load[s.name] <= shortest + SLACK else 0,
                                        -load[s.name]))
        placed.append(Placement(cell, best.name, warmth(cell, warm[best.name])))
        load[best.name] += 1
        warm[best.name].update(cell.cache_keys)
    by_engine = {s.name: n for n, s in enumerate(slots)}
    placed.sort(key=lambda p: by_engine[p.engine])  # stable: each engine's cells keep the order they were placed
    return Assignment(tuple(placed), tuple(unplaced))
