"""ab's bracketed statistics: the interval and the equivalence test against scipy's own, hand-made run sets whose
control drifts (linearly, and in steps between processes, as a launch-bound GPU metric does), the attempts added
while a metric is undecided, sweeps, and the words a failing A/B ends with."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stackctl.ab.plan import Better, Metric, Trial, TrialKind, load_plan
from stackctl.ab.run import problem, run_trial
from stackctl.ab.runs import Leg, Run
from stackctl.ab.stats import (
    Interval,
    bench_verdict,
    brackets,
    brackets_for_equivalence,
    equivalence_p,
    interval,
    log_band,
    mann_whitney,
    percent,
    why,
)
from stackctl.ab.summary import metric_rows, summary_rows
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


def test_a_steady_drift_cancels_in_the_brackets_where_pooled_samples_see_nothing() -> None:
    """The host slows 15% a run; the candidate is 30% slower than the controls around it. Pooled, the candidate's
    samples overlap the drifting control's; bracketed, every delta is -30%."""
    control = [[100.0 * 0.85 ** i + d for d in (-1, 0, 1)] for i in range(0, 12, 2)]
    candidate = [[0.7 * 100.0 * 0.85 ** i + d for d in (-1, 0, 1)] for i in range(1, 11, 2)]
    v = trial_verdict(TOK_S, _runs(control, candidate), 0.05).metrics[0]
    assert [round(b.delta_pct, 6) for b in v.brackets] == [-30.0] * 5
    assert v.verdict == "regressed" and v.delta_pct == pytest.approx(-30.0)
    pooled_p = mann_whitney([x for r in control for x in r], [x for r in candidate for x in r])[1]
    assert pooled_p > 0.05  # the test of pooled samples alone could not have called it
    same = trial_verdict(TOK_S, _runs(control, [[(a + b) / 2 for a, b in zip(c0, c1, strict=True)]
                                                for c0, c1 in pairwise(control)]), 0.05)
    assert same.metrics[0].verdict == "neutral"  # the same drift, identical legs: equivalence shown


def test_a_control_that_jumps_between_processes_still_decides_a_launch_bound_regression() -> None:
    """A launch-bound tok/s whose runs land near 335 or 590 at random (76% apart): a candidate 35% slower than
    whichever the host gave is regressed at the cap, though one drift figure of 76% would veto any delta."""
    rng = random.Random(7)
    modes = [rng.choice((335.0, 590.0)) for _ in range(25)]
    control = [[m * rng.uniform(0.99, 1.01) for _ in range(4)] for m in modes[::2]]
    candidate = [[0.65 * m * rng.uniform(0.99, 1.01) for _ in range(4)] for m in modes[1::2]]
    v = trial_verdict(TOK_S, _runs(control, candidate), 0.05).metrics[0]
    assert v.drift_pct > 70 and v.verdict == "regressed" and len(v.brackets) == 12
    assert v.high_pct is not None and v.high_pct < -3  # the interval sits wholly beyond the band


def test_verdicts_from_the_interval_against_the_band() -> None:
    def iv(low: float, high: float) -> Interval:
        return Interval(6, (low + high) / 2, low, high, 0.9)

    assert bench_verdict(iv(-1.0, 2.0), 3.0, Better.HIGHER) == "neutral"
    assert bench_verdict(iv(-40.0, -20.0), 3.0, Better.HIGHER) == "regressed"
    assert bench_verdict(iv(-40.0, -20.0), 3.0, Better.LOWER) == "improved"
    assert bench_verdict(iv(20.0, 40.0), 3.0, Better.LOWER) == "regressed"
    assert bench_verdict(iv(2.0, 8.0), 3.0, Better.LOWER) == "undecided"  # 5% slower, the band 3%: never neutral
    assert bench_verdict(iv(-9.0, 2.0), 3.0, Better.HIGHER) == "undecided"


def test_brackets_pair_each_candidate_run_with_the_geometric_mean_of_the_controls_around_it() -> None:
    got = brackets([100.0, 121.0, 144.0], [88.0, 105.6, 99.0])
    assert [(b.before, b.after, round(b.delta_pct, 9)) for b in got] == [(100.0, 121.0, -20.0), (121.0, 144.0, -20.0)]
    assert got[0].log_ratio == pytest.approx(math.log(0.8))
    # a twofold slowdown and a twofold speedup are the same size, shown as +100% and -50%
    slower, faster = brackets([10.0, 10.0], [20.0])[0], brackets([10.0, 10.0], [5.0])[0]
    assert slower.log_ratio == pytest.approx(-faster.log_ratio) == pytest.approx(math.log(2))
    assert (slower.delta_pct, faster.delta_pct) == (pytest.approx(100.0), pytest.approx(-50.0))


