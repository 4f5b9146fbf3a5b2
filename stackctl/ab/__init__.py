"""Stage 10, dual-stack validation: the plan (`plan`), the legs that run it (`legs`, the edge), what each run left
(`runs`), the statistics (`stats`, pure) and the verdicts (`verdicts`, pure), and `ab` itself (`run`).

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.ab.plan import DEFAULT_PLAN as DEFAULT_PLAN
    from stackctl.ab.plan import Plan as Plan
    from stackctl.ab.plan import load_plan as load_plan
    from stackctl.ab.plot import picture_name as picture_name
    from stackctl.ab.run import AbReport as AbReport
    from stackctl.ab.run import GateCheck as GateCheck
    from stackctl.ab.run import record_ab as record_ab
    from stackctl.ab.run import run_ab as run_ab
    from stackctl.ab.runs import Leg as Leg
    from stackctl.ab.runs import Run as Run
    from stackctl.ab.summary import LEG_COLUMNS as LEG_COLUMNS
    from stackctl.ab.summary import METRIC_COLUMNS as METRIC_COLUMNS
    from stackctl.ab.summary import PLACE_COLUMNS as PLACE_COLUMNS
    from stackctl.ab.summary import SUMMARY_COLUMNS as SUMMARY_COLUMNS
    from stackctl.ab.summary import SWEEP_COLUMNS as SWEEP_COLUMNS
    from stackctl.ab.summary import gate_failures as gate_failures
    from stackctl.ab.summary import inventory_lines as inventory_lines
    from stackctl.ab.summary import leg_rows as leg_rows
    from stackctl.ab.summary import metric_rows as metric_rows
    from stackctl.ab.summary import place_rows as place_rows
    from stackctl.ab.summary import summary_rows as summary_rows
    from stackctl.ab.summary import sweep_rows as sweep_rows
    from stackctl.ab.verdicts import MetricVerdict as MetricVerdict
    from stackctl.ab.verdicts import TestsVerdict as TestsVerdict
    from stackctl.ab.verdicts import TrialVerdict as TrialVerdict

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
