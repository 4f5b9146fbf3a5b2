"""`stackctl build` as one call: prepare the render, check the engine has the base image, lay down the
context with every wheel's sha256 checked, build (the gate runs as the last step), and write the build
record with its fingerprint. The engine comes in through the `Engine` Protocol."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

from stackctl.base.files import sha256_file, write_atomic
from stackctl.base.jsonout import dumps
from stackctl.base.progress import Phases, Progress, Steps
from stackctl.base.times import now_iso
from stackctl.errors import CheckFailed, InputError
from stackctl.image.app import finish_app, stack_image_ref
from stackctl.image.artefact import Artefact
from stackctl.image.buildlog import BuildFailed, BuildResult, ImageFacts, gate_result
from stackctl.image.context import WHEEL_MISMATCH_HINT, wheel_mismatch, write_context
from stackctl.image.fingerprint import Fingerprint, file_inputs
from stackctl.image.gatespec import left_for_app
from stackctl.image.labels import LABEL_EPOCH
from stackctl.image.order import BuildOrder
from stackctl.image.prepare import Prepared, with_sbom
from stackctl.image.protocols import Engine, WheelServing
from stackctl.image.record import build_entry
from stackctl.image.render import INSTALLED_PATH
from stackctl.index.client import IndexClient


@dataclass(frozen=True)
class BuildRequest:
    """One image's build: the render prepared for it, and the order (what the user asked) it is part of."""

    prepared: Prepared
    lock: Path  # the lock file the render was made from
    order: BuildOrder = field(default_factory=BuildOrder)
    record_dir: Path = Path("build")  # the order's, or RECORD_DIR/TARGET for one of several cells of a stack
    context: Path | None = None  # default: RECORD_DIR/STACK/context
    cache_from: tuple[str, ...] = ()  # images the stack's build may take steps from (a matrix's stage images)

    @property
    def repository(self) -> str | None:
        return self.order.repository

    @property
    def wheelhouse(self) -> Path | None:  # holds the lock's wheels; else they are fetched into the record dir
        return self.order.wheelhouse

    @property
    def no_cache(self) -> bool:
        return self.order.no_cache

    @property
    def overrides(self) -> Mapping[str, str]:  # --index NAME=URL for fetching wheels
        return self.order.overrides

    @property
    def send_wheels(self) -> bool:  # put the wheels in the context even where a wheel server could serve them
        return self.order.send_wheels

    @property
    def command(self) -> str:  # the command line that asked for the build: the record says how to run it again
        return self.order.command


@dataclass(frozen=True)
class Built:
    image: str  # repository:tag
    result: BuildResult
    record_path: Path
    record: dict[str, Any]


def wheelhouse_for(prep: Prepared, wheelhouse: Path | None, default: Path, overrides: Mapping[str, str],
                   client: IndexClient | None = None, progress: Progress | None = None) -> Path:
    """The lock's wheels: the given wheelhouse when it holds them all, else fetched from the indexes.
    (The context checks every sha256 against the lock as it copies.)"""
    from stackctl.resolve.wheelhouse import fetch_wheelhouse

    needed = [f.wheel for f in prep.rendered.files if f.wheel]
    where = wheelhouse or default
    if all((where / w).is_file() for w in needed if w):
        return where
    fetch_wheelhouse(prep.lock, prep.stack, prep.target, where, client=client, overrides=overrides, progress=progress)
    return where


CI_BASE_IMAGE = "stackctl-base:bookworm"  # the one image .ci/services.sh builds
SEND_WHEELS_UNDER_BUILDKIT = ("--send-wheels changes nothing under BuildKit: its install stages bind-mount the "
                              "wheels from the build context; the option matters to the classic builder alone")


def base_image_hint(base: str) -> str:
    """What to do about a base image the engine lacks; .ci/services.sh builds only the example's base."""
    if base == CI_BASE_IMAGE:
        return f"`bash .ci/services.sh` builds {CI_BASE_IMAGE}"
    return (f"`docker pull {base}` from the registry that publishes it, or `docker load` an exported copy; "
            "the profile's [image] base names it")


