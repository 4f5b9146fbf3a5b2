"""What a build gives back, and the `Engine` Protocol the image stage builds, pushes and pulls through.

The one real adapter is `stackctl.engine.docker.DockerEngine`; the fold of the engine's build stream into
a `BuildResult` is pure and lives here, beside the result it makes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from stackctl.base.progress import Steps
from stackctl.base.words import count
from stackctl.errors import CheckFailed, ServiceError

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)")


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


Progress = Steps  # step, of steps, instruction (the one shape, in base.progress)


class Engine(Protocol):
    def build(self, context: Path, tag: str, on_step: Progress | None = None, *,
              nocache: bool = False) -> BuildResult: ...
    def facts(self, ref: str) -> ImageFacts | None: ...
    def push(self, repository: str, tag: str) -> str: ...
    def pull(self, ref: str) -> ImageFacts: ...
    def remove(self, ref: str) -> None: ...
    def tag(self, source: str, repository: str, tag: str) -> None: ...


# Terminal escapes a build step printed (pip's and apt's colours: `\x1b[91m`): the log is shown in CI
# logs and stored in files, where they are noise; CSI sequences and OSC strings both.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


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
                line = strip_ansi(line.rstrip("\r"))
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
                log.append(strip_ansi(partial))
            error = strip_ansi(str(ev.get("errorDetail", {}).get("message") or ev["error"])).strip()
            fails = tuple(line for line in log if line.startswith("FAIL "))
            if fails:
                raise BuildFailed(f"the gate failed: {count(len(fails), 'check')} did not pass", fails, tuple(log))
            last = tuple(line for line in log[-15:] if line.strip())
            raise BuildFailed(f"the build failed: {error}", last, tuple(log))
    if partial:
        log.append(strip_ansi(partial))
    if not image_id:
        built = [m.group(1) for x in log if (m := re.match(r"Successfully built ([0-9a-f]+)", x))]
        image_id = built[-1] if built else ""
    if not image_id:
        raise ServiceError("the engine finished the build without naming an image id")
    return BuildResult(image_id, tuple(log), steps, cached)
