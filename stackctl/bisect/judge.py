"""One step's outcome for the search, from ab's verdict of the trial: pure.

The narrow reading of ab's result: `TrialVerdict.trial/.kind/.verdict/.failing`, each metric's
`.metric/.verdict/.delta_pct`, and the names of the test nodes that regressed.

- bad: the trial (or the metric named) regressed; a changed test inventory or differing exact outputs, which
  also fail `ab`, count as bad too;
- good: pass, neutral, improved, neutral-to-positive, flaky, fails on both (what the control does too);
- cannot tell (a skip): undecided (which the runner then looks at from the candidate's side), broken, skipped,
  or anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackctl.bisect.search import Outcome

if TYPE_CHECKING:
    from stackctl.ab import TrialVerdict

BAD = frozenset({"regressed", "inventory changed", "outputs differ"})
GOOD = frozenset({"pass", "neutral", "improved", "neutral-to-positive", "flaky", "fails on both"})
METRIC_GOOD = frozenset({"neutral", "improved"})


@dataclass(frozen=True)
class Judged:
    outcome: Outcome
    verdict: str  # ab's word for the trial, or for the metric named
    delta_pct: float | None  # the metric's (the named one, else the first)
    regressions: tuple[str, ...]  # test nodes failing only with the step's stack


def judge_trial(trial: TrialVerdict, metric: str | None = None) -> Judged:
    metrics = list(trial.metrics)
    chosen = next((m for m in metrics if m.metric == metric), None) if metric else (metrics[0] if metrics else None)
    delta = chosen.delta_pct if chosen is not None else None
    nodes = tuple(n.node for n in trial.tests.regressions) if trial.tests is not None else ()
    if metric is not None:
        if chosen is None:
            return Judged(Outcome.SKIP, trial.verdict, None, nodes)
        word = chosen.verdict
        outcome = (Outcome.BAD if word == "regressed" else Outcome.GOOD if word in METRIC_GOOD else Outcome.SKIP)
        return Judged(outcome, word, delta, nodes)
    word = trial.verdict
    outcome = Outcome.BAD if word in BAD else Outcome.GOOD if word in GOOD else Outcome.SKIP
    return Judged(outcome, word, delta, nodes)
