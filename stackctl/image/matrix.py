"""`stackctl build --all` as one call on one engine: stacks by targets, the registry as the cache the engines
that build them share (a cluster's nodes each run this for their cells, usecases/build.py).

A BuildKit engine builds its cells as one `docker buildx bake` (`bake_queue`): every cell's context rendered as
for a single build, one bake file, BuildKit running the cells' stages in parallel and a stage they share once;
where the builder exports its cache (the containerd image store) each cell's stages go to the registry as
REPO:buildcache-STACK-TARGET and the next bake, on any engine, starts from them. A classic-builder engine
builds its cells one after another: before a cell builds, the engine pulls the stage images the registry
holds for the cell's layer groups (`cachekeys`) and builds with them as `cache_from`; after it built, the
cell's own stage images go to the registry for the next engine. A failing cell is recorded and the engine
goes on with the others; the matrix record (RECORD_DIR/matrix.json) says which cell was built where, for
`publish --all`.

A single `stackctl build` is a one-cell matrix over DOCKER_HOST's engine, through the same planning and the
same cell build; it shares nothing (`MatrixRequest.shared`): no stage images pulled from or pushed to a
registry, no bake (its one cell is built by `docker buildx build`, as `verify --rebuild` rebuilds it, so the
two give one digest), no matrix record (its build record is its whole account).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from stackctl.base.files import write_atomic
from stackctl.base.imageref import names_registry
from stackctl.base.jsonout import dumps
from stackctl.base.progress import BuildProgress, Phases
from stackctl.errors import CheckFailed, InputError, Problems, ServiceError, StackctlError
from stackctl.image.bakefile import Baked, BakeTarget, cache_ref, registry_cache, target_name
from stackctl.image.build import (
    BuildRequest,
    Built,
    Staged,
    build_image,
    finish_build,
    keep_failed_step,
    lay_context,
    stage_build,
)
from stackctl.image.buildlog import BuildFailed
from stackctl.image.cachekeys import StageCache, stage_caches, stage_images
from stackctl.image.labels import image_ref
from stackctl.image.order import BuildOrder
from stackctl.image.prepare import Prepared
from stackctl.image.protocols import Bakes, Engine

MATRIX_RECORD = "matrix.json"


class PoolEngine(Engine, Protocol):
    def pull_cache(self, ref: str) -> int | None: ...  # a stage image pulled from the registry: its bytes, or None


Event = Callable[[str, str, str], None]  # (engine, cell name, what happened)
CellProgress = Callable[[str, str], BuildProgress]  # (engine, cell name): where that cell's build reports


@dataclass(frozen=True)
class CellInput:
    prepared: Prepared
    lock: Path
    record_dir: Path  # RECORD_DIR, or RECORD_DIR/TARGET when the stack has more than one cell
    context: Path | None = None  # a single build's --context (default: RECORD_DIR/STACK/context)


@dataclass(frozen=True)
class MatrixRequest:
    cells: tuple[CellInput, ...]
    machine: str  # the engine's architecture (x86_64, aarch64): a cell of another is not built there
    address: str | None = None  # the engine's URL (credentials left out), kept in the record
    order: BuildOrder = field(default_factory=BuildOrder)

    @property
    def repository(self) -> str | None:
        return self.order.repository

    @property
    def shared(self) -> bool:
        """`build --all`: the cells share their stages through the registry, a BuildKit engine bakes its queue,
        the matrix is recorded for `publish --all`. A single build (`BuildOrder.every` unset) does none of it."""
        return self.order.every


@dataclass(frozen=True)
class CellResult:
    stack: str
    target: str
    engine: str | None
    result: str  # built | gate failed | build failed | engine failed | failed | not built
    image: str  # repository:tag
    image_id: str | None = None
    steps: int = 0
    steps_cached: int = 0
    seconds: float = 0.0
    cache_pulled: int = 0  # stage images found in the registry and pulled
    cache_bytes: int = 0  # compressed bytes those pulls brought
    cache_pushed: int = 0
    error: str | None = None
    exit_code: int = 0
    record: str | None = None
    profile: str | None = None
    lock: str | None = None
    address: str | None = None
    builder: str | None = None  # buildkit (the cell was a bake target) or classic
    # --cluster: where the cell's task ran and what became of it there
    node: str | None = None  # the Ray node id
    host: str | None = None  # the node's host name
    digest: str | None = None  # the manifest digest the node pushed to the registry (no tag moved)
    published: Mapping[str, Any] | None = None  # the node's publication by digest: publish --all finishes it
    attempts: tuple[Mapping[str, str], ...] = ()  # each node that ran it: a node that died, then the one that built
    versions: Mapping[str, str] | None = None  # the stackctl and Ray that ran the task


@dataclass(frozen=True)
class Outcome:
    """A cell's result, with what a single build shows of it: the build, or its failure as raised."""

    cell: CellResult
    built: Built | None = None
    error: StackctlError | None = None


