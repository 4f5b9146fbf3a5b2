"""Stage 10b, bisect: which pin move makes a candidate regress. The units of moves (`units`, pure), the search
(`search`, pure), one step's outcome from ab's verdict (`judge`, pure), the rows people read (`summary`, pure) and
the run that resolves, builds and compares intermediate stacks (`run`, the edge).

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.bisect.judge import Judged as Judged
    from stackctl.bisect.judge import judge_trial as judge_trial
    from stackctl.bisect.run import BisectOptions as BisectOptions
    from stackctl.bisect.run import BisectReport as BisectReport
    from stackctl.bisect.run import Culprit as Culprit
    from stackctl.bisect.run import RunSteps as RunSteps
    from stackctl.bisect.run import Step as Step
    from stackctl.bisect.run import StepJob as StepJob
    from stackctl.bisect.run import record_bisect as record_bisect
    from stackctl.bisect.run import run_bisect as run_bisect
    from stackctl.bisect.run import run_step as run_step
    from stackctl.bisect.run import steps_here as steps_here
    from stackctl.bisect.search import Finding as Finding
    from stackctl.bisect.search import Outcome as Outcome
    from stackctl.bisect.search import SearchResult as SearchResult
    from stackctl.bisect.search import one_by_one as one_by_one
    from stackctl.bisect.search import search_units as search_units
    from stackctl.bisect.summary import culprits_table as culprits_table
    from stackctl.bisect.summary import steps_table as steps_table
    from stackctl.bisect.summary import units_table as units_table
    from stackctl.bisect.units import PinMove as PinMove
    from stackctl.bisect.units import Unit as Unit
    from stackctl.bisect.units import Units as Units
    from stackctl.bisect.units import intermediate_profile as intermediate_profile
    from stackctl.bisect.units import plan_units as plan_units

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
