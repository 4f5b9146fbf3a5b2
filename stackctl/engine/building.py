"""Which builder a build runs on, chosen in one place: `--builder auto|buildkit|classic` (or STACKCTL_BUILDER).

auto: BuildKit (`docker buildx build`) when the buildx plugin runs and the engine is Docker 23 or later; else the
classic builder of the engine API, with one line saying why. The BuildKit embedded in Docker 20.10 (v0.8) builds
the rendered Dockerfile (the wheels bind-mounted from the main context), but two --no-cache builds of one
revision give different layers there (it knows no SOURCE_DATE_EPOCH), so `verify --rebuild` could not reproduce
the image: on 20.10 auto keeps the classic builder, and --builder buildkit is the user's own choice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from stackctl.errors import InputError

if TYPE_CHECKING:
    from stackctl.engine.buildx import BuildxEngine
    from stackctl.engine.docker import DockerEngine

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