@dataclass(frozen=True)
class Matrix:
    outcomes: tuple[Outcome, ...]
    record: Path | None  # RECORD_DIR/matrix.json; a single build writes none

    @property
    def cells(self) -> tuple[CellResult, ...]:
        return tuple(o.cell for o in self.outcomes)

    @property
    def exit_code(self) -> int:
        """0, else 3 when an engine failed a cell, else the worst other failure (1 for a gate)."""
        codes = {c.exit_code for c in self.cells if c.exit_code}
        return 3 if 3 in codes else max(codes, default=0)


def matrix_cells(order: BuildOrder, env: Mapping[str, str]) -> tuple[CellInput, ...]:
    """The order's cells, each profile resolved once and prepared for its build: with --all every named profile
    (none: every profile in ./stacks/) for each of its targets it has (none: the target of its image's python);
    a single build, its profile for its one target. Every bad input reported at once, before any engine builds."""
    from stackctl.image.prepare import pick_target, prepare_build
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.lock import lock_path

    names = list(order.profiles) or sorted(str(p) for p in Path("stacks").glob("*.toml"))
    if not names:
        raise InputError("--all: no profile named and none in ./stacks/")
    if order.lock is not None and len(names) > 1:
        raise InputError("--lock names one stack's lock: with --all each profile's lock is the one beside it")
    cells: list[CellInput] = []
    problems: list[StackctlError] = []
    wanted, loaded = set(order.targets), []
    for name in names:
        try:
            ref = stack_ref(name)
            if not order.every:  # a single build: its one target, or the image's python's
                labels = [pick_target(ref.stack, order.target)]
            elif order.targets:
                labels = [t.label for t in ref.stack.targets if t.label in wanted]
            else:
                labels = [pick_target(ref.stack, None)]
            loaded.append((ref, labels))
            wanted -= set(labels)
        except StackctlError as exc:
            problems.append(exc)
    if wanted and not problems:
        raise InputError(f"--target {', '.join(sorted(wanted))}: no named stack has it")
    for ref, labels in loaded:
        for label in labels:
            try:
                path = lock_path(ref, order.lock)
                prep = prepare_build(ref.stack, path, label, order.revision, order.ref, order.created,
                                     order.allow_dirty, env)
                cells.append(CellInput(prep, path, order.record_dir if len(labels) == 1
                                       else order.record_dir / label, None if order.every else order.context))
            except StackctlError as exc:
                problems.append(exc)
    if problems:
        raise Problems.of(problems)
    return tuple(cells)


def cache_repository(req: MatrixRequest, prep: Prepared) -> str | None:
    """The registry repository the cells share their stages through; None for a single build, or where the
    image's repository names no registry."""
    if not req.shared:
        return None
    repo = req.order.cache_repository or image_ref(prep.stack, req.repository).repository
    return repo if names_registry(repo) else None


def _absolute(source: str) -> str:
    """A profile source as `publish --all` finds it from any directory (PATH@GITREV kept as given)."""
    return source if "@" in source else str(Path(source).absolute())


