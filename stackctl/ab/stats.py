"""Statistics of recorded samples: pure functions, values in and values out.

The two-sample test is scipy's Mann-Whitney U (two-sided), the test benchstat and Google Benchmark's
compare.py use for timings: it assumes no distribution (timings are skewed, with a long tail), and scipy's
exact and asymptotic p-values are maintained and tested against the literature, which a hand-written rank
sum would have to reinvent.
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

    @property
    def spread_pct(self) -> float:
        """The coefficient of variation in percent: how much one sample wanders around the mean."""
        return abs(self.stdev / self.mean) * 100 if self.mean else 0.0


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


def mann_whitney(control: Sequence[float], candidate: Sequence[float]) -> tuple[float, float]:
    """(U of the candidate, two-sided p-value). Identical samples on both sides are no evidence of a
    difference: p = 1."""
    from scipy.stats import mannwhitneyu

    if len(set(control) | set(candidate)) <= 1:
        return len(control) * len(candidate) / 2, 1.0
    result = mannwhitneyu(candidate, control, alternative="two-sided")
    return float(result.statistic), float(result.pvalue)


def drift_pct(control_runs: Sequence[Sequence[float]]) -> float:
    """How far the control moves while the candidate runs: the change between the medians of two adjacent control
    runs (each pair brackets one candidate run), in percent of the control's median; the median of those changes,
    so one disturbed run (a neighbour's job starting) does not stand for the whole host."""
    medians = [statistics.median(r) for r in control_runs if r]
    if len(medians) < 2:
        return 0.0
    centre = statistics.median([x for r in control_runs for x in r])
    return statistics.median(abs(delta_pct(centre, b) - delta_pct(centre, a)) for a, b in pairwise(medians))


NEUTRAL, IMPROVED, REGRESSED, INCONCLUSIVE = "neutral", "improved", "regressed", "inconclusive"


def bench_verdict(delta: float, p: float, drift: float, band: float, better: Better, alpha: float) -> tuple[str, str]:
    """The verdict of one metric, and why. A delta within the band is neutral, unless the bracketing control
    itself moved by more than the band between runs: then the host, not the stacks, sets what is measured, and
    nothing can be said (rerun on a quieter host). A delta beyond the band must be larger than the control's
    own drift (else the drift alone could make it) and the two-sample test must reject "the same distribution"
    (else the samples overlap too much to call it: more repetitions)."""
    if abs(delta) <= band:
        if drift > band:
            return INCONCLUSIVE, (f"{delta:+.2f}% is within ±{band:g}%, but the bracketing control drifted "
                                  f"{drift:.2f}% between runs, more than the band: rerun on a quieter host")
        return NEUTRAL, f"{delta:+.2f}% is within ±{band:g}%"
    if drift >= abs(delta):
        return INCONCLUSIVE, (f"{delta:+.2f}% is outside ±{band:g}%, but the bracketing control drifted as much "
                              f"({drift:.2f}%) between runs: rerun on a quieter host")
    if p >= alpha:
        return INCONCLUSIVE, (f"{delta:+.2f}% is outside ±{band:g}% but the samples overlap (Mann-Whitney p={p:.3g} "
                              f"≥ {alpha:g}): rerun with more repetitions")
    worse = delta < 0 if better is Better.HIGHER else delta > 0
    return (REGRESSED if worse else IMPROVED), (f"{delta:+.2f}% is outside ±{band:g}% "
                                                f"(Mann-Whitney p={p:.3g} < {alpha:g})")
