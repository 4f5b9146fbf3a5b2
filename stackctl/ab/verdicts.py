"""Verdicts: pure functions of the recorded runs of one trial in both legs.

- tests: the two legs' inventories of node ids must be the same; per node, its status on each leg over all
  of that leg's runs (a node that failed in one run and passed in another is flaky); a node failing only on
  the candidate is a regression, named;
- bench: per metric, each bracket's delta (the log ratio of a candidate run to the geometric mean of the control runs
  around it), their confidence interval held against the band on the same scale: neutral / improved / regressed /
  undecided (`stats.bench_verdict`), shown in percent;
  each leg's pooled summary, the control's drift and the pooled Mann-Whitney U as secondary figures;
- outputs: the digest of each exact-output file must be one and the same over every run of both legs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from stackctl.ab.plan import Better, Metric, Trial, TrialKind
from stackctl.ab.runs import FAILED, MISSING, PASSED, SKIPPED, Run
from stackctl.ab.stats import (
    REGRESSED,
    UNDECIDED,
    Bracket,
    Summary,
    as_pct,
    bench_verdict,
    brackets,
    brackets_for_equivalence,
    delta_pct,
    drift_pct,
    equivalence_p,
    interval,
    log_band,
    mann_whitney,
    run_statistic,
    summarize,
    why,
)

CONTROL, CANDIDATE = "control", "candidate"
FLAKY = "flaky"
# trial verdicts
PASS, INVENTORY_CHANGED, FAILS_ON_BOTH, BROKEN, SKIPPED_TRIAL = "pass", "inventory changed", "fails on both", \
    "broken", "skipped"
OUTPUTS_DIFFER = "outputs differ"


@dataclass(frozen=True)
class NodeStatus:
    node: str
    control: str  # passed | failed | skipped | flaky | missing
    candidate: str
    message: str = ""  # the candidate's failure, else the control's


@dataclass(frozen=True)
class LegCounts:
    passed: int
    failed: int
    skipped: int
    flaky: int
    collected: int
    seconds: float  # of the leg's first run

    def words(self) -> str:
        parts = [f"{self.passed} passed", f"{self.skipped} skipped", f"{self.failed} failed"]
        if self.flaky:
            parts.append(f"{self.flaky} flaky")
        return ", ".join(parts) + f" of {self.collected} collected"


@dataclass(frozen=True)
class TestsVerdict:
    same_inventory: bool
    only_control: tuple[str, ...]  # removed by the candidate
    only_candidate: tuple[str, ...]  # added by the candidate
    control: LegCounts
    candidate: LegCounts
    regressions: tuple[NodeStatus, ...]  # fail only on the candidate
    fixed: tuple[NodeStatus, ...]  # fail only on the control
    failing_both: tuple[NodeStatus, ...]
    flaky: tuple[NodeStatus, ...]
    nodes: tuple[NodeStatus, ...]


@dataclass(frozen=True)
class MetricVerdict:
    """One metric of a benchmark trial. The bracket deltas are log ratios; every `_pct` figure is one of them
    shown in percent (exp(x) - 1), so a metric and its inverse have mirrored figures and the same verdict."""

    metric: str
    unit: str
    better: Better
    band: float  # percent: within a factor 1 + band/100 either way is neutral
    verdict: str  # neutral | improved | regressed | undecided
    why: str
    delta_pct: float  # the mean of the bracket deltas (the run is the unit), in percent
    low_pct: float | None  # its confidence interval at `level`; None where unbounded (fewer than two brackets)
    high_pct: float | None
    level: float
    brackets: tuple[Bracket, ...]
    equivalence_p: float  # two one-sided tests of "within ±band", on the log scale
    reach_pct: float | None  # the smallest band these brackets could call neutral
    drift_pct: float  # the control's own movement between adjacent runs (shown, not a veto)
    control: Summary  # secondary: the pooled samples of each leg
    candidate: Summary
    pooled_delta_pct: float  # the candidate's pooled mean against the control's
    u: float  # the pooled samples' Mann-Whitney U and two-sided p
    p: float
    statistic: str = "median"  # what each run said of the metric: the median, best or mean of its samples
    log_delta: float = 0.0  # the mean bracket delta as a log ratio, and its interval (None where unbounded)
    log_low: float | None = None
    log_high: float | None = None
    spread_pct: float | None = None  # the bracket deltas' standard deviation: the host's noise, bracket by bracket
    equivalence_brackets: int | None = None  # undecided: brackets that would show equivalence were the true delta 0
    below_noise: bool = False  # undecided: and that is more than max_repeat, so the band is below the host's noise


@dataclass(frozen=True)
class OutputVerdict:
    file: str
    equal: bool
    control: tuple[str, ...]  # the distinct digests seen on each leg
    candidate: tuple[str, ...]


@dataclass(frozen=True)
class TrialVerdict:
    trial: str
    kind: TrialKind
    config: str
    verdict: str
    failing: bool  # what makes `ab` exit 1: a regression, a changed inventory, differing outputs, a broken run,
    # an undecided benchmark (unless allowed)
    tests: TestsVerdict | None = None
    metrics: tuple[MetricVerdict, ...] = ()
    outputs: tuple[OutputVerdict, ...] = ()
    errors: tuple[str, ...] = ()  # runs that gave nothing to judge, each as "leg run N: why"
    note: str = ""  # a skipped trial's reason
    sweep: str = ""  # a sweep's cell: the sweep's name, and the cell's values
    cell: tuple[tuple[str, str], ...] = ()


def schedule(kind: TrialKind, repeat: int) -> tuple[tuple[str, int], ...]:
    """The order of a trial's runs, (leg, repetition). A benchmark's control brackets the candidate: C T C T
    ... C, one more control run than candidate runs, so a host that drifts moves both sides alike and the
    control's own drift is measured. Tests need no bracket (a status does not drift): C T, repeated."""
    runs: list[tuple[str, int]] = []
    for i in range(repeat):
        runs += [(CONTROL, i), (CANDIDATE, i)]
    if kind is TrialKind.BENCH:
        runs.append((CONTROL, repeat))
    return tuple(runs)


