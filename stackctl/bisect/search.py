"""The search: which units of moves make the candidate regress, by comparing intermediate stacks with the control.

Pure: `search_units(k, compare_many, slots)` over units 0..k-1 in their order; `compare_many` is given a round of
subsets at once (at most `slots` of them, compared side by side) and says of each whether the control with those
units moved is good (as the control), bad (regressed) or cannot tell (a skip: it did not resolve, failed its ABI
check or gate, or the comparison was undecided). The empty set is the control (good); the whole set is the
candidate, compared first. Each subset is compared at most once.

1. Binary search over the prefixes: the first prefix that is bad ends in a culprit (log2(k) comparisons). A skipped
   prefix is stepped over to the nearest other one in the range, as `git bisect skip` does; when every prefix in
   the range is skipped, the finding is the range itself ("ambiguous").
2. Verification: the control with that unit alone. Bad: a culprit. Good: it regresses only with some of the units
   before it, an interaction, whose smallest set is searched for the same way (the unit, plus the shortest prefix
   that makes it bad, again and again until the set alone is bad).
3. The candidate without the units found (and without those found before): good, done; bad, another culprit is
   among the rest, searched for from 1.

With one slot each round is one comparison, in the order above. With N slots (a k-ary search, as attempts run side
by side): a round of the prefix search tests up to N prefixes spread evenly over the open range, and the range
left is (the longest good, the shortest bad) among them, so k units take about log_(N+1)(k) rounds; the first split
points go in the candidate's round, and the candidate without the unit in its "alone" round, each on the chance
that it is needed (an answer that is not needed is left unused).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
    round: int  # the round that asked it (1, 2, ...): probes of one round were compared side by side


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
    rounds: int  # how many rounds of comparisons were asked

    @property
    def culprits(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind != AMBIGUOUS)


Ask = tuple[tuple[int, ...], str]  # the units moved, in order, and what the search asks it for (a Probe's role)
CompareMany = Callable[[Sequence[Ask]], Sequence[Outcome]]  # a round: the outcome of each ask, in its order
Compare = Callable[[tuple[int, ...], str], Outcome]


def one_by_one(compare: Compare) -> CompareMany:
    """A round's comparisons made one after another, in the order asked."""
    return lambda asks: [compare(units, role) for units, role in asks]


def _spread(lo: int, hi: int, skipped: set[int], n: int) -> list[int]:
    """Up to `n` prefix lengths strictly between lo and hi, none skipped, spread evenly: each the open one nearest
    to lo + j (hi - lo) / (n + 1) (the shorter on a tie). One: the middle, as a binary search takes."""
    open_ = [m for m in range(lo + 1, hi) if m not in skipped]
    if len(open_) <= n:
        return open_
    chosen: list[int] = []
    for j in range(1, n + 1):
        target = lo + j * (hi - lo) // (n + 1)
        chosen.append(min((m for m in open_ if m not in chosen), key=lambda m: (abs(m - target), m)))
    return sorted(chosen)


def _narrow(lo: int, hi: int, outcomes: Mapping[int, Outcome], skipped: set[int]) -> tuple[int, int]:
    """The range left by the prefixes tested: up to the shortest bad one, from the longest good one below it (a
    good one above a bad one is passed over: the search looks for where the candidate first goes bad)."""
    bad = [m for m, o in outcomes.items() if o is Outcome.BAD and lo < m < hi]
    if bad:
        hi = min(bad)
    good = [m for m, o in outcomes.items() if o is Outcome.GOOD and lo < m < hi]
    if good:
        lo = max(good)
    skipped.update(m for m, o in outcomes.items() if o is Outcome.SKIP)
    return lo, hi


