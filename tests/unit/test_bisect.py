"""bisect's pure parts: the units of moves two profiles make, the intermediate profile, the search (against hand-made
oracles: one culprit anywhere, two culprits, an interaction, skips; with one slot against the binary search it was
before rounds, with several against itself with one) and the reading of ab's verdicts."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackctl.bisect import Outcome, intermediate_profile, judge_trial, one_by_one, plan_units, search_units
from stackctl.bisect.search import CompareMany
from stackctl.profile.loader import load_stack
from tests.conftest import STACKS
from tests.support.cli import Cli
from tests.support.profiles import write_profile

GOOD, BAD, SKIP = Outcome.GOOD, Outcome.BAD, Outcome.SKIP


def _five(tmp_path: Path) -> tuple[Path, Path]:
    """Five packages move: alpha and beta one release train, gamma, delta, and kern built against delta."""
    control = write_profile(tmp_path, "control", {
        "gamma": "1.0", "alpha": {"version": "1.0", "train": "ab"}, "beta": {"version": "1.0", "train": "ab"},
        "delta": "2.0", "kern": "0.5+delta2.0", "steady": "3.0", "gone": "1.0"})
    candidate = write_profile(tmp_path, "candidate", {
        "gamma": "1.1", "alpha": {"version": "1.1", "train": "ab"}, "beta": {"version": "1.1", "train": "ab"},
        "delta": "2.1", "kern": "0.5+delta2.1", "steady": {"version": "3.0", "note": "a note is no move"},
        "fresh": "0.1"})
    return control, candidate


def test_units_move_a_train_whole_and_a_build_with_the_pin_its_label_names(tmp_path: Path) -> None:
    control, candidate = _five(tmp_path)
    units = plan_units(load_stack(control), load_stack(candidate))
    assert [(u.name, u.pins) for u in units.units] == [
        ("gamma", ("gamma",)), ("train ab", ("alpha", "beta")), ("delta + kern", ("delta", "kern")),
        ("gone", ("gone",)), ("fresh", ("fresh",))]
    delta = units.units[2]
    assert delta.why == ("kern 0.5+delta2.1 is built against delta 2.1",)
    assert [m.change for m in units.units[3].moves + units.units[4].moves] == ["removed", "added"]
    assert units.kept == ()


def test_the_musa_upgrade_is_two_units_deep_ep_with_its_torch() -> None:
    units = plan_units(load_stack(STACKS / "torch-2.11-post1.toml"), load_stack(STACKS / "torch-2.11-post2.toml"))
    assert [u.name for u in units.units] == ["train musa-torch + deep_ep", "torchada"]
    assert units.units[0].pins == ("torch", "torch_musa", "torchvision", "torchaudio", "deep_ep")
    assert ("deep_ep 1.1.0+musa5.2.0torch2.11.0.post2 is built against torch 2.11.0.post2+musa5.2.0"
            in units.units[0].why)
    # post2 also moves vendor modules to find_spec in the gate: not a pin move, said, never bisected
    assert any("gate" in k or "pins that keep their version" in k for k in units.kept)


def test_a_label_names_a_version_and_not_a_longer_one(tmp_path: Path) -> None:
    control = write_profile(tmp_path, "c", {"torch": "2.11.0.post1", "ext": "1.0+torch2.11.0.post1"})
    candidate = write_profile(tmp_path, "n", {"torch": "2.11.0.post2", "ext": "1.0+torch2.11.0.post20"})
    units = plan_units(load_stack(control), load_stack(candidate))
    assert [u.pins for u in units.units] == [("torch",), ("ext",)]


def test_an_intermediate_extends_the_control_and_moves_only_its_units(tmp_path: Path) -> None:
    control, candidate = _five(tmp_path)
    c, n = load_stack(control), load_stack(candidate)
    units = plan_units(c, n)
    text = intermediate_profile(c, n, [units.units[1], units.units[3], units.units[4]], "candidate-bisect-2-4-5")
    path = control.parent / "candidate-bisect-2-4-5.toml"
    path.write_text(text)
    mid = load_stack(path)
    assert mid.extends == "control"
    versions = {p.name: p.version for p in mid.pins}
    assert versions == {"gamma": "1.0", "alpha": "1.1", "beta": "1.1", "delta": "2.0", "kern": "0.5+delta2.0",
                        "steady": "3.0", "fresh": "0.1"}  # gone is removed, fresh added, the train moved whole
    assert next(p for p in mid.pins if p.name == "alpha").train == "ab"


# --- the search ----------------------------------------------------------------------------------------

def oracle(bad_sets: Iterable[frozenset[int]], skip: Callable[[frozenset[int]], bool] = lambda s: False,
           calls: list[tuple[int, ...]] | None = None) -> CompareMany:
    """Bad when the subset holds one of `bad_sets` whole; a skip where `skip` says so."""
    sets = list(bad_sets)

    def compare(units: tuple[int, ...], role: str) -> Outcome:
        if calls is not None:
            calls.append(units)
        s = frozenset(units)
        if skip(s):
            return SKIP
        return BAD if any(b <= s for b in sets) else GOOD

    return one_by_one(compare)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 9])
def test_one_culprit_anywhere_is_found_verified_and_named_alone(k: int) -> None:
    for culprit in range(k):
        calls: list[tuple[int, ...]] = []
        result = search_units(k, oracle([frozenset({culprit})], calls=calls))
        assert [(f.units, f.kind, f.alone, f.without) for f in result.findings] == [((culprit,), "culprit", BAD, GOOD)]
        assert result.complete and result.candidate is BAD
        assert len(calls) == len(set(calls))  # each subset once
        # the candidate, ⌈log2 k⌉ prefixes at most, the unit alone and the candidate without it
        assert len(calls) <= 1 + math.ceil(math.log2(k)) + 2 if k > 1 else len(calls) == 1


def test_two_culprits_are_both_named() -> None:
    result = search_units(5, oracle([frozenset({1}), frozenset({3})]))
    assert [(f.units, f.kind, f.alone) for f in result.findings] == [((1,), "culprit", BAD), ((3,), "culprit", BAD)]
    assert result.findings[0].without is BAD and result.findings[1].without is GOOD and result.complete


def test_an_interaction_is_said_with_the_smallest_set() -> None:
    result = search_units(6, oracle([frozenset({1, 4})]))
    assert [(f.units, f.kind, f.alone, f.without) for f in result.findings] == [
        ((1, 4), "interaction", BAD, GOOD)]
    three = search_units(7, oracle([frozenset({0, 2, 5})]))
    assert [(f.units, f.kind) for f in three.findings] == [((0, 2, 5), "interaction")]


def test_a_stack_that_cannot_be_made_is_stepped_over() -> None:
    # unit 2 needs unit 3 to resolve: any set with 2 and without 3 is a skip
    calls: list[tuple[int, ...]] = []
    result = search_units(6, oracle([frozenset({4})], skip=lambda s: 2 in s and 3 not in s, calls=calls))
    assert [(f.units, f.kind) for f in result.findings] == [((4,), "culprit")] and result.complete
    assert (0, 1, 2) in calls  # the prefix asked for first was a skip, the search went on past it


def test_when_every_stack_between_is_skipped_the_range_is_named() -> None:
    result = search_units(4, oracle([frozenset({1})], skip=lambda s: 0 in s and len(s) < 4))
    assert [(f.units, f.kind) for f in result.findings] == [((0, 1, 2, 3), "ambiguous")]
    assert not result.complete and not result.culprits


def test_a_candidate_that_does_not_regress_ends_the_search_at_once() -> None:
    calls: list[tuple[int, ...]] = []
    result = search_units(5, oracle([], calls=calls))
    assert result.candidate is GOOD and result.findings == () and calls == [(0, 1, 2, 3, 4)] and result.complete
    undecided = search_units(5, lambda asks: [SKIP] * len(asks))
    assert undecided.candidate is SKIP and not undecided.complete


def test_every_single_and_pair_of_culprits_among_six() -> None:
    for n in (1, 2):
        for bad in itertools.combinations(range(6), n):
            result = search_units(6, oracle([frozenset({b}) for b in bad]))
            assert sorted(u for f in result.findings for u in f.units) == list(bad), bad
            assert all(f.kind == "culprit" for f in result.findings)


# --- rounds: several comparisons side by side ------------------------------------------------------------

def _as_before(k: int, compare: Callable[[tuple[int, ...], str], Outcome]
               ) -> tuple[Outcome, list[tuple[tuple[int, ...], str, Outcome | None, Outcome | None]],
                          list[tuple[tuple[int, ...], Outcome, str]], bool]:
    """The search as it was before it asked in rounds (a binary search, one comparison at a time), kept as the
    reference that one slot must match probe for probe: (candidate, findings, probes, complete)."""
    memo: dict[frozenset[int], Outcome] = {}
    probes: list[tuple[tuple[int, ...], Outcome, str]] = []

    def cmp(units: Sequence[int], role: str) -> Outcome:
        key = frozenset(units)
        if not key:
            return GOOD
        if key not in memo:
            memo[key] = compare(tuple(sorted(key)), role)
            probes.append((tuple(sorted(key)), memo[key], role))
        return memo[key]

    def first_bad(pool: Sequence[int], fixed: Sequence[int], role: str) -> tuple[int, int, bool]:
        lo, hi = 0, len(pool)
        skipped: set[int] = set()
        while hi - lo > 1:
            mid = (lo + hi) // 2
            for m in sorted((m for m in range(lo + 1, hi) if m not in skipped), key=lambda m: (abs(m - mid), m)):
                outcome = cmp([*pool[:m], *fixed], role)
                if outcome is SKIP:
                    skipped.add(m)
                    continue
                lo, hi = (m, hi) if outcome is GOOD else (lo, m)
                break
            else:
                return lo, hi, False
        return lo, hi, True

    everything = list(range(k))
    top = cmp(everything, "candidate") if everything else GOOD
    findings: list[tuple[tuple[int, ...], str, Outcome | None, Outcome | None]] = []
    if top is not BAD:
        return top, findings, probes, top is GOOD
    rest = everything
    while rest:
        lo, hi, ok = first_bad(rest, (), "search")
        if not ok:
            findings.append((tuple(rest[lo:hi]), "ambiguous", None, None))
            return top, findings, probes, False
        unit, before = rest[hi - 1], rest[:hi - 1]
        alone = cmp([unit], "alone")
        units: tuple[int, ...] = (unit,)
        kind = "culprit"
        if alone is GOOD:
            needed, pool = [unit], before
            while True:
                lo, hi, ok = first_bad(pool, needed, "interaction")
                if not ok:
                    findings.append((tuple(sorted([*needed, *pool[lo:hi]])), "ambiguous", None, None))
                    return top, findings, probes, False
                needed.append(pool[hi - 1])
                pool = pool[:hi - 1]
                alone = cmp(needed, "interaction")
                if alone is not GOOD:
                    units, kind = tuple(sorted(needed)), "interaction"
                    break
        rest_after = [u for u in rest if u not in units]
        without = cmp(rest_after, "without")
        findings.append((units, kind, alone, without))
        if without is not BAD:
            return top, findings, probes, without is GOOD
        rest = rest_after
    return top, findings, probes, True


def _drawn(data: st.DataObject, outcomes: dict[frozenset[int], Outcome]) -> Callable[[tuple[int, ...], str], Outcome]:
    """An outcome drawn for each subset the first time it is asked, the same every later time."""
    def compare(units: tuple[int, ...], role: str) -> Outcome:
        key = frozenset(units)
        if key not in outcomes:
            outcomes[key] = data.draw(st.sampled_from([GOOD, BAD, SKIP]), label=f"{sorted(key)}")
        return outcomes[key]

    return compare


def _same_as_before(k: int, compare: Callable[[tuple[int, ...], str], Outcome]) -> None:
    top, findings, probes, complete = _as_before(k, compare)
    result = search_units(k, one_by_one(compare))
    assert [(p.units, p.outcome, p.role) for p in result.probes] == probes
    assert [(f.units, f.kind, f.alone, f.without) for f in result.findings] == findings
    assert (result.candidate, result.complete) == (top, complete)
    # one slot: every comparison is a round of its own
    assert [p.round for p in result.probes] == list(range(1, len(probes) + 1)) and result.rounds == len(probes)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10), st.data())
def test_one_slot_asks_what_the_binary_search_asked_in_its_order_whatever_the_outcomes(
        k: int, data: st.DataObject) -> None:
    _same_as_before(k, _drawn(data, {}))


@pytest.mark.parametrize(("k", "bad", "skip"), [
    (9, [{4}], lambda s: False), (5, [{1}, {3}], lambda s: False), (6, [{1, 4}], lambda s: False),
    (7, [{0, 2, 5}], lambda s: False), (6, [{4}], lambda s: 2 in s and 3 not in s),
    (4, [{1}], lambda s: 0 in s and len(s) < 4), (8, [{7}, {0}], lambda s: len(s) == 3)])
def test_one_slot_matches_the_binary_search_on_the_scenarios_above(
        k: int, bad: list[set[int]], skip: Callable[[frozenset[int]], bool]) -> None:
    sets = [frozenset(b) for b in bad]
    _same_as_before(k, lambda units, role: SKIP if skip(frozenset(units)) else
                    BAD if any(b <= frozenset(units) for b in sets) else GOOD)


def _rounds_of(slots: int, bad_sets: Iterable[frozenset[int]], skip: Callable[[frozenset[int]], bool] = lambda s: False
               ) -> tuple[CompareMany, list[list[tuple[tuple[int, ...], str]]]]:
    """An oracle that keeps each round as asked, and checks that a round asks at most `slots` subsets, each once
    over the whole search."""
    rounds: list[list[tuple[tuple[int, ...], str]]] = []
    one = oracle(bad_sets, skip)

    def compare(asks: Sequence[tuple[tuple[int, ...], str]]) -> list[Outcome]:
        assert 0 < len(asks) <= slots, asks
        seen = {frozenset(u) for r in rounds for u, _ in r}
        assert not any(frozenset(u) in seen or not u for u, _ in asks), asks
        rounds.append(list(asks))
        return list(one(asks))

    return compare, rounds


@pytest.mark.parametrize("culprit", range(8))
def test_three_slots_find_one_culprit_of_eight_in_two_search_rounds_and_a_verification_round(culprit: int) -> None:
    compare, rounds = _rounds_of(3, [frozenset({culprit})])
    result = search_units(8, compare, slots=3)
    assert [(f.units, f.kind, f.alone, f.without) for f in result.findings] == [((culprit,), "culprit", BAD, GOOD)]
    # the candidate's round with the first two split points, one more round of split points, then the unit alone
    # and the candidate without it side by side (one binary search would need 1 + 3 rounds before verifying)
    assert result.rounds == len(rounds) <= 3 and result.complete
    assert rounds[0][0] == (tuple(range(8)), "candidate")
    assert {role for _, role in rounds[-1]} <= {"alone", "without"}
    assert [p.round for p in result.probes] == sorted(p.round for p in result.probes)
    one = search_units(8, oracle([frozenset({culprit})]))
    assert one.rounds > result.rounds


def test_split_points_beside_a_candidate_that_does_not_regress_are_left_unused() -> None:
    compare, rounds = _rounds_of(4, [])
    result = search_units(9, compare, slots=4)
    assert result.candidate is GOOD and result.findings == () and result.complete and result.rounds == 1
    assert [u for u, _ in rounds[0]] == [tuple(range(9)), (0, 1), (0, 1, 2, 3), (0, 1, 2, 3, 4, 5)]


def test_with_slots_a_skipped_split_point_is_stepped_over_and_a_range_all_skipped_is_named() -> None:
    # unit 2 needs unit 3 to resolve; the culprit is 4
    compare, rounds = _rounds_of(2, [frozenset({4})], skip=lambda s: 2 in s and 3 not in s)
    result = search_units(6, compare, slots=2)
    assert [(f.units, f.kind) for f in result.findings] == [((4,), "culprit")] and result.complete
    # the split point beside the candidate was a skip; the next round tested two others around it
    assert rounds[:2] == [[((0, 1, 2, 3, 4, 5), "candidate"), ((0, 1, 2), "search")],
                          [((0, 1), "search"), ((0, 1, 2, 3), "search")]]
    compare, _ = _rounds_of(2, [frozenset({1})], skip=lambda s: 0 in s and len(s) < 4)
    ambiguous = search_units(4, compare, slots=2)
    assert [(f.units, f.kind) for f in ambiguous.findings] == [((0, 1, 2, 3), "ambiguous")]
    assert not ambiguous.complete and not ambiguous.culprits


def test_an_interaction_is_found_with_slots_too() -> None:
    compare, rounds = _rounds_of(3, [frozenset({1, 4})])
    result = search_units(6, compare, slots=3)
    assert [(f.units, f.kind, f.alone, f.without) for f in result.findings] == [((1, 4), "interaction", BAD, GOOD)]
    # the candidate without unit 4 was asked beside 4 alone, on the chance that 4 was a culprit alone: unused
    assert ((0, 1, 2, 3, 5), "without") in [a for r in rounds for a in r]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12), st.lists(st.sets(st.integers(0, 11), min_size=1, max_size=3), max_size=3),
       st.integers(2, 4))
def test_slots_find_what_one_slot_finds_when_the_comparisons_are_sure(
        k: int, culprits: list[set[int]], slots: int) -> None:
    bad = [frozenset(u for u in c if u < k) for c in culprits]
    bad = [b for b in bad if b]
    compare, rounds = _rounds_of(slots, bad)
    many = search_units(k, compare, slots=slots)
    one = search_units(k, oracle(bad))
    assert [(f.units, f.kind, f.alone, f.without) for f in many.findings] == [
        (f.units, f.kind, f.alone, f.without) for f in one.findings]
    assert (many.candidate, many.complete) == (one.candidate, one.complete)
    assert many.rounds == len(rounds) <= one.rounds
    assert [p.round for p in many.probes] == [i for i, r in enumerate(rounds, 1) for _ in r]


def test_a_round_gets_as_many_outcomes_as_it_asked() -> None:
    with pytest.raises(ValueError, match="3 comparisons asked, 1 outcomes given"):
        search_units(8, lambda asks: [BAD], slots=3)
    with pytest.raises(ValueError, match="slots must be at least 1"):
        search_units(8, lambda asks: [BAD], slots=0)


# --- ab's verdicts, read narrowly ------------------------------------------------------------------------

def _trial(verdict: str, metrics: tuple[tuple[str, str, float], ...] = (), nodes: tuple[str, ...] = ()
           ) -> SimpleNamespace:
    tests = SimpleNamespace(regressions=tuple(SimpleNamespace(node=n) for n in nodes)) if nodes else None
    return SimpleNamespace(trial="t", kind="bench", verdict=verdict, failing=verdict == "regressed", tests=tests,
                           metrics=tuple(SimpleNamespace(metric=m, verdict=v, delta_pct=d) for m, v, d in metrics))


@pytest.mark.parametrize(("verdict", "outcome"), [
    ("regressed", BAD), ("pass", GOOD), ("neutral", GOOD), ("improved", GOOD), ("neutral-to-positive", GOOD),
    ("flaky", GOOD), ("fails on both", GOOD), ("undecided", SKIP), ("inconclusive", SKIP), ("broken", SKIP)])
def test_a_trial_verdict_is_good_bad_or_cannot_tell(verdict: str, outcome: Outcome) -> None:
    assert judge_trial(_trial(verdict)).outcome is outcome  # type: ignore[arg-type]


def test_a_named_metric_decides_alone_and_its_delta_and_the_failing_nodes_are_kept() -> None:
    trial = _trial("regressed", (("ops", "neutral", 1.0), ("ms", "regressed", 41.5)))
    assert judge_trial(trial, "ops").outcome is GOOD  # type: ignore[arg-type]
    judged = judge_trial(trial, "ms")  # type: ignore[arg-type]
    assert judged.outcome is BAD and judged.delta_pct == 41.5
    assert judge_trial(_trial("regressed", nodes=("t::a",))).regressions == ("t::a",)  # type: ignore[arg-type]


# --- the report's section ----------------------------------------------------------------------------------

def _record(profile_digest: str) -> object:
    from stackctl.base.evidence import Evidence

    move = {"pin": "eps", "before": "1.0", "after": "1.1"}
    result = {
        "control": "control", "candidate": "candidate", "trial": "unit", "metric": None, "failing": False,
        "conclusion": "culprit: eps (eps 1.0 → 1.1)", "builds": 5, "comparisons": 4, "seconds": 61.0,
        "units": [{"name": "eps", "pins": ["eps"], "moves": [move], "why": []}],
        "culprits": [{"kind": "culprit", "units": ["eps"], "pins": ["eps"], "moves": [move], "alone": "bad",
                      "without": "good"}],
        "ambiguous": [],
        "steps": [{"units": ["gamma"], "role": "search", "stack": "candidate-bisect-1", "outcome": "skip",
                   "verdict": "cannot resolve", "why": "no solution", "delta_pct": None, "regressions": [],
                   "record": None, "reused": False},
                  {"units": ["eps"], "role": "alone", "stack": "candidate-bisect-4", "outcome": "bad",
                   "verdict": "regressed", "why": "", "delta_pct": None, "regressions": ["check::test_eps_zero"],
                   "record": "build/bisect/candidate/ab/candidate-bisect-4.ab.json", "reused": True}],
    }
    return Evidence("bisect", "stackctl bisect control candidate --trial unit", "2026-12-04T17:00:00Z", "candidate",
                    None, ("sha256:c", profile_digest), result)


def test_report_quotes_the_culprits_and_steps_and_says_when_the_profile_moved_on() -> None:
    from stackctl.review.bisect import bisect_section

    section = bisect_section(_record("sha256:n"), "build/candidate.bisect.json", "sha256:n")  # type: ignore[arg-type]
    assert section.status == "ok" and "culprit: eps (eps 1.0 → 1.1)" in section.text
    culprits, steps = section.tables
    assert culprits.rows == (("culprit", "eps", "eps 1.0 → 1.1", "bad", "good"),)
    assert steps.rows[0][4:6] == ("skip", "cannot resolve: no solution")
    assert steps.rows[1][0] == "2 (reused)" and steps.rows[1][6] == "regressed: check::test_eps_zero"
    stale = bisect_section(_record("sha256:old"), "build/candidate.bisect.json", "sha256:n")  # type: ignore[arg-type]
    assert stale.status == "stale" and "Rerun: `stackctl bisect control candidate --trial unit`" in stale.text


def test_the_conclusion_names_culprits_ranges_and_the_candidate_that_does_not_regress(tmp_path: Path) -> None:
    from stackctl.bisect.run import _culprit, conclusion

    control, candidate = _five(tmp_path)
    units = plan_units(load_stack(control), load_stack(candidate))
    two = search_units(5, oracle([frozenset({2}), frozenset({4})]))
    culprits = tuple(_culprit(units, f.kind, f.units, f.alone, f.without) for f in two.findings)
    assert conclusion(units, two, culprits, (), "unit") == (
        "culprits: delta + kern (delta 2.0 → 2.1; kern 0.5+delta2.0 → 0.5+delta2.1); fresh (fresh — → 0.1)")
    cannot = search_units(5, oracle([frozenset({2})], skip=lambda s: len(s) < 5))
    ranges = tuple(_culprit(units, f.kind, f.units, f.alone, f.without) for f in cannot.findings)
    assert conclusion(units, cannot, (), ranges, "unit").startswith(
        "no single culprit named: it is one of gamma, train ab, delta + kern, gone, fresh; the stacks between")
    fine = search_units(5, oracle([]))
    assert conclusion(units, fine, (), (), "unit") == (
        "candidate does not regress on unit against control: nothing to bisect")


def test_bad_input_is_one_error_line_and_exit_2(cli: Cli) -> None:
    post1, post2 = str(STACKS / "torch-2.11-post1.toml"), str(STACKS / "torch-2.11-post2.toml")
    for args, said in (
            (["--trial", "nonesuch"], "no trial 'nonesuch' in the plan (trials: unfiltered-ut,"),
            (["--trial", "unfiltered-ut", "--metric", "ms"], "--metric ms: trial unfiltered-ut has no such metric"),
            (["--trial", "unfiltered-ut", "--work-dir", str(STACKS)], "would lie among the real ones")):
        r = cli("bisect", post1, post2, *args)
        assert r.code == 2 and r.err.startswith("error: ") and said in r.err, r.err
    same = cli("bisect", post1, post1, "--trial", "unfiltered-ut", "--plan", str(STACKS / "validation" / "plan.toml"))
    assert same.code == 2 and "moves no pin from torch-2.11-post1: nothing to bisect" in same.err


def test_a_pin_moved_to_an_index_only_the_candidate_declares_brings_the_index_along(tmp_path: Path) -> None:
    control = write_profile(tmp_path, "c", {"a": "1.0", "b": "1.0"})
    candidate = write_profile(tmp_path, "n", {"a": "1.1", "b": {"version": "1.1", "index": "j"}},
                              index_extra='[indexes.j]\nurl = "http://127.0.0.1:2/simple/"\n'
                                          'password_env = "J_PASSWORD"\n')
    c, n = load_stack(control), load_stack(candidate)
    units = plan_units(c, n)
    path = control.parent / "n-bisect-2.toml"
    path.write_text(intermediate_profile(c, n, [units.units[1]], "n-bisect-2"))
    mid = load_stack(path)
    assert {p.name: (p.version, p.index) for p in mid.pins} == {"a": ("1.0", "i"), "b": ("1.1", "j")}
    assert mid.index("j") == n.index("j")