def _leg_status(statuses: Sequence[str]) -> str:
    seen = set(statuses)
    if PASSED in seen and FAILED in seen:
        return FLAKY
    if FAILED in seen:
        return FAILED
    if seen == {SKIPPED}:
        return SKIPPED
    return PASSED


def _statuses(runs: Sequence[Run]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in runs:
        for n in r.nodes:
            out.setdefault(n.id, []).append(n.status)
    return out


def _messages(runs: Sequence[Run]) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in runs:
        for n in r.nodes:
            if n.message and n.status == FAILED:
                out.setdefault(n.id, n.message)
    return out


def _counts(statuses: dict[str, str], runs: Sequence[Run]) -> LegCounts:
    values = list(statuses.values())
    return LegCounts(values.count(PASSED), values.count(FAILED), values.count(SKIPPED), values.count(FLAKY),
                     len(values), runs[0].seconds if runs else 0.0)


def tests_verdict(control: Sequence[Run], candidate: Sequence[Run]) -> TestsVerdict:
    c_raw, t_raw = _statuses(control), _statuses(candidate)
    c = {k: _leg_status(v) for k, v in c_raw.items()}
    t = {k: _leg_status(v) for k, v in t_raw.items()}
    c_msg, t_msg = _messages(control), _messages(candidate)
    order = list(dict.fromkeys([*c, *t]))
    nodes = tuple(NodeStatus(n, c.get(n, MISSING), t.get(n, MISSING), t_msg.get(n) or c_msg.get(n, ""))
                  for n in order)
    return TestsVerdict(
        same_inventory=set(c) == set(t),
        only_control=tuple(n for n in c if n not in t),
        only_candidate=tuple(n for n in t if n not in c),
        control=_counts(c, control), candidate=_counts(t, candidate),
        regressions=tuple(s for s in nodes if s.candidate == FAILED and s.control in (PASSED, SKIPPED)),
        fixed=tuple(s for s in nodes if s.control == FAILED and s.candidate in (PASSED, SKIPPED)),
        failing_both=tuple(s for s in nodes if s.control == FAILED and s.candidate == FAILED),
        flaky=tuple(s for s in nodes if FLAKY in (s.control, s.candidate)),
        nodes=nodes,
    )


EARLY_SHARE = 0.25  # of alpha, spread over the looks before the last


def look_alpha(trial: Trial, alpha: float, brackets: int) -> float:
    """The error allowed to the look taken after `brackets` brackets. The verdict is taken after the first
    `repeat` brackets and again after each bracket added, up to `max_repeat`: a test repeated until it says
    something says it by chance far more often than alpha, so alpha is divided among the looks the schedule
    may take, and by the union bound the whole sequence is wrong at most alpha of the time. The last look gets
    three quarters of it and the earlier ones share the rest evenly: an effect plain at once is called early,
    and a noisy host's verdict is not made much harder than a single look at `max_repeat` brackets would be."""
    looks = max(trial.max_repeat, trial.repeat) - trial.repeat + 1
    if looks == 1:
        return alpha
    if brackets >= trial.max_repeat:
        return alpha * (1 - EARLY_SHARE)
    return alpha * EARLY_SHARE / (looks - 1)


def metric_verdict(metric: Metric, control: Sequence[Run], candidate: Sequence[Run], alpha: float,
                   max_repeat: int | None = None, final_alpha: float | None = None) -> MetricVerdict:
    """Each candidate run against the control runs around it in the schedule, as a log ratio; the verdict from the
    interval of those deltas at 1 - alpha: inside the band it is equivalence shown by two one-sided tests at
    alpha / 2, wholly beyond it a difference larger than the band shown at alpha / 2 on that side; either wrong
    call at most alpha / 2 of the time, both together at most alpha. An undecided metric says how many brackets
    would show equivalence were the true delta zero, at the error the trial's last look gets (`final_alpha`,
    default alpha), and whether that is more than `max_repeat`. Every sample must be positive (`positive`)."""
    c_runs = [r.sample(metric.name) for r in sorted(control, key=lambda r: r.order)]
    t_runs = [r.sample(metric.name) for r in sorted(candidate, key=lambda r: r.order)]
    c_stats = [run_statistic(r, metric.statistic, metric.better) for r in c_runs]
    found = brackets(c_stats, [run_statistic(r, metric.statistic, metric.better) for r in t_runs])
    deltas = [b.log_ratio for b in found]
    band = log_band(metric.band)
    iv = interval(deltas, 1 - alpha)
    verdict = bench_verdict(iv, band, metric.better)
    equivalence, below = None, False
    if verdict == UNDECIDED:
        equivalence = brackets_for_equivalence(iv.spread, band, alpha if final_alpha is None else final_alpha)
        below = equivalence is not None and max_repeat is not None and equivalence > max_repeat
    c_all = [x for r in c_runs for x in r]
    t_all = [x for r in t_runs for x in r]
    cs, ts = summarize(c_all), summarize(t_all)
    u, p = mann_whitney(c_all, t_all)

    def pct(x: float | None) -> float | None:
        return None if x is None else as_pct(x)

    low, high = _bounded(iv.low), _bounded(iv.high)
    return MetricVerdict(
        metric.name, metric.unit, metric.better, metric.band, verdict,
        why(verdict, iv, metric.band, equivalence, below),
        delta_pct=as_pct(iv.mean), low_pct=pct(low), high_pct=pct(high), level=iv.level, brackets=found,
        equivalence_p=equivalence_p(deltas, band), reach_pct=pct(_bounded(iv.reach)), drift_pct=drift_pct(c_stats),
        control=cs, candidate=ts, pooled_delta_pct=delta_pct(cs.mean, ts.mean), u=u, p=p, statistic=metric.statistic,
        log_delta=iv.mean, log_low=low, log_high=high, spread_pct=pct(_bounded(iv.spread)),
        equivalence_brackets=equivalence, below_noise=below)


def positive(trial: Trial, runs: Sequence[Run]) -> tuple[str, ...]:
    """The runs whose samples a ratio cannot take (zero or negative), each as "leg run N: why": a benchmark's
    deltas are ratios of runs, which only positive quantities have."""
    out = []
    for r in sorted(runs, key=lambda r: r.order):
        for m in trial.metrics:
            bad = [x for x in r.sample(m.name) if not x > 0]
            if bad:
                out.append(f"{r.leg} run {r.repetition + 1}: {m.name} = {bad[0]:g}; a benchmark's deltas are "
                           "ratios of runs and need positive samples")
    return tuple(out)


def _bounded(x: float) -> float | None:
    return x if math.isfinite(x) else None


def outputs_verdict(trial: Trial, control: Sequence[Run], candidate: Sequence[Run]) -> tuple[OutputVerdict, ...]:
    out = []
    for f in trial.outputs:
        c = tuple(dict.fromkeys(d for r in control for name, d in r.outputs if name == f))
        t = tuple(dict.fromkeys(d for r in candidate for name, d in r.outputs if name == f))
        equal = len(set(c) | set(t)) == 1 and MISSING not in c
        out.append(OutputVerdict(f, equal, c, t))
    return tuple(out)


def trial_verdict(trial: Trial, runs: Sequence[Run], alpha: float, allow_undecided: bool = False) -> TrialVerdict:
    """The verdict of one trial from all its runs (reruns included). An undecided benchmark fails, as a
    regression does, unless `allow_undecided`: what the runs could not tell apart from a regression is not
    evidence that there is none."""
    return replace(_verdict(trial, runs, alpha, allow_undecided), sweep=trial.sweep, cell=trial.cell)


def _verdict(trial: Trial, runs: Sequence[Run], alpha: float, allow_undecided: bool) -> TrialVerdict:
    control = [r for r in runs if r.leg == CONTROL]
    candidate = [r for r in runs if r.leg == CANDIDATE]
    errors = tuple(f"{r.leg} run {r.repetition + 1}{f' (rerun {r.rerun})' if r.rerun else ''}: {r.error}"
                   for r in runs if r.error)
    outputs = outputs_verdict(trial, [r for r in control if not r.error], [r for r in candidate if not r.error])
    differ = any(not o.equal for o in outputs)
    if trial.kind is TrialKind.TESTS:
        good_c = [r for r in control if not r.error]
        good_t = [r for r in candidate if not r.error]
        if not good_c or not good_t:
            return TrialVerdict(trial.name, trial.kind, trial.config, BROKEN, True, outputs=outputs, errors=errors)
        tv = tests_verdict(good_c, good_t)
        if not tv.same_inventory:
            verdict = INVENTORY_CHANGED
        elif tv.regressions:
            verdict = REGRESSED
        elif differ:
            verdict = OUTPUTS_DIFFER
        elif tv.failing_both:
            verdict = FAILS_ON_BOTH
        elif tv.flaky:
            verdict = FLAKY
        else:
            verdict = PASS
        failing = verdict in (INVENTORY_CHANGED, REGRESSED, OUTPUTS_DIFFER) or bool(errors)
        return TrialVerdict(trial.name, trial.kind, trial.config, verdict, failing, tv, outputs=outputs, errors=errors)
    errors = errors or positive(trial, runs)
    if errors:  # a benchmark judged on some of its runs would judge another schedule than the one planned
        return TrialVerdict(trial.name, trial.kind, trial.config, BROKEN, True, errors=errors)
    brackets = min(len(control) - 1, len(candidate))
    final = look_alpha(trial, alpha, max(trial.max_repeat, trial.repeat))
    metrics = tuple(metric_verdict(m, control, candidate, look_alpha(trial, alpha, brackets),
                                   max(trial.max_repeat, trial.repeat), final) for m in trial.metrics)
    worst = [m.verdict for m in metrics]
    verdict = (OUTPUTS_DIFFER if differ else REGRESSED if REGRESSED in worst
               else UNDECIDED if UNDECIDED in worst else _overall(worst))
    failing = verdict in (REGRESSED, OUTPUTS_DIFFER) or (verdict == UNDECIDED and not allow_undecided)
    return TrialVerdict(trial.name, trial.kind, trial.config, verdict, failing, metrics=metrics, outputs=outputs)


def _overall(verdicts: Sequence[str]) -> str:
    """All neutral: neutral; some improved, none worse: "improved" when all are, else "neutral-to-positive"."""
    if all(v == "improved" for v in verdicts):
        return "improved"
    if "improved" in verdicts:
        return "neutral-to-positive"
    return "neutral"


def skipped(trial: Trial, why: str) -> TrialVerdict:
    return TrialVerdict(trial.name, trial.kind, trial.config, SKIPPED_TRIAL, False, note=why, sweep=trial.sweep,
                        cell=trial.cell)