def test_the_band_holds_a_factor_either_way() -> None:
    """±3% is a factor 1.03 either way: 3% faster is inside, and so is what 3% slower is from the other side."""
    band = log_band(3.0)
    assert band == pytest.approx(math.log(1.03))

    def verdict(ratio: float) -> str:
        x = math.log(ratio)
        return bench_verdict(Interval(5, x, x - 1e-6, x + 1e-6, 0.9), band, Better.HIGHER)

    assert verdict(1.0299) == verdict(1 / 1.0299) == "neutral"
    assert (verdict(1.0301), verdict(1 / 1.0301)) == ("improved", "regressed")
    assert why("neutral", Interval(5, 0.0, -0.01, 0.01, 0.9), 3.0).endswith("inside ±3% (-2.91% to +3%)")


@settings(max_examples=300, deadline=None)
@given(st.floats(1e-4, 1e4), st.floats(0.1, 50), st.sampled_from([0.001, 0.0375, 0.05, 0.2]))
def test_brackets_for_equivalence_is_the_fewest_whose_t_interval_around_zero_fits(spread: float, band_pct: float,
                                                                                   alpha: float) -> None:
    from scipy.stats import t

    band = log_band(band_pct)
    n = brackets_for_equivalence(spread, band, alpha)
    assert n is not None and n >= 2

    def width(k: int) -> float:
        return float(t.ppf(1 - alpha / 2, k - 1)) * spread / math.sqrt(k)

    assert width(n) < band
    assert n == 2 or width(n - 1) >= band
    assert brackets_for_equivalence(float("inf"), band, alpha) is None  # one bracket: no spread to go by
    assert brackets_for_equivalence(spread, 0.0, alpha) is None  # no band to show


def _noisy(mean: float, seed: int, n: int = 12) -> list[Run]:
    """Runs in schedule order whose bracket deltas (log ratios) are `mean` plus a fixed spread of about 4%."""
    rng = random.Random(seed)
    noise = [rng.gauss(0, 0.04) for _ in range(n)]
    shift = sum(noise) / n
    control = [[100.0]] * (n + 1)
    candidate = [[100.0 * math.exp(mean + e - shift)] for e in noise]
    return _runs(control, candidate)


def test_the_figure_for_an_undecided_metric_does_not_hang_on_its_mean() -> None:
    """Two undecided A/Bs with the same spread, one centred on zero, one on the band's edge: each says how many
    brackets would show equivalence were the true delta zero, the same for both, and a band of 2% is below the
    noise of this host, where 12 brackets are allowed. (A count of brackets to decide it, taken from the mean,
    ran to thousands at the edge.)"""
    trial = Trial("speed", TrialKind.BENCH, ("x",), repeat=12, max_repeat=12,
                  metrics=(Metric("tok_s", "tok/s", Better.HIGHER, 2.0),))
    said = problem(trial_verdict(trial, _noisy(0.0, 1), 0.05))
    assert "±2% is below this host's noise: with no true difference it would take about 17 brackets" in said
    centred = trial_verdict(trial, _noisy(0.0, 1), 0.05).metrics[0]
    edge = trial_verdict(trial, _noisy(log_band(2.0) * 0.999, 1), 0.05).metrics[0]
    assert centred.verdict == edge.verdict == "undecided"
    assert centred.spread_pct == pytest.approx(edge.spread_pct)
    assert centred.equivalence_brackets == edge.equivalence_brackets
    assert centred.equivalence_brackets is not None and 12 < centred.equivalence_brackets < 100
    assert centred.below_noise
    roomy = replace(trial, repeat=40, max_repeat=40)  # the cap above the count: the band is not below the noise
    wide = trial_verdict(roomy, _noisy(0.0, 1), 0.05).metrics[0]
    assert wide.verdict == "undecided" and not wide.below_noise
    assert f"about {wide.equivalence_brackets} brackets would show equivalence" in wide.why


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
    assert rows[0][3] == "BS1 +0.100%; BS4 -29.9% (regressed)" and rows[0][4] == "Regressed"
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
    from scipy.stats import gmean

    from stackctl.ab.stats import run_statistic

    samples = [10.0, 12.0, 11.0, 30.0]
    assert run_statistic(samples) == pytest.approx(math.sqrt(11.0 * 12.0))  # the middle two, on the log scale
    assert run_statistic([*samples, 9.0]) == 11.0
    assert run_statistic(samples, "best", Better.LOWER) == 10.0  # the least disturbed sample of a timing
    assert run_statistic(samples, "best", Better.HIGHER) == 30.0
    assert run_statistic(samples, "mean") == pytest.approx(float(gmean(samples)))
    for statistic in ("median", "mean", "best"):  # what a run says of a metric's inverse is the inverse
        inverse = run_statistic([1 / x for x in samples], statistic, Better.LOWER)
        assert inverse == pytest.approx(1 / run_statistic(samples, statistic, Better.HIGHER))


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


