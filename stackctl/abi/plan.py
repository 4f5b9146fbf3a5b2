"""The ABI check of a whole stack: which wheels of the lock are read for each target, in what depth, and
the reports. One call per `stackctl abi`; the CLI only renders what comes back.

Wheels that only provide are first listed by name (for a remote wheel: its central directory); the
ones a checked file resolved to have their ELF headers read so a library for another machine never
counts as found; their libraries are read whole only if a name is left unresolved. Each wheel stays
open across passes and targets, and every remote byte goes through the index client.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stackctl.abi.check import AbiReport, RunTime, Severity, StackWheel, check_abi
from stackctl.abi.inventory import Inventory
from stackctl.base.annotations import Annotation, Level
from stackctl.base.progress import Progress
from stackctl.errors import CheckFailed, InputError, Problems, ServiceError, StackctlError
from stackctl.index.client import IndexClient
from stackctl.index.config import IndexEndpoint
from stackctl.profile.model import AbiRole, Stack
from stackctl.resolve.lock import Lock
from stackctl.resolve.wheelhouse import endpoint_for
from stackctl.wheels.archive import Limits
from stackctl.wheels.scan import WheelScan, platform_arch
from stackctl.wheels.source import OpenedWheel, WheelOrigin


@dataclass(frozen=True)
class PlannedWheel:
    location: str  # a path, file:// or http(s) URL
    sha256: str | None
    check: bool  # its ELF files are checked (else they only provide)
    size: int | None = None
    endpoint: IndexEndpoint | None = None  # the index a remote wheel is read from
    requires_dist: tuple[str, ...] | None = None  # from the lock: what the coupling warning compares


@dataclass(frozen=True)
class TargetPlan:
    label: str
    arch: str | None
    wheels: tuple[PlannedWheel, ...]
    runtime: RunTime = field(default_factory=RunTime)


@dataclass(frozen=True)
class AbiPlan:
    targets: tuple[TargetPlan, ...]
    allow: tuple[str, ...] = ()  # the profile's allow list
    inventory: str | None = None  # the profile's inventory file
    warnings: tuple[str, ...] = ()
    base: str | None = None  # the profile's base image, which an inventory should be of


@dataclass(frozen=True)
class AbiRun:
    reports: tuple[tuple[str, AbiReport], ...]  # (target label, report)
    origins: tuple[WheelOrigin, ...]
    errors: tuple[StackctlError, ...] = ()  # targets that could not be checked at all (an index failed)
    warnings: tuple[str, ...] = ()

    def failures(self) -> list[str]:
        """One line per unresolved library and per other error, each target's prefixed with its label."""
        return [f"{label}: {msg}" if len(self.reports) > 1 else msg
                for label, rep in self.reports for msg in rep.failures()]


def inventory_warning(plan: AbiPlan, inventory: Inventory | None, inventory_file: str | Path | None) -> str | None:
    """An inventory of another image than the profile's base checks the stack against a loader it will never
    meet: say so, since the check then proves nothing about the image being built."""
    if inventory is None or plan.base is None or inventory.image == plan.base:
        return None
    return (f"{inventory_file}: is the inventory of {inventory.image}, not of the profile's base image {plan.base}; "
            f"what it finds in the image is not what {plan.base} holds (`stackctl inventory {plan.base} --out FILE` "
            "writes that one)")


def plan_wheels(paths: list[str], arch: str | None, runtime: RunTime | None = None) -> AbiPlan:
    """Wheel files or URLs named on the command line, checked together."""
    return AbiPlan((TargetPlan("wheels", arch, tuple(PlannedWheel(p, None, True) for p in paths),
                               runtime or RunTime()),))


def stack_runtime(stack: Stack, target: str | None, extra_providers: tuple[str, ...] = ()) -> RunTime:
    """The run time a target's ABI check models: the gate's imports in order, the profile's providers
    (built-in sets extended by `[abi.provides]`), optional members, baseline and LD_LIBRARY_PATH."""
    from stackctl.profile.runtime import provider_sets

    t = next((x for x in stack.targets if x.label == target), None)
    imports = tuple(dict.fromkeys(e.module.split(".", 1)[0] for e in stack.gate_entries(t)))
    vendors = tuple(dict.fromkeys((*stack.abi.providers, *extra_providers)))
    return RunTime(imports, provider_sets(vendors, stack.abi.provides), stack.abi.optional, stack.abi.baseline,
                   stack.abi.ld_library_path)


