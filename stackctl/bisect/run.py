"""`stackctl bisect CONTROL CANDIDATE --trial T`: the edge. Each comparison the search asks for is an intermediate
stack (a profile extending the control, in a working directory), resolved, ABI-checked, built (unchanged layer
groups from the build cache) and A/B'd against the control with `ab`; its outcome goes back to the pure search
(`search.py`, `judge.py`).

The search asks a round of stacks at once. Each is prepared here in turn (its profile written, its lock resolved
with this machine's index and credentials, its ABI check); its build and A/B go to a runner as a `StepJob`, which
`run_step` runs: by default in this process, one after another (`steps_here`), or side by side elsewhere.

Every finished step is written to the working directory's ledger at once, so an interrupted run keeps them and a
second run reuses each step made for the same locks, plan, trial and metric.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackctl.base.bounded import TomlError, read_toml
from stackctl.base.times import now_iso
from stackctl.bisect.judge import judge_trial
from stackctl.bisect.search import AMBIGUOUS, Ask, Outcome, SearchResult, search_units
from stackctl.bisect.units import PinMove, Unit, Units, intermediate_profile, plan_units
from stackctl.errors import CheckFailed, InputError, ServiceError, StackctlError

if TYPE_CHECKING:
    from stackctl.ab import Plan
    from stackctl.image.order import BuildOrder
    from stackctl.profile.locate import StackRef
    from stackctl.profile.model import Stack
    from stackctl.resolve import Lock

RECORD_KIND = "bisect"
LEDGER = "steps.json"
Say = Callable[[str], None]
# How a stack between is built: given the build's order and where its lines go, the image built. The caller
# (the bisect use case) wires it to the build; bisect decides only what to build and when.
BuildImage = Callable[["BuildOrder", Say], str]


@dataclass(frozen=True)
class Step:
    """One comparison: the stack (the control with `units` moved), what became of it and what it cost."""

    units: tuple[str, ...]  # unit names
    role: str  # what the search asked it for: candidate, search, alone, without, interaction
    stack: str
    profile: str
    outcome: str  # good | bad | skip
    verdict: str  # ab's word, or the stage that could not make the stack: "cannot resolve", "ABI", "build", "gate"
    why: str
    delta_pct: float | None = None
    regressions: tuple[str, ...] = ()
    lock_digest: str | None = None
    image: str | None = None
    record: str | None = None  # the step's ab record
    seconds: float = 0.0
    built: bool = False
    compared: bool = False
    reused: bool = False  # from an earlier run's ledger
    key: str = ""  # what makes a recorded step reusable: locks, plan, trial, metric
    round: int = 0  # the search's round that asked for it: the steps of one round are built and compared side by side


@dataclass(frozen=True)
class Culprit:
    """A finding of the search: the units (one culprit, an interaction's set, or an ambiguous range)."""

    kind: str  # culprit | interaction | ambiguous
    units: tuple[str, ...]
    pins: tuple[str, ...]  # distribution names
    moves: tuple[PinMove, ...]
    alone: str | None  # the control with these units alone: good | bad | skip
    without: str | None  # the candidate without them


@dataclass(frozen=True)
class BisectReport:
    control: str
    candidate: str
    trial: str
    metric: str | None
    plan: str
    plan_digest: str
    units: tuple[Unit, ...]
    kept: tuple[str, ...]  # differences that are not pin moves: only the candidate has them
    candidate_outcome: str
    culprits: tuple[Culprit, ...]
    ambiguous: tuple[Culprit, ...]
    steps: tuple[Step, ...]
    builds: int
    comparisons: int
    reused: int
    rounds: int  # the search's rounds: with one slot, one comparison each; with N, up to N side by side
    slots: int  # stacks a round may build and compare side by side
    seconds: float
    started: str
    finished: str
    complete: bool
    status: str  # done | interrupted
    conclusion: str
    work_dir: str
    problems: tuple[str, ...] = field(default=())

    @property
    def failing(self) -> bool:
        """Exit 1: the search could not name what makes the candidate regress."""
        return self.status != "done" or not self.complete or (
            self.candidate_outcome == Outcome.BAD.value and not self.culprits)

    def failure(self) -> CheckFailed | None:
        """Exit 1 when no culprit could be named, with why (the problems, else the conclusion)."""
        if not self.failing:
            return None
        why = self.problems or (self.conclusion,)
        return CheckFailed(f"bisect {self.control} → {self.candidate}: " + "; ".join(why))


@dataclass(frozen=True)
class BisectOptions:
    control: str  # the profiles as the user named them
    candidate: str
    plan: Plan
    trial: str
    metric: str | None = None
    index: tuple[str, ...] = ()  # NAME=URL
    inventory: str | None = None
    work_dir: Path | None = None  # default RECORD_DIR/bisect/CANDIDATE
    record_dir: Path = Path("build")
    builder: str | None = None
    command: str = ""
    max_repeat: int | None = None  # ab's: brackets a benchmark may reach while a metric is undecided


# --- the working directory ------------------------------------------------------------------------------

def profile_chain(profile_arg: str) -> tuple[tuple[str, str], ...]:
    """(file name, text) of the profile and of every profile it extends, in that order: the files a stack's build
    reads, which all lie in one directory (profiles extend by name)."""
    from stackctl.profile.locate import resolve_profile_arg
    from stackctl.profile.sources import split_ref

    source, name = split_ref(resolve_profile_arg(profile_arg))
    chain: dict[str, str] = {}
    while name not in chain:
        text = chain[name] = source.read(name)
        try:
            parent = read_toml(text, source.display(name)).get("stack", {}).get("extends")
        except TomlError:
            break
        if not isinstance(parent, str):
            break
        name = parent if parent.endswith(".toml") else f"{parent}.toml"
    return tuple(chain.items())


def copy_chain(profile_arg: str, work: Path) -> tuple[tuple[str, str], ...]:
    """The control's profile and every profile it extends, copied byte for byte into `work`: an intermediate
    there extends the control by name, as profiles of one directory do. Returns what it copied."""
    from stackctl.base.files import write_atomic

    chain = profile_chain(profile_arg)
    for name, text in chain:
        write_atomic(work / name, text)
    return chain


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_ledger(work: Path) -> dict[str, dict[str, Any]]:
    """Steps of earlier runs by key; a ledger that cannot be read is started afresh."""
    try:
        data = json.loads((work / LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    steps = data.get("steps") if isinstance(data, dict) else None
    return {str(s["key"]): s for s in steps or () if isinstance(s, dict) and s.get("key")}


def _write_ledger(work: Path, steps: Mapping[str, dict[str, Any]]) -> None:
    from stackctl.base.files import write_atomic

    write_atomic(work / LEDGER, json.dumps({"steps": list(steps.values())}, indent=1, sort_keys=True) + "\n")


def _step_from(d: Mapping[str, Any]) -> Step:
    return Step(tuple(d.get("units") or ()), str(d.get("role", "")), str(d.get("stack", "")),
                str(d.get("profile", "")), str(d.get("outcome", "skip")), str(d.get("verdict", "")),
                str(d.get("why", "")), d.get("delta_pct"), tuple(d.get("regressions") or ()), d.get("lock_digest"),
                d.get("image"), d.get("record"), float(d.get("seconds") or 0.0), False, False, True,
                str(d.get("key", "")))


# --- one step: what this machine prepares, and the build and A/B, which may run elsewhere ---------------

@dataclass(frozen=True)
class StepJob:
    """A stack between, resolved and ABI-checked here, to build and A/B against the control: what `run_step`
    needs, as values and small files (the profiles and the lock as text, the images by reference), so that a
    runner may run it in this process or on another machine. It holds no credential (an --index URL is kept as
    given): the machine that runs it fetches the lock's wheels with its own."""

    n: int  # the step's number in the run
    units: tuple[str, ...]  # unit names
    role: str
    whole: bool  # the candidate itself
    stack: StackRef  # the stack between (the candidate: as the user named it)
    profiles: tuple[tuple[str, str], ...]  # (file name, text): its profile, then each it extends
    lock: str  # its lock's path
    lock_text: str
    lock_digest: str
    key: str  # the ledger's
    control: StackRef
    control_image: str
    candidate: StackRef
    candidate_image: str | None  # None: the candidate's own step, or a step of the round that builds it
    plan: Plan  # the one trial's
    trial: str
    metric: str | None
    max_repeat: int | None
    builder: str | None
    overrides: tuple[tuple[str, str], ...]  # --index NAME=URL, parsed
    work_dir: str  # where the build record, the A/B records and the build context go
    command: str
    undecided: Step | None = None  # built and compared already, undecided: only the candidate's side is left

    def placed(self, where: Path) -> StepJob:
        """The job with its profiles and lock written into `where` (a directory on the machine that runs it),
        and its records going there too."""
        from stackctl.base.files import write_atomic
        from stackctl.profile.locate import StackRef

        for name, text in self.profiles:
            write_atomic(where / name, text)
        lock = where / Path(self.lock).name
        write_atomic(lock, self.lock_text)
        profile = where / self.profiles[0][0]
        stack = StackRef(str(profile), self.stack.stack, profile)
        return replace(self, stack=stack, lock=str(lock), work_dir=str(where))


# Runs a round's jobs (side by side, or one after another) and gives each one's step as it finishes: (the job's
# index in the round, its step), in any order. A step it could not run raises, as `run_step` does.
RunSteps = Callable[[Sequence[StepJob]], Iterable[tuple[int, Step]]]


def steps_here(jobs: Sequence[StepJob], build_image: BuildImage, say: Say) -> Iterator[tuple[int, Step]]:
    """The runner in this process: one job after another."""
    for i, job in enumerate(jobs):
        yield i, run_step(job, build_image, say)


def build_stack_image(profile: str, lock_file: Path, stack: Stack, lock_digest: str, work: Path,
                      overrides: Mapping[str, str], builder: str | None, build_image: BuildImage,
                      say: Say) -> tuple[str, bool]:
    """The stack's image, and whether it was built now: an image the working directory's build record says was
    built for this profile and lock, still in the engine under that id, is used as it is."""
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.order import BuildOrder

    try:
        done = json.loads((work / f"{stack.name}.build.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        done = None
    if (isinstance(done, dict) and done.get("lock_digest") == lock_digest
            and done.get("profile_digest") == stack.digest() and isinstance(done.get("image"), str)):
        facts = DockerEngine().facts(done["image"])
        if facts is not None and facts.id == done.get("image_id"):
            say(f"  {stack.name}: {done['image']}, built for this lock before (its build record)")
            return done["image"], False
    say(f"  {stack.name}: building")
    order = BuildOrder((profile,), lock=lock_file, overrides=overrides, allow_dirty=True, record_dir=work,
                       builder=builder)
    return build_image(order, lambda line: say(f"  {line}")), True


def run_step(job: StepJob, build_image: BuildImage, say: Say) -> Step:
    """The job's stack built (with `build_image`) and A/B'd against the control, and where that is undecided the
    candidate A/B'd against it: the step as the ledger keeps it, `seconds` what this took. Reads only the job,
    its files and the engine; the index is not asked."""
    started = time.monotonic()
    if job.undecided is not None:
        step = _from_the_candidate(job, job.undecided, say)
        return replace(step, seconds=job.undecided.seconds + time.monotonic() - started)
    name = job.stack.stack.name
    try:
        image, built = build_stack_image(job.stack.arg, Path(job.lock), job.stack.stack, job.lock_digest,
                                         Path(job.work_dir), dict(job.overrides), job.builder, build_image, say)
    except ServiceError:
        raise
    except StackctlError as exc:
        verdict, why = _unbuilt(exc)
        step = Step(job.units, job.role, name, str(job.stack.file), Outcome.SKIP.value, verdict, why,
                    lock_digest=job.lock_digest, built=True, key=job.key)
        return replace(step, seconds=time.monotonic() - started)
    say(f"  {name}: {image}; A/B against the control on {job.trial}")
    step = replace(_ab(job, image, say), key=job.key, built=built)
    return replace(step, seconds=time.monotonic() - started)


def _ab(job: StepJob, image: str, say: Say) -> Step:
    from stackctl.ab import record_ab, run_ab

    work = Path(job.work_dir)
    rep = run_ab(job.control, job.stack, job.plan, images=(job.control_image, image), record_dir=work,
                 max_repeat=job.max_repeat, say=lambda line: say(f"  {line}"))
    name = job.stack.stack.name
    where = work / "ab" / f"{name}.ab.json"
    record_ab(rep, where, job.command, job.control.stack, job.stack.stack)
    base = Step(job.units, job.role, name, str(job.stack.file), Outcome.SKIP.value, "", "",
                lock_digest=job.lock_digest, image=image, record=str(where), built=True, compared=True)
    failed_gates = [g for g in rep.gates if not g.ok]
    if failed_gates:
        g = failed_gates[0]
        return replace(base, verdict="gate", why=f"the gate failed in the {g.leg} leg: {g.problem}")
    trial = next((t for t in rep.trials if t.trial == job.trial), None)
    if trial is None:
        return replace(base, verdict="not run", why=f"ab gave no verdict of {job.trial}")
    j = judge_trial(trial, job.metric)
    step = replace(base, outcome=j.outcome.value, verdict=j.verdict, delta_pct=j.delta_pct,
                   regressions=j.regressions)
    candidate_image = image if job.whole else job.candidate_image
    if j.verdict == "undecided" and candidate_image not in (None, image):
        return _from_the_candidate(job, step, say)
    return step


def _from_the_candidate(job: StepJob, step: Step, say: Say) -> Step:
    """A stack between that its comparison with the control left undecided, looked at from the candidate's
    side. On a noisy host identical legs seldom show equivalence within the band, so a stack without the
    slow move is undecided against the control as often as not; but the candidate, which regressed against
    the control, regresses against such a stack too. The candidate regressed against it: it lacks the
    regression (good). The candidate no worse than it: it holds the regression (bad). Else: a skip."""
    from stackctl.ab import record_ab, run_ab

    assert job.candidate_image is not None and step.image is not None
    name = job.stack.stack.name
    say(f"  {name}: undecided against the control; the candidate against it")
    rep = run_ab(job.stack, job.candidate, job.plan, images=(step.image, job.candidate_image),
                 record_dir=Path(job.work_dir), max_repeat=job.max_repeat, say=lambda line: say(f"  {line}"))
    where = Path(job.work_dir) / "ab" / f"{name}.candidate.ab.json"
    record_ab(rep, where, job.command, job.stack.stack, job.candidate.stack)
    trial = next((t for t in rep.trials if t.trial == job.trial), None)
    if trial is None:
        return step
    j = judge_trial(trial, job.metric)
    seen = f"the candidate against it: {j.verdict}" + (f" ({j.delta_pct:+.1f} %)" if j.delta_pct is not None
                                                      else "") + f", {where}"
    if j.outcome is Outcome.BAD:
        return replace(step, outcome=Outcome.GOOD.value, why=f"undecided against the control; {seen}")
    if j.outcome is Outcome.GOOD:
        return replace(step, outcome=Outcome.BAD.value, why=f"undecided against the control; {seen}")
    return replace(step, why=f"undecided both ways; {seen}")


# --- the run's side of each step: prepared here, a round at once -----------------------------------------

class _Bisect:
    def __init__(self, opts: BisectOptions, control: Stack, candidate: Stack, units: Units, work: Path,
                 say: Say, build_image: BuildImage, slots: int, run_steps: RunSteps) -> None:
        from stackctl.index.config import parse_overrides
        from stackctl.resolve import make_client

        self.opts, self.control, self.candidate, self.units, self.work, self.say = (
            opts, control, candidate, units, work, say)
        self.build_image = build_image
        self.slots, self.run_steps = slots, run_steps
        self.overrides = parse_overrides(list(opts.index))
        self.client = make_client()
        self.ledger = read_ledger(work)
        self.done: dict[int, Step] = {}  # by step number
        self.rounds = 0
        self.control_image: str | None = None
        self.candidate_image: str | None = None  # the candidate's, once its step has built or reused it
        self.candidate_bad = False
        self.control_built = False
        self.control_lock: Lock | None = None
        self.control_chain: tuple[tuple[str, str], ...] = ()  # as copied into the working directory

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self.done[n] for n in sorted(self.done))

    # the stacks' locks: the user's own where it was made from the profile, else resolved here
    def lock_of(self, stack: Stack, profile_arg: str) -> tuple[Path, Lock]:
        from stackctl.resolve import lock_path, read_lock, resolve_stack

        path = lock_path(profile_arg)
        if path.exists():
            found = read_lock(path)
            if found.made_from(stack):
                return path, found
        here = self.work / f"{stack.name}.lock"
        self.say(f"{stack.name}: resolving (its lock {path} is {'not made from it' if path.exists() else 'missing'})")
        return here, resolve_stack(stack, self.client, self.overrides, write_to=here)

    def key(self, lock: Lock) -> str:
        """A step is reused for the same locks, plan file, trial as run (its repeats too) and metric."""
        from stackctl.base.jsonout import to_jsonable

        assert self.control_lock is not None
        trial = json.dumps(to_jsonable(self.opts.plan.trial(self.opts.trial)), sort_keys=True)
        parts = (self.control_lock.digest(), lock.digest(), self.opts.plan.digest, trial, self.opts.metric or "",
                 str(self.opts.max_repeat or ""))
        return _digest("\0".join(parts))[:32]

    def start(self) -> None:
        """The control: its lock and its image, which every comparison runs against."""
        path, self.control_lock = self.lock_of(self.control, self.opts.control)
        self.control_image, self.control_built = build_stack_image(
            self.opts.control, path, self.control, self.control_lock.digest(), self.work, self.overrides,
            self.opts.builder, self.build_image, self.say)
        self.say(f"control {self.control.name}: {self.control_image}")

    def profile_for(self, idx: tuple[int, ...]) -> tuple[str, Stack, str]:
        """(profile argument, stack, profile path) of the control with units `idx` moved; all of them: the
        candidate itself."""
        from stackctl.base.files import write_atomic
        from stackctl.profile.loader import load_stack
        from stackctl.profile.locate import load_profile, profile_file

        if len(idx) == len(self.units.units):
            return self.opts.candidate, load_profile(self.opts.candidate), str(profile_file(self.opts.candidate))
        chosen = [self.units.units[i] for i in idx]
        label = "-".join(str(i + 1) for i in idx) if len(idx) <= 6 else f"{len(idx)}units"
        name = f"{self.candidate.name}-bisect-{label}"
        # an image tag of its own: the control's template would give stacks between one tag for many
        tag = f"bisect-{_digest(intermediate_profile(self.control, self.candidate, chosen, name))[:16]}"
        path = self.work / f"{name}.toml"
        write_atomic(path, intermediate_profile(self.control, self.candidate, chosen, name, tag))
        return str(path), load_stack(path), str(path)

    def compare_many(self, asks: Sequence[Ask]) -> list[Outcome]:
        """A round of the search: each stack prepared here in turn (its profile, its lock, the ledger, its ABI
        check), then those left to build and compare given to the runner at once."""
        self.rounds += 1
        first = len(self.done) + 1
        if self.slots > 1:
            span = f"steps {first}-{first + len(asks) - 1} side by side" if len(asks) > 1 else f"step {first}"
            self.say(f"round {self.rounds}: {span}")
        jobs: list[StepJob] = []
        prepared: dict[int, float] = {}  # seconds each job's preparation took, by step number
        for n, (idx, role) in enumerate(asks, first):
            started = time.monotonic()
            names = tuple(self.units.units[i].name for i in idx)
            what = "the candidate" if len(idx) == len(self.units.units) else ", ".join(names)
            self.say(f"step {n} ({role}): the control with {what}")
            got = self.prepare(n, idx, role, names)
            if isinstance(got, Step):
                self.finish(n, got, time.monotonic() - started)
            else:
                jobs.append(got)
                prepared[n] = time.monotonic() - started
        held: list[tuple[StepJob, Step]] = []
        for job, step in self._run(jobs):
            if (step.verdict == "undecided" and job.candidate_image is None and not job.whole
                    and step.image is not None):
                held.append((job, step))  # the candidate's side, once the round has built the candidate
            else:
                self.finish(job.n, step, prepared[job.n])
        held.sort(key=lambda done: done[0].n)
        looked = bool(held) and self.candidate_bad and self.candidate_image is not None
        if looked:
            looks = [replace(job, candidate_image=self.candidate_image, undecided=step) for job, step in held]
            held = sorted(self._run(looks), key=lambda done: done[0].n)
        for job, step in held:
            # not looked at from the candidate's side (it did not regress: the search ends), so not the step one
            # slot would have recorded: kept in the report, never reused
            self.finish(job.n, step, prepared[job.n], ledger=looked)
        return [Outcome(self.done[n].outcome) for n in range(first, first + len(asks))]

    def _run(self, jobs: Sequence[StepJob]) -> Iterator[tuple[StepJob, Step]]:
        if not jobs:
            return
        given: set[int] = set()
        for i, step in self.run_steps(jobs):
            given.add(i)
            yield jobs[i], step
        if len(given) != len(jobs):
            missing = ", ".join(str(job.n) for i, job in enumerate(jobs) if i not in given)
            raise RuntimeError(f"the runner gave no result of step {missing}")

    def finish(self, n: int, step: Step, prepared: float, ledger: bool = True) -> None:
        """A step done: kept, written to the ledger at once, said."""
        step = replace(step, seconds=step.seconds if step.reused else prepared + step.seconds, round=self.rounds)
        self.done[n] = step
        if step.role == "candidate":
            self.candidate_image = step.image
            self.candidate_bad = step.outcome == Outcome.BAD.value
        if step.key and not step.reused and ledger:
            self.ledger[step.key] = _jsonable(step)
            _write_ledger(self.work, self.ledger)
        delta = f", {step.delta_pct:+.1f} %" if step.delta_pct is not None else ""
        nodes = f", regressed: {', '.join(step.regressions)}" if step.regressions else ""
        self.say(f"step {n}: {step.outcome} ({step.verdict}{delta}{nodes})"
                 + (" — reused from an earlier run" if step.reused else "") + (f": {step.why}" if step.why else ""))

    def prepare(self, n: int, idx: tuple[int, ...], role: str, names: tuple[str, ...]) -> Step | StepJob:
        """What needs this machine: the stack's profile written, its lock resolved (the index and its
        credentials stay here), the ledger read, the ABI check. A step decided here (a skip, or reused from the
        ledger), or the job that builds and compares it."""
        from stackctl.profile.locate import StackRef, profile_file
        from stackctl.resolve import resolve_stack

        try:
            arg, stack, profile = self.profile_for(idx)
        except StackctlError as exc:  # a moved pin the control's profile cannot take (an index it lacks)
            return Step(names, role, "", "", Outcome.SKIP.value, "profile", str(exc).splitlines()[0])
        whole = len(idx) == len(self.units.units)

        def skip(verdict: str, why: str, **kw: Any) -> Step:
            return Step(names, role, stack.name, profile, Outcome.SKIP.value, verdict, why, **kw)

        try:
            if whole:
                lock_file, lock = self.lock_of(stack, arg)
            else:
                self.say(f"  {stack.name}: resolving")
                lock_file = self.work / f"{stack.name}.lock"
                lock = resolve_stack(stack, self.client, self.overrides, write_to=lock_file)
        except ServiceError:
            raise
        except StackctlError as exc:
            return skip("cannot resolve", str(exc))
        key = self.key(lock)
        if key in self.ledger:
            return replace(_step_from(self.ledger[key]), units=names, role=role)
        if not whole:
            problem = self.abi(arg, lock_file, stack.name)
            if problem is not None:
                return replace(skip("ABI", problem, lock_digest=lock.digest()), key=key)
        assert self.control_image is not None
        profiles = profile_chain(arg) if whole else ((Path(arg).name, Path(arg).read_text(encoding="utf-8")),
                                                     *self.control_chain)
        return StepJob(
            n, names, role, whole, StackRef(arg, stack, Path(profile)), profiles, str(lock_file),
            lock_file.read_text(encoding="utf-8"), lock.digest(), key,
            StackRef(self.opts.control, self.control, profile_file(self.opts.control)), self.control_image,
            StackRef(self.opts.candidate, self.candidate, profile_file(self.opts.candidate)),
            self.candidate_image, self.opts.plan, self.opts.trial, self.opts.metric, self.opts.max_repeat,
            self.opts.builder, tuple(self.overrides.items()), str(self.work), self.opts.command)

    def abi(self, profile: str, lock: Path, name: str) -> str | None:
        from stackctl.abi import check_targets

        self.say(f"  {name}: ABI check")
        try:
            outcome = check_targets([profile], lock=lock, inventory=self.opts.inventory, overrides=self.overrides,
                                    record=self.work / f"{name}.abi.json", command=self.opts.command)
        except CheckFailed as exc:
            return str(exc)
        return str(outcome.problems[0]) if outcome.problems else None


def _unbuilt(exc: StackctlError) -> tuple[str, str]:
    """(verdict, why) of a stack whose build failed: its gate, said by the checks that failed (the message alone
    counts them, and the user's next question is which import), or the build itself."""
    from stackctl.image import BuildFailed

    head = (exc.reason if isinstance(exc, BuildFailed) else str(exc)).splitlines()[0]  # not where its log is
    fails = [line for line in exc.lines if line.startswith("FAIL ")] if isinstance(exc, BuildFailed) else []
    if fails and head.startswith("the gate failed"):
        return "gate", f"{head}: {'; '.join(fails)}"
    return "build", head


def _jsonable(step: Step) -> dict[str, Any]:
    from stackctl.base.jsonout import to_jsonable

    out: dict[str, Any] = to_jsonable(step)
    return out


# --- the whole run --------------------------------------------------------------------------------------

def _culprit(units: Units, kind: str, idx: tuple[int, ...], alone: Outcome | None,
             without: Outcome | None) -> Culprit:
    chosen = [units.units[i] for i in idx]
    moves = tuple(m for u in chosen for m in u.moves)
    return Culprit(kind, tuple(u.name for u in chosen), tuple(m.pin for m in moves), moves,
                   alone.value if alone else None, without.value if without else None)


def conclusion(units: Units, result: SearchResult | None, culprits: tuple[Culprit, ...],
               ambiguous: tuple[Culprit, ...], trial: str) -> str:
    """The run in one sentence."""
    if result is None:
        return "interrupted before the search ended; the steps finished are kept and a second run reuses them"
    if result.candidate is Outcome.GOOD:
        return f"{units.candidate} does not regress on {trial} against {units.control}: nothing to bisect"
    if result.candidate is Outcome.SKIP:
        return f"cannot tell whether {units.candidate} regresses on {trial}: nothing to bisect from"
    said = []
    for c in culprits:
        what = " + ".join(c.units)
        if c.kind == "interaction":
            said.append(f"{what} regress only together (an interaction; no one of them regresses alone)")
        else:
            said.append(f"{what} ({'; '.join(m.words() for m in c.moves)})")
    ranges = [f"one of {', '.join(a.units)}" for a in ambiguous]
    why = "the stacks between could not be compared with the control (see the skipped steps)"
    if not said:
        if ranges:
            return f"no single culprit named: it is {'; '.join(ranges)}; {why}"
        return f"no culprit named: {units.candidate} regresses, but the search could not tell which move does it"
    head = "culprit: " if len(said) == 1 else "culprits: "
    tail = f"; and {'; '.join(ranges)} ({why})" if ranges else ""
    if not result.complete and not ranges:
        tail += "; the search could not finish (a skip), so there may be more"
    return head + "; ".join(said) + tail


def run_bisect(opts: BisectOptions, build_image: BuildImage, *, say: Say = lambda _: None,
               interrupted: Callable[[BisectReport], None] | None = None, slots: int = 1,
               run_steps: RunSteps | None = None) -> BisectReport:
    """Bisect the moves from the control to the candidate on one trial (and metric) of the plan, each stack
    between built with `build_image`. Each round of the search builds and compares up to `slots` stacks with
    `run_steps` (default: in this process, one after another, each with `build_image`). On Ctrl-C,
    `interrupted` is given the report of the steps finished (to record it) before KeyboardInterrupt goes on."""
    from stackctl.profile.locate import load_profile, profile_file

    started_at, started = now_iso(), time.monotonic()
    control, candidate = load_profile(opts.control), load_profile(opts.candidate)
    trial = opts.plan.trial(opts.trial)
    if trial is None:
        known = ", ".join(t.name for t in opts.plan.trials)
        raise InputError(f"{opts.plan.path}: no trial {opts.trial!r} in the plan (trials: {known})")
    if opts.metric is not None and opts.metric not in {m.name for m in trial.metrics}:
        known = ", ".join(m.name for m in trial.metrics) or "none: a tests trial has no metrics"
        raise InputError(f"--metric {opts.metric}: trial {opts.trial} has no such metric (metrics: {known})")
    if slots < 1:
        raise InputError(f"{slots} slots: a round of the search needs at least one")
    plan = opts.plan.select((opts.trial,))
    opts = replace(opts, plan=plan)
    units = plan_units(control, candidate)
    if not units.units:
        raise InputError(f"{candidate.name} moves no pin from {control.name}: nothing to bisect",
                         hint="bisect looks for the pin move that makes a candidate regress; `stackctl diff` "
                         "shows what else differs")
    work = opts.work_dir or opts.record_dir / "bisect" / candidate.name
    homes = {profile_file(a).resolve().parent for a in (opts.control, opts.candidate)} | {Path("stacks").resolve()}
    if work.resolve() in homes:
        raise InputError(f"--work-dir {work}: the profiles of the stacks between would lie among the real ones "
                         "(every command that reads a directory of profiles would take them for stacks)",
                         hint="give a directory of its own, e.g. build/bisect/NAME")
    chain = copy_chain(opts.control, work)
    say(f"{len(units.units)} units of moves: " + "; ".join(f"{i + 1}. {u.name}" for i, u in enumerate(units.units)))
    if units.kept:
        say(f"not bisected (only the candidate has them): {', '.join(units.kept)}")
    if run_steps is None:
        run_steps = functools.partial(steps_here, build_image=build_image, say=say)
    run = _Bisect(opts, control, candidate, units, work, say, build_image, slots, run_steps)
    run.control_chain = chain
    result: SearchResult | None = None
    status = "done"
    try:
        run.start()
        result = search_units(len(units.units), run.compare_many, slots)
    except KeyboardInterrupt:
        status = "interrupted"
        if interrupted is not None:
            with contextlib.suppress(StackctlError):  # worth less than the interruption itself
                interrupted(_report(opts, units, run, result, status, started_at, started, work))
        raise
    return _report(opts, units, run, result, status, started_at, started, work)


def _report(opts: BisectOptions, units: Units, run: _Bisect, result: SearchResult | None, status: str,
            started_at: str, started: float, work: Path) -> BisectReport:
    found = result.findings if result else ()
    culprits = tuple(_culprit(units, f.kind, f.units, f.alone, f.without) for f in found if f.kind != AMBIGUOUS)
    ambiguous = tuple(_culprit(units, f.kind, f.units, f.alone, f.without) for f in found if f.kind == AMBIGUOUS)
    steps = tuple(run.steps)
    problems: list[str] = []
    if result is not None and result.candidate is not Outcome.GOOD and not culprits:
        problems.append(conclusion(units, result, culprits, ambiguous, opts.trial))
    elif result is not None and not result.complete:
        problems.append("the search could not finish: a stack it needed could not be compared")
    return BisectReport(
        units.control, units.candidate, opts.trial, opts.metric, opts.plan.path, opts.plan.digest, units.units,
        units.kept, result.candidate.value if result else "", culprits, ambiguous, steps,
        builds=sum(s.built for s in steps) + run.control_built,
        comparisons=sum(s.compared for s in steps),
        reused=sum(s.reused for s in steps), rounds=run.rounds, slots=run.slots,
        seconds=time.monotonic() - started, started=started_at,
        finished=now_iso(), complete=bool(result and result.complete), status=status,
        conclusion=conclusion(units, result, culprits, ambiguous, opts.trial), work_dir=str(work),
        problems=tuple(problems))


def record_bisect(report: BisectReport, path: Path, command: str, control: Stack, candidate: Stack,
                  lock_digest: str | None = None) -> None:
    """The record `report` quotes, under the candidate's stack."""
    from stackctl.base.evidence import write_evidence
    from stackctl.base.jsonout import to_jsonable

    result = to_jsonable(report) | {"failing": report.failing}
    write_evidence(path, RECORD_KIND, candidate.name, result, command=command, lock_digest=lock_digest,
                   profile_digests=(control.digest(), candidate.digest()))
