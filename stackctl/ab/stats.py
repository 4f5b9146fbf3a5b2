"""Statistics of recorded runs: pure functions, values in and values out.

The unit of replication is the run, not the sample: the samples of one run share its process, its warm-up, its
clocks and whatever else the host did meanwhile, so they are not independent of each other, and a test that
pools them counts one noisy run as many witnesses. The schedule brackets every candidate run by two control runs
(C T C T … C); each bracket gives one delta, the log of the candidate run's statistic over the geometric mean of
the two control runs around it, in which a host that drifts by a steady factor cancels. The verdict comes from
the confidence interval of those log ratios, held against the band on the same scale (±log(1 + band/100)).

On the log scale a metric and its inverse (ops/s and ms per op) give deltas of opposite sign and equal size, so
their intervals mirror and their verdicts agree; a twofold slowdown and a twofold speedup are the same distance
from zero. What people read is in percent: a log ratio x is shown as exp(x) - 1.

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


def log_ratio(reference: float, value: float) -> float:
    """log(value / reference) of two positive values: + is larger, and the inverse's is its negative."""
    return math.log(value) - math.log(reference)


def as_pct(x: float) -> float:
    """A log ratio in percent of the reference, as people read it: exp(x) - 1."""
    return math.expm1(x) * 100 if x < 700 else math.inf


def log_band(band: float) -> float:
    """A band in percent on the log scale: ±band% means within a factor 1 + band/100 either way."""
    return math.log1p(band / 100)


def percent(x: float, signed: bool = False) -> str:
    """A percentage as every line of `ab` writes it: three significant figures in plain decimals (150%, 56.4%,
    0.512%; at most three decimals, never an exponent)."""
    if math.isinf(x):
        return ("+" if signed and x > 0 else "-" if x < 0 else "") + "∞%"
    if abs(x) < 0.0005:  # nothing at three decimals: no "-0.000%"
        return f"{0.0:{'+' if signed else ''}.3f}%"
    digits = min(3, max(0, 2 - math.floor(math.log10(abs(x)))))
    return f"{x:{'+' if signed else ''}.{digits}f}%"


def run_statistic(samples: Sequence[float], statistic: str = "median", better: Better = Better.HIGHER) -> float:
    """What one run says of a metric. The median of its samples (the default) is not moved by one disturbed
    sample; the best (the highest where higher is better, else the lowest) is the run's least disturbed sample,
    for a host whose interference only ever slows a run down (a shared CI host: a neighbour never speeds a
    benchmark up); the mean counts every sample alike. Both are taken on the log scale the verdict uses (an even
    count's median is the geometric mean of its middle two, the mean is the geometric mean), so each says of a
    metric's inverse exactly the inverse of what it says of the metric."""
    if statistic == "best":
        return max(samples) if better is Better.HIGHER else min(samples)
    if statistic == "mean":
        return statistics.geometric_mean(samples)
    ordered = sorted(samples)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return math.sqrt(ordered[middle - 1]) * math.sqrt(ordered[middle])


@dataclass(frozen=True)
class Bracket:
    """One candidate run between the two control runs around it."""

    before: float  # the control run's statistic before the candidate run
    candidate: float
    after: float  # the control run's statistic after it
    delta_pct: float  # the candidate against the geometric mean of the two controls, in percent: + is larger
    log_ratio: float  # the same on the log scale, which the interval is taken on


def brackets(control: Sequence[float], candidate: Sequence[float]) -> tuple[Bracket, ...]:
    """`control` and `candidate` are positive run statistics in schedule order (C T C T … C): candidate run i sits
    between control runs i and i+1. A candidate run without a control run after it is no bracket yet."""
    out = []
    for (a, b), t in zip(pairwise(control), candidate, strict=False):
        x = math.log(t) - (math.log(a) + math.log(b)) / 2
        out.append(Bracket(a, t, b, as_pct(x), x))
    return tuple(out)


