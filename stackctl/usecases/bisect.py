"""`stackctl bisect`: the plan loaded, the bisect run with each stack between built as `stackctl build` builds
it, and the run recorded where `report` reads it (also when interrupted: the steps finished)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stackctl.bisect.run import BisectReport, Say
    from stackctl.image.order import BuildOrder


@dataclass(frozen=True)
class BisectAsk:
    """`stackctl bisect`'s options as given."""

    control: str
    candidate: str
    trial: str
    plan: Path | None = None  # default: validation/plan.toml beside the candidate's profile
    metric: str | None = None
    repeat: int | None = None
    max_repeat: int | None = None
    index: tuple[str, ...] = ()
    inventory: str | None = None
    work_dir: Path | None = None
    record_dir: Path = Path("build")
    record: Path | None = None  # default: RECORD_DIR/CANDIDATE.bisect.json
    no_record: bool = False
    builder: str | None = None
    command: str = ""
    slots: int = 1  # stacks each round of the search builds and compares side by side


def bisect_moves(ask: BisectAsk, *, say: Say) -> BisectReport:
    """Bisect `ask.candidate` against `ask.control`; the report is recorded unless `no_record`, and on Ctrl-C
    the steps finished are recorded before KeyboardInterrupt goes on."""
    from stackctl.ab.plan import DEFAULT_PLAN, load_plan
    from stackctl.bisect.run import BisectOptions, record_bisect, run_bisect
    from stackctl.profile.locate import profile_file, stack_ref

    the_plan = load_plan(ask.plan or profile_file(ask.candidate).parent / DEFAULT_PLAN).repeated(ask.repeat)
    opts = BisectOptions(ask.control, ask.candidate, the_plan, ask.trial, ask.metric, ask.index, ask.inventory,
                         ask.work_dir, ask.record_dir, ask.builder, ask.command, ask.max_repeat)
    control, candidate = stack_ref(ask.control), stack_ref(ask.candidate)
    where = ask.record or ask.record_dir / f"{candidate.name}.bisect.json"

    def keep(rep: BisectReport) -> None:
        if not ask.no_record:
            record_bisect(rep, where, ask.command, control.stack, candidate.stack)
            say(f"recorded {where}" + (" (interrupted: the steps finished)" if rep.status != "done" else ""))

    rep = run_bisect(opts, build_between, say=say, interrupted=keep, slots=ask.slots)
    keep(rep)
    return rep


def build_between(order: BuildOrder, say: Say) -> str:
    """A stack between built as `stackctl build` builds it: the image. A module's function, so that a runner on
    another machine can be given it by name."""
    from stackctl.usecases.build import build_stack

    return build_stack(order, say=lambda line, _level: say(line)).image
