"""What one run in one leg left behind, as values: the raw record `ab` keeps, and what verdicts read.

The runner in the leg (`legrun.py`) returns its exit status, output and the files the trial wrote; `read_run`
turns them into a `Run`: JUnit XML into per-node statuses, JSON lines into metric samples, outputs into
digests. Pure: bytes in, values out.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stackctl.ab.plan import Trial, TrialKind

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
MISSING = "missing"


@dataclass(frozen=True)
class Node:
    id: str  # classname::name, as the JUnit XML names the test case
    status: str  # passed | failed | skipped
    message: str = ""  # the failure's first line


@dataclass(frozen=True)
class Leg:
    """Where one side ran: an image on the engine, or an interpreter on the host."""

    role: str  # control | candidate
    stack: str
    profile: str  # as the user named it
    kind: str  # image | python
    ref: str  # the image reference, or the interpreter's path
    image_id: str | None = None
    digest: str | None = None  # a registry digest of the image, when it was pushed
    revision: str | None = None  # org.opencontainers.image.revision
    python: str = ""  # the interpreter's version, as the leg reported it
    devices: str = "none"  # how the leg was given its devices (the profile's [devices])
    device_name: str | None = None  # as the profile or the leg names it
    devices_seen: tuple[str, ...] = ()  # one line per device the leg saw: name, driver
    build_record: str | None = None  # the build record the image came from


@dataclass(frozen=True)
class Run:
    trial: str
    leg: str  # control | candidate
    order: int  # position in the trial's schedule (0, 1, 2, ...: control first)
    repetition: int  # within the leg
    rerun: int  # 0, or which rerun of a run with failures
    started: str
    seconds: float
    exit_status: int
    stdout: str = ""  # the tail
    stderr: str = ""
    nodes: tuple[Node, ...] = ()
    samples: tuple[tuple[str, tuple[float, ...]], ...] = ()
    outputs: tuple[tuple[str, str], ...] = ()  # file → sha256, or "missing"
    error: str | None = None  # why the run gave nothing to judge (timeout, no JUnit XML, ...)
    files: Mapping[str, str] = field(default_factory=dict, compare=False)  # raw JUnit / metrics text kept
    devices: tuple[str, ...] = ()  # the cards the run was given (CUDA_VISIBLE_DEVICES as it saw it, by UUID)
    node: str | None = None  # the cluster node it ran on (Ray node id and host); None: this machine

    def sample(self, metric: str) -> tuple[float, ...]:
        return next((v for k, v in self.samples if k == metric), ())


def parse_junit(text: str) -> tuple[Node, ...]:
    """Every test case of a JUnit XML document (pytest's --junitxml or any runner's), in document order."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    nodes: list[Node] = []
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        node = f"{classname}::{name}" if classname else name
        status, message = PASSED, ""
        for child in case:
            if child.tag in ("failure", "error"):
                status, message = FAILED, _first_line(child.get("message") or child.text or child.tag)
                break
            if child.tag == "skipped":
                status, message = SKIPPED, _first_line(child.get("message") or "")
        nodes.append(Node(node, status, message))
    return tuple(nodes)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def parse_metrics(text: str, names: tuple[str, ...]) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """Samples of each metric from JSON lines: every line that is a JSON object holding a metric's name with a
    finite number gives one sample of it; other lines (a benchmark's own chatter) are passed over."""
    found: dict[str, list[float]] = {n: [] for n in names}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        for n in names:
            v = doc.get(n)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                found[n].append(float(v))
    return tuple((n, tuple(v)) for n, v in found.items())


def read_run(trial: Trial, leg: str, order: int, repetition: int, rerun: int, started: str,
             result: Mapping[str, Any]) -> Run:
    """The runner's result document as a `Run` of `trial`."""
    import base64

    files: dict[str, bytes | None] = {}
    for name, data in dict(result.get("files") or {}).items():
        files[str(name)] = base64.b64decode(data) if isinstance(data, str) else None
    status = int(result.get("exit", -1))
    error = result.get("error") or None
    if result.get("timed_out"):
        error = f"did not finish in {trial.timeout} s"
    nodes: tuple[Node, ...] = ()
    samples: tuple[tuple[str, tuple[float, ...]], ...] = ()
    kept: dict[str, str] = {}
    if trial.kind is TrialKind.TESTS and error is None:
        junit = files.get(trial.junit)
        if junit is None:
            error = f"wrote no JUnit XML at {{out}}/{trial.junit} (exit {status})"
        else:
            text = junit.decode("utf-8", "replace")
            kept[trial.junit] = text
            try:
                nodes = parse_junit(text)
            except Exception as exc:
                error = f"{{out}}/{trial.junit} is not JUnit XML ({exc})"
    if trial.kind is TrialKind.BENCH:
        names = tuple(m.name for m in trial.metrics)
        if trial.metrics_from == "stdout":
            text = str(result.get("stdout", ""))
        else:
            raw = files.get(trial.metrics_from)
            text = raw.decode("utf-8", "replace") if raw is not None else ""
            kept[trial.metrics_from] = text
        samples = parse_metrics(text, names)
        if error is None and status != 0:
            error = f"exited {status}"
        if error is None and (empty := [n for n, v in samples if not v]):
            error = f"printed no sample of {', '.join(empty)}"
    outputs = tuple((o, hashlib.sha256(data).hexdigest() if (data := files.get(o)) is not None else MISSING)
                    for o in trial.outputs)
    return Run(trial.name, leg, order, repetition, rerun, started, float(result.get("seconds", 0.0)), status,
               _tail(str(result.get("stdout", ""))), _tail(str(result.get("stderr", ""))), nodes, samples, outputs,
               error, kept, tuple(str(d) for d in result.get("visible") or ()))


def _tail(text: str, limit: int = 16384) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]
