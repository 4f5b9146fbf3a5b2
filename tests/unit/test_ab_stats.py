"""ab's bracketed statistics: the interval and the equivalence test against scipy's own, hand-made run sets whose
control drifts (linearly, and in steps between processes, as a launch-bound GPU metric does), the attempts added
while a metric is undecided, sweeps, and the words a failing A/B ends with."""

from __future__ import annotations

import json
import random
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackctl.ab.plan import Better, Metric, Trial, TrialKind, load_plan
from stackctl.ab.run import problem, run_trial
from stackctl.ab.runs import Leg, Run
from stackctl.ab.stats import (
    Interval,
    bench_verdict,
    brackets,
    brackets_needed,
    equivalence_p,
    interval,
    mann_whitney,
)
from stackctl.ab.summary import summary_rows
from stackctl.ab.verdicts import trial_verdict
from stackctl.base import to_jsonable
from stackctl.errors import ProfileError


def _runs(control: list[list[float]], candidate: list[list[float]]) -> list[Run]:
    """Runs in schedule order, C T C T … C, from each run's samples."""
    out = []
    for i in range(len(control) + len(candidate)):
        leg, samples = ("control", control[i // 2]) if i % 2 == 0 else ("candidate", candidate[i // 2])
        out.append(Run("speed", leg, i, i // 2, 0, "2026-12-04T00:00:00Z", 1.0, 0,
                       samples=(("tok_s", tuple(samples)),)))
    return out


TOK_S = Trial("speed", TrialKind.BENCH, ("x",), repeat=5, max_repeat=12,
              metrics=(Metric("tok_s", "tok/s", Better.HIGHER, 3.0),))


def test_the_interval_is_scipys_t_interval_of_the_bracket_deltas() -> None:
    from scipy.stats import ttest_1samp

    deltas = [-31.0, -28.5, -33.2, -27.9, -30.4]
    iv = interval(deltas, 0.90)
    want = ttest_1samp(deltas, 0.0).confidence_interval(0.90)
    assert (iv.low, iv.high) == (pytest.approx(want.low), pytest.approx(want.high))
    assert iv.mean == pytest.approx(sum(deltas) / 5) and iv.n == 5
    one = interval([-30.0], 0.90)  # one bracket: no spread to go by, nothing can be shown
    assert (one.low, one.high) == (float("-inf"), float("inf"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-20, 20, allow_nan=False), min_size=2, max_size=12), st.floats(0.5, 10))
def test_equivalence_shown_exactly_when_the_interval_lies_inside_the_band(deltas: list[float], band: float) -> None:
    """Two one-sided tests at a reject exactly when the (1 - 2a) interval lies inside the band: the verdict's
    interval at 1 - alpha inside the band is equivalence shown at alpha / 2."""
    iv = interval(deltas, 0.90)
    if min(abs(iv.low + band), abs(iv.high - band)) < 1e-6:
        return  # on the band's edge both sides round either way
    assert (equivalence_p(deltas, band) < 0.05) == (-band < iv.low and iv.high < band)


def test_a_linear_drift_cancels_in_the_brackets_where_pooled_samples_see_nothing() -> None:
    """The host slows 8% a run; the candidate is 30% slower than the controls around it. Pooled, the candidate's
    samples overlap the drifting control's; bracketed, every delta is -30%."""
    control = [[100.0 * (1 - 0.08 * i) + d for d in (-1, 0, 1)] for i in range(0, 12, 2)]
    candidate = [[0.7 * 100.0 * (1 - 0.08 * i) + d for d in (-1, 0, 1)] for i in range(1, 11, 2)]
    v = trial_verdict(TOK_S, _runs(control, candidate), 0.05).metrics[0]
    assert [round(b.delta_pct, 6) for b in v.brackets] == [-30.0] * 5
    assert v.verdict == "regressed" and v.delta_pct == pytest.approx(-30.0)
    pooled_p = mann_whitney([x for r in control for x in r], [x for r in candidate for x in r])[1]
    assert pooled_p > 0.05  # the test of pooled samples alone could not have called it
    same = trial_verdict(TOK_S, _runs(control, [[(a + b) / 2 for a, b in zip(c0, c1, strict=True)]
                                                for c0, c1 in pairwise(control)]), 0.05)
    assert same.metrics[0].verdict == "neutral"  # the same drift, identical legs: equivalence shown


def test_a_control_that_jumps_between_processes_still_decides_a_launch_bound_regression() -> None:
    """A launch-bound tok/s whose runs land near 335 or 590 at random (73% apart): a candidate 35% slower than
    whichever the host gave is regressed, though one drift figure of 73% would veto any delta."""
    rng = random.Random(7)
    modes = [rng.choice((335.0, 590.0)) for _ in range(13)]
    control = [[m * rng.uniform(0.99, 1.01) for _ in range(4)] for m in modes[::2]]
    candidate = [[0.65 * m * rng.uniform(0.99, 1.01) for _ in range(4)] for m in modes[1::2]]
    v = trial_verdict(TOK_S, _runs(control, candidate), 0.05).metrics[0]
    assert v.drift_pct > 10 and v.verdict in ("regressed", "undecided")
    assert v.high_pct is not None and v.high_pct < 0  # the interval sits wholly below zero either way


def test_verdicts_from_the_interval_against_the_band() -> None:
    def iv(low: float, high: float) -> Interval:
        return Interval(6, (low + high) / 2, low, high, 0.9)

    assert bench_verdict(iv(-1.0, 2.0), 3.0, Better.HIGHER) == "neutral"
    assert bench_verdict(iv(-40.0, -20.0), 3.0, Better.HIGHER) == "regressed"
    assert bench_verdict(iv(-40.0, -20.0), 3.0, Better.LOWER) == "improved"
    assert bench_verdict(iv(20.0, 40.0), 3.0, Better.LOWER) == "regressed"
    assert bench_verdict(iv(2.0, 8.0), 3.0, Better.LOWER) == "undecided"  # 5% slower, the band 3%: never neutral
    assert bench_verdict(iv(-9.0, 2.0), 3.0, Better.HIGHER) == "undecided"
    # the mean -3.5 is 0.5 beyond the band: the half-width 5.5 must shrink 11-fold, which takes 11² times the brackets
    assert brackets_needed(iv(-9.0, 2.0), 3.0) == 6 * 11 ** 2
    assert brackets_needed(Interval(6, 0.0, -1.0, 1.0, 0.9), 3.0) == 6


def test_brackets_pair_each_candidate_run_with_the_controls_around_it() -> None:
    got = brackets([100.0, 110.0, 120.0], [84.0, 92.0, 99.0])
    assert [(b.before, b.after, round(b.delta_pct, 3)) for b in got] == [(100.0, 110.0, -20.0), (110.0, 120.0, -20.0)]


class FakeLeg:
    """A leg whose benchmark prints `per_run` samples of tok/s drawn around `speed` times a host that changes
    between runs and wobbles within them (the protocol's runner, in memory)."""

    def __init__(self, role: str, speed: float, host: random.Random) -> None:
        self.leg = Leg(role, role, role, "python", role)
        self.speed, self.host = speed, host

    def run(self, job: dict[str, Any], files: dict[str, bytes], timeout: float) -> dict[str, Any]:
        level = self.host.choice((0.8, 1.0, 1.25))  # what the other jobs leave this run
        lines = [json.dumps({"tok_s": 100 * self.speed * level * self.host.uniform(0.9, 1.1)}) for _ in range(6)]
        return {"exit": 0, "seconds": 1.0, "stdout": "\n".join(lines), "stderr": "", "files": {}}


def _plan(tmp_path: Path, extra: str = "", max_repeat: int = 12) -> Any:
    (tmp_path / "plan.toml").write_text(
        '[[trial]]\nname = "speed"\nkind = "bench"\ncommand = ["{python}", "bench.py"]\nrepeat = 3\n'
        f'max_repeat = {max_repeat}\n{extra}\n[[trial.metric]]\nname = "tok_s"\nbetter = "higher"\nband = 3\n')
    return load_plan(tmp_path / "plan.toml")


@pytest.mark.parametrize("seed", range(5))
def test_brackets_are_added_until_decided_and_no_further(tmp_path: Path, seed: int) -> None:
    plan = _plan(tmp_path)
    host = random.Random(seed)
    said: list[str] = []
    runners: Any = {"control": FakeLeg("control", 1.0, host), "candidate": FakeLeg("candidate", 0.7, host)}
    runs = run_trial(plan, plan.trials[0], runners, {}, said.append)
    v = trial_verdict(plan.trials[0], runs, plan.alpha)
    assert v.verdict == "regressed", v.metrics[0].why
    n = len(v.metrics[0].brackets)
    assert 3 <= n <= 12 and len(runs) == 2 * n + 1
    assert [r.leg for r in runs] == ["control", "candidate"] * n + ["control"]
    assert [r.order for r in runs] == list(range(2 * n + 1))
    added = [ln for ln in said if "adding bracket" in ln]
    assert len(added) == n - 3  # one line per added bracket, with the interval so far
    assert all("tok_s undecided after" in ln and "%]" in ln for ln in added)
    # decided before the cap: the bracket before the last did not decide it, the last did
    if n > 3:
        assert trial_verdict(plan.trials[0], runs[:-2], plan.alpha).metrics[0].verdict == "undecided"


def test_identical_legs_are_never_called_different_and_stop_at_the_cap(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    for seed in range(5):
        host = random.Random(100 + seed)
        runners: Any = {"control": FakeLeg("control", 1.0, host), "candidate": FakeLeg("candidate", 1.0, host)}
        runs = run_trial(plan, plan.trials[0], runners, {}, lambda _: None)
        v = trial_verdict(plan.trials[0], runs, plan.alpha)
        assert v.verdict in ("neutral", "undecided")
        if v.verdict == "undecided":
            assert len(v.metrics[0].brackets) == 12 and v.failing
            assert "these runs can tell ±" in problem(v)


def test_a_sweep_is_a_trial_a_cell_and_one_summary_row(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'config = "decode, batch {bs}"\nenv = { BS = "{bs}" }\n[trial.matrix]\nbs = [1, 4]\n')
    assert [(t.name, t.sweep, t.label, t.config, dict(t.env)) for t in plan.trials] == [
        ("speed[bs=1]", "speed", "BS1", "decode, batch 1", {"BS": "1"}),
        ("speed[bs=4]", "speed", "BS4", "decode, batch 4", {"BS": "4"})]
    assert [t.name for t in plan.select(("speed",)).trials] == ["speed[bs=1]", "speed[bs=4]"]
    verdicts = []
    for trial, slow in zip(plan.trials, (1.0, 0.7), strict=True):
        base = [[100.0 + d for d in (-1, 0, 1)] for _ in range(4)]
        verdicts.append(trial_verdict(trial, _runs(base, [[x * slow + 0.1 * i for x in base[0]] for i in range(3)]),
                                      0.05))
    rows = summary_rows({"trials": to_jsonable(verdicts)})
    assert len(rows) == 1 and rows[0][0] == "speed" and rows[0][1] == "sweep bs = 1, 4"
    assert rows[0][3] == "BS1 +0.100%; BS4 -29.900% (regressed)" and rows[0][4] == "Regressed"
    neutral = rows = summary_rows({"trials": to_jsonable([verdicts[0], verdicts[0]])})
    assert neutral[0][3] == "+0.100% to +0.100%, all neutral"


@pytest.mark.parametrize(("extra", "want"), [
    ("[trial.matrix]\nrun = [1]\n", "trial.0.matrix.run: 'run' cannot name a sweep"),
    ("[trial.matrix]\nbs = []\n", "trial.0.matrix.bs: an empty sweep"),
    ("[trial.matrix]\nbs = [1, 1]\n", "trial.0.matrix.bs: a value is named twice"),
    ("[trial.matrix]\nbs = [true]\n", "trial.0.matrix.bs: must be strings or numbers"),
    ("[trial.matrix]\nbs = [{a = 1}]\n", "trial.0.matrix.bs.0: must be a string or a number"),
    ('env = { X = "{tp}" }\n', "trial.0.env.X: {tp} is not a placeholder"),
])
def test_a_bad_sweep_is_a_problem_naming_its_key(tmp_path: Path, extra: str, want: str) -> None:
    with pytest.raises(ProfileError) as err:
        _plan(tmp_path, extra)
    assert any(want in str(p) for p in err.value.problems), err.value.problems


def test_max_repeat_is_checked_and_overridden(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as err:
        _plan(tmp_path, max_repeat=2)
    assert any("trial.0.max_repeat: 2 is fewer than repeat (3)" in str(p) for p in err.value.problems)
    plan = _plan(tmp_path)
    assert plan.trials[0].max_repeat == 12 and not plan.allow_undecided
    more = plan.repeated(None, 20, True)
    assert more.trials[0].max_repeat == 20 and more.allow_undecided
    assert plan.repeated(15).trials[0].max_repeat == 15  # never fewer brackets than it starts with


def test_the_failing_line_names_the_nodes_and_the_metrics() -> None:
    control = [[100.0 + d for d in (-1, 0, 1)] for _ in range(4)]
    slow = trial_verdict(TOK_S, _runs(control, [[x * 0.7 + i for x in control[0]] for i in range(3)]), 0.05)
    assert problem(slow).startswith("speed: regressed (tok_s -29.")
    assert "wholly beyond ±3%" in problem(slow)


def test_the_legs_table_says_image_id_where_an_image_has_no_registry_digest() -> None:
    from stackctl.ab.summary import leg_rows

    leg = {"stack": "s", "ref": "r:1", "kind": "image", "image_id": "sha256:abc", "digest": None}
    rows = leg_rows({"control": leg, "candidate": {**leg, "digest": "sha256:def"}})
    assert rows[0][3] == "image id sha256:abc" and rows[1][3] == "sha256:def"


def test_a_run_says_its_median_best_or_mean() -> None:
    from stackctl.ab.stats import run_statistic

    samples = [10.0, 12.0, 11.0, 30.0]
    assert run_statistic(samples) == 11.5
    assert run_statistic(samples, "best", Better.LOWER) == 10.0  # the least disturbed sample of a timing
    assert run_statistic(samples, "best", Better.HIGHER) == 30.0
    assert run_statistic(samples, "mean") == 15.75


def test_the_best_sample_decides_where_interference_only_slows() -> None:
    """Runs of which half shared the core with a neighbour for most of their samples: such a run's median is
    moved, its best sample is not, so the bracket deltas of the best are tight around the true +30%."""
    rng = random.Random(3)

    def run(speed: float) -> tuple[float, ...]:
        hit = 4 if rng.random() < 0.5 else 0
        samples = [speed * (1.6 if i < hit else 1.0) * rng.uniform(1.0, 1.02) for i in range(6)]
        rng.shuffle(samples)
        return tuple(samples)

    runs = [Run("speed", "control" if i % 2 == 0 else "candidate", i, i // 2, 0, "2026-12-04T00:00:00Z", 1.0, 0,
                samples=(("ms", run(1.3 if i % 2 else 1.0)),)) for i in range(17)]

    def verdict(statistic: str) -> Any:
        trial = Trial("speed", TrialKind.BENCH, ("x",), repeat=8, max_repeat=8,
                      metrics=(Metric("ms", "ms", Better.LOWER, 3.0, statistic),))
        return trial_verdict(trial, runs, 0.05).metrics[0]

    median, best = verdict("median"), verdict("best")
    assert best.statistic == "best" and best.verdict == "regressed"
    assert best.delta_pct == pytest.approx(30.0, abs=3)
    assert best.high_pct - best.low_pct < (median.high_pct - median.low_pct) / 3


def test_an_unknown_run_statistic_is_a_problem_naming_its_key(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text('[[trial]]\nname = "s"\nkind = "bench"\ncommand = ["x"]\n[[trial.metric]]\n'
                                        'name = "ms"\nbetter = "lower"\nband = 3\nstatistic = "min"\n')
    with pytest.raises(ProfileError) as err:
        load_plan(tmp_path / "plan.toml")
    assert [str(p).split(" ", 1)[1] for p in err.value.problems] == [
        "trial.0.metric.0.statistic: 'min': use \"median\", \"best\", \"mean\""]