@st.composite
def _bench_runs(draw: st.DrawFn) -> tuple[list[list[float]], list[list[float]]]:
    """Positive samples of C T C T … C: from 2 to 8 brackets, 1 to 5 samples a run, either arbitrary or a run's
    level (the host) times the candidate's factor times a little noise, so every verdict comes up."""
    n = draw(st.integers(2, 8))
    k = draw(st.integers(1, 5))
    if draw(st.booleans()):
        x = st.floats(1e-3, 1e3)
        return ([draw(st.lists(x, min_size=k, max_size=k)) for _ in range(n + 1)],
                [draw(st.lists(x, min_size=k, max_size=k)) for _ in range(n)])
    factor = draw(st.floats(0.3, 3.0))
    noise = st.floats(0.97, 1.03)

    def run(scale: float) -> list[float]:
        level = draw(st.floats(0.8, 1.25))
        return [100.0 * scale * level * draw(noise) for _ in range(k)]

    return [run(1.0) for _ in range(n + 1)], [run(factor) for _ in range(n)]


@settings(max_examples=150, deadline=None)
@given(_bench_runs(), st.floats(0.5, 20.0), st.sampled_from(["median", "best", "mean"]))
def test_a_metric_and_its_inverse_get_mirrored_verdicts_and_intervals(
        runs: tuple[list[list[float]], list[list[float]]], band: float, statistic: str) -> None:
    """ops/s and ms per op (1000 / ops/s) from the same runs: the same verdict where each knows its direction,
    mirrored (regressed and improved swapped) where both are called higher is better; intervals, deltas and the
    band they could tell mirrored in ratio, (1 + low of one) * (1 + high of the other) = 1."""
    control, candidate = runs
    inverse = ([[1000 / x for x in r] for r in control], [[1000 / x for x in r] for r in candidate])
    trial = Trial("speed", TrialKind.BENCH, ("x",), repeat=len(candidate), max_repeat=len(candidate) + 4,
                  metrics=(Metric("ops_per_s", "", Better.HIGHER, band, statistic),
                           Metric("lat_ms", "", Better.LOWER, band, statistic),
                           Metric("lat_as_higher", "", Better.HIGHER, band, statistic)))
    joined = [replace(a, samples=(("ops_per_s", a.samples[0][1]), ("lat_ms", b.samples[0][1]),
                                  ("lat_as_higher", b.samples[0][1])))
              for a, b in zip(_runs(control, candidate), _runs(*inverse), strict=True)]
    ops, lat, mirror = trial_verdict(trial, joined, 0.05).metrics
    edges = [math.log1p(x / 100) for m in (ops, lat) for x in (m.low_pct, m.high_pct) if x is not None and x > -100]
    assume(all(abs(abs(e) - log_band(band)) > 1e-9 for e in edges))  # on the band's edge both round either way
    assert lat.verdict == ops.verdict
    if statistic != "best":  # a run's best sample is chosen by the direction, which this one turns round
        assert mirror.verdict == {"regressed": "improved", "improved": "regressed"}.get(ops.verdict, ops.verdict)
    assert _mirrored(lat.delta_pct, ops.delta_pct)
    if ops.low_pct is None or ops.high_pct is None:
        assert (lat.low_pct, lat.high_pct) == (None, None)
    else:
        assert lat.low_pct is not None and lat.high_pct is not None
        assert _mirrored(lat.low_pct, ops.high_pct) and _mirrored(lat.high_pct, ops.low_pct)
        assert lat.reach_pct == pytest.approx(ops.reach_pct, rel=1e-9)
        assert lat.equivalence_p == pytest.approx(ops.equivalence_p, rel=1e-6, abs=1e-12)


