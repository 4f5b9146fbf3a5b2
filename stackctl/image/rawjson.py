"""BuildKit's build progress as buildx writes it with `--progress=rawjson`, folded into a `BuildResult`.

Pure: `parse_rawjson(text)` takes what buildx wrote on stderr and returns values. That text is a sequence of
JSON documents, each a BuildKit `SolveStatus` (`vertexes`, `statuses`, `logs`, `warnings`; a log's `data` is
base64), then, when the build failed, buildx's own lines for people (`ERROR: failed to solve: ...`). Each
vertex is a step; its log lines are kept together, in the order the steps first appeared, so the gate's
lines (the last step's) stay one block whatever ran beside them.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from stackctl.base.progress import Steps
from stackctl.errors import ServiceError
from stackctl.image.buildlog import (
    BuildFailed,
    BuildResult,
    brief_step,
    check_gate_verdict,
    clean_line,
    raise_if_gate_failed,
)

# A Dockerfile step's vertex: "[stage 2/9] RUN ..." or "[2/2] RUN ..."; "[internal] ..." and the exporter are not steps
_STEP = re.compile(r"^\[(?:[^\]\s]+ )?(\d+)/(\d+)\] (.*)", re.S)


@dataclass
class _Vertex:
    name: str
    cached: bool = False
    started: bool = False
    error: str | None = None
    lines: list[str] = field(default_factory=list)
    partial: dict[int, str] = field(default_factory=dict)  # stream → the text after its last newline


@dataclass(frozen=True)
class Stream:
    """What the documents said, before any verdict: the steps in order, and buildx's closing text."""

    vertices: tuple[tuple[str, bool, str | None, tuple[str, ...]], ...]  # (name, cached, error, lines)
    trailer: tuple[str, ...]  # buildx's lines after the documents (its error message)


def documents(text: str) -> tuple[list[dict[str, Any]], str]:
    """The JSON documents at the head of `text`, and the text after the last one."""
    decoder = json.JSONDecoder()
    docs: list[dict[str, Any]] = []
    at, end = 0, len(text)
    while True:
        while at < end and text[at].isspace():
            at += 1
        if at >= end or text[at] != "{":
            return docs, text[at:]
        try:
            doc, at = decoder.raw_decode(text, at)
        except ValueError:
            return docs, text[at:]
        if isinstance(doc, dict):
            docs.append(doc)


class Folder:
    """The vertices of the status documents as they arrive (a vertex is sent again each time it changes: the
    last word wins), each with its log lines; `on_step(n, of, name)` as each Dockerfile step starts, and
    `on_phase(name)` as a vertex after the steps (the exporters: "exporting to oci image format") or one of its
    statuses ("exporting layers", "unpacking to ...") starts, so a log names where the seconds after the last
    step go."""

    def __init__(self, on_step: Steps | None = None, on_phase: Callable[[str], None] | None = None) -> None:
        self._vertices: dict[str, _Vertex] = {}
        self._started = 0
        self._on_step = on_step
        self._on_phase = on_phase
        self._phases: set[str] = set()  # the vertices said as phases
        self._statuses: set[tuple[str, str]] = set()

    def feed(self, doc: dict[str, Any]) -> None:
        vertices = self._vertices
        for raw in doc.get("vertexes") or ():
            if not isinstance(raw, dict) or not isinstance(raw.get("digest"), str):
                continue
            v = vertices.setdefault(raw["digest"], _Vertex(str(raw.get("name") or "")))
            v.name = str(raw.get("name") or v.name)
            v.cached = v.cached or bool(raw.get("cached"))
            if raw.get("error"):
                v.error = clean_line(str(raw["error"]))
            step = _STEP.match(v.name)
            if raw.get("started") and not v.started:
                v.started = True
                if step is not None:
                    self._started += 1
                    if self._on_step is not None:  # BuildKit names every vertex of the solve at its start
                        total = sum(1 for x in vertices.values() if _STEP.match(x.name))
                        self._on_step(self._started, max(total, self._started), brief_step(v.name))
                elif self._on_phase is not None and self._started and not v.name.startswith("["):
                    # not a step, nor BuildKit's own ("[internal] ...", "[context NAME] ..."): an exporter
                    self._phases.add(raw["digest"])
                    self._on_phase(clean_line(v.name))
        for raw in doc.get("statuses") or ():  # a phase's parts: "exporting layers", "unpacking to ..."
            if not isinstance(raw, dict) or raw.get("vertex") not in self._phases or not raw.get("started"):
                continue
            key = (str(raw["vertex"]), str(raw.get("id") or ""))
            if key not in self._statuses and self._on_phase is not None:
                self._statuses.add(key)
                self._on_phase(clean_line(_short_digests(key[1])))
        for log in doc.get("logs") or ():
            if not isinstance(log, dict) or not isinstance(log.get("vertex"), str):
                continue
            v = vertices.setdefault(log["vertex"], _Vertex(""))
            try:
                data = base64.b64decode(str(log.get("data") or ""), validate=True).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                continue
            stream = int(log.get("stream") or 1)
            *lines, rest = (v.partial.get(stream, "") + data).split("\n")
            v.partial[stream] = rest
            v.lines.extend(clean_line(x) for x in lines)

    def stream(self, trailer: str = "") -> Stream:
        out = []
        for v in self._vertices.values():
            tail = [clean_line(p) for p in v.partial.values() if p]
            out.append((v.name, v.cached, v.error, tuple(v.lines + tail)))
        return Stream(tuple(out), tuple(clean_line(x) for x in trailer.splitlines() if x.strip()))


