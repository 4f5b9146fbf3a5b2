"""What a build gives back: the fold of the engine's build stream into a `BuildResult` is pure and lives
here, beside the result it makes (the `Engine` it comes from is in `stackctl.image.protocols`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackctl.base.annotations import Annotation, Level
from stackctl.base.progress import Steps
from stackctl.base.words import count
from stackctl.errors import CheckFailed, ServiceError

if TYPE_CHECKING:
    from stackctl.image.artefact import Artefact

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)")
# CSI (colours, cursor moves), OSC (window titles, links) and the two-byte escapes; then every other
# control character but tab: a package importing in the gate writes whatever it likes to the terminal.
_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
RESULT_MARK = "STACKCTL-GATE-RESULT "  # gates/gate.py prints its result as one JSON object after this


def clean_line(raw: str) -> str:
    """A log line as a terminal would leave it: escapes gone, only the text after the last carriage return."""
    text = _ESCAPE.sub("", raw).rstrip("\r")
    text = text.rsplit("\r", 1)[-1]
    return _CONTROL.sub("", text)


# A step's name as BuildKit gives it: "[STAGE N/M] INSTRUCTION ..." ("[N/M] ..." in a stage of no name)
_VERTEX = re.compile(r"^\[(?:([^\]\s]+) )?\d+/\d+\] (.*)", re.S)
_FROM_AS = re.compile(r"^FROM\s+(?:--\S+\s+)*\S+\s+AS\s+(\S+)", re.I)
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
STEP_WORDS = 48  # the most characters of an instruction's words a step's brief name keeps


def brief_step(name: str, stage: str = "") -> str:
    """A build step named for a person reading progress: its stage and the first words of its instruction,
    `layer01-train-core: RUN python -m pip install --no-index …`, not the whole instruction (an install step's
    RUN is over a thousand characters of mounts, flags and shell). `name`: BuildKit's vertex name
    (`[STAGE 2/3] RUN ...`) or the classic builder's instruction with its `stage` (the last `FROM ... AS`)."""
    text = " ".join(clean_line(name).split())
    m = _VERTEX.match(text)
    if m is not None:
        stage, text = m.group(1) or stage, m.group(2)
    head, _, rest = text.partition(" ")
    words = rest.split()
    if head.upper() == "RUN":
        if rest.startswith("["):  # the exec form: a JSON list
            try:
                parsed = json.loads(rest)
            except ValueError:
                parsed = None
            if isinstance(parsed, list):  # its strings may hold what JSON escapes: newlines, escapes
                words = _CONTROL.sub("", _ESCAPE.sub("", " ".join(str(w) for w in parsed).replace("\t", " "))).split()
        while words and (words[0].startswith("--") or _ENV_WORD.match(words[0])):  # mounts, network; env
            words.pop(0)
        if words and words[0].startswith("/"):
            words[0] = words[0].rsplit("/", 1)[-1]  # /opt/venv/bin/python: python
    said, kept = "", 0
    for word in words:
        if said and len(said) + 1 + len(word) > STEP_WORDS:
            break
        said = f"{said} {word}" if said else word[:STEP_WORDS]
        kept += 1
    cut = kept < len(words) or bool(words and len(words[0]) > STEP_WORDS)
    instruction = f"{head} {said}".rstrip() + (" …" if cut else "")
    return f"{stage}: {instruction}" if stage else instruction


def stage_of(instruction: str) -> str | None:
    """The stage a classic builder's step begins (`FROM base AS tools`: tools), None for any other step."""
    m = _FROM_AS.match(instruction.strip())
    return m.group(1) if m else None


@dataclass(frozen=True)
class GateResult:
    """What the gate itself said it found: the verdict of a build comes from here, not from the log."""

    passed: int
    failed: int
    lines: tuple[str, ...]  # every PASS/FAIL line, in order

    @property
    def fails(self) -> tuple[str, ...]:
        return tuple(ln for ln in self.lines if ln.startswith("FAIL "))