def kept_gate_lines(engine: Engine, image: str, freeze: str = INSTALLED_PATH) -> tuple[str, ...]:
    """The gate's lines as the run that passed these layers kept them in the image (gates/gate.py writes
    them beside its --freeze file): a build whose gate step came from the cache printed none. Empty for an
    image built before the gate kept them."""
    kept = str(PurePosixPath(freeze).with_suffix(".gate.txt"))
    _, _, _, data = engine.run_with_files(image, {}, ["/opt/venv/bin/python", "-c", ""], fetch=kept, timeout=60)
    if data is None:
        return ()
    log = tuple(data.decode("utf-8", "replace").splitlines())
    return BuildResult("", log, 0, 0).gate_lines if gate_result(log) is not None else ()


def _epoch_arg(engine: Engine, prep: Prepared) -> dict[str, str] | None:
    """SOURCE_DATE_EPOCH for BuildKit (its exporter dates the config, the history and, rewritten, the layers'
    files from it); the classic builder is not given it: it would warn of an argument no step uses."""
    if engine.builder != "buildkit" or prep.plan is None:
        return None
    epoch = dict(prep.plan.labels).get(LABEL_EPOCH)
    return {"SOURCE_DATE_EPOCH": epoch} if epoch else None


def _versions(engine: Engine) -> dict[str, str]:
    """What built the image, for the provenance: the engine's version and API, the builder, buildx's version."""
    return {str(k): str(v) for k, v in engine.versions().items()}


@dataclass(frozen=True)
class Staged:
    """A build up to the engine's part: the render settled for this engine, the wheels at hand, the base
    checked. `lay_context` writes its context; the engine builds it; `finish_build` writes the record."""

    prepared: Prepared
    image: str  # the stack image's repository:tag
    context: Path
    work: Path  # RECORD_DIR/STACK
    wheels: Path
    base_facts: ImageFacts
    started: str
    wheels_how: str
    layout: Path  # where the stack image's OCI layout goes
    buildargs: Mapping[str, str] | None
    # groups/…: sha256 of the wheels the context does not read, for what checks each one as it is installed: the
    # wheel server, or under BuildKit's mounts the install stage's own --require-hashes
    served: Mapping[str, str] = field(default_factory=dict)
    server: WheelServing | None = None
    notes: tuple[str, ...] = ()  # what the build says of the options it was given (the record keeps them)


def stage_build(req: BuildRequest, engine: Engine, *, on_fetch: Progress | None = None) -> Staged:
    """Everything before the engine builds: the base image checked (before any download), the wheels fetched
    where the wheelhouse lacks them, the wheel server or the mounts chosen, the SBOM read from the wheels."""
    prep = req.prepared
    stack = prep.stack
    started = now_iso()  # the provenance's startedOn; `time` below is its finishedOn
    if stack.image is None:
        raise InputError(f"{stack.name}: the profile has no image table")
    image = stack_image_ref(stack, req.repository)  # the profile's tag, or TAG-stack under [image.app]
    base_facts = engine.facts(stack.image.base)
    if base_facts is None:  # before any download: a missing base makes every later byte wasted
        raise InputError(f"base image {stack.image.base} is not in the engine", hint=base_image_hint(stack.image.base))
    base = req.record_dir / stack.name
    ctx = req.context or base / "context"
    wheels = wheelhouse_for(prep, req.wheelhouse, base / "wheelhouse", req.overrides, progress=on_fetch)
    served = {f.path.removeprefix("groups/"): f.sha256 for f in prep.rendered.files
              if f.wheel and f.sha256 and f.path.startswith("groups/")}
    serving = engine.wheel_serving  # the classic builder's: BuildKit's stages mount their wheels
    offered = None if serving is None else "--send-wheels" if req.send_wheels else serving.wheel_server(
        ctx / "groups", served)
    server = None if offered is None or isinstance(offered, str) else offered
    if server is not None:
        wheels_how = f"served to the install stages at {server.where}: {server.how}"
    else:
        wheels_how = f"sent in the build context: {offered or 'this engine offers no wheel server'}"
    if server is not None:
        assert prep.plan is not None
        prep = dataclasses.replace(prep, plan=dataclasses.replace(prep.plan, serve_wheels=True))
    notes: tuple[str, ...] = ()
    if engine.mounts:  # BuildKit's: the stages bind-mount the wheels
        assert prep.plan is not None
        prep = dataclasses.replace(prep, plan=dataclasses.replace(prep.plan, mounts=engine.mounts))
        wheels_how = ("mounted into the install stages from each group's build context `wheels-GROUP`"
                      if engine.mounts == "named" else
                      "mounted into the install stages from the build context (this BuildKit has no named contexts)")
        if req.send_wheels:  # asked for, and nothing to do: said, not silently dropped
            notes = (SEND_WHEELS_UNDER_BUILDKIT,)
            wheels_how += f"; {SEND_WHEELS_UNDER_BUILDKIT}"
    prep = with_sbom(prep, wheels)  # licences from the wheels' own metadata (and the render again)
    # with an app on top, the published image is the final one: its layout takes STACK.oci, the stack
    # image's goes beside it
    layout = req.record_dir / f"{stack.name}{'.stack' if stack.app else ''}.oci"
    # Under BuildKit the wheels are mounted into their install stages, whose installer checks each against the
    # lock's sha256 (--require-hashes): a rebuild whose stages come from the cache need not read gigabytes of
    # wheels first (torch's 192 MB: 0.17 s of a 3 s rebuild). A failed build looks for a wheel that lies
    # (`_lying_wheel`), so the error names it as the context's check would have.
    return Staged(prep, str(image), ctx, base, wheels, base_facts, started, wheels_how, layout,
                  _epoch_arg(engine, prep), served if server or engine.mounts else {}, server, notes)


