"""`stackctl bisect`: the plan loaded, the bisect run with each stack between built as `stackctl build` builds
it, and the run recorded where `report` reads it (also when interrupted: the steps finished)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stackctl.bisect.run import BisectOptions, BisectReport, Say, Step, StepJob
    from stackctl.cluster import ClusterAddress, RayCluster
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
    cluster: str | None = None  # --cluster (or STACKCTL_CLUSTER): the rounds' stacks on a Ray cluster's nodes


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

    from stackctl.cluster import cluster_address

    address = cluster_address(ask.cluster)
    if address is None:
        rep = run_bisect(opts, build_between, say=say, interrupted=keep, slots=ask.slots)
    else:
        rep = _on_cluster(address, opts, say, keep)
    keep(rep)
    return rep


def build_between(order: BuildOrder, say: Say) -> str:
    """A stack between built as `stackctl build` builds it: the image. A module's function, so that a runner on
    another machine can be given it by name."""
    from stackctl.usecases.build import build_stack

    return build_stack(order, say=lambda line, _level: say(line)).image


# --- bisect --cluster: each round's stacks built and compared side by side on the cluster's build nodes --------

@dataclass(frozen=True)
class Shipped:
    """A stack as it travels to a node to be built there: its profile and each it extends (file name, text), its
    lock's text, and the revision and ref its labels name (a node has no work tree to read them from)."""

    profiles: tuple[tuple[str, str], ...]
    lock_name: str
    lock_text: str
    revision: str
    ref: str

    def build_here(self, order: BuildOrder, say: Say) -> str:
        """Built on this node's engine, its wheels fetched into the node's cache: the image."""
        from stackctl.resolve.lock import read_lock
        from stackctl.usecases.matrix import drop_stale_wheels, node_dir

        base = node_dir()
        (base / "wheels").mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="bisect-", dir=base))
        try:
            for name, text in self.profiles:
                (work / name).write_text(text, encoding="utf-8")
            (work / self.lock_name).write_text(self.lock_text, encoding="utf-8")
            drop_stale_wheels(base / "wheels", read_lock(work / self.lock_name))
            return build_between(replace(order, profiles=(str(work / self.profiles[0][0]),),
                                         lock=work / self.lock_name, record_dir=work, revision=self.revision,
                                         ref=self.ref, wheelhouse=base / "wheels", fetch=True), say)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def control_on_node(control: Shipped, order: BuildOrder) -> str:
    """On a node: the control built (or found built, by its build's cache) in this node's engine."""
    return control.build_here(order, lambda _line: None)


@dataclass(frozen=True)
class StepDone:
    step: Step
    records: tuple[tuple[str, str], ...]  # the A/B records the step wrote (file name, JSON text)


def step_on_node(job: StepJob, control: Shipped, plan_files: tuple[tuple[str, bytes], ...]) -> StepDone:
    """On a node: the control's image made sure of in this node's engine, then the step's stack built and A/B'd
    against it as `run_step` does in-process (the plan's files laid out here); the step's A/B records come back
    with it."""
    from stackctl.bisect.run import run_step
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.order import BuildOrder
    from stackctl.usecases.matrix import node_dir

    if DockerEngine().facts(job.control_image) is None:
        control_on_node(control, BuildOrder(overrides=dict(job.overrides), allow_dirty=True, builder=job.builder))
    work = Path(tempfile.mkdtemp(prefix=f"step{job.n}-", dir=node_dir()))
    try:
        ship = Shipped(job.profiles, Path(job.lock).name, job.lock_text, control.revision, control.ref)

        def build(order: BuildOrder, say: Say) -> str:  # the step's stack, from the files the job carries
            return ship.build_here(replace(order, overrides=dict(job.overrides)), say)

        for rel, data in plan_files:
            (work / "plan" / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / "plan" / rel).write_bytes(data)
        placed = replace(job.placed(work), plan=replace(job.plan, root=str(work / "plan")))
        step = run_step(placed, build, lambda _line: None)
        records = tuple((p.name, p.read_text(encoding="utf-8")) for p in sorted((work / "ab").glob("*.json")))
        return StepDone(step, records)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _shipped(order: BuildOrder) -> Shipped:
    """The stack an order names, as it travels: its profile chain, its lock, this work tree's revision and ref."""
    from stackctl.base.git import read_git
    from stackctl.bisect.run import profile_chain
    from stackctl.errors import StackctlError

    assert order.lock is not None
    try:
        git = read_git(Path.cwd(), ())
        revision, ref = git.revision + ("-dirty" if git.dirty else ""), git.ref
    except StackctlError:  # not a work tree: the stacks between are the bisect's own, named so
        revision = ref = "bisect"
    return Shipped(profile_chain(order.profiles[0]), order.lock.name, order.lock.read_text(encoding="utf-8"),
                   revision, ref)


