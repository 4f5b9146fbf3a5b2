"""The edges the image stage works through: an engine that builds, pushes and pulls; the wheel server a
build's install stages fetch from; a registry's API.

Each has one real adapter in `stackctl.engine` (`DockerEngine`, `WheelServer`, `Registry`); tests give
fakes that implement the same Protocol where a real engine or registry is not the point.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from stackctl.base.progress import Steps

if TYPE_CHECKING:
    from stackctl.image.buildlog import BuildResult, ImageFacts


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


class Engine(Protocol):
    def build(self, context: Path, tag: str | None, on_step: Steps | None = None, *,
              nocache: bool = False, proxy: str | None = None, buildargs: Mapping[str, str] | None = None,
              dockerfile: Path | None = None, target: str | None = None,
              layout: Path | None = None) -> BuildResult: ...
    def run_with_files(self, image: str, files: Mapping[str, bytes], argv: list[str], *, fetch: str | None = None,
                       timeout: float = 600.0) -> tuple[int, str, str, bytes | None]: ...
    # a server, or why the wheels cannot be served (then they go in the context); None: the engine serves none
    def wheel_server(self, root: Path, sha256: Mapping[str, str]) -> WheelServing | str | None: ...
    def facts(self, ref: str) -> ImageFacts | None: ...
    def push(self, repository: str, tag: str) -> str: ...
    def pull(self, ref: str) -> ImageFacts: ...
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
