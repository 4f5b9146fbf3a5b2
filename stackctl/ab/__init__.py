"""Stage 10, dual-stack validation: the plan (`plan`), the legs that run it (`legs`, the edge), what each run left
(`runs`), the statistics (`stats`, pure) and the verdicts (`verdicts`, pure), and `ab` itself (`run`).

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.ab.plan import DEFAULT_PLAN, Plan, load_plan
    from stackctl.ab.plot import picture_name
    from stackctl.ab.run import AbReport, GateCheck, record_ab, run_ab
    from stackctl.ab.runs import Leg, Run
    from stackctl.ab.summary import (
        LEG_COLUMNS,
        METRIC_COLUMNS,
        SUMMARY_COLUMNS,
        SWEEP_COLUMNS,
        gate_failures,
        inventory_lines,
        leg_rows,
        metric_rows,
        summary_rows,
        sweep_rows,
    )
    from stackctl.ab.verdicts import MetricVerdict, TestsVerdict, TrialVerdict

__all__ = [
    "DEFAULT_PLAN", "LEG_COLUMNS", "METRIC_COLUMNS", "SUMMARY_COLUMNS", "SWEEP_COLUMNS", "AbReport", "GateCheck", "Leg",
    "MetricVerdict", "Plan", "Run", "TestsVerdict", "TrialVerdict", "gate_failures", "inventory_lines", "leg_rows",
    "load_plan", "metric_rows", "picture_name", "record_ab", "run_ab", "summary_rows", "sweep_rows",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "plan": ("DEFAULT_PLAN", "Plan", "load_plan"),
        "plot": ("picture_name",),
        "run": ("AbReport", "GateCheck", "record_ab", "run_ab"),
        "runs": ("Leg", "Run"),
        "summary": ("LEG_COLUMNS", "METRIC_COLUMNS", "SUMMARY_COLUMNS", "SWEEP_COLUMNS", "gate_failures",
                    "inventory_lines", "leg_rows", "metric_rows", "summary_rows", "sweep_rows"),
        "verdicts": ("MetricVerdict", "TestsVerdict", "TrialVerdict"),
    })