def gate_result(log: tuple[str, ...] | list[str]) -> GateResult | None:
    """The last result the gate printed into `log`, or None when it printed none (a cached gate step).

    Raises ServiceError when a result line is there but unreadable: the verdict must never be guessed.
    """
    for line in reversed(log):
        at = line.find(RESULT_MARK)
        if at < 0:
            continue
        try:
            doc, _ = json.JSONDecoder().raw_decode(line, at + len(RESULT_MARK))
            lines = tuple(clean_line(str(x)) for x in doc["lines"])
            passed, failed = int(doc["passed"]), int(doc["failed"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ServiceError(f"the gate's result line is unreadable ({exc}); the build's verdict is unknown") \
                from None
        if failed != sum(1 for ln in lines if ln.startswith("FAIL ")) or passed + failed != len(lines):
            raise ServiceError(f"the gate's result does not add up ({passed} passed, {failed} failed, "
                               f"{len(lines)} lines)")
        return GateResult(passed, failed, lines)
    return None


def disagreement(log: tuple[str, ...] | list[str], result: GateResult) -> str | None:
    """Why the PASS/FAIL lines in the log and the gate's own result disagree, or None when they agree.

    A check line may arrive with another process's output in front of it (stderr of an import with no
    newline at its end): it still counts as printed when the log line ends with it.
    """
    wanted = set(result.lines)
    printed = [ln for ln in log if ln.startswith(("PASS ", "FAIL ")) and RESULT_MARK not in ln]
    extra = [ln for ln in printed if ln not in wanted]
    missing = [ln for ln in result.lines if not any(x == ln or x.endswith(ln) for x in log)]
    if extra:
        return f"the log shows {count(len(extra), 'check line')} the gate's result does not have, first {extra[0]!r}"
    if missing:
        return f"the gate's result has {count(len(missing), 'check line')} the log does not show, first {missing[0]!r}"
    return None


@dataclass(frozen=True)
class ImageFacts:
    id: str
    labels: tuple[tuple[str, str], ...]
    repo_digests: tuple[str, ...]
    size: int
    layers: tuple[str, ...] = ()
    parent: str = ""  # the image of the step before (a local build's), "" when the engine names none

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    log: tuple[str, ...]
    steps: int
    cached_steps: int
    artefact: Artefact | None = None  # the image's OCI layout, where the builder wrote one (BuildKit's)
    ran: tuple[str, ...] = ()  # the steps that ran, not taken from the cache, in order, each by `brief_step`

    @property
    def gate_lines(self) -> tuple[str, ...]:
        result = gate_result(self.log)
        if result is not None:
            head = tuple(ln for ln in self.log if ln.startswith("gate ") and not ln.startswith(SUMMARY))
            tail = tuple(ln for ln in self.log if ln.startswith(SUMMARY))
            return head[:1] + result.lines + tail[-1:]
        return tuple(line for line in self.log if line.startswith(("PASS ", "FAIL ", "gate ")))

    @property
    def gate_cached(self) -> bool:
        """The gate's step came from the cache: an earlier build of the very same layers passed it."""
        return not any(line.startswith(SUMMARY) or RESULT_MARK in line for line in self.log)


class BuildFailed(CheckFailed):
    """The build ran and a step failed; `lines` are what the user must see (the gate's FAIL lines first), `step`
    the step that failed as the builder names it and `output` all it printed (its last lines are `lines`);
    `kept`: the file that output was written to, once it was, which the message then names after `reason`."""

    step: str = ""
    output: tuple[str, ...] = ()
    kept: Path | None = None

    def __init__(self, message: str, lines: tuple[str, ...], log: tuple[str, ...], *, step: str = "",
                 output: tuple[str, ...] | None = None) -> None:
        super().__init__(message)
        self.reason = message
        self.lines = lines
        self.log = log
        self.step = step
        self.output = log if output is None else output

    def of_step(self, step: str, output: tuple[str, ...]) -> BuildFailed:
        """The failure, said of the step that failed (a gate's verdict is read from the whole log first)."""
        self.step, self.output = step, output
        return self

    def annotations(self, profile: str | None) -> tuple[Annotation, ...]:
        """For CI: the gate's verdict at the profile that declares the gate, one annotation per FAIL line it
        printed (the failure itself when the build failed before the gate)."""
        fails = [line for line in self.lines if line.startswith("FAIL ")] or [str(self)]
        return tuple(Annotation(Level.ERROR, line, profile) for line in fails)

    def in_one_line(self) -> CheckFailed:
        """The failure with its lines in its message: for `--json`, whose stdout carries one document."""
        return CheckFailed(f"{self}: " + " | ".join(self.lines), hint=self.hint)


SUMMARY = ("gate ok: ", "gate FAILED: ")
def _agree(log: list[str], result: GateResult) -> None:
    why = disagreement(log, result)
    if why is not None:
        raise BuildFailed(f"the gate's printed lines disagree with its result: {why}",
                          result.fails or result.lines[-3:], tuple(log))


def raise_if_gate_failed(log: list[str]) -> None:
    """A build that failed: when the gate is what failed it, say so with the gate's FAIL lines (its result's,
    else those it printed before it died, a crash in an import), rather than the engine's last words.
    Both builders' streams end here, so their verdicts cannot drift apart."""
    result = gate_result(log)
    if result is not None and result.failed:
        _agree(log, result)
        raise BuildFailed(f"the gate failed: {count(result.failed, 'check')} did not pass", result.fails, tuple(log))
    fails = tuple(line for line in log if line.startswith("FAIL "))
    if fails:
        raise BuildFailed(f"the gate failed: {count(len(fails), 'check')} did not pass", fails, tuple(log))


def check_gate_verdict(log: list[str]) -> None:
    """A build that succeeded: the gate's result must agree with its lines and have no failure (its step
    should have failed the build: never pass it), and FAIL lines with no result leave the verdict unknown."""
    result = gate_result(log)
    if result is not None:
        _agree(log, result)
        if result.failed:
            raise BuildFailed(f"the gate failed: {count(result.failed, 'check')} did not pass, yet the build step "
                              "succeeded", result.fails, tuple(log))
    elif any(line.startswith("FAIL ") for line in log):
        raise BuildFailed("the gate printed FAIL lines but no result; the build's verdict is unknown",
                          tuple(line for line in log if line.startswith("FAIL ")), tuple(log))


def parse_build_stream(events: Iterator[dict[str, Any]], on_step: Steps | None = None) -> BuildResult:
    """Fold the engine's JSON build stream into a result; raise BuildFailed on an error event."""
    log: list[str] = []
    image_id = ""
    steps = cached = 0
    partial = ""
    step: str | None = None  # the step the stream is in, until "Using cache" says it did not run
    ran: list[str] = []
    stage = ""  # the stage the steps are in (the last `FROM ... AS`)
    began = 0  # where the last step's lines begin in the log
    for ev in events:
        if "stream" in ev:
            partial += ev["stream"]
            *lines, partial = partial.split("\n")
            for raw in lines:
                line = clean_line(raw)
                log.append(line)
                m = _STEP.match(line)
                if m:
                    began = len(log) - 1
                    if step is not None:
                        ran.append(step)
                    steps = int(m.group(2))
                    step = brief_step(m.group(3), stage)
                    stage = stage_of(m.group(3)) or stage
                    if on_step:
                        on_step(int(m.group(1)), steps, step)
                elif line.strip() == "---> Using cache":
                    cached += 1
                    step = None
        elif "aux" in ev and isinstance(ev["aux"], dict) and "ID" in ev["aux"]:
            image_id = ev["aux"]["ID"]
        elif "error" in ev:
            if partial:
                log.append(clean_line(partial))
            details = ev.get("errorDetail")
            message = details.get("message") if isinstance(details, dict) else None
            error = clean_line(str(message or ev["error"])).strip()
            name, output = (log[began], tuple(log[began + 1:])) if _STEP.match(log[began] if log else "") \
                else ("", tuple(log))
            try:
                raise_if_gate_failed(log)
            except BuildFailed as exc:
                raise exc.of_step(name, output) from None
            last = tuple(line for line in log[-15:] if line.strip())
            raise BuildFailed(f"the build failed: {error}", last, tuple(log), step=name, output=output)
    if partial:
        log.append(clean_line(partial))
    if step is not None:
        ran.append(step)
    check_gate_verdict(log)
    if not image_id:
        built = [m.group(1) for x in log if (m := re.match(r"Successfully built ([0-9a-f]+)", x))]
        image_id = built[-1] if built else ""
    if not image_id:
        raise ServiceError("the engine finished the build without naming an image id")
    return BuildResult(image_id, tuple(log), steps, cached, ran=tuple(ran))