def _lying_wheel(staged: Staged) -> CheckFailed | None:
    """After a failed build whose install stages checked their own wheels (BuildKit's mounts): a wheel of the
    wheelhouse whose bytes are not the lock's, said as the context's check says it; None when none lies."""
    if staged.server is not None:
        return None  # the wheel server names a wheel it refused itself
    for path, locked in sorted(staged.served.items()):
        wheel = staged.wheels / PurePosixPath(path).name
        try:
            digest = sha256_file(wheel)
        except OSError:
            continue  # gone since the context was written: the build's own failure says what happened
        if digest != locked:
            return CheckFailed(wheel_mismatch(wheel, digest, locked), hint=WHEEL_MISMATCH_HINT)
    return None


def lay_context(staged: Staged, on_wheel: Callable[[str], None] | None = None, *,
                every_wheel: bool = False) -> dict[str, str]:
    """The build context written; the digest of each file in it. A wheel's sha256 is checked here unless the
    stage that installs it checks it (`served`); with `every_wheel` every wheel's is, as a bake needs: there one
    cell's wheel that lies would fail the whole bake, the other cells with it."""
    prep = staged.prepared
    unread = () if every_wheel else staged.served
    return write_context(prep.rendered, staged.wheels, staged.context, on_wheel,
                         served={f"groups/{k}" for k in unread},
                         distinct_times=prep.plan is not None and bool(prep.plan.mounts))


def build_image(req: BuildRequest, engine: Engine, *, on_wheel: Callable[[str], None] | None = None,
                on_step: Steps | None = None, on_fetch: Progress | None = None) -> Built:
    """Build and gate the image; raises `BuildFailed` (a CheckFailed) when a step or the gate fails."""
    staged = stage_build(req, engine, on_fetch=on_fetch)
    server = staged.server
    phases = Phases.over(on_step)  # the steps, then each phase after them with its time
    with server or contextlib.nullcontext():  # closed however the build ends (its port, its thread)
        digests = lay_context(staged, on_wheel)
        try:
            result = engine.build(staged.context, staged.image, phases, nocache=req.no_cache,
                                  proxy=server.proxy if server else None, cache_from=req.cache_from,
                                  buildargs=staged.buildargs, layout=staged.layout)
        except BuildFailed as exc:
            if server is not None and server.refused:
                raise CheckFailed(server.refused[0], hint=WHEEL_MISMATCH_HINT) from exc
            lie = _lying_wheel(staged)
            if lie is not None:
                raise lie from exc
            if server is not None and server.requests == 0 and exc.hint is None:
                exc.hint = (f"no install stage reached the wheel server at {server.where}; if this engine's "
                            "containers cannot reach this machine, build with --send-wheels")
            _raise_kept(req, staged.image, exc)
    try:
        return finish_build(req, staged, digests, result, engine, phases)
    except BuildFailed as exc:  # the app phase's build or gate ([image.app])
        _raise_kept(req, staged.image, exc)