def plan_stack(stack: Stack, lock: Lock, lock_name: str | Path, eps: Mapping[str, IndexEndpoint],
               target: str | None = None, arch: str | None = None, providers: tuple[str, ...] = ()) -> AbiPlan:
    """Every target's wheels from the lock (pins with `abi = "ignore"` left out), each read from its index."""
    if lock.stack != stack.name:
        raise InputError(f"{lock_name}: is the lock of stack {lock.stack!r}, not {stack.name!r}")
    warnings = () if lock.made_from(stack) else (
        f"{lock_name} was resolved from another version of {stack.name}; re-run `stackctl resolve` to refresh it",)
    labels = [t.label for t in stack.targets]
    if target is not None:
        if target not in labels:
            raise InputError(f"--target {target}: {stack.name} has targets {', '.join(labels)}")
        labels = [target]
    roles: dict[tuple[str, str], AbiRole] = {}
    pin_index: dict[str, str] = {}
    for p in lock.pins:
        pin = stack.pin(p.name)
        for f in p.files:
            roles[(f.target, f.filename)] = pin.abi if pin else AbiRole.PROVIDE
            pin_index[f.url] = p.index
    plans = []
    for label in labels:
        files = [f for f in lock.wheels_for(label) if roles.get((label, f.filename)) is not AbiRole.IGNORE]
        if not files:
            raise InputError(f"{lock_name}: no wheels for target {label}")
        wheels = tuple(PlannedWheel(f.url, f.sha256, roles.get((label, f.filename)) is AbiRole.CHECK, f.size,
                                    endpoint_for(f, pin_index.get(f.url), eps, stack), f.requires_dist)
                       for f in files)
        platform = label.split("-", 1)[1] if "-" in label else label
        plans.append(TargetPlan(label, arch or platform_arch(platform), wheels, stack_runtime(stack, label, providers)))
    return AbiPlan(tuple(plans), stack.abi.allow, stack.abi.inventory, warnings,
                   stack.image.base if stack.image else None)


def run_abi(plan: AbiPlan, inventory: Inventory | None, rules: tuple[str, ...], limits: Limits,
            client: IndexClient | None = None, progress: Progress | None = None,
            inventory_file: str | Path | None = None, use_facts: bool = True) -> AbiRun:
    reading = _Reading(limits, client, use_facts)
    reports: list[tuple[str, AbiReport]] = []
    errors: list[StackctlError] = []
    try:
        for t in plan.targets:  # a target that cannot be read is one problem; the others are still checked
            try:
                reports.append((t.label, _check_target(t, inventory, rules, reading, progress)))
            except StackctlError as exc:
                errors.append(_for_target(exc, t.label) if len(plan.targets) > 1 else exc)
        said = inventory_warning(plan, inventory, inventory_file or plan.inventory)
        return AbiRun(tuple(reports), reading.origins(), tuple(errors), (said,) if said else ())
    finally:
        reading.close()


def _for_target(exc: StackctlError, label: str) -> StackctlError:
    """The same failure, its message prefixed with the target it stopped."""
    kind = next(k for k in (ServiceError, InputError, CheckFailed, StackctlError) if isinstance(exc, k))
    return kind(f"{label}: {exc}", hint=exc.hint)


