"""The edges the image stage works through: an engine that builds, pushes and pulls; the wheel server a
build's install stages fetch from; a registry's API.

Each has one real adapter in `stackctl.engine` (`DockerEngine` and `BuildxEngine`, `WheelServer`, `Registry`);
tests give fakes that implement the same Protocol where a real engine or registry is not the point.

What an engine can do is declared on it, as buildx's drivers declare their features: which builder it runs
(`builder`), how its install stages get their wheels (`mounts`, or the classic builder's wheel server through
`wheel_serving`), whether its build writes the OCI layout itself (`writes_layout`), whether it builds a queue
of images as one bake (`baking`) and what it is (`versions`). The build reads these; it never probes an adapter
for attributes it may lack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from stackctl.base.progress import Steps

if TYPE_CHECKING:
    from stackctl.image.artefact import Artefact
    from stackctl.image.bakefile import Baked, BakeTarget
    from stackctl.image.buildlog import BuildResult, ImageFacts

Builder = Literal["classic", "buildkit"]  # the engine API's builder, or BuildKit through `docker buildx build`
# How BuildKit's install stages mount their wheels: from a named context a group (Dockerfile frontend 1.4,
# Docker 23), or from the main context; "": they do not mount them (the classic builder)
Mounts = Literal["", "named", "context"]


class WheelServing(Protocol):
    """A running wheel server (engine.wheelserver): `proxy` goes to the build as `http_proxy` (it carries the
    build's password: `where` is what a message may name)."""

    proxy: str
    where: str
    requests: int
    refused: list[str]  # wheels whose bytes were not the lock's
    how: str  # the address in words: how the engine's containers reach it

    def __enter__(self) -> WheelServing: ...
    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


class ServesWheels(Protocol):
    """The classic builder's way to the wheels: its install stages fetch them over HTTP from a server on this
    machine (BuildKit's bind-mount them from the context instead)."""

    # a server, or why the wheels cannot be served (then they go in the context)
    def wheel_server(self, root: Path, sha256: Mapping[str, str]) -> WheelServing | str: ...


class Bakes(Protocol):
    """BuildKit's way to build many images at once: one `docker buildx bake` over a queue of targets, the stages
    they share built once (engine/bake.py)."""

    @property
    def registry_cache(self) -> bool: ...  # whether its builder exports the cache to a registry

    def named_contexts(self, context: Path, given: Mapping[str, Path] | None = None) -> dict[str, Path]: ...
    def bake(self, targets: Sequence[BakeTarget], on_step: Callable[[str], Steps | None],
             on_event: Callable[[str, str], None]) -> Mapping[str, Baked]: ...


class Engine(Protocol):
    @property
    def builder(self) -> Builder: ...
    @property
    def mounts(self) -> Mounts: ...
    @property
    def writes_layout(self) -> bool: ...  # `build(layout=...)` writes the image's OCI layout (BuildKit's exporter)
    @property
    def wheel_serving(self) -> ServesWheels | None: ...  # None: the install stages need no wheel server
    @property
    def baking(self) -> Bakes | None: ...  # None: it builds one image at a time
    @property
    def url(self) -> str | None: ...  # where it was reached (None: DOCKER_HOST's); a later command reaches it again
    def versions(self) -> Mapping[str, str]: ...  # what builds: for the provenance (engine, API, builder, buildx)
    def layout(self, image: str, dest: Path) -> Artefact: ...  # the engine's image copied into an OCI layout
    # `cache_from`: images whose steps the build may take as cached (the registry's stage images of a matrix)
    def build(self, context: Path, tag: str | None, on_step: Steps | None = None, *,
              nocache: bool = False, proxy: str | None = None, cache_from: Sequence[str] = (),
              buildargs: Mapping[str, str] | None = None, dockerfile: Path | None = None,
              target: str | None = None, layout: Path | None = None) -> BuildResult: ...
    def run_with_files(self, image: str, files: Mapping[str, bytes], argv: list[str], *, fetch: str | None = None,
                       timeout: float = 600.0) -> tuple[int, str, str, bytes | None]: ...
    def facts(self, ref: str) -> ImageFacts | None: ...
    def push(self, repository: str, tag: str) -> str: ...
    def remove(self, ref: str) -> None: ...
    def tag(self, source: str, repository: str, tag: str) -> None: ...


class RegistryApi(Protocol):
    def manifest(self, repository: str, reference: str) -> tuple[str, bytes] | None: ...
    def blob(self, repository: str, digest: str) -> bytes: ...
    def layer(self, repository: str, digest: str) -> tuple[str, int]: ...
    def layer_files(self, repository: str, digest: str, wanted: tuple[str, ...]) -> dict[str, bytes]: ...
    def put_blob(self, repository: str, data: bytes) -> str: ...
    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> str: ...
    def referrers(self, repository: str, digest: str) -> list[dict[str, Any]] | None: ...