@dataclass(frozen=True)
class Interval:
    """The mean of the bracket deltas (log ratios) and its two-sided confidence interval at `level`."""

    n: int  # brackets
    mean: float
    low: float
    high: float
    level: float  # the interval's coverage: its inside shows equivalence, its outside a difference
    spread: float = 0.0  # the deltas' sample standard deviation: the host's noise, bracket by bracket

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
        return Interval(0, 0.0, -math.inf, math.inf, level, math.inf)
    mean = statistics.fmean(deltas)
    if n == 1:
        return Interval(1, mean, -math.inf, math.inf, level, math.inf)
    sd = _stdev(deltas)
    if sd == 0:
        return Interval(n, mean, mean, mean, level, 0.0)
    low, high = t.interval(level, n - 1, loc=mean, scale=sd / math.sqrt(n))
    return Interval(n, mean, float(low), float(high), level, sd)


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
        return 0.0 if abs(statistics.fmean(deltas)) < band else 1.0
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
    """How far the control moves between adjacent runs (each pair brackets one candidate run): the median of
    those changes, each as a log ratio, in percent. Shown, never a veto: the brackets cancel a steady drift, and
    a drift that does not cancel widens the interval, which is where it belongs."""
    if len(control_runs) < 2:
        return 0.0
    return as_pct(statistics.median(abs(log_ratio(a, b)) for a, b in pairwise(control_runs)))


NEUTRAL, IMPROVED, REGRESSED, UNDECIDED = "neutral", "improved", "regressed", "undecided"


def bench_verdict(iv: Interval, band: float, better: Better) -> str:
    """Inside ±band: neutral (equivalence shown); wholly beyond it on one side: improved or regressed by the
    metric's direction; anything else: undecided. `band` is on the interval's scale (`log_band`)."""
    if -band < iv.low and iv.high < band:
        return NEUTRAL
    if iv.low > band or iv.high < -band:
        worse = (iv.high < -band) if better is Better.HIGHER else (iv.low > band)
        return REGRESSED if worse else IMPROVED
    return UNDECIDED


def brackets_for_equivalence(spread: float, band: float, alpha: float) -> int | None:
    """How many brackets would show equivalence if the true delta were zero and the deltas kept their spread:
    the fewest n whose interval at 1 - alpha, t(n - 1) · spread / √n either side of zero, lies inside ±band. It
    does not hang on where this A/B's mean happens to fall (a mean near the band's edge would need any number of
    brackets to come clear of it): it is what the host's noise asks of the band. None without a spread to go by
    or with no band to show."""
    from scipy.stats import t

    if not math.isfinite(spread) or band <= 0:
        return None

    def shows(n: int) -> bool:
        return float(t.ppf(1 - alpha / 2, n - 1)) * spread / math.sqrt(n) < band

    if shows(2):
        return 2
    low, high = 2, 4  # shows(low) is false, shows(high) is to be found; the width shrinks as n grows
    while not shows(high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if shows(mid) else (mid, high)
    return high


def tell_words(reach_pct: float | None, band: float, equivalence: int | None, below_noise: bool) -> str:
    """What an undecided metric's runs can tell, in one phrase that every report of it uses: the smallest band
    they could call neutral, and how many brackets would show equivalence with no true difference (and that the
    band is below the host's noise where the trial may not run as many)."""
    if reach_pct is None:
        return "one bracket has no spread to judge by; run more"
    said = f"these runs can tell ±{percent(reach_pct)}, not ±{band:g}%"
    if equivalence is None:
        return said
    if below_noise:
        return (f"{said}; ±{band:g}% is below this host's noise: with no true difference it would take about "
                f"{equivalence} brackets to show equivalence, more than the trial may run")
    return f"{said}; with no true difference about {equivalence} brackets would show equivalence"


def band_words(band: float) -> str:
    """The band as it holds on the log scale: ±3% is a factor 1.03 either way, -2.91% to +3%."""
    if band <= 0:
        return f"±{band:g}%"
    return f"±{band:g}% ({percent(as_pct(-log_band(band)), True)} to +{band:g}%)"


def why(verdict: str, iv: Interval, band: float, equivalence: int | None = None, below_noise: bool = False) -> str:
    """The verdict in words: the interval (log ratios, shown in percent) against the band (in percent), and for
    an undecided one what the runs can tell."""
    shown = f"{percent(as_pct(iv.mean), True)} [{percent(as_pct(iv.low), True)}, {percent(as_pct(iv.high), True)}]" \
        f" at {iv.level * 100:.3g}% over {iv.n} bracket" + ("s" if iv.n != 1 else "")
    if verdict == NEUTRAL:
        return f"{shown}: inside {band_words(band)}"
    if verdict in (REGRESSED, IMPROVED):
        return f"{shown}: wholly beyond {band_words(band)}"
    reach = as_pct(iv.reach) if math.isfinite(iv.reach) else None
    return f"{shown}: {tell_words(reach, band, equivalence, below_noise)}"
