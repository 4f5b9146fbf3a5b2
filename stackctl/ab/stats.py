"""Statistics of recorded runs: pure functions, values in and values out.

The unit of replication is the run, not the sample: the samples of one run share its process, its warm-up, its
clocks and whatever else the host did meanwhile, so they are not independent of each other, and a test that
pools them counts one noisy run as many witnesses. The schedule brackets every candidate run by two control runs
(C T C T … C); each bracket gives one delta, the candidate run's statistic against the mean of the two control
runs around it, in which a linear drift of the host cancels. The verdict comes from the confidence interval of
those deltas, held against the band.

scipy supplies the distributions (Student's t for the interval and the two one-sided tests of equivalence) and
the pooled Mann-Whitney U kept as a secondary figure: its quantiles and p-values are maintained and tested
against the literature, which hand-written ones would have to reinvent.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from stackctl.ab.plan import Better


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    stdev: float  # sample standard deviation; 0 for one sample
    minimum: float
    maximum: float


def summarize(samples: Sequence[float]) -> Summary:
    if not samples:
        raise ValueError("no samples")
    return Summary(len(samples), statistics.fmean(samples), statistics.median(samples),
                   statistics.stdev(samples) if len(samples) > 1 else 0.0, min(samples), max(samples))


def delta_pct(reference: float, value: float) -> float:
    """`value` against `reference`, in percent of the reference (+ is larger)."""
    if reference == 0:
        return 0.0 if value == 0 else math.copysign(math.inf, value)
    return (value - reference) / abs(reference) * 100


def run_statistic(samples: Sequence[float], statistic: str = "median", better: Better = Better.HIGHER) -> float:
    """What one run says of a metric. The median of its samples (the default) is not moved by one disturbed
    sample; the best (the highest where higher is better, else the lowest) is the run's least disturbed sample,
    for a host whose interference only ever slows a run down (a shared CI host: a neighbour never speeds a
    benchmark up); the mean counts every sample alike."""
    if statistic == "best":
        return max(samples) if better is Better.HIGHER else min(samples)
    if statistic == "mean":
        return statistics.fmean(samples)
    return statistics.median(samples)


@dataclass(frozen=True)
class Bracket:
    """One candidate run between the two control runs around it."""

    before: float  # the control run's statistic before the candidate run
    candidate: float
    after: float  # the control run's statistic after it
    delta_pct: float  # the candidate against the mean of the two controls, + is larger


def brackets(control: Sequence[float], candidate: Sequence[float]) -> tuple[Bracket, ...]:
    """`control` and `candidate` are run statistics in schedule order (C T C T … C): candidate run i sits between
    control runs i and i+1. A candidate run without a control run after it is no bracket yet."""
    return tuple(Bracket(a, t, b, delta_pct((a + b) / 2, t))
                 for (a, b), t in zip(pairwise(control), candidate, strict=False))


@dataclass(frozen=True)
class Interval:
    """The mean bracket delta and its two-sided confidence interval at `level`, in percent."""

    n: int  # brackets
    mean: float
    low: float
    high: float
    level: float  # the interval's coverage: its inside shows equivalence, its outside a difference

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def reach(self) -> float:
        """The smallest band these brackets could call neutral: the interval's farthest end from zero."""
        return max(abs(self.low), abs(self.high))


def interval(deltas: Sequence[float], level: float) -> Interval:
    """Student's t interval of the mean delta. One bracket has no spread to go by: its interval is unbounded."""
    from scipy.stats import t

    n = len(deltas)
    if n == 0:
        return Interval(0, 0.0, -math.inf, math.inf, level)
    mean = statistics.fmean(deltas)
    if n == 1:
        return Interval(1, mean, -math.inf, math.inf, level)
    se = _stdev(deltas) / math.sqrt(n)
    if se == 0:
        return Interval(n, mean, mean, mean, level)
    low, high = t.interval(level, n - 1, loc=mean, scale=se)
    return Interval(n, mean, float(low), float(high), level)