def _caches(prep: Prepared) -> tuple[StageCache, ...]:
    return stage_caches(prep.plan) if prep.plan is not None else ()


def check_tags(req: MatrixRequest) -> None:
    """Two cells that would carry one tag are a usage error, before anything is built."""
    seen: dict[str, str] = {}
    for c in req.cells:
        ref = str(image_ref(c.prepared.stack, req.repository))
        if ref in seen:
            raise InputError(f"{c.prepared.stack.name} {c.prepared.target} and {seen[ref]} would both be tagged "
                             f"{ref}", hint="build one target at a time, or give the profile's tag a "
                             "per-target part")
        seen[ref] = f"{c.prepared.stack.name} {c.prepared.target}"


def cell_machine(cell: CellInput) -> str:
    """What `uname -m` says on an engine that can run the cell's wheels."""
    target = cell.prepared.stack.target(cell.prepared.target)
    return target.machine if target is not None else "x86_64"


def _failure(exc: StackctlError) -> tuple[str, int]:
    if isinstance(exc, BuildFailed):
        return ("gate failed" if any(ln.startswith("FAIL ") for ln in exc.lines) else "build failed"), 1
    if isinstance(exc, ServiceError):
        return "engine failed", 3
    if isinstance(exc, CheckFailed):
        return "failed", 1
    return "failed", exc.exit_code


def _push_stages(engine: PoolEngine, repo: str, caches: Sequence[StageCache], had: set[str],
                 log: Sequence[str]) -> int:
    """The stages the registry lacks, tagged and pushed; how many. A stage whose image the builder took from a
    pulled cache image has no local id of its own, and the registry has it under its key already."""
    ids, pushed = stage_images(log), 0
    for s in caches:
        ref = f"{repo}:{s.tag()}"
        if s.stage not in ids or ref in had:
            continue
        engine.tag(ids[s.stage], repo, s.tag())
        engine.push(repo, s.tag())
        pushed += 1
    return pushed


def build_cell(req: MatrixRequest, cell: CellInput, name: str, engine: PoolEngine, on_event: Event,
               progress: CellProgress | None = None) -> Outcome:
    """One cell on one engine: pull its cached stages, build, push its stages. Never raises a StackctlError:
    a failure is the cell's result."""
    prep = cell.prepared
    label, image = _label(cell), str(image_ref(prep.stack, req.repository))
    base = _unbuilt(req, cell, name, engine.builder)
    said = progress(name, label) if progress else BuildProgress()
    started = time.monotonic()
    pulled = nbytes = pushed = 0
    # the registry's stage images are the classic builder's cache (a BuildKit engine keeps its own)
    classic = engine if engine.baking is None else None
    try:
        repo = cache_repository(req, prep) if classic is not None else None
        caches = _caches(prep) if repo and not req.order.no_cache else ()
        found = []
        for s in caches:
            assert classic is not None
            ref = f"{repo}:{s.tag()}"
            if classic.facts(ref) is not None:
                found.append(ref)
                continue
            got = classic.pull_cache(ref)
            if got is not None:
                found.append(ref)
                pulled, nbytes = pulled + 1, nbytes + got
        # With cache_from the classic builder takes a local step only from those images' chains: the cell's
        # own earlier image keeps an unchanged rebuild cached to the last step.
        own = [image] if found and engine.facts(image) is not None else []
        if caches:
            on_event(name, label, f"cache: {len(found)} of {len(caches)} stages from the registry"
                                  + (f" ({pulled} pulled, {nbytes} bytes)" if pulled else ""))
        on_event(name, label, "build started")
        breq = BuildRequest(prep, cell.lock, req.order, cell.record_dir, cell.context,
                            tuple(found + own) if found else ())
        built = build_image(breq, engine, on_wheel=said.wheel, on_step=said.step, on_fetch=said.fetch)
        if classic is not None and repo:
            pushed = _push_stages(classic, repo, _caches(prep), set(found), built.result.log)
            on_event(name, label, f"cache: pushed {pushed} stage images to {repo}")
    except StackctlError as exc:
        return _failed(replace(base, cache_pulled=pulled, cache_bytes=nbytes), exc, started, on_event)
    return _built(replace(base, cache_pulled=pulled, cache_bytes=nbytes, cache_pushed=pushed), built, started,
                  on_event)