def _raise_kept(req: BuildRequest, image: str, exc: BuildFailed) -> NoReturn:
    kept = keep_failed_step(req, image, exc)
    if kept is exc:
        raise exc
    raise kept from exc


FAILED_STEP = ".failed-step.log"  # RECORD_DIR/STACK.failed-step.log: the output of the step a build failed at


def failed_step_path(record_dir: Path, stack: str) -> Path:
    return record_dir / f"{stack}{FAILED_STEP}"


def keep_failed_step(req: BuildRequest, image: str, exc: BuildFailed) -> BuildFailed:
    """The failure, its step's whole output written beside where the build record would be (the error shows its
    last lines only: an installer's failure is often said further up), and the error naming that file."""
    if exc.kept is not None or not (exc.output or exc.log):
        return exc
    stack = req.prepared.stack.name
    path = failed_step_path(req.record_dir, stack)
    head = [f"stackctl build of {image} (stack {stack}, target {req.prepared.target}) failed at {now_iso()}",
            f"step: {exc.step or '(the builder named none)'}", f"error: {exc}", f"command: {req.command}", ""]
    try:
        write_atomic(path, "\n".join([*head, *(exc.output or exc.log)]) + "\n")
    except OSError:
        return exc  # the failure itself is what the user must see
    kept = BuildFailed(f"{exc}; the step's whole output is in {path}", exc.lines, exc.log, step=exc.step,
                       output=exc.output)
    kept.hint, kept.kept, kept.reason = exc.hint, path, exc.reason
    return kept


def finish_build(req: BuildRequest, staged: Staged, digests: Mapping[str, str], result: BuildResult,
                 engine: Engine, on_step: Steps | None = None) -> Built:
    """After the engine built the stack image: the app image on top where the profile has one, the artefact,
    and the build record with its fingerprint."""
    prep, image, base_facts = staged.prepared, staged.image, staged.base_facts
    stack = prep.stack
    phases = Phases.over(on_step)
    phases.phase("the built image's facts from the engine" + (", the gate's lines kept in it (its step was cached)"
                                                              if result.gate_cached else ""), "the image's facts")
    assert stack.image is not None
    all_inputs = {**dict(prep.profile_inputs), **file_inputs({"lock": req.lock}),
                  **{f"context:{k}": v for k, v in digests.items()}}
    fp = Fingerprint(stack.name, image, result.image_id, prep.revision, prep.ref,
                     prep.git.branch if prep.git else None, prep.git.revision if prep.git else None,
                     bool(prep.git and prep.git.dirty), stack.image.base, base_facts.id, base_facts.repo_digests,
                     tuple(sorted(all_inputs.items())))
    built = engine.facts(image)
    record = {"stack": stack.name, "time": now_iso(), "started": staged.started, "invocation": str(uuid.uuid4()),
              "command": req.command,
              "source": prep.git.remote if prep.git else None, "lock_digest": prep.lock.digest(),
              "profile_digest": stack.digest(), "labels": dict(built.labels) if built else {},
              "image": image, "image_id": result.image_id, "target": prep.target,
              "steps": result.steps, "cached_steps": result.cached_steps, "ran_steps": list(result.ran),
              "gate": list(kept_gate_lines(engine, image) if result.gate_cached else result.gate_lines),
              "gate_cached": result.gate_cached, "wheels": "served" if staged.server else "context",
              "builder": engine.builder,
              "engine": _versions(engine),
              "artefact": result.artefact.record() if result.artefact is not None else None,
              "wheels_how": staged.wheels_how,
              "warnings": [w for w in (prep.lock.override_warning(),) if w], "notes": [*prep.notes, *staged.notes],
              "fingerprint": fp, "fingerprint_digest": fp.digest(), "base_layers": list(base_facts.layers)}
    if stack.app is not None:
        app, fields = finish_app(prep, result, image, req.repository, staged.work, engine, req.no_cache, phases)
        record.update(fields)
        return _recorded(req, stack.name, app.image, app.result, record, engine, phases)
    else:
        record["gate_left"] = list(left_for_app(stack, prep.target))  # for `stackctl gate --image`
    return _recorded(req, stack.name, image, result, record, engine, phases)


