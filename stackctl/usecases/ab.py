"""`stackctl ab`: both profiles resolved once, the validation plan loaded (beside the candidate's profile unless
named) and narrowed to the trials asked for, the legs run, and the result recorded where `report` reads it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stackctl.errors import CheckFailed

if TYPE_CHECKING:
    from stackctl.ab.run import AbReport, Say


@dataclass(frozen=True)
class AbAsk:
    """`stackctl ab`'s options as given."""

    control: str
    candidate: str
    plan: Path | None = None  # default: validation/plan.toml beside the candidate's profile
    trials: tuple[str, ...] = ()
    repeat: int | None = None
    max_repeat: int | None = None
    allow_undecided: bool = False
    images: tuple[str, ...] = ()
    pythons: tuple[str, ...] = ()
    target: str | None = None
    record_dir: Path = Path("build")
    record: Path | None = None  # default: RECORD_DIR/CANDIDATE.ab.json
    no_record: bool = False
    command: str = ""


@dataclass(frozen=True)
class AbDone:
    """The A/B report, the stacks' names, and where it was recorded (None: not asked to) with its pictures."""

    report: AbReport
    control: str
    candidate: str
    recorded: Path | None
    pictures: tuple[str, ...]

    def failure(self) -> CheckFailed | None:
        """Exit 1, naming every problem, when the candidate regressed (or the A/B could not tell)."""
        if not self.report.failing:
            return None
        return CheckFailed(f"ab {self.control} → {self.candidate}: " + "; ".join(self.report.problems))


def ab_compare(ask: AbAsk, *, say: Say) -> AbDone:
    """Run the plan's trials in the control's and the candidate's legs; record the report unless `no_record`."""
    from stackctl.ab.plan import DEFAULT_PLAN, load_plan
    from stackctl.ab.run import record_ab, run_ab
    from stackctl.profile.locate import stack_ref

    control, candidate = stack_ref(ask.control), stack_ref(ask.candidate)
    plan = load_plan(ask.plan or candidate.file.parent / DEFAULT_PLAN)
    plan = plan.select(ask.trials).repeated(ask.repeat, ask.max_repeat, ask.allow_undecided)
    rep = run_ab(control, candidate, plan, images=ask.images, pythons=ask.pythons, record_dir=ask.record_dir,
                 target=ask.target, say=say)
    if ask.no_record:
        return AbDone(rep, control.name, candidate.name, None, ())
    where = ask.record or ask.record_dir / f"{candidate.name}.ab.json"
    drawn = record_ab(rep, where, ask.command, control.stack, candidate.stack)
    say(f"recorded {where}" + (f" and {len(drawn)} picture(s) beside it" if drawn else ""))
    if not drawn and any(t.metrics for t in rep.trials):
        say("no pictures: they need matplotlib (pip install 'stackctl[plots]')")
    return AbDone(rep, control.name, candidate.name, where, drawn)