def _label(cell: CellInput) -> str:
    return f"{cell.prepared.stack.name} {cell.prepared.target}"


def _unbuilt(req: MatrixRequest, cell: CellInput, name: str, builder: str) -> CellResult:
    prep = cell.prepared
    return CellResult(prep.stack.name, prep.target, name, "not built", str(image_ref(prep.stack, req.repository)),
                      profile=_absolute(prep.stack.sources[0]) if prep.stack.sources else None,
                      lock=str(cell.lock.absolute()), address=req.address, builder=builder)


def _failed(base: CellResult, exc: StackctlError, started: float, on_event: Event) -> Outcome:
    result, code = _failure(exc)
    on_event(base.engine or "", f"{base.stack} {base.target}", f"{result}: {exc}")
    return Outcome(replace(base, result=result, error=str(exc), exit_code=code,
                           seconds=round(time.monotonic() - started, 1)), error=exc)


def _built(base: CellResult, built: Built, started: float, on_event: Event) -> Outcome:
    seconds = round(time.monotonic() - started, 1)
    on_event(base.engine or "", f"{base.stack} {base.target}", f"built {base.image} in {seconds} s, "
             f"{built.result.cached_steps} of {built.result.steps} steps cached")
    return Outcome(replace(base, result="built", image_id=built.result.image_id, steps=built.result.steps,
                           steps_cached=built.result.cached_steps, seconds=seconds, record=str(built.record_path)),
                   built)


@dataclass(frozen=True)
class _Staged:
    cell: CellInput
    request: BuildRequest
    staged: Staged
    digests: Mapping[str, str]
    target: BakeTarget


def bake_queue(req: MatrixRequest, cells: Sequence[CellInput], name: str, engine: Engine, bakes: Bakes,
               on_event: Event, progress: CellProgress | None = None) -> list[Outcome]:
    """An engine's queue as one bake: each cell staged and its context written as for a single build, every
    cell a target of one `docker buildx bake`, then each cell's record written from its own result. Never
    raises a StackctlError: a failure is the cell's result."""
    started = time.monotonic()
    done: dict[str, Outcome] = {}
    staged: dict[str, _Staged] = {}
    labels: dict[str, str] = {}
    for cell in cells:
        prep = cell.prepared
        tname = target_name(prep.stack.name, prep.target)
        labels[tname] = _label(cell)
        base = _unbuilt(req, cell, name, "buildkit")
        said = progress(name, labels[tname]) if progress else BuildProgress()
        try:
            breq = BuildRequest(prep, cell.lock, req.order, cell.record_dir, cell.context)
            st = stage_build(breq, engine, on_fetch=said.fetch)
            digests = lay_context(st, said.wheel, every_wheel=True)
        except StackctlError as exc:
            done[tname] = _failed(base, exc, started, on_event)
            continue
        repo = cache_repository(req, prep) if bakes.registry_cache else None
        cache_from, cache_to = registry_cache(cache_ref(repo, prep.stack.name, prep.target)) if repo else ((), ())
        target = BakeTarget(tname, st.context, st.image, args=dict(st.buildargs or {}),
                            contexts=bakes.named_contexts(st.context), layout=st.layout,
                            no_cache=req.order.no_cache, cache_from=() if req.order.no_cache else cache_from,
                            cache_to=cache_to)
        staged[tname] = _Staged(cell, breq, st, digests, target)
        on_event(name, labels[tname], f"bake target {tname}" + (f", registry cache {cache_to[0]}" if target.cache_to
                                                                 else ""))
    if not staged:
        return [done[target_name(c.prepared.stack.name, c.prepared.target)] for c in cells]

    phases: dict[str, Phases] = {}

    def steps(tname: str) -> Phases:  # one a cell: the phases after the bake's steps are numbered on from them
        if tname not in phases:
            phases[tname] = Phases.over(progress(name, labels[tname]).step if progress else None)
        return phases[tname]

    try:
        baked: Mapping[str, Baked] = bakes.bake([s.target for s in staged.values()], steps,
                                                 lambda tname, what: on_event(name, labels[tname], what))
    except StackctlError as exc:  # buildx could not run at all: every staged cell fails with it
        baked = {tname: Baked(None, exc) for tname in staged}
    for tname, s in staged.items():
        base = _unbuilt(req, s.cell, name, "buildkit")
        got = baked.get(tname) or Baked(None, ServiceError(f"docker buildx bake gave no result for {tname}"))
        imported = 1 if got.cache_imported else 0
        pushed = len(s.target.cache_to) if got.result is not None else 0
        base = replace(base, cache_pulled=imported, cache_pushed=pushed)
        if got.result is None:
            error = got.error or ServiceError(f"{tname}: no result")
            if isinstance(error, BuildFailed):  # its step's whole output kept, as a single build keeps it
                error = keep_failed_step(s.request, s.staged.image, error)
            done[tname] = _failed(base, error, started, on_event)
            continue
        try:
            built = finish_build(s.request, s.staged, s.digests, got.result, engine, steps(tname))
        except StackctlError as exc:
            done[tname] = _failed(base, exc, started, on_event)
            continue
        done[tname] = _built(base, built, started, on_event)
    return [done[target_name(c.prepared.stack.name, c.prepared.target)] for c in cells]