class _Reading:
    """The wheels of one `abi` run: opened once each (several at a time), and their scans, from the ELF facts
    kept per sha256 when a run before read them."""

    WORKERS = 4  # wheels read side by side: each its own connection, inflating without the GIL

    def __init__(self, limits: Limits, client: IndexClient | None, use_facts: bool) -> None:
        self.limits, self.client, self.use_facts = limits, client, use_facts
        self.opened: dict[str, OpenedWheel] = {}
        self.scans: dict[tuple[str, bool], WheelScan] = {}  # (location, libraries read) -> scan
        self.cached: dict[str, WheelOrigin] = {}
        self.sha: dict[str, str] = {}
        self.order: dict[str, None] = {}  # locations in plan order: what the sources list follows
        self._lock = threading.Lock()

    def wheel(self, p: PlannedWheel) -> OpenedWheel:
        with self._lock:
            w = self.opened.get(p.location)
        if w is None:
            w = OpenedWheel(p.location, self.limits, sha256=p.sha256, size=p.size, client=self.client,
                            ep=p.endpoint)
            with self._lock:
                if p.location in self.opened:
                    w.close()
                    return self.opened[p.location]
                self.opened[p.location] = w
        return w

    def scan(self, p: PlannedWheel, full: bool) -> WheelScan:
        key = (p.location, full)
        if key in self.scans:
            return self.scans[key]
        if self.use_facts and p.sha256 and p.location not in self.opened:
            from stackctl.wheels.facts import load_facts

            hit = load_facts(p.sha256, True) or (None if full else load_facts(p.sha256, False))
            if hit is not None:
                scan, verified = hit
                self.scans[key] = scan
                self.cached[p.location] = WheelOrigin(scan.filename, p.location, p.size or 0, 0, 0, None,
                                                      any(not e.unread for e in scan.elves), 0, verified,
                                                      True, cached=True)
                return scan
        self.sha[p.location] = p.sha256 or ""
        scan = self.wheel(p).scan(read_elves=full)
        self.scans[key] = scan
        return scan

    def read(self, label: str, items: tuple[PlannedWheel, ...], full: bool, progress: Progress | None
             ) -> list[StackWheel]:
        from concurrent.futures import ThreadPoolExecutor

        done = [0]
        self.order.update(dict.fromkeys(p.location for p in items))

        def one(p: PlannedWheel) -> WheelScan:
            scan = self.scan(p, full or p.check)
            if progress:
                with self._lock:
                    done[0] += 1
                    progress(f"reading {label}", done[0], len(items))
            return scan

        with ThreadPoolExecutor(max_workers=self.WORKERS) as pool:
            scans = list(pool.map(one, items))
        return [StackWheel(s, p.check, p.requires_dist) for s, p in zip(scans, items, strict=True)]

    def origins(self) -> tuple[WheelOrigin, ...]:
        """What reading each wheel cost; the facts of every wheel read whose bytes matched the lock are kept."""
        from stackctl.wheels.facts import save_facts

        out = []
        for location in self.order:
            if location in self.cached:
                out.append(self.cached[location])
            if (w := self.opened.get(location)) is None:
                continue
            o = w.origin()
            out.append(o)
            sha = self.sha.get(location)
            if self.use_facts and sha and o.verified in ("sha256", "size"):
                for full in (True, False):
                    if (location, full) in self.scans:
                        save_facts(sha, full, self.scans[(location, full)], o.verified)
                        break
        return tuple(out)

    def close(self) -> None:
        for w in self.opened.values():
            w.close()


def _check_target(plan: TargetPlan, inv: Inventory | None, rules: tuple[str, ...], reading: _Reading,
                  progress: Progress | None) -> AbiReport:
    items = plan.wheels
    rt = plan.runtime
    wheels = reading.read(plan.label, items, False, progress)
    rep = check_abi(wheels, inv, rules, plan.arch, rt)
    used = {(r.provider_wheel, r.provider_path) for r in rep.resolutions if r.provider_wheel}
    headers = False
    for i, (p, w) in enumerate(zip(items, wheels, strict=True)):
        paths = {e.path for e in w.scan.elves if e.unread and e.machine is None and e.problem is None
                 and (w.scan.filename, e.installed) in used}
        if paths:
            headed = reading.wheel(p).read_machines(w.scan, paths)
            reading.scans[(p.location, p.check)] = headed  # the facts kept include the machines read
            wheels[i] = StackWheel(headed, w.check, w.requires_dist)
            headers = True
    if headers:
        rep = check_abi(wheels, inv, rules, plan.arch, rt)
    if rep.unresolved() and any(not p.check for p in items):
        rep = check_abi(reading.read(plan.label, items, True, progress), inv, rules, plan.arch, rt)
    return rep


@dataclass(frozen=True)
class AbiOutcome:
    """`stackctl abi` as one result: each target's report, what reading each wheel cost, the problems, and
    the JSON document --json prints and --record keeps."""

    reports: tuple[tuple[str, AbiReport], ...]
    origins: tuple[WheelOrigin, ...]
    problems: tuple[StackctlError, ...]
    warnings: tuple[str, ...]
    annotations: tuple[Annotation, ...] = ()  # each finding where CI shows it (cli --annotations)
    recorded: Path | None = None  # where a profile's check was recorded for `stackctl report`

    def failure(self) -> StackctlError | None:
        """Every problem, in one error (the worst exit code), or None when every check passed."""
        return Problems.of(self.problems) if self.problems else None

    def as_json(self) -> dict[str, object]:
        return {"reports": [{"target": label, **report_json(rep)} for label, rep in self.reports],
                "sources": self.origins, "warnings": list(self.warnings),
                "problems": [{"error": str(e), "exit_code": e.exit_code} for e in self.problems]}


def report_json(rep: AbiReport) -> dict[str, object]:
    from stackctl.base.jsonout import to_jsonable

    d: dict[str, object] = to_jsonable(rep)
    d["ok"] = rep.ok
    d["unresolved"] = [{"library": lib, "needed_by": list(files)} for lib, files in rep.unresolved()]
    return d


