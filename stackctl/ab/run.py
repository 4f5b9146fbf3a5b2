"""`stackctl ab CONTROL CANDIDATE`: the plan run in both legs, alternating, every run recorded raw, then the
verdicts. The runs are the edge (`legs`); everything judged is a pure function of what they recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from stackctl.ab.legs import LegRunner, image_legs, plan_files, python_legs, with_facts
from stackctl.ab.plan import Plan, Trial, TrialKind
from stackctl.ab.runs import FAILED, Leg, Run, read_run
from stackctl.ab.stats import REGRESSED, UNDECIDED, percent, tell_words
from stackctl.ab.verdicts import BROKEN, CANDIDATE, CONTROL, TrialVerdict, schedule, skipped, trial_verdict
from stackctl.base.times import now_iso
from stackctl.errors import InputError

if TYPE_CHECKING:
    from stackctl.image.gaterun import GateRun
    from stackctl.profile.locate import StackRef
    from stackctl.profile.model import Stack

RECORD_KIND = "ab"


@dataclass(frozen=True)
class GateCheck:
    """The stack's gate in one leg (and its device phase, where the stack declares devices)."""

    leg: str
    phase: str  # "all" | "device"
    passed: int
    failed: int
    ok: bool
    problem: str | None
    lines: tuple[str, ...]


@dataclass(frozen=True)
class AbReport:
    plan: str
    plan_path: str
    plan_digest: str
    description: str
    control: Leg
    candidate: Leg
    gates: tuple[GateCheck, ...]
    trials: tuple[TrialVerdict, ...]
    runs: tuple[Run, ...]
    started: str
    finished: str
    failing: bool = False
    problems: tuple[str, ...] = field(default=())  # why it exits 1, in words
    cluster: Mapping[str, Any] | None = None  # --cluster: its address and where each trial's task ran

    @property
    def verdict(self) -> str:
        return "failed" if self.failing else "passed"


Say = Callable[[str], None]


def _has_device_phase(stack: Stack) -> bool:
    from stackctl.profile.model import GateMode, GatePhase

    return stack.devices is not None and (any(e.mode is GateMode.SPEC for e in stack.gate_entries())
                                          or any(p.phase is GatePhase.DEVICE for p in stack.probes))


GATE_DIR = ".stackctl-gate"  # under the run's work directory


def _gate_in_leg(plan: Plan, runner: LegRunner, spec: str, files: dict[str, bytes]) -> GateRun:
    """The gate as one more run of the leg's runner: the interpreter, flags, environment, work directory (the
    plan's files) and devices every trial gets, so what the gate certifies is what the trials import (a
    PYTHONPATH of the plan's shadows a package for both, or for neither)."""
    from stackctl.base.assets import asset_root
    from stackctl.image.gaterun import GateRun

    files = {**files, f"{GATE_DIR}/gate.py": (asset_root() / "gates" / "gate.py").read_bytes(),
             f"{GATE_DIR}/gate.json": spec.encode("utf-8")}
    job = {"argv": ["{python}", f"{{work}}/{GATE_DIR}/gate.py", f"{{work}}/{GATE_DIR}/gate.json"],
           "env": dict(plan.env), "leg": runner.leg.role, "run": 0, "timeout": 600, "collect": [],
           "devices": False}
    result = runner.run(job, files, 600)
    if result.get("error") and not result.get("stdout"):
        raise InputError(f"{runner.leg.role} leg {runner.leg.ref}: cannot run the gate: {result['error']}")
    return GateRun.from_output(f"{runner.leg.python or 'python'} in {runner.leg.ref}", int(result.get("exit", -1)),
                               str(result.get("stdout", "")), str(result.get("stderr", "")))