def _short_digests(text: str) -> str:
    return re.sub(r"(sha256:[0-9a-f]{12})[0-9a-f]{52}", r"\1", text)


def fold(docs: Iterable[dict[str, Any]], trailer: str = "", on_step: Steps | None = None) -> Stream:
    folder = Folder(on_step)
    for doc in docs:
        folder.feed(doc)
    return folder.stream(trailer)


def result_of(stream: Stream, image_id: str, ok: bool) -> BuildResult:
    """The build's result from its steps; raises BuildFailed when a step (the gate's above all) failed or the
    gate's result says a check failed, as the classic path's `parse_build_stream` does."""
    steps = [v for v in stream.vertices if _STEP.match(v[0])]
    log: list[str] = []
    for _name, _, _, lines in stream.vertices:
        log.extend(lines)
    # the step that failed, not those BuildKit cancelled because it did
    errors = [v for v in stream.vertices if v[2]]
    failed = next((v for v in errors if "canceled" not in (v[2] or "")), errors[0] if errors else None)
    if failed is not None or not ok:
        step, output = (failed[0], failed[3]) if failed is not None else ("", tuple(log) + stream.trailer)
        try:
            raise_if_gate_failed(log)
        except BuildFailed as exc:
            raise exc.of_step(step, output) from None
        error = next((ln.removeprefix("ERROR: ") for ln in reversed(stream.trailer) if ln.startswith("ERROR: ")),
                     failed[2] if failed is not None else "buildx exited with an error")
        last = tuple(ln for ln in (failed[3] if failed is not None else tuple(log))[-15:] if ln.strip())
        if failed is None:
            last = last or stream.trailer[-15:]
        raise BuildFailed(f"the build failed: {error}", last, tuple(log), step=step, output=output)
    check_gate_verdict(log)
    if not image_id:
        raise ServiceError("buildx finished the build without naming an image")
    cached = sum(1 for v in steps if v[1])
    ran = tuple(brief_step(v[0]) for v in steps if not v[1])
    return BuildResult(image_id, tuple(log), len(steps), cached, ran=ran)


def parse_rawjson(text: str, image_id: str, ok: bool, on_step: Steps | None = None) -> BuildResult:
    """`text`: buildx's stderr under `--progress=rawjson`; `ok`: whether buildx exited 0."""
    docs, trailer = documents(text)
    return result_of(fold(docs, trailer, on_step), image_id, ok)


__all__ = ["Folder", "Stream", "documents", "fold", "parse_rawjson", "result_of"]
