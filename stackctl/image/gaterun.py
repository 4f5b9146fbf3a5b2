"""One run of `gates/gate.py` (`run_gate`), what it said, and the verdict stackctl draws from it.

The verdict is pure: the interpreter's exit status and output in, a `GateRun` and an error (or None) out. A gate passes
only when it printed its summary line, exited 0 and no check failed: an interpreter that exits 0 without
running the script (a wrapper, `/bin/true`) or dies in an import (a signal) must never read as a pass.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from stackctl.base.concurrency import run_child
from stackctl.base.words import count
from stackctl.errors import CheckFailed, InputError, StackctlError
from stackctl.image.buildlog import RESULT_MARK, GateResult, clean_line, disagreement, gate_result
from stackctl.profile.model import GatePhase, Stack
from stackctl.resolve.lock import Lock

SUMMARY = ("gate ok: ", "gate FAILED: ")


class LineKind(Enum):
    """What a line of the gate's output is: a check that passed, one that failed, or anything else it said."""

    PASS = "pass"
    FAIL = "fail"
    NOTE = "note"

    @classmethod
    def of(cls, line: str) -> LineKind:
        return cls.PASS if line.startswith("PASS ") else cls.FAIL if line.startswith("FAIL ") else cls.NOTE


@dataclass(frozen=True)
class GateLine:
    """A line of the gate's output, with its kind: what a renderer styles it by."""

    kind: LineKind
    text: str


def gate_lines(lines: Iterable[str]) -> tuple[GateLine, ...]:
    return tuple(GateLine(LineKind.of(ln), ln) for ln in lines)


@dataclass(frozen=True)
class GateRun:
    python: str
    returncode: int
    lines: tuple[str, ...]  # the gate's stdout, one entry per line
    stderr: str
    result: GateResult | None = None  # the gate's own machine-readable verdict

    @classmethod
    def from_output(cls, python: str, returncode: int, stdout: str, stderr: str) -> GateRun:
        """The run as shown and judged: escapes stripped, the result line read and kept out of the lines."""
        lines = [clean_line(ln) for ln in stdout.splitlines()]
        try:
            result = gate_result(lines)
        except StackctlError:
            result = None  # an unreadable result: `verdict` finds the lines without one
        return cls(python, returncode, tuple(ln for ln in lines if RESULT_MARK not in ln),
                   clean_text(stderr), result)

    @property
    def shown(self) -> tuple[GateLine, ...]:
        """Every line, with its kind."""
        return gate_lines(self.lines)

    @property
    def results(self) -> tuple[tuple[bool, str], ...]:
        """(passed, line) for each check's line."""
        return tuple((ln.kind is LineKind.PASS, ln.text) for ln in self.shown if ln.kind is not LineKind.NOTE)

    @property
    def failed(self) -> int:
        return sum(1 for ok, _ in self.results if not ok)

    @property
    def passed(self) -> int:
        return len(self.results) - self.failed

    @property
    def finished(self) -> bool:
        return any(ln.startswith(SUMMARY) for ln in self.lines)

    @property
    def crashed(self) -> bool:
        """Started checking, then died: its stderr (faulthandler's dump) says where."""
        return not self.finished and (self.returncode < 0 or bool(self.results))


def clean_text(text: str) -> str:
    return "\n".join(clean_line(ln) for ln in text.splitlines())


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def verdict(stack: str, run: GateRun) -> StackctlError | None:
    """None when the gate ran to its end and every check passed."""
    where = f"gate of {stack} under {run.python}"
    if run.returncode < 0:
        after = (f"after {count(len(run.results), 'check')}, last {run.results[-1][1]!r}" if run.results
                 else "before any check")
        return CheckFailed(f"{where} was killed by {_signal_name(-run.returncode)} {after}",
                           hint="an import crashed the interpreter; the gate's stderr shows where")
    if not run.results and not run.finished:
        if run.returncode == 2 and _last(run.stderr).startswith("gate: "):
            return InputError(f"{where} could not read its spec: {_last(run.stderr)}")
        return InputError(f"{where} did not run (exit {run.returncode}, no gate output): {_last(run.stderr)}")
    if not run.finished:
        return CheckFailed(f"{where} stopped after {count(len(run.results), 'check')} with exit {run.returncode}: "
                           f"{_last(run.stderr)}")
    if run.result is None:
        return CheckFailed(f"{where} printed its summary but no readable result line; its verdict is unknown")
    why = disagreement(run.lines, run.result)
    if why is not None or run.result.failed != run.failed:
        return CheckFailed(f"{where}: the printed lines disagree with the gate's result: "
                           f"{why or count(run.failed, 'FAIL line') + f' printed, {run.result.failed} in the result'}")
    if run.failed:
        return CheckFailed(f"{where}: {count(run.failed, 'check')} failed")
    if run.returncode != 0:
        return CheckFailed(f"{where} exited {run.returncode}: {_last(run.stderr)}")
    return None


def gate_spec_text(stack: Stack, lock: Lock | None = None, target: str | None = None,
                   phase: GatePhase | None = None) -> str:
    """The gate spec (JSON) the profile renders; with a lock, `preserve` also holds the lock's closure; for
    one `phase`, only its entries."""
    from stackctl.image import gatespec
    from stackctl.image.prepare import pick_target

    preserve, tgt = None, target
    if lock is not None:
        lock.require_made_from(stack)
        tgt = pick_target(stack, target)
        preserve = gatespec.installed_pins(stack, lock, tgt)
    return gatespec.dumps(gatespec.gate_spec(stack, preserve, tgt, phase))


def run_gate(stack: Stack, python: str, spec: str, timeout: float = 600.0) -> GateRun:
    """Run `gates/gate.py` with `spec` under `python` (isolated mode: the environment's own packages only)."""
    from stackctl.base.assets import asset_root

    script = asset_root() / "gates" / "gate.py"
    with tempfile.TemporaryDirectory(prefix="stackctl-gate-") as tmp:
        (Path(tmp) / "gate.json").write_text(spec, encoding="utf-8")
        command = [python, "-I", str(script), str(Path(tmp) / "gate.json")]
        try:
            proc = run_child(command, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"the gate of {stack.name} under {python} did not finish in {timeout:g} s") from None
        except FileNotFoundError:
            raise InputError(f"{python}: no such interpreter") from None
        except OSError as exc:
            raise InputError(f"{python}: cannot run: {exc}") from None
    return GateRun.from_output(python, proc.returncode, proc.stdout, proc.stderr)
