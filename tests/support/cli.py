"""How a test runs `stackctl`: the `cli` fixture's type and what it returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


class Cli(Protocol):
    """The `cli` fixture: `stackctl ARGS...` run in this process (optionally from `cwd`)."""

    def __call__(self, *args: str, cwd: Path | None = None) -> Result: ...