def build_matrix(req: MatrixRequest, name: str, engine: PoolEngine, on_event: Event,
                 progress: CellProgress | None = None) -> Matrix:
    """Every cell built on `engine` (or its failure kept as its outcome) and, for `build --all`, the matrix record
    written; raises only for bad input. A cell for another machine than the engine's is not built there (a
    single build goes where the user sent it)."""
    check_tags(req)
    able = [c for c in req.cells if not req.shared or cell_machine(c) == req.machine]
    for c in able:
        on_event(name, _label(c), "queued")
    if engine.baking is not None and req.shared:
        built = bake_queue(req, able, name, engine, engine.baking, on_event, progress)
    else:
        built = [build_cell(req, cell, name, engine, on_event, progress) for cell in able]
    done = {(o.cell.stack, o.cell.target): o for o in built}
    for c in req.cells:
        if c not in able:
            why = f"the engine runs {req.machine}, the target needs {cell_machine(c)}"
            done[(c.prepared.stack.name, c.prepared.target)] = Outcome(
                CellResult(c.prepared.stack.name, c.prepared.target, None, "not built",
                           str(image_ref(c.prepared.stack, req.repository)), error=why, exit_code=3),
                error=ServiceError(f"{_label(c)}: {why}"))
    outcomes = tuple(done[(c.prepared.stack.name, c.prepared.target)] for c in req.cells)
    return Matrix(outcomes, write_matrix(req.order.record_dir, [o.cell for o in outcomes]) if req.shared else None)


def write_matrix(record_dir: Path, cells: Sequence[CellResult]) -> Path:
    """RECORD_DIR/matrix.json, what `publish --all` publishes, written whole (atomically)."""
    record = record_dir / MATRIX_RECORD
    try:
        write_atomic(record, dumps({"cells": list(cells)}) + "\n")
    except OSError as exc:
        raise InputError(f"{record}: cannot write the matrix record: {exc.strerror or exc}") from None
    return record


def read_matrix(path: Path) -> tuple[CellResult, ...]:
    import json

    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        return tuple(CellResult(**{**c, "attempts": tuple(c.get("attempts") or ())}) for c in data["cells"])
    except FileNotFoundError:
        raise InputError(f"{path}: no matrix record", hint="run `stackctl build --all` first") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the matrix record: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a matrix record ({exc})") from None
