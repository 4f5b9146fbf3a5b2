"""Stage 10b, bisect: which pin move makes a candidate regress. The units of moves (`units`, pure), the search
(`search`, pure), one step's outcome from ab's verdict (`judge`, pure), the rows people read (`summary`, pure) and
the run that resolves, builds and compares intermediate stacks (`run`, the edge).

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.bisect.judge import Judged, judge_trial
    from stackctl.bisect.run import (
        BisectOptions,
        BisectReport,
        Culprit,
        RunSteps,
        Step,
        StepJob,
        record_bisect,
        run_bisect,
        run_step,
        steps_here,
    )
    from stackctl.bisect.search import Finding, Outcome, SearchResult, one_by_one, search_units
    from stackctl.bisect.summary import culprits_table, steps_table, units_table
    from stackctl.bisect.units import PinMove, Unit, Units, intermediate_profile, plan_units

__all__ = [
    "BisectOptions", "BisectReport", "Culprit", "Finding", "Judged", "Outcome", "PinMove", "RunSteps", "SearchResult",
    "Step", "StepJob", "Unit", "Units", "culprits_table", "intermediate_profile", "judge_trial", "one_by_one",
    "plan_units", "record_bisect", "run_bisect", "run_step", "search_units", "steps_here", "steps_table",
    "units_table",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "judge": ("Judged", "judge_trial"),
        "run": ("BisectOptions", "BisectReport", "Culprit", "RunSteps", "Step", "StepJob", "record_bisect",
                "run_bisect", "run_step", "steps_here"),
        "search": ("Finding", "Outcome", "SearchResult", "one_by_one", "search_units"),
        "summary": ("culprits_table", "steps_table", "units_table"),
        "units": ("PinMove", "Unit", "Units", "intermediate_profile", "plan_units"),
    })