def _gates(plan: Plan, stack: Stack, runner: LegRunner, files: dict[str, bytes], target: str | None,
           say: Say) -> list[GateCheck]:
    from stackctl.image.gaterun import gate_spec_text, verdict
    from stackctl.profile.model import GatePhase

    out = []
    phases: list[GatePhase | None] = [None]
    if _has_device_phase(stack):
        phases.append(GatePhase.DEVICE)
    for phase in phases:
        name = phase.value if phase is not None else "all"
        say(f"{runner.leg.role}: gate of {stack.name} ({name}) in {runner.leg.ref}")
        run = _gate_in_leg(plan, runner, gate_spec_text(stack, None, target, phase), files)
        problem = verdict(stack.name, run)
        out.append(GateCheck(runner.leg.role, name, run.passed, run.failed, problem is None,
                             str(problem) if problem else None, tuple(run.lines)))
    return out


def _job(plan: Plan, trial: Trial, leg: str, run: int, first: bool) -> dict[str, Any]:
    """What the runner in the leg is given for one run of `trial` (a sweep's values are in its argv already)."""
    collect = list(trial.outputs)
    if trial.kind is TrialKind.TESTS:
        collect.append(trial.junit)
    elif trial.metrics_from != "stdout":
        collect.append(trial.metrics_from)
    return {"argv": list(trial.command), "env": {**dict(plan.env), **dict(trial.env)}, "leg": leg, "run": run,
            "timeout": trial.timeout, "collect": list(dict.fromkeys(collect)), "devices": first}


def _probe_leg(plan: Plan, runner: LegRunner, say: Say) -> None:
    """A first, empty run in the leg: the interpreter's version and the devices it sees, for the record."""
    probe = Trial("stackctl-facts", TrialKind.TESTS, ("{python}", "-c", "pass"), timeout=120)
    result = runner.run(_job(plan, probe, runner.leg.role, 0, True) | {"collect": []}, {}, 120)
    if result.get("error") or result.get("exit") != 0:
        raise InputError(f"{runner.leg.role} leg {runner.leg.ref}: cannot run its interpreter: "
                         f"{result.get('error') or str(result.get('stderr', '')).strip()[-300:] or 'no output'}")
    seen = tuple(str(x) for x in result.get("devices") or ())
    with_facts(runner, str(result.get("python", "")), seen)
    say(f"{runner.leg.role}: {runner.leg.ref}, python {runner.leg.python}, "
        f"devices {', '.join(seen) or 'none seen'}")


def _has_failures(run: Run) -> bool:
    return run.error is not None or any(n.status == FAILED for n in run.nodes)


def run_trial(plan: Plan, trial: Trial, runners: dict[str, LegRunner], files: dict[str, bytes],
              say: Say) -> list[Run]:
    """The trial's schedule (control first, alternating), a tests run with failures run again up to `rerun`
    times in the same leg straight away. A benchmark with a metric still undecided then gets one more bracket
    (T C) at a time, as Pinpoint adds attempts to a comparison it cannot yet call, until every metric is
    decided or it has `max_repeat` brackets."""
    runs: list[Run] = []
    counter = {CONTROL: 0, CANDIDATE: 0}

    def one(order: int, leg: str, rep: int, planned: int) -> None:
        attempts = 1 + (trial.rerun if trial.kind is TrialKind.TESTS else 0)
        for attempt in range(attempts):
            started = now_iso()
            result = runners[leg].run(_job(plan, trial, leg, counter[leg], False), files, trial.timeout)
            counter[leg] += 1
            run = read_run(trial, leg, order, rep, attempt, started, result)
            runs.append(run)
            say(_run_line(trial, run, order, planned))
            if not _has_failures(run):
                break

    plan_runs = schedule(trial.kind, trial.repeat)
    for order, (leg, rep) in enumerate(plan_runs):
        one(order, leg, rep, len(plan_runs))
    if trial.kind is not TrialKind.BENCH:
        return runs
    for bracket in range(trial.repeat, trial.max_repeat):
        if any(r.error for r in runs):
            break  # a broken benchmark is judged as broken, not measured on
        undecided = [m for m in trial_verdict(trial, runs, plan.alpha, True).metrics if m.verdict == UNDECIDED]
        if not undecided:
            break
        for m in undecided:
            say(f"{trial.name}: {m.metric} undecided after {bracket} brackets, {m.why}; "
                f"adding bracket {bracket + 1} (at most {trial.max_repeat})")
        planned = 2 * bracket + 3
        one(planned - 2, CANDIDATE, bracket, planned)
        one(planned - 1, CONTROL, bracket + 1, planned)
    return runs


