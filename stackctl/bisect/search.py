"""The search: which units of moves make the candidate regress, by comparing intermediate stacks with the control.

Pure: `search(k, compare)` over units 0..k-1 in their order; `compare(subset)` says whether the control with
those units moved is good (as the control), bad (regressed) or cannot tell (a skip: it did not resolve, failed its
ABI check or gate, or the comparison was undecided). The empty set is the control (good); the whole set is the
candidate, compared first. Each subset is compared at most once.

1. Binary search over the prefixes: the first prefix that is bad ends in a culprit (log2(k) comparisons). A skipped
   prefix is stepped over to the nearest other one in the range, as `git bisect skip` does; when every prefix in
   the range is skipped, the finding is the range itself ("ambiguous").
2. Verification: the control with that unit alone. Bad: a culprit. Good: it regresses only with some of the units
   before it, an interaction, whose smallest set is searched for the same way (the unit, plus the shortest prefix
   that makes it bad, again and again until the set alone is bad).
3. The candidate without the units found (and without those found before): good, done; bad, another culprit is
   among the rest, searched for from 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum


class Outcome(str, Enum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


CULPRIT, INTERACTION, AMBIGUOUS = "culprit", "interaction", "ambiguous"


@dataclass(frozen=True)
class Probe:
    """One comparison: the units moved (indices, in order), its outcome and what the search asked it for."""

    units: tuple[int, ...]
    outcome: Outcome
    role: str  # "candidate" | "search" | "alone" | "without" | "interaction"


@dataclass(frozen=True)
class Finding:
    """`units`: one culprit, the smallest set found of an interaction, or the range the skips left (ambiguous)."""

    units: tuple[int, ...]
    kind: str
    alone: Outcome | None  # the control with these units alone
    without: Outcome | None  # the candidate without them (and without the findings before)


@dataclass(frozen=True)
class SearchResult:
    k: int
    candidate: Outcome  # the whole set against the control
    findings: tuple[Finding, ...]
    probes: tuple[Probe, ...]
    complete: bool  # False: the search stopped at a skip it could not step over (an ambiguous finding, or an
    # unknown "without")

    @property
    def culprits(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind != AMBIGUOUS)


Compare = Callable[[tuple[int, ...], str], Outcome]


class _Search:
    def __init__(self, k: int, compare: Compare) -> None:
        self.k = k
        self.compare = compare
        self.memo: dict[frozenset[int], Outcome] = {}
        self.probes: list[Probe] = []

    def cmp(self, units: Sequence[int], role: str) -> Outcome:
        key = frozenset(units)
        if not key:
            return Outcome.GOOD
        if key not in self.memo:
            ordered = tuple(sorted(key))
            outcome = self.compare(ordered, role)
            self.memo[key] = outcome
            self.probes.append(Probe(ordered, outcome, role))
        return self.memo[key]

    def first_bad(self, pool: Sequence[int], fixed: Sequence[int], role: str) -> tuple[int, int] | None:
        """The shortest prefix of `pool` that, with `fixed`, is bad: (lo, hi) with hi - lo == 1 when found,
        where prefix lo is good and prefix hi bad (prefix 0 is taken as good, the whole pool as bad). None: the
        skips left a range of more than one unit, returned through `self.range`."""
        lo, hi = 0, len(pool)
        skipped: set[int] = set()
        while hi - lo > 1:
            mid = (lo + hi) // 2
            tries = sorted((m for m in range(lo + 1, hi) if m not in skipped), key=lambda m: (abs(m - mid), m))
            for m in tries:
                outcome = self.cmp([*pool[:m], *fixed], role)
                if outcome is Outcome.SKIP:
                    skipped.add(m)
                    continue
                if outcome is Outcome.GOOD:
                    lo = m
                else:
                    hi = m
                break
            else:
                self.range = (lo, hi)
                return None
        return lo, hi

    range: tuple[int, int] = (0, 0)

    def run(self) -> SearchResult:
        everything = list(range(self.k))
        top = self.cmp(everything, "candidate") if everything else Outcome.GOOD
        findings: list[Finding] = []
        if top is not Outcome.BAD:
            return SearchResult(self.k, top, (), tuple(self.probes), top is Outcome.GOOD)
        rest = everything
        while rest:
            found = self.first_bad(rest, (), "search")
            if found is None:
                lo, hi = self.range
                findings.append(Finding(tuple(rest[lo:hi]), AMBIGUOUS, None, None))
                return SearchResult(self.k, top, tuple(findings), tuple(self.probes), False)
            unit = rest[found[1] - 1]
            finding = self.verify(unit, rest[:found[1] - 1])
            if finding.kind is AMBIGUOUS:
                findings.append(finding)
                return SearchResult(self.k, top, tuple(findings), tuple(self.probes), False)
            remaining = [u for u in rest if u not in finding.units]
            without = self.cmp(remaining, "without")
            findings.append(Finding(finding.units, finding.kind, finding.alone, without))
            if without is not Outcome.BAD:
                return SearchResult(self.k, top, tuple(findings), tuple(self.probes), without is Outcome.GOOD)
            rest = remaining
        return SearchResult(self.k, top, tuple(findings), tuple(self.probes), True)

    def verify(self, unit: int, before: list[int]) -> Finding:
        """The unit alone; where it is good alone, the smallest set of the units before it that it needs."""
        alone = self.cmp([unit], "alone")
        if alone is not Outcome.GOOD:  # bad: a culprit; skip: a culprit as far as the search can tell
            return Finding((unit,), CULPRIT, alone, None)
        needed = [unit]
        pool = before
        while True:
            found = self.first_bad(pool, needed, "interaction")
            if found is None:
                lo, hi = self.range
                return Finding(tuple(sorted([*needed, *pool[lo:hi]])), AMBIGUOUS, None, None)
            partner = pool[found[1] - 1]
            needed.append(partner)
            pool = pool[:found[1] - 1]
            together = self.cmp(needed, "interaction")
            if together is not Outcome.GOOD:
                return Finding(tuple(sorted(needed)), INTERACTION, together, None)


def search_units(k: int, compare: Compare) -> SearchResult:
    """Which of units 0..k-1 make the candidate bad; `compare(units, role)` is called once per distinct subset."""
    return _Search(k, compare).run()
