"""Verdicts: pure functions of the recorded runs of one trial in both legs.

- tests: the two legs' inventories of node ids must be the same; per node, its status on each leg over all
  of that leg's runs (a node that failed in one run and passed in another is flaky); a node failing only on
  the candidate is a regression, named;
- bench: per metric, each leg's summary, the candidate's delta against the bracketing control, the control's
  own drift, Mann-Whitney U, and neutral / improved / regressed / inconclusive (`stats.bench_verdict`);
- outputs: the digest of each exact-output file must be one and the same over every run of both legs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stackctl.ab.plan import Better, Metric, Trial, TrialKind
from stackctl.ab.runs import FAILED, MISSING, PASSED, SKIPPED, Run
from stackctl.ab.stats import (
    INCONCLUSIVE,
    REGRESSED,
    Summary,
    bench_verdict,
    delta_pct,
    drift_pct,
    mann_whitney,
    summarize,
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
    metric: str
    unit: str
    better: Better
    band: float
    control: Summary
    candidate: Summary
    delta_pct: float  # candidate mean against the bracketing control's mean
    median_delta_pct: float
    drift_pct: float  # the control's own movement between adjacent runs
    u: float
    p: float
    verdict: str  # neutral | improved | regressed | inconclusive
    why: str


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
    failing: bool  # what makes `ab` exit 1: a regression, a changed inventory, differing outputs, a broken run
    tests: TestsVerdict | None = None
    metrics: tuple[MetricVerdict, ...] = ()
    outputs: tuple[OutputVerdict, ...] = ()
    errors: tuple[str, ...] = ()  # runs that gave nothing to judge, each as "leg run N: why"
    note: str = ""  # a skipped trial's reason


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


def metric_verdict(metric: Metric, control: Sequence[Run], candidate: Sequence[Run], alpha: float) -> MetricVerdict:
    """`control` in schedule order: each adjacent pair brackets one candidate run."""
    c_runs = [r.sample(metric.name) for r in sorted(control, key=lambda r: r.order)]
    c_all = [x for r in c_runs for x in r]
    t_all = [x for r in candidate for x in r.sample(metric.name)]
    cs, ts = summarize(c_all), summarize(t_all)
    delta = delta_pct(cs.mean, ts.mean)
    drift = drift_pct(c_runs)
    u, p = mann_whitney(c_all, t_all)
    verdict, why = bench_verdict(delta, p, drift, metric.band, metric.better, alpha)
    return MetricVerdict(metric.name, metric.unit, metric.better, metric.band, cs, ts, delta,
                         delta_pct(cs.median, ts.median), drift, u, p, verdict, why)


def outputs_verdict(trial: Trial, control: Sequence[Run], candidate: Sequence[Run]) -> tuple[OutputVerdict, ...]:
    out = []
    for f in trial.outputs:
        c = tuple(dict.fromkeys(d for r in control for name, d in r.outputs if name == f))
        t = tuple(dict.fromkeys(d for r in candidate for name, d in r.outputs if name == f))
        equal = len(set(c) | set(t)) == 1 and MISSING not in c
        out.append(OutputVerdict(f, equal, c, t))
    return tuple(out)


def trial_verdict(trial: Trial, runs: Sequence[Run], alpha: float) -> TrialVerdict:
    """The verdict of one trial from all its runs (reruns included)."""
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
    if errors:  # a benchmark judged on some of its runs would judge another schedule than the one planned
        return TrialVerdict(trial.name, trial.kind, trial.config, BROKEN, True, errors=errors)
    metrics = tuple(metric_verdict(m, control, candidate, alpha) for m in trial.metrics)
    worst = [m.verdict for m in metrics]
    verdict = (OUTPUTS_DIFFER if differ else REGRESSED if REGRESSED in worst
               else INCONCLUSIVE if INCONCLUSIVE in worst else _overall(worst))
    return TrialVerdict(trial.name, trial.kind, trial.config, verdict, verdict in (REGRESSED, OUTPUTS_DIFFER),
                        metrics=metrics, outputs=outputs)


def _overall(verdicts: Sequence[str]) -> str:
    """All neutral: neutral; some improved, none worse: "improved" when all are, else "neutral-to-positive"."""
    if all(v == "improved" for v in verdicts):
        return "improved"
    if "improved" in verdicts:
        return "neutral-to-positive"
    return "neutral"


def skipped(trial: Trial, why: str) -> TrialVerdict:
    return TrialVerdict(trial.name, trial.kind, trial.config, SKIPPED_TRIAL, False, note=why)