def _on_cluster(address: ClusterAddress, opts: BisectOptions, say: Say,
                keep: Callable[[BisectReport], None]) -> BisectReport:
    """The control built on a build node, then each round's stacks side by side, one slot a node's engine slot
    (and its cards, where the trial needs devices)."""
    from stackctl.base.urls import strip_userinfo
    from stackctl.bisect.run import run_bisect
    from stackctl.cluster import ENGINE_RESOURCE, connect
    from stackctl.errors import ServiceError

    trial = opts.plan.trial(opts.trial)
    devices = trial.devices if trial is not None else 0
    with connect(address) as cluster:
        slots = sum(n.engines for n in cluster.offers() if n.gpus >= devices)
        if slots < 1:
            raise ServiceError(f"cluster {address}: no node declares the {ENGINE_RESOURCE} resource"
                               + (f" with {devices} GPU(s)" if devices else ""),
                               hint="start build nodes as docs/cluster.md says")
        say(f"cluster {address}: Ray {cluster.ray_version}, {slots} slot(s): up to {slots} stacks a round")
        control: list[Shipped] = []

        def on_event(where: str, key: str, what: str) -> None:
            say(f"  [{where}] {key}: {what}")

        def build_control(order: BuildOrder, _said: Say) -> str:
            control.append(_shipped(order))
            bare = replace(order, overrides={k: strip_userinfo(v) for k, v in order.overrides.items()})
            return str(_one(cluster, "control", control_on_node, (control[0], bare), devices=0, on_event=on_event))

        def run_steps(jobs: Sequence[StepJob]) -> Iterator[tuple[int, Step]]:
            yield from _steps(cluster, jobs, control[0], devices, on_event)

        return run_bisect(opts, build_control, say=say, interrupted=keep, slots=slots, run_steps=run_steps)


def _one(cluster: RayCluster, key: str, fn: Callable[..., object], args: tuple[object, ...], *, devices: int,
         on_event: Callable[[str, str, str], None]) -> object:
    from stackctl.cluster import ENGINE_RESOURCE, Task

    (done,) = cluster.run([Task(key, fn, args, gpus=devices, resources={ENGINE_RESOURCE: 1}, retries=1)], on_event)
    if done.error is not None:
        raise done.error
    return done.value


def _steps(cluster: RayCluster, jobs: Sequence[StepJob], control: Shipped, devices: int,
           on_event: Callable[[str, str, str], None]) -> Iterator[tuple[int, Step]]:
    """A round's jobs as tasks side by side; each step's A/B records written here, where the step names them."""
    from stackctl.ab.legs import plan_files
    from stackctl.base.files import write_atomic
    from stackctl.base.urls import strip_userinfo
    from stackctl.cluster import ENGINE_RESOURCE, Task

    plan = jobs[0].plan
    files = tuple(plan_files(Path(plan.root), plan.files).items())
    # a node fetches with its own credentials: an --index URL travels without its user info
    tasks = [Task(f"step {job.n}", step_on_node,
                  (replace(job, overrides=tuple((k, strip_userinfo(v)) for k, v in job.overrides)), control, files),
                  gpus=devices, resources={ENGINE_RESOURCE: 1}, retries=1) for job in jobs]
    for i, (job, done) in enumerate(zip(jobs, cluster.run(tasks, on_event), strict=True)):
        if done.error is not None:
            raise done.error
        got: StepDone = done.value
        step = got.step
        for name, text in got.records:
            write_atomic(Path(job.work_dir) / "ab" / name, text)
        if step.record is not None:
            step = replace(step, record=str(Path(job.work_dir) / "ab" / Path(step.record).name))
        yield i, step