class _Search:
    def __init__(self, k: int, compare: CompareMany, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, not {slots}")
        self.k = k
        self.compare = compare
        self.slots = slots
        self.memo: dict[frozenset[int], Outcome] = {}
        self.probes: list[Probe] = []
        self.rounds = 0

    def known(self, units: Sequence[int]) -> Outcome | None:
        key = frozenset(units)
        return self.memo.get(key) if key else Outcome.GOOD

    def ask(self, asks: Sequence[tuple[Sequence[int], str]]) -> list[Outcome]:
        """One round: the subsets not compared before, compared at once; the outcome of every ask, in order."""
        new: dict[frozenset[int], Ask] = {}
        for units, role in asks:
            key = frozenset(units)
            if key and key not in self.memo and key not in new:
                new[key] = (tuple(sorted(key)), role)
        if new:
            assert len(new) <= self.slots, (new, self.slots)
            self.rounds += 1
            asked = list(new.values())
            outcomes = list(self.compare(asked))
            if len(outcomes) != len(asked):
                raise ValueError(f"{len(asked)} comparisons asked, {len(outcomes)} outcomes given")
            for (units, role), outcome in zip(asked, outcomes, strict=True):
                self.memo[frozenset(units)] = outcome
                self.probes.append(Probe(units, outcome, role, self.rounds))
        return [self.memo[frozenset(u)] if u else Outcome.GOOD for u, _ in asks]

    def first_bad(self, pool: Sequence[int], fixed: Sequence[int], role: str) -> tuple[int, int] | None:
        """The shortest prefix of `pool` that, with `fixed`, is bad: (lo, hi) with hi - lo == 1 when found,
        where prefix lo is good and prefix hi bad (prefix 0 is taken as good, the whole pool as bad). None: the
        skips left a range of more than one unit, returned through `self.range`."""
        lo, hi = 0, len(pool)
        skipped: set[int] = set()

        def prefix(m: int) -> list[int]:
            return [*pool[:m], *fixed]

        while hi - lo > 1:
            if self.slots > 1:  # what earlier rounds (the speculative ones too) tell of this range, for free
                told = {m: o for m in range(lo + 1, hi) if (o := self.known(prefix(m))) is not None}
                lo, hi = _narrow(lo, hi, told, skipped)
                if hi - lo <= 1:
                    break
            points = _spread(lo, hi, skipped, self.slots)
            if not points:
                self.range = (lo, hi)
                return None
            outcomes = self.ask([(prefix(m), role) for m in points])
            lo, hi = _narrow(lo, hi, dict(zip(points, outcomes, strict=True)), skipped)
        return lo, hi

    range: tuple[int, int] = (0, 0)

    def result(self, top: Outcome, findings: list[Finding], complete: bool) -> SearchResult:
        return SearchResult(self.k, top, tuple(findings), tuple(self.probes), complete, self.rounds)

    def run(self) -> SearchResult:
        everything = list(range(self.k))
        if not everything:
            return self.result(Outcome.GOOD, [], True)
        first: list[tuple[Sequence[int], str]] = [(everything, "candidate")]
        # with slots to spare, the first split points beside the candidate: unused unless it regressed
        first += [(everything[:m], "search") for m in _spread(0, self.k, set(), self.slots - 1)]
        top = self.ask(first)[0]
        findings: list[Finding] = []
        if top is not Outcome.BAD:
            return self.result(top, findings, top is Outcome.GOOD)
        rest = everything
        while rest:
            found = self.first_bad(rest, (), "search")
            if found is None:
                lo, hi = self.range
                findings.append(Finding(tuple(rest[lo:hi]), AMBIGUOUS, None, None))
                return self.result(top, findings, False)
            unit = rest[found[1] - 1]
            finding = self.verify(unit, rest[:found[1] - 1], [u for u in rest if u != unit])
            if finding.kind is AMBIGUOUS:
                findings.append(finding)
                return self.result(top, findings, False)
            remaining = [u for u in rest if u not in finding.units]
            without = self.ask([(remaining, "without")])[0]
            findings.append(Finding(finding.units, finding.kind, finding.alone, without))
            if without is not Outcome.BAD:
                return self.result(top, findings, without is Outcome.GOOD)
            rest = remaining
        return self.result(top, findings, True)

    def verify(self, unit: int, before: list[int], without: list[int]) -> Finding:
        """The unit alone; where it is good alone, the smallest set of the units before it that it needs.
        `without`: the rest without the unit, asked beside it (with slots to spare) on the chance that it is a
        culprit."""
        asks: list[tuple[Sequence[int], str]] = [([unit], "alone")]
        if self.slots > 1 and self.known([unit]) is not Outcome.GOOD:
            asks.append((without, "without"))
        alone = self.ask(asks)[0]
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
            together = self.ask([(needed, "interaction")])[0]
            if together is not Outcome.GOOD:
                return Finding(tuple(sorted(needed)), INTERACTION, together, None)


def search_units(k: int, compare: CompareMany, slots: int = 1) -> SearchResult:
    """Which of units 0..k-1 make the candidate bad. `compare` is called once a round with at most `slots`
    subsets, none asked before; with one slot, once per distinct subset in the order of a binary search."""
    return _Search(k, compare, slots).run()
