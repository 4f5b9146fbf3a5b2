"""`stackctl ab`: both profiles resolved once, the validation plan loaded (beside the candidate's profile unless
named) and narrowed to the trials asked for, the legs run, and the result recorded where `report` reads it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stackctl.errors import CheckFailed

if TYPE_CHECKING:
    from stackctl.ab.plan import Plan
    from stackctl.ab.run import AbReport, Say
    from stackctl.cluster.address import ClusterAddress
    from stackctl.profile.locate import StackRef


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
    cluster: str | None = None  # --cluster (or STACKCTL_CLUSTER): a Ray head's address


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
    from stackctl.cluster import cluster_address
    from stackctl.profile.locate import stack_ref

    control, candidate = stack_ref(ask.control), stack_ref(ask.candidate)
    plan = load_plan(ask.plan or candidate.file.parent / DEFAULT_PLAN)
    plan = plan.select(ask.trials).repeated(ask.repeat, ask.max_repeat, ask.allow_undecided)
    address = cluster_address(ask.cluster)
    if address is None:
        rep = run_ab(control, candidate, plan, images=ask.images, pythons=ask.pythons, record_dir=ask.record_dir,
                     target=ask.target, say=say)
    else:
        rep = _on_cluster(address, ask, control, candidate, plan, say)
    if ask.no_record:
        return AbDone(rep, control.name, candidate.name, None, ())
    where = ask.record or ask.record_dir / f"{candidate.name}.ab.json"
    drawn = record_ab(rep, where, ask.command, control.stack, candidate.stack)
    say(f"recorded {where}" + (f" and {len(drawn)} picture(s) beside it" if drawn else ""))
    if not drawn and any(t.metrics for t in rep.trials):
        say("no pictures: they need matplotlib (pip install 'stackctl[plots]')")
    return AbDone(rep, control.name, candidate.name, where, drawn)


def _on_cluster(address: ClusterAddress, ask: AbAsk, control: StackRef, candidate: StackRef, plan: Plan,
                say: Say) -> AbReport:
    """The legs probed and gated here, each trial a task on the cluster; the report names where each ran."""
    import dataclasses

    from stackctl.ab.run import run_ab
    from stackctl.cluster import ClusterTrials, connect, task_records

    with connect(address) as cluster:
        offers = cluster.offers()
        say(f"cluster {address}: Ray {cluster.ray_version}, {sum(n.gpus for n in offers)} GPU(s) on "
            f"{len(offers)} node(s)")
        place = ClusterTrials(cluster, lambda where, key, what: say(f"[{where}] {key}: {what}"))
        rep = run_ab(control, candidate, plan, images=ask.images, pythons=ask.pythons, record_dir=ask.record_dir,
                     target=ask.target, say=say, place=place)
        return dataclasses.replace(rep, cluster={"address": address.text, "ray": cluster.ray_version,
                                                 "tasks": task_records(place.tasks)})