def finding_annotations(stack: Stack | None, reports: tuple[tuple[str, AbiReport], ...]) -> tuple[Annotation, ...]:
    """Each error and warning at the line of the pin whose wheel has it (the profile is what a fix changes);
    wheel files checked on their own name no file of the repository, so their findings have none."""
    from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename

    from stackctl.profile.locate import key_position

    pins = {p.key: p.name for p in stack.pins} if stack is not None else {}
    out: list[Annotation] = []
    for label, rep in reports:
        for f in rep.findings:
            try:
                key: NormalizedName | None = canonicalize_name(parse_wheel_filename(f.wheel.rsplit("/", 1)[-1])[0])
            except InvalidWheelFilename:
                key = None
            where: tuple[str | None, int | None] = (None, None)
            if stack is not None:
                where = key_position(stack, ("pins", pins[key]) if key in pins else ("pins",))
            level = Level.ERROR if f.severity is Severity.ERROR else Level.WARNING
            out.append(Annotation(level, f"{label}: {f.wheel}: {f.message}", where[0], where[1]))
    return tuple(out)


def is_wheel_target(target: str) -> bool:
    """A wheel file, or a wheel's URL as an index page links it: `#sha256=...` (PEP 503) or a mirror's query
    after the file name; anything else is a profile."""
    from urllib.parse import urlsplit

    if target.startswith(("http://", "https://")):
        return urlsplit(target).path.endswith(".whl")
    return target.endswith(".whl")


def check_targets(targets: list[str], *, lock: Path | None = None, target: str | None = None,
                  inventory: str | None = None, allow: tuple[str, ...] = (), arch: str | None = None,
                  providers: tuple[str, ...] = (),
                  limits: Limits | None = None, overrides: Mapping[str, str] | None = None,
                  record: Path | None = None, no_record: bool = False, command: str = "",
                  progress: Progress | None = None, use_facts: bool = True) -> AbiOutcome:
    """`stackctl abi PROFILE` (the lock's wheels, read from their indexes) or `stackctl abi WHEEL...` (the
    files or URLs together); for a profile, the result also written as evidence where `report` reads it
    (build/STACK.abi.json, or `record`), unless `no_record`."""
    from stackctl.abi.inventory import read_inventory

    wheel_mode = all(is_wheel_target(t) for t in targets)
    if not wheel_mode and len(targets) != 1:
        raise InputError("give one profile, or only wheel files (*.whl)")
    from stackctl.profile.runtime import BUILTIN

    known = dict(BUILTIN)
    client = None
    stack: Stack | None = None
    recorded: tuple[str, str | None, tuple[str, ...]] | None = None  # stack, lock digest, profile digest
    if wheel_mode:
        if lock is not None or target is not None or overrides or record is not None or no_record:
            raise InputError("--lock, --target, --index, --record and --no-record apply to a profile, not to "
                             "wheel files")
        from stackctl.profile.runtime import provider_sets

        plan = plan_wheels(targets, arch, RunTime(imports=None, providers=provider_sets(providers)))
    else:
        from stackctl.index.config import endpoints
        from stackctl.profile.locate import load_profile
        from stackctl.resolve.lock import lock_path, read_lock

        stack = load_profile(targets[0])
        known.update(stack.abi.provides)
        path = lock_path(targets[0], lock)
        locked = read_lock(path, targets[0])
        plan = plan_stack(stack, locked, path, endpoints(stack, overrides, locked=locked.index_origins()), target,
                          arch, providers)
        recorded = (stack.name, locked.digest(), (stack.digest(),))
        client = IndexClient()
    for name in providers:
        if name not in known:
            raise InputError(f"--provider {name}: no such run-time provider set; known: {', '.join(sorted(known))}")
    inv_file = inventory or plan.inventory
    inv = read_inventory(inv_file) if inv_file else None
    run = run_abi(plan, inv, plan.allow + allow, limits or Limits(), client, progress, inv_file, use_facts)
    problems = (*run.errors, *(CheckFailed(f) for f in run.failures()))
    outcome = AbiOutcome(run.reports, run.origins, problems, plan.warnings + run.warnings,
                         finding_annotations(stack, run.reports))
    if recorded is not None:
        from stackctl.base.evidence import record_to, write_evidence

        stack_name, lock_digest, digests = recorded
        done = record_to(record, no_record, "abi", stack_name, lambda at: write_evidence(
            at, "abi", stack_name, {**outcome.as_json(), "failures": [str(e) for e in problems]},
            lock_digest=lock_digest, profile_digests=digests, command=command))
        outcome = dataclasses.replace(outcome, warnings=(*outcome.warnings, *done.warnings), recorded=done.at)
    return outcome
