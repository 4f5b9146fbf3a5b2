"""The Docker engine edge: build, inspect, push, pull, remove, behind a small Protocol.

`DockerEngine` is the one real adapter (the docker SDK, engine from `DOCKER_HOST`); nothing else in
stackctl imports docker. Every SDK and API error is wrapped here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from stackctl.errors import CheckFailed, InputError, ServiceError

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)")
SILENT_STEP_LIMIT = 3 * 3600  # seconds a build step may go without output before the engine counts as lost


@dataclass(frozen=True)
class ImageFacts:
    id: str
    labels: tuple[tuple[str, str], ...]
    repo_digests: tuple[str, ...]
    size: int
    layers: tuple[str, ...] = ()

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    log: tuple[str, ...]
    steps: int
    cached_steps: int

    @property
    def gate_lines(self) -> tuple[str, ...]:
        return tuple(line for line in self.log if line.startswith(("PASS ", "FAIL ", "gate ")))

    @property
    def gate_cached(self) -> bool:
        """The gate's step came from the cache: an earlier build of the very same layers passed it."""
        return not any(line.startswith(("gate ok: ", "gate FAILED: ")) for line in self.log)


class BuildFailed(CheckFailed):
    """The build ran and a step failed; `lines` are what the user must see (the gate's FAIL lines first)."""

    def __init__(self, message: str, lines: tuple[str, ...], log: tuple[str, ...]) -> None:
        super().__init__(message)
        self.lines = lines
        self.log = log


Progress = Callable[[int, int, str], None]  # step, of steps, instruction


class Engine(Protocol):
    def build(self, context: Path, tag: str, on_step: Progress | None = None, *,
              nocache: bool = False) -> BuildResult: ...
    def facts(self, ref: str) -> ImageFacts | None: ...
    def push(self, repository: str, tag: str) -> str: ...
    def pull(self, ref: str) -> ImageFacts: ...
    def remove(self, ref: str) -> None: ...


def parse_build_stream(events: Iterator[dict[str, Any]], on_step: Progress | None = None) -> BuildResult:
    """Fold the engine's JSON build stream into a result; raise BuildFailed on an error event."""
    log: list[str] = []
    image_id = ""
    steps = cached = 0
    partial = ""
    for ev in events:
        if "stream" in ev:
            partial += ev["stream"]
            *lines, partial = partial.split("\n")
            for line in lines:
                line = line.rstrip("\r")
                log.append(line)
                m = _STEP.match(line)
                if m:
                    steps = int(m.group(2))
                    if on_step:
                        on_step(int(m.group(1)), steps, m.group(3))
                elif line.strip() == "---> Using cache":
                    cached += 1
        elif "aux" in ev and isinstance(ev["aux"], dict) and "ID" in ev["aux"]:
            image_id = ev["aux"]["ID"]
        elif "error" in ev:
            if partial:
                log.append(partial)
            error = str(ev.get("errorDetail", {}).get("message") or ev["error"]).strip()
            fails = tuple(line for line in log if line.startswith("FAIL "))
            if fails:
                raise BuildFailed(f"the gate failed: {len(fails)} check(s) did not pass", fails, tuple(log))
            last = tuple(line for line in log[-15:] if line.strip())
            raise BuildFailed(f"the build failed: {error}", last, tuple(log))
    if partial:
        log.append(partial)
    if not image_id:
        built = [m.group(1) for x in log if (m := re.match(r"Successfully built ([0-9a-f]+)", x))]
        image_id = built[-1] if built else ""
    if not image_id:
        raise ServiceError("the engine finished the build without naming an image id")
    return BuildResult(image_id, tuple(log), steps, cached)


class DockerEngine:
    def __init__(self) -> None:
        import docker
        import docker.errors
        import requests
        import urllib3.exceptions

        self._errors = docker.errors
        # The SDK reads build, push and pull streams from urllib3 directly: its errors arrive unwrapped.
        self._lost = (docker.errors.DockerException, requests.RequestException, urllib3.exceptions.HTTPError)
        try:
            self._client = docker.from_env(version="auto", timeout=600)
            self._client.ping()
        except self._lost as exc:
            raise ServiceError(f"cannot reach the Docker engine (DOCKER_HOST or /var/run/docker.sock): {exc}",
                               hint="start the engine (`bash .ci/services.sh`) or set DOCKER_HOST") from exc

    @property
    def client(self) -> Any:
        return self._client

    @contextmanager
    def talking(self, what: str) -> Iterator[None]:
        """Every SDK error, and the connection dropping mid-stream, as one ServiceError."""
        try:
            yield
        except self._errors.APIError as exc:
            raise ServiceError(f"{what}: {exc.explanation or exc}") from exc
        except self._lost as exc:
            raise ServiceError(f"{what}: lost the engine: {type(exc).__name__}: {exc}") from exc

    def build(self, context: Path, tag: str, on_step: Progress | None = None, *,
              nocache: bool = False) -> BuildResult:
        with self.talking(f"build of {tag}"):
            # A step may print nothing for long (pip unpacking a multi-GB torch wheel, the engine committing
            # its layer): the client's 600 s read timeout would cut a healthy build's stream.
            events = self._client.api.build(path=str(context), tag=tag, rm=True, forcerm=True, decode=True,
                                            pull=False, nocache=nocache, timeout=SILENT_STEP_LIMIT)
            return parse_build_stream(events, on_step)

    def facts(self, ref: str) -> ImageFacts | None:
        with self.talking(f"cannot inspect {ref}"):
            try:
                attrs = self._client.api.inspect_image(ref)
            except self._errors.ImageNotFound:
                return None
        config = attrs.get("Config") or {}
        return ImageFacts(
            id=attrs["Id"],
            labels=tuple(sorted((config.get("Labels") or {}).items())),
            repo_digests=tuple(attrs.get("RepoDigests") or ()),
            size=int(attrs.get("Size") or 0),
            layers=tuple((attrs.get("RootFS") or {}).get("Layers") or ()),
        )

    def push(self, repository: str, tag: str) -> str:
        """Push with the Docker config's credentials (the SDK reads them; nothing here prints them)."""
        digest = None
        with self.talking(f"push of {repository}:{tag} failed"):
            for ev in self._client.api.push(repository, tag=tag, stream=True, decode=True):
                if "error" in ev:
                    msg = str(ev.get("errorDetail", {}).get("message") or ev["error"]).strip()
                    raise ServiceError(f"push of {repository}:{tag} failed: {msg}")
                aux = ev.get("aux")
                if isinstance(aux, dict) and aux.get("Digest"):
                    digest = str(aux["Digest"])
        if not digest:
            raise ServiceError(f"push of {repository}:{tag} reported no digest")
        return digest

    def pull(self, ref: str) -> ImageFacts:
        repo, _, digest = ref.partition("@")
        if not digest:
            raise InputError(f"{ref}: pull back needs a digest reference")
        with self.talking(f"pull of {ref} failed"):
            for ev in self._client.api.pull(repo, tag=digest, stream=True, decode=True):
                if "error" in ev:
                    raise ServiceError(f"pull of {ref} failed: {ev['error']}")
        facts = self.facts(ref)
        if facts is None:
            raise ServiceError(f"pull of {ref} finished but the engine has no such image")
        return facts

    def remove(self, ref: str) -> None:
        with self.talking(f"cannot remove {ref}"), suppress(self._errors.ImageNotFound):
            self._client.api.remove_image(ref, force=True, noprune=False)

    def tag(self, source: str, repository: str, tag: str) -> None:
        with self.talking(f"cannot tag {source} as {repository}:{tag}"):
            self._client.api.tag(source, repository, tag=tag)
