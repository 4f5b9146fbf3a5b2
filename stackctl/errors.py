"""The one exception hierarchy. Every message is written for the person at the terminal."""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_INPUT = 2
EXIT_SERVICE = 3


class StackctlError(Exception):
    """Root of every error stackctl reports; `exit_code` is what the CLI exits with."""

    exit_code = EXIT_INPUT
    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    @property
    def message(self) -> str:
        return str(self)


class InputError(StackctlError):
    """Bad usage or bad input: a missing file, malformed TOML, an unknown stack."""

    exit_code = EXIT_INPUT


class CheckFailed(StackctlError):
    """A check ran and failed: gate, ABI, drift, stale references, a pin missing for a target."""

    exit_code = EXIT_CHECK_FAILED


class ServiceError(StackctlError):
    """An external service (index, engine, registry, git) failed or lied."""

    exit_code = EXIT_SERVICE


@dataclass(frozen=True)
class Problem:
    """One validation problem: where it is and what is wrong."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where} {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ProfileError(InputError):
    """A profile failed validation; carries every problem found, not only the first."""

    def __init__(self, problems: tuple[Problem, ...]) -> None:
        self.problems = problems
        first = str(problems[0]) if problems else "invalid profile"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(first + more)
