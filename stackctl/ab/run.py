"""`stackctl ab CONTROL CANDIDATE`: the plan run in both legs, alternating, every run recorded raw, then the
verdicts. The runs are the edge (`legs`); everything judged is a pure function of what they recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackctl.ab.legs import LegRunner, image_legs, plan_files, python_legs, with_facts
from stackctl.ab.plan import Plan, Trial, TrialKind
from stackctl.ab.runs import FAILED, Leg, Run, read_run
from stackctl.ab.verdicts import CANDIDATE, CONTROL, TrialVerdict, schedule, skipped, trial_verdict
from stackctl.base.times import now_iso
from stackctl.errors import InputError

if TYPE_CHECKING:
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

    @property
    def verdict(self) -> str:
        return "failed" if self.failing else "passed"


Say = Callable[[str], None]


def _has_device_phase(stack: Stack) -> bool:
    from stackctl.profile.model import GateMode, GatePhase

    return stack.devices is not None and (any(e.mode is GateMode.SPEC for e in stack.gate_entries())
                                          or any(p.phase is GatePhase.DEVICE for p in stack.probes))


def _gates(stack: Stack, runner: LegRunner, target: str | None, say: Say) -> list[GateCheck]:
    from stackctl.image.gaterun import gate_spec_text, verdict
    from stackctl.profile.model import GatePhase

    out = []
    phases: list[GatePhase | None] = [None]
    if _has_device_phase(stack):
        phases.append(GatePhase.DEVICE)
    for phase in phases:
        name = phase.value if phase is not None else "all"
        say(f"{runner.leg.role}: gate of {stack.name} ({name}) in {runner.leg.ref}")
        run = runner.gate(stack, gate_spec_text(stack, None, target, phase), stack.devices if phase else None)
        problem = verdict(stack.name, run)
        out.append(GateCheck(runner.leg.role, name, run.passed, run.failed, problem is None,
                             str(problem) if problem else None, tuple(run.lines)))
    return out


def _job(plan: Plan, trial: Trial, leg: str, run: int, first: bool) -> dict[str, Any]:
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
    times in the same leg straight away."""
    runs: list[Run] = []
    counter = {CONTROL: 0, CANDIDATE: 0}
    plan_runs = schedule(trial.kind, trial.repeat)
    for order, (leg, rep) in enumerate(plan_runs):
        attempts = 1 + (trial.rerun if trial.kind is TrialKind.TESTS else 0)
        for attempt in range(attempts):
            started = now_iso()
            result = runners[leg].run(_job(plan, trial, leg, counter[leg], False), files, trial.timeout)
            counter[leg] += 1
            run = read_run(trial, leg, order, rep, attempt, started, result)
            runs.append(run)
            say(_run_line(trial, run, order, len(plan_runs)))
            if not _has_failures(run):
                break
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


def run_ab(control: Stack, candidate: Stack, args: tuple[str, str], plan: Plan, *,
           images: tuple[str, ...] = (), pythons: tuple[str, ...] = (), record_dir: Path = Path("build"),
           target: str | None = None, say: Say = lambda _: None) -> AbReport:
    """Both legs, the gate in each, every trial's runs, the verdicts."""
    if images and pythons:
        raise InputError("give --image or --python, not both: both legs run the same way")
    for opt, values in (("--image", images), ("--python", pythons)):
        if values and len(values) != 2:
            raise InputError(f"{opt}: give it twice, the control's first and the candidate's second "
                             f"(got {len(values)})")
    files = plan_files(Path(plan.root), plan.files)
    started = now_iso()
    if pythons:
        legs = python_legs(control, candidate, args, pythons)
    else:
        legs = image_legs(control, candidate, args, images, record_dir, plan.python, plan.workdir)
    runners = {CONTROL: legs[0], CANDIDATE: legs[1]}
    for runner in legs:
        _probe_leg(plan, runner, say)
    gates: list[GateCheck] = []
    if plan.gate:
        for stack, runner in ((control, legs[0]), (candidate, legs[1])):
            gates += _gates(stack, runner, target, say)
    verdicts: list[TrialVerdict] = []
    runs: list[Run] = []
    for trial in plan.trials:
        short = [r.leg.role for r in legs if len(r.leg.devices_seen) < trial.devices]
        if short:
            least = min(len(r.leg.devices_seen) for r in legs)
            why = (f"needs {trial.devices} device(s); the {' and '.join(short)} "
                   f"{'legs see' if len(short) > 1 else 'leg sees'} {least}")
            say(f"{trial.name}: skipped, {why}")
            verdicts.append(skipped(trial, why))
            continue
        trial_runs = run_trial(plan, trial, runners, files, say)
        runs += trial_runs
        verdicts.append(trial_verdict(trial, trial_runs, plan.alpha))
    problems = [f"gate of the {g.leg} ({g.phase}): {g.problem}" for g in gates if not g.ok]
    problems += [f"{v.trial}: {v.verdict}" + (f" ({v.errors[0]})" if v.errors else "") for v in verdicts if v.failing]
    return AbReport(plan.name, plan.path, plan.digest, plan.description, legs[0].leg, legs[1].leg, tuple(gates),
                    tuple(verdicts), tuple(runs), started, now_iso(), bool(problems), tuple(problems))


def record_ab(report: AbReport, path: Path, command: str, control: Stack, candidate: Stack) -> None:
    """The record `report` reads: the whole report, raw runs included, under the candidate's stack."""
    from stackctl.base.evidence import write_evidence

    write_evidence(path, RECORD_KIND, candidate.name, report, command=command,
                   profile_digests=(control.digest(), candidate.digest()))
