"""`ab --cluster`: each trial, and each cell of a `[trial.matrix]` sweep, one task on the cluster holding its cards
for its whole schedule: the brackets C T C ... and every bracket added until decided run on one node and the same
cards, different trials side by side on other cards and nodes. What travels is the plan, the trial, the legs as
values and the plan's files; the runs come back as the records a local run makes, each naming its node and the
cards it saw. The verdicts are computed here, from those runs, as for a local run.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from stackctl.ab.legs import ImageLeg, LegRunner, PythonLeg
from stackctl.ab.plan import Plan, Trial
from stackctl.ab.run import Say, run_trial
from stackctl.ab.runs import Run
from stackctl.ab.verdicts import CANDIDATE, CONTROL
from stackctl.cluster.tasks import Event, RayCluster, Task, TaskOutcome
from stackctl.errors import InputError, StackctlError
from stackctl.profile.model import Devices

TRIAL_RETRIES = 1  # a trial whose node died runs once more, whole, on another node


@dataclass(frozen=True)
class LegSpec:
    """A leg as values, rebuilt into its runner on the node: an interpreter (the same path on every node) or an
    image (pulled by the node's engine where it lacks it)."""

    runner: PythonLeg | None = None
    image: ImageLeg | None = None  # with its engine left out: each node uses its own
    devices: Devices | None = None


def leg_spec(runner: LegRunner) -> LegSpec:
    if isinstance(runner, PythonLeg):
        return LegSpec(runner=runner)
    if isinstance(runner, ImageLeg):
        return LegSpec(image=dataclasses.replace(runner, engine=None), devices=runner.devices)  # type: ignore[arg-type]
    raise InputError(f"--cluster: a {type(runner).__name__} leg cannot run on a cluster")


def runner_here(spec: LegSpec) -> LegRunner:
    """The leg's runner on this node."""
    if spec.runner is not None:
        return spec.runner
    assert spec.image is not None
    from stackctl.engine.docker import DockerEngine

    engine = DockerEngine()
    ref = spec.image.leg.ref
    if engine.facts(ref) is None and engine.pull_cache(ref) is None:
        raise InputError(f"image {ref} is not in the engine of node {socket.gethostname()} and cannot be pulled",
                         hint="name each leg's image by registry digest (--image REPO@sha256:...)")
    return dataclasses.replace(spec.image, engine=engine)


@dataclass(frozen=True)
class TrialJob:
    plan: Plan
    trial: Trial
    legs: tuple[LegSpec, LegSpec]
    files: dict[str, bytes]


@dataclass(frozen=True)
class TrialDone:
    runs: tuple[Run, ...]
    said: tuple[str, ...]


def trial_on_node(job: TrialJob) -> TrialDone:
    """One trial's whole schedule on this node and the cards Ray gave this worker (CUDA_VISIBLE_DEVICES)."""
    import ray

    node = f"{ray.get_runtime_context().get_node_id()} {socket.gethostname()}"
    runners = {CONTROL: runner_here(job.legs[0]), CANDIDATE: runner_here(job.legs[1])}
    said: list[str] = []
    runs = run_trial(job.plan, job.trial, runners, job.files, said.append)
    return TrialDone(tuple(dataclasses.replace(r, node=node) for r in runs), tuple(said))


class ClusterTrials:
    """The `TrialPlace` of a cluster: a task a trial, asking for the trial's devices as GPUs."""

    def __init__(self, cluster: RayCluster, on_event: Event) -> None:
        self.cluster, self.on_event = cluster, on_event
        self.tasks: list[TaskOutcome] = []

    def unplaceable(self, trial: Trial, legs: Sequence[LegRunner]) -> str | None:
        most = max((n.gpus for n in self.cluster.offers()), default=0)
        if trial.devices <= most:
            return None
        return f"needs {trial.devices} device(s); no node of the cluster offers more than {most} GPU(s)"

    def run(self, plan: Plan, trials: Sequence[Trial], runners: dict[str, LegRunner], files: dict[str, bytes],
            say: Say) -> Iterator[list[Run]]:
        legs = (leg_spec(runners[CONTROL]), leg_spec(runners[CANDIDATE]))
        tasks = [Task(t.name, trial_on_node, (TrialJob(plan, t, legs, files),), gpus=t.devices,
                      retries=TRIAL_RETRIES) for t in trials]
        outcomes = self.cluster.run(tasks, self.on_event)
        self.tasks += outcomes
        failed = [o.error for o in outcomes if o.error is not None]
        if failed:
            raise _first(failed)
        for o in outcomes:
            done: TrialDone = o.value
            for line in done.said:
                say(line)
            yield list(done.runs)


def _first(errors: Sequence[StackctlError]) -> StackctlError:
    from stackctl.errors import Problems

    return errors[0] if len(errors) == 1 else Problems.of(list(errors))


def task_records(outcomes: Sequence[TaskOutcome]) -> list[dict[str, Any]]:
    """Where each task ran and what ran it, for the record: node, host, cards, versions, every attempt."""
    return [{"task": o.key, "node": o.placed.node if o.placed else None,
             "host": o.placed.host if o.placed else None,
             "devices": list(o.placed.devices) if o.placed else [],
             "stackctl": o.placed.stackctl if o.placed else None, "ray": o.placed.ray if o.placed else None,
             "seconds": round(o.seconds, 2),
             "attempts": [dataclasses.asdict(a) for a in o.attempts]} for o in outcomes]