def _run_line(trial: Trial, run: Run, order: int, total: int) -> str:
    what = f"{trial.name} {order + 1}/{total} {run.leg}" + (f" (rerun {run.rerun})" if run.rerun else "")
    if run.error:
        return f"{what}: {run.error}"
    if trial.kind is TrialKind.TESTS:
        failed = sum(n.status == FAILED for n in run.nodes)
        return f"{what}: {len(run.nodes)} tests, {failed} failed in {run.seconds:.1f} s"
    samples = ", ".join(f"{k} n={len(v)}" for k, v in run.samples)
    return f"{what}: {samples} in {run.seconds:.1f} s"


class TrialPlace(Protocol):
    """Where the trials run: here, one after another, or on a cluster's nodes, each trial (each sweep cell) on
    one node and the same cards for its whole schedule."""

    def unplaceable(self, trial: Trial, legs: Sequence[LegRunner]) -> str | None:
        """Why no place can run the trial (too few devices), or None."""
        ...

    def run(self, plan: Plan, trials: Sequence[Trial], runners: dict[str, LegRunner], files: dict[str, bytes],
            say: Say) -> Iterable[list[Run]]:
        """Each trial's runs, in the trials' order."""
        ...


class _Here:
    def unplaceable(self, trial: Trial, legs: Sequence[LegRunner]) -> str | None:
        short = [r.leg.role for r in legs if len(r.leg.devices_seen) < trial.devices]
        if not short:
            return None
        least = min(len(r.leg.devices_seen) for r in legs)
        return (f"needs {trial.devices} device(s); the {' and '.join(short)} "
                f"{'legs see' if len(short) > 1 else 'leg sees'} {least}")

    def run(self, plan: Plan, trials: Sequence[Trial], runners: dict[str, LegRunner], files: dict[str, bytes],
            say: Say) -> Iterator[list[Run]]:
        for trial in trials:
            yield run_trial(plan, trial, runners, files, say)


HERE: TrialPlace = _Here()


def same_place(trial: Trial, runs: Sequence[Run]) -> TrialVerdict | None:
    """A trial whose runs did not all run on one node with the same cards compared legs on different hardware:
    an error, not a verdict (the bracketing control cancels drift on one card, not a difference between two)."""
    places = sorted({(r.node or "this machine", r.devices) for r in runs})
    if len(places) <= 1:
        return None
    seen = "; ".join(f"{node} cards {','.join(devices) or 'none'}" for node, devices in places)
    return TrialVerdict(trial.name, trial.kind, trial.config, BROKEN, True,
                        errors=(f"its runs ran on {len(places)} different places ({seen}): not one node and the "
                                "same cards",))