def _mirrored(a: float, b: float) -> bool:
    """Two changes in percent that undo each other, (1 + a) * (1 + b) = 1, compared as logs; a change whose ratio
    is too near 0 for percent to keep its digits (-99.999…%) only as such."""
    x, y = 1 + a / 100, 1 + b / 100
    if min(x, y) < 1e-6:
        return min(x, y) < 1e-6 and max(x, y) > 1e5
    return math.log(x) == pytest.approx(-math.log(y), abs=1e-9)


def test_one_format_for_a_percentage_in_progress_summary_and_failure() -> None:
    """The band an undecided metric's runs could tell, as the progress line (the verdict's why), the summary's
    verdict column and the failing line write it: the same figure, in plain decimals."""
    assert [percent(x) for x in (152.4, 56.42, 5.749, 0.5123, 0.0781, 0.0, 1834.2)] == \
        ["152%", "56.4%", "5.75%", "0.512%", "0.078%", "0.000%", "1834%"]
    assert [percent(x, True) for x in (26.99, -0.279, -1e-12)] == ["+27.0%", "-0.279%", "+0.000%"]
    control = [[100.0], [100.0], [100.0], [100.0]]
    wild = trial_verdict(TOK_S, _runs(control, [[60.0], [250.0], [90.0]]), 0.05)
    m = wild.metrics[0]
    assert m.verdict == "undecided" and m.reach_pct is not None and m.reach_pct > 100
    told = f"these runs can tell ±{percent(m.reach_pct)}, not ±3%"
    assert told in m.why and told in problem(wild)
    rows = metric_rows({"trials": to_jsonable([wild])})
    assert told in rows[0][-1]
    assert "e+" not in m.why + problem(wild) + " ".join(rows[0])


def test_the_worked_example_in_the_docs_is_what_the_code_says() -> None:
    """docs/ab.md's worked example: each bracket's delta, the looks that stay undecided (with what their runs can
    tell) and the line the A/B fails with, as the verdicts compute them from the table's runs."""
    from tests.conftest import REPO

    text = (REPO / "docs" / "ab.md").read_text()
    table = text.split("| bracket | control before | candidate | control after | delta |", 1)[1].split("\n\n")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    control = [float(rows[0][1])] + [float(r[3]) for r in rows]
    candidate = [float(r[2]) for r in rows]
    prose = " ".join(text.split())
    trial = Trial("speed", TrialKind.BENCH, ("x",), repeat=5, max_repeat=12,
                  metrics=(Metric("work_ms", "ms", Better.LOWER, 3.0),))

    def looked(n: int) -> Any:
        runs = [replace(r, samples=(("work_ms", r.samples[0][1]),))
                for r in _runs([[x] for x in control[:n + 1]], [[x] for x in candidate[:n]])]
        return trial_verdict(trial, runs, 0.05)

    last = looked(len(rows))
    assert [r[4] for r in rows] == [percent(b.delta_pct, True) for b in last.metrics[0].brackets]
    assert f"with `{problem(last)}`" in prose
    for n in range(5, len(rows)):
        m = looked(n).metrics[0]
        assert m.verdict == "undecided" and f"[{percent(m.low_pct, True)}, {percent(m.high_pct, True)}]" in prose
    first = looked(5)
    assert f"can tell ±{percent(first.metrics[0].reach_pct)}, not ±3%" in prose
    assert problem(first).split("not ±3%; ", 1)[1].rstrip(")") in prose


def test_a_sample_of_zero_or_below_makes_the_benchmark_broken_naming_the_run() -> None:
    """A ratio of runs needs positive values: a benchmark that prints 0 is not judged as infinitely faster."""
    v = trial_verdict(TOK_S, _runs([[100.0]] * 4, [[90.0], [0.0, 95.0], [95.0]]), 0.05)
    assert (v.verdict, v.failing, v.metrics) == ("broken", True, ())
    assert v.errors == ("candidate run 2: tok_s = 0; a benchmark's deltas are ratios of runs and need positive "
                        "samples",)
    assert "speed: broken (candidate run 2: tok_s = 0;" in problem(v)
