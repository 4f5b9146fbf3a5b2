"""`stackctl build`: one order (`BuildOrder`) for a single build and for `build --all`, its cells prepared by
the image stage's `matrix_cells` (each profile resolved once), and which builder each engine runs, chosen in
one place: `--builder auto|buildkit|classic` (or STACKCTL_BUILDER).

auto: BuildKit (`docker buildx build`) when the buildx plugin runs and the engine is Docker 23 or later; else the
classic builder of the engine API, with one line saying why. The BuildKit embedded in Docker 20.10 (v0.8) builds
the rendered Dockerfile (the wheels bind-mounted from the main context), but two --no-cache builds of one
revision give different layers there (it knows no SOURCE_DATE_EPOCH), so `verify --rebuild` could not reproduce
the image: on 20.10 auto keeps the classic builder, and --builder buildkit is the user's own choice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackctl.base.annotations import Level
from stackctl.base.progress import BuildProgress, Steps
from stackctl.errors import InputError
from stackctl.image.gaterun import GateLine, gate_lines
from stackctl.image.order import BuildOrder

if TYPE_CHECKING:
    from stackctl.engine.buildx import BuildxEngine
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.build import Built
    from stackctl.image.context import WrittenContext
    from stackctl.image.labels import ImageRef
    from stackctl.profile.model import Stack

BUILDERS = ("auto", "buildkit", "classic")


def chosen_builder(given: str | None, env: Mapping[str, str] | None = None) -> str:
    """The builder asked for: the option, else STACKCTL_BUILDER, else auto."""
    env = os.environ if env is None else env
    name = (given or env.get("STACKCTL_BUILDER") or "auto").strip().lower()
    if name not in BUILDERS:
        where = "--builder" if given else "STACKCTL_BUILDER"
        raise InputError(f"{where} {name!r}: pick one of {', '.join(BUILDERS)}")
    return name


def open_engine(builder: str | None = None, *, url: str | None = None,
                say: Callable[[str], None] | None = None) -> DockerEngine | BuildxEngine:
    """The engine to build on (DOCKER_HOST's, or `url`), with the builder chosen: it is reached first, so an
    unreachable engine fails before any download."""
    from stackctl.engine.docker import DockerEngine

    name = chosen_builder(builder)
    return with_builder(DockerEngine(url), name, url=url, say=say)


def with_builder(docker: DockerEngine, name: str, *, url: str | None = None,
                 say: Callable[[str], None] | None = None) -> DockerEngine | BuildxEngine:
    """A reached engine with the builder `name` (a `chosen_builder`) put in front: BuildKit where buildx runs
    and, for auto, the engine is Docker 23 or later; else the engine API's classic builder."""
    from stackctl.engine.buildx import BuildxEngine, buildx_version

    if name == "classic":
        return docker
    version = buildx_version({**os.environ, **({"DOCKER_HOST": url} if url else {})})
    if version is None:
        if name == "buildkit":
            raise InputError("--builder buildkit: `docker buildx version` does not run here",
                             hint="install the docker-buildx plugin, or build with --builder classic")
        if say is not None:
            say("builder: classic (the engine API's): `docker buildx version` does not run here, so BuildKit is "
                "out of reach")
        return docker
    engine = BuildxEngine(docker, url, version)
    if name == "auto" and not engine.reproducible:
        if say is not None:
            say(f"builder: classic (the engine API's): the BuildKit of Docker {engine.server_version} gives no "
                "reproducible digest; --builder buildkit builds with it all the same")
        return docker
    return engine


# A line for the user: `None` says what was chosen (the builder), NOTICE a note, WARNING a warning.
Say = Callable[[str, "Level | None"], None]
# Entered around the build itself, once the stack is prepared and the engine reached: given the stack and the
# image's ref, it gives the build's progress callbacks (the caller's display) and sees a failure go by.
Watch = Callable[["Stack", "ImageRef"], AbstractContextManager[BuildProgress]]


@dataclass(frozen=True)
class StackImage:
    """Under [image.app]: the stack image beneath the project's, built (and gated) first."""

    image: str
    image_id: str
    gate_cached: bool


@dataclass(frozen=True)
class BuildReport:
    """A single build, as `stackctl build` shows it; `record` is the build record as written (its JSON)."""

    stack: str
    profile: str  # the PROFILE argument as given (what a hint says to run)
    image: str  # repository:tag
    image_id: str
    record_path: Path
    gate: tuple[GateLine, ...]  # the gate's lines: this run's, or those the image kept from the run that passed it
    gate_cached: bool
    gate_left: tuple[str, ...]  # entries left to the app phase (`gate --image`)
    wheels_how: str
    steps: int
    cached_steps: int
    ran: tuple[str, ...]  # the steps a rebuild ran, by their instruction
    stack_image: StackImage | None
    record: Mapping[str, Any]

    @classmethod
    def of(cls, built: Built, profile: str) -> BuildReport:
        record, result = built.record, built.result
        below = record.get("stack_image")
        return cls(str(record["stack"]), profile, built.image, result.image_id, built.record_path,
                   gate_lines(record["gate"]), result.gate_cached, tuple(record.get("gate_left") or ()),
                   str(record["wheels_how"]), result.steps, result.cached_steps, tuple(result.ran),
                   StackImage(below["image"], below["image_id"], bool(below["gate_cached"])) if below else None,
                   record)


def check_single(order: BuildOrder) -> None:
    """A single build names one profile, at most one target, and no cluster."""
    if len(order.profiles) != 1 or len(order.targets) > 1 or order.cluster or order.cache_repository:
        raise InputError("build: give one PROFILE and at most one --target; --cluster and --cache-repository "
                         "go with --all")


def build_stack(order: BuildOrder, *, say: Say, watch: Watch | None = None,
                env: Mapping[str, str] | None = None) -> BuildReport:
    """`stackctl build PROFILE`: a one-cell matrix (`build --all`'s cells and pipeline, sharing nothing) over
    DOCKER_HOST's engine, reached with the builder the order chooses before any download; the lock's and the
    render's notes said, and the build run inside `watch`. Raises the cell's failure as its build raised it:
    `BuildFailed` (a CheckFailed) when a step or the gate fails."""
    from stackctl.image.context import check_wheelhouse_arg
    from stackctl.image.labels import image_ref
    from stackctl.image.matrix import MatrixRequest, build_matrix, matrix_cells

    check_wheelhouse_arg(order.wheelhouse, order.fetch)
    check_single(order)
    (cell,) = matrix_cells(order, os.environ if env is None else env)
    prep = cell.prepared
    # before any download: an unreachable engine fails at once
    engine = open_engine(order.builder, say=lambda line: say(line, None))
    if (said := prep.lock.override_warning()) is not None:
        say(said, Level.WARNING)
    for note in prep.notes:
        say(note, Level.NOTICE)
    # The user chose the engine (DOCKER_HOST): the cell goes to it whatever machine its target names.
    target = prep.stack.target(prep.target)
    req = MatrixRequest((cell,), target.machine if target is not None else "x86_64", order=order)
    around = watch(prep.stack, image_ref(prep.stack, order.repository)) if watch else nullcontext(BuildProgress())
    with around as progress:
        (outcome,) = build_matrix(req, HERE, engine, _unsaid, lambda _engine, _cell: progress).outcomes
        if outcome.error is not None:
            raise outcome.error
    assert outcome.built is not None  # a cell without an error was built
    return BuildReport.of(outcome.built, order.profiles[0])


HERE = "DOCKER_HOST"  # the one engine of a single build's matrix


def _unsaid(_engine: str, _cell: str, _what: str) -> None:
    """A single build's matrix events: its progress and its report say what they would."""


def image_tag(profile: str, repository: str | None = None) -> ImageRef:
    """`stackctl tag`: the image reference the profile's template gives."""
    from stackctl.image.labels import image_ref
    from stackctl.profile.locate import load_profile

    return image_ref(load_profile(profile), repository)


def render_profile(profile: str, out: Path, lock: Path | None = None, *, target: str | None = None,
                   wheelhouse: Path | None = None, revision: str | None = None, ref: str | None = None,
                   created: str | None = None, env: Mapping[str, str] | None = None,
                   on_wheel: Steps | None = None) -> WrittenContext:
    """`stackctl render`: the build context of the profile (its lock `lock`, else the one beside it) in `out`."""
    from stackctl.base.files import check_output
    from stackctl.image.context import render_context
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.lock import lock_path

    check_output(out, "--out", directory=True)
    stack = stack_ref(profile)
    return render_context(stack.stack, lock_path(stack, lock), out, target=target, wheelhouse=wheelhouse,
                          revision=revision, ref=ref, created=created, env=os.environ if env is None else env,
                          on_wheel=on_wheel)