def run_ab(control_ref: StackRef, candidate_ref: StackRef, plan: Plan, *,
           images: tuple[str, ...] = (), pythons: tuple[str, ...] = (), record_dir: Path = Path("build"),
           target: str | None = None, max_repeat: int | None = None, allow_undecided: bool = False,
           say: Say = lambda _: None, place: TrialPlace | None = None) -> AbReport:
    """Both legs, the gate in each, every trial's runs, the verdicts. `max_repeat` and `allow_undecided` stand
    for the plan's where given (`--max-repeat`, `--allow-undecided`). `place` runs the trials (a cluster's
    nodes); by default they run here, one after another, on the legs' own devices."""
    control, candidate = control_ref.stack, candidate_ref.stack
    plan = plan.repeated(None, max_repeat, allow_undecided)
    if images and pythons:
        raise InputError("give --image or --python, not both: both legs run the same way")
    for opt, values in (("--image", images), ("--python", pythons)):
        if values and len(values) != 2:
            raise InputError(f"{opt}: give it twice, the control's first and the candidate's second "
                             f"(got {len(values)})")
    files = plan_files(Path(plan.root), plan.files)
    started = now_iso()
    if pythons:
        legs = python_legs((control_ref, candidate_ref), pythons)
    else:
        legs = image_legs((control_ref, candidate_ref), images, record_dir, plan.python, plan.workdir)
    runners = {CONTROL: legs[0], CANDIDATE: legs[1]}
    for runner in legs:
        _probe_leg(plan, runner, say)
    gates: list[GateCheck] = []
    if plan.gate:
        for stack, runner in ((control, legs[0]), (candidate, legs[1])):
            gates += _gates(plan, stack, runner, files, target, say)
    where = place or HERE
    verdicts: dict[str, TrialVerdict] = {}
    runs: list[Run] = []
    runnable = []
    for trial in plan.trials:
        why = where.unplaceable(trial, legs)
        if why is None:
            runnable.append(trial)
            continue
        say(f"{trial.name}: skipped, {why}")
        verdicts[trial.name] = skipped(trial, why)
    for trial, trial_runs in zip(runnable, where.run(plan, runnable, runners, files, say), strict=True):
        runs += trial_runs
        verdict = same_place(trial, trial_runs) or trial_verdict(trial, trial_runs, plan.alpha, plan.allow_undecided)
        verdicts[trial.name] = verdict
        say(f"{trial.name}: {verdict.verdict}" + "".join(f"; {m.metric} {m.verdict}, {m.why}" for m in verdict.metrics))
    ordered = [verdicts[t.name] for t in plan.trials]
    problems = [f"gate of the {g.leg} ({g.phase}): {g.problem}" for g in gates if not g.ok]
    problems += [problem(v) for v in ordered if v.failing]
    return AbReport(plan.name, plan.path, plan.digest, plan.description, legs[0].leg, legs[1].leg, tuple(gates),
                    tuple(ordered), tuple(runs), started, now_iso(), bool(problems), tuple(problems))


def problem(v: TrialVerdict) -> str:
    """Why a failing trial fails, naming what failed: the nodes, the metrics and their intervals, the runs."""
    what: list[str] = []
    if v.tests is not None:
        what += [n.node for n in v.tests.regressions]
        what += [f"only on the control: {n}" for n in v.tests.only_control]
        what += [f"only on the candidate: {n}" for n in v.tests.only_candidate]
    for m in v.metrics:
        if m.verdict == REGRESSED:
            what.append(f"{m.metric} {m.why}")
        elif m.verdict == UNDECIDED:
            what.append(f"{m.metric} {percent(m.delta_pct, True)} after {len(m.brackets)} brackets, "
                        + tell_words(m.reach_pct, m.band, m.equivalence_brackets, m.below_noise))
    what += [o.file + " differs" for o in v.outputs if not o.equal]
    what += list(v.errors[:1])
    if not what:
        return f"{v.trial}: {v.verdict}"
    more = f" and {len(what) - 4} more" if len(what) > 4 else ""
    return f"{v.trial}: {v.verdict} ({'; '.join(what[:4])}{more})"


def record_ab(report: AbReport, path: Path, command: str, control: Stack, candidate: Stack) -> tuple[str, ...]:
    """The record `report` reads: the whole report, raw runs included, under the candidate's stack; and beside it
    a picture of each benchmark metric (when matplotlib, the `plots` extra, is there): the pictures' paths, or
    () without them."""
    from stackctl.ab.plot import PlotsMissing, pictures
    from stackctl.base import to_jsonable
    from stackctl.base.evidence import write_evidence
    from stackctl.base.files import write_atomic

    write_evidence(path, RECORD_KIND, candidate.name, report, command=command,
                   profile_digests=(control.digest(), candidate.digest()))
    try:
        drawn = pictures(to_jsonable(report), str(path))
    except PlotsMissing:
        return ()
    for name, svg in drawn.items():
        write_atomic(name, svg)
    return tuple(drawn)