def _stdev(values: Sequence[float]) -> float:
    """The sample standard deviation, 0 where the values differ only by rounding (the same delta computed from
    runs that drifted in step), which t's moments would otherwise divide by."""
    sd = statistics.stdev(values)
    return 0.0 if sd <= 1e-9 * (1 + abs(statistics.fmean(values))) else sd


def equivalence_p(deltas: Sequence[float], band: float) -> float:
    """Two one-sided t-tests (TOST) of "the mean delta lies within ±band": the larger of the two p-values, so
    p < a shows equivalence at a. The (1 - 2a) interval lies inside the band exactly when it does."""
    from scipy.stats import ttest_1samp

    if len(deltas) < 2:
        return 1.0
    if _stdev(deltas) == 0:
        return 0.0 if abs(deltas[0]) < band else 1.0
    above = ttest_1samp(deltas, -band, alternative="greater").pvalue
    below = ttest_1samp(deltas, band, alternative="less").pvalue
    return float(max(above, below))


def mann_whitney(control: Sequence[float], candidate: Sequence[float]) -> tuple[float, float]:
    """(U of the candidate, two-sided p-value) over the pooled samples of every run: a secondary figure, since
    it takes samples of one run for independent witnesses. Identical samples on both sides: p = 1."""
    from scipy.stats import mannwhitneyu

    if len(set(control) | set(candidate)) <= 1:
        return len(control) * len(candidate) / 2, 1.0
    result = mannwhitneyu(candidate, control, alternative="two-sided")
    return float(result.statistic), float(result.pvalue)


def drift_pct(control_runs: Sequence[float]) -> float:
    """How far the control moves between adjacent runs (each pair brackets one candidate run), in percent of
    its median run: the median of those changes. Shown, never a veto: the brackets cancel a linear drift, and
    a drift that does not cancel widens the interval, which is where it belongs."""
    if len(control_runs) < 2:
        return 0.0
    centre = statistics.median(control_runs)
    return statistics.median(abs(delta_pct(centre, b) - delta_pct(centre, a)) for a, b in pairwise(control_runs))


NEUTRAL, IMPROVED, REGRESSED, UNDECIDED = "neutral", "improved", "regressed", "undecided"


def bench_verdict(iv: Interval, band: float, better: Better) -> str:
    """Inside ±band: neutral (equivalence shown); wholly beyond it on one side: improved or regressed by the
    metric's direction; anything else: undecided."""
    if -band < iv.low and iv.high < band:
        return NEUTRAL
    if iv.low > band or iv.high < -band:
        worse = (iv.high < -band) if better is Better.HIGHER else (iv.low > band)
        return REGRESSED if worse else IMPROVED
    return UNDECIDED


def brackets_needed(iv: Interval, band: float) -> int | None:
    """About how many brackets in all would decide an undecided metric if the deltas keep their spread: the
    interval narrows with the square root of the count, and must come clear of the band on one side. None when
    no count would (the mean sits on the band's edge, or there is no spread to go by yet)."""
    gap = abs(band - abs(iv.mean))
    if iv.n < 2 or not math.isfinite(iv.half_width) or gap == 0:
        return None
    if iv.half_width <= gap:
        return iv.n
    return math.ceil(iv.n * (iv.half_width / gap) ** 2)


def why(verdict: str, iv: Interval, band: float) -> str:
    """The verdict in words: the interval against the band, and for an undecided one what the runs can tell."""
    shown = f"{iv.mean:+.2f}% [{iv.low:+.2f}%, {iv.high:+.2f}%] at {iv.level * 100:.3g}% over {iv.n} bracket" + \
        ("s" if iv.n != 1 else "")
    if verdict == NEUTRAL:
        return f"{shown}: inside ±{band:g}%"
    if verdict in (REGRESSED, IMPROVED):
        return f"{shown}: wholly beyond ±{band:g}%"
    if not math.isfinite(iv.reach):
        return f"{shown}: one bracket has no spread to judge by; run more"
    return f"{shown}: these runs can tell ±{iv.reach:.2g}%, not ±{band:g}%"
