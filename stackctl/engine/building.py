"""`stackctl build PROFILE` as one call (`build_stack`), and which builder it runs on, chosen in one place:
`--builder auto|buildkit|classic` (or STACKCTL_BUILDER).

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
from typing import TYPE_CHECKING

from stackctl.base.annotations import Level
from stackctl.base.progress import Progress, Steps
from stackctl.errors import InputError

if TYPE_CHECKING:
    from stackctl.engine.buildx import BuildxEngine
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.build import Built
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
    engine = BuildxEngine(docker, url)
    if name == "auto" and not engine.reproducible:
        if say is not None:
            say(f"builder: classic (the engine API's): the BuildKit of Docker {engine.server_version} gives no "
                "reproducible digest; --builder buildkit builds with it all the same")
        return docker
    return engine



@dataclass(frozen=True)
class BuildOptions:
    """`stackctl build PROFILE`'s options as given; `index` the raw NAME=URL overrides."""

    profile: str
    lock: Path | None = None
    target: str | None = None
    wheelhouse: Path | None = None
    index: tuple[str, ...] = ()
    context: Path | None = None
    repository: str | None = None
    allow_dirty: bool = False
    revision: str | None = None
    ref: str | None = None
    created: str | None = None
    record_dir: Path = Path("build")
    no_cache: bool = False
    send_wheels: bool = False
    command: str = ""  # the command line as given (no credentials), kept in the build record for `report`
    builder: str | None = None


@dataclass(frozen=True)
class BuildProgress:
    """Where a build reports as it goes: wheels fetched, each wheel written into the context, each build step
    as the builder starts it."""

    fetch: Progress | None = None
    wheel: Callable[[str], None] | None = None
    step: Steps | None = None


# A line for the user: `None` says what was chosen (the builder), NOTICE a note, WARNING a warning.
Say = Callable[[str, "Level | None"], None]
# Entered around the build itself, once the stack is prepared and the engine reached: given the stack and the
# image's ref, it gives the build's progress callbacks (the caller's display) and sees a failure go by.
Watch = Callable[["Stack", "ImageRef"], AbstractContextManager[BuildProgress]]


def build_stack(options: BuildOptions, *, say: Say, watch: Watch | None = None,
                env: Mapping[str, str] | None = None) -> Built:
    """Build and gate the profile's image on the engine (DOCKER_HOST's) with the builder `options` choose:
    the profile loaded and its lock rendered first, then the engine reached (so an unreachable one fails
    before any download), the lock's and the render's notes said, and the build run inside `watch`.
    Raises `BuildFailed` (a CheckFailed) when a step or the gate fails."""
    from stackctl.image.build import BuildRequest, build_image
    from stackctl.image.labels import image_ref
    from stackctl.image.prepare import prepare_build
    from stackctl.index.config import parse_overrides
    from stackctl.profile.locate import load_profile
    from stackctl.resolve.lock import lock_path

    path = lock_path(options.profile, options.lock)
    prep = prepare_build(load_profile(options.profile), path, options.target, options.revision, options.ref,
                         options.created, options.allow_dirty, os.environ if env is None else env)
    # before any download: an unreachable engine fails at once
    engine = open_engine(options.builder, say=lambda line: say(line, None))
    if (said := prep.lock.override_warning()) is not None:
        say(said, Level.WARNING)
    for note in prep.notes:
        say(note, Level.NOTICE)
    req = BuildRequest(prep, path, options.repository, options.wheelhouse, options.context, options.record_dir,
                       options.no_cache, parse_overrides(options.index), options.send_wheels, options.command)
    around = watch(prep.stack, image_ref(prep.stack, options.repository)) if watch else nullcontext(BuildProgress())
    with around as progress:
        return build_image(req, engine, on_wheel=progress.wheel, on_step=progress.step, on_fetch=progress.fetch)