def _recorded(req: BuildRequest, stack: str, image: str, result: BuildResult, record: dict[str, Any],
              engine: Engine, phases: Phases) -> Built:
    record_path = req.record_dir / f"{stack}.build.json"
    # The artefact publish copies to the registry: the image's OCI layout. BuildKit's exporter wrote it already
    # where the store allows (`writes_layout`). Elsewhere it is a copy of the engine's image, which costs what a
    # second export of the whole image does (the torch stack on 20.10: 25 s of an 82 s cold build, 9 s of a
    # 14 s rebuild): it is made when first needed (`made_artefact`: publish, verify --rebuild), from the image
    # this build made, and its digest is the same whenever it is made (`reproducible`).
    if not record.get("artefact"):
        record[PENDING] = _pending(engine, record["image_id"], req.record_dir / f"{stack}.oci")
    below = record.get("stack_image")
    if isinstance(below, dict) and not below.get("artefact"):  # [image.app]: the stack image, published first
        below[PENDING] = _pending(engine, below["image_id"], req.record_dir / f"{stack}.stack.oci")
    phases.phase(f"the build record {record_path}", "the record")
    try:
        write_atomic(record_path, dumps(record) + "\n")
    except OSError as exc:
        raise InputError(f"{record_path}: cannot write the build record of {image}: {exc.strerror or exc}") from None
    failed_step_path(req.record_dir, stack).unlink(missing_ok=True)  # an earlier failure's: this build passed it
    phases.done()
    return Built(image, result, record_path, record)


PENDING = "artefact_pending"  # a build record's: the OCI layout to copy out of the engine when first needed


def _pending(engine: Engine, image_id: str, layout: Path) -> dict[str, Any]:
    return {"image_id": image_id, "layout": str(layout), "engine": engine.url}


def layout_pending(build_record: Path, stack_image: bool = False) -> tuple[bool, str | None]:
    """Whether the build left its OCI layout to be made when first needed (its record's `artefact_pending`),
    and the URL of the engine holding the image to make it from (None: DOCKER_HOST's)."""
    _, entry = build_entry(build_record, stack_image)
    pending = entry.get(PENDING)
    if entry.get("artefact") or not isinstance(pending, dict):
        return False, None
    return True, str(pending["engine"]) if pending.get("engine") else None


def made_artefact(build_record: Path, engine: Engine, stack_image: bool = False) -> Artefact:
    """The build's artefact: the OCI layout its record names, made now where the build left it to be made (the
    image the build made, by id, copied out of `engine` and its config made reproducible), and the record
    rewritten to name it."""
    from stackctl.image.artefact import from_record
    from stackctl.image.layout import build_artefact

    data, entry = build_entry(build_record, stack_image)
    pending = entry.get(PENDING)
    if entry.get("artefact") or not isinstance(pending, dict):
        return from_record(entry.get("artefact"), str(build_record))
    image_id = str(pending.get("image_id") or "")
    if not image_id or engine.facts(image_id) is None:
        raise InputError(f"{build_record}: the build left its OCI layout to be copied out of the engine's image "
                         f"{image_id[:19]}, which the engine no longer holds", hint="run `stackctl build` again")
    artefact = build_artefact(engine, image_id, Path(str(pending["layout"])), dict(entry.get("labels") or {}))
    entry["artefact"] = artefact.record()
    del entry[PENDING]
    try:
        write_atomic(build_record, dumps(data) + "\n")
    except OSError as exc:
        raise InputError(f"{build_record}: cannot write the build record: {exc.strerror or exc}") from None
    return artefact
