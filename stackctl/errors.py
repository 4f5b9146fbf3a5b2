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


class Unreachable(ServiceError):
    """A service that gave no answer at all (nothing listens, no such host, no answer in time). Every request
    to it fails alike, so `Problems.of` says several such failures once, for the service."""

    def __init__(self, message: str, *, service: str, base: str, subject: str, cause: str, after: str = "",
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.service, self.base, self.subject, self.cause, self.after = service, base, subject, cause, after

    @classmethod
    def merged(cls, alike: list[Unreachable]) -> Unreachable:
        """One error for requests to one service that failed the same way."""
        if len(alike) == 1:
            return alike[0]
        first = alike[0]
        return cls(f"{first.service}: {first.cause} at {first.base}{first.after} ({len(alike)} requests failed "
                   f"alike, the first for {first.subject})", service=first.service, base=first.base,
                   subject=first.subject, cause=first.cause, after=first.after, hint=first.hint)


class NotInRegistry(CheckFailed):
    """The registry answered, and the image is not there: what is checked or shown is missing, no service
    failed (exit 1). `verify` and `inspect` say it in these words."""

    def __init__(self, repository: str, reference: str) -> None:
        sep = "@" if reference.startswith("sha256:") else ":"
        super().__init__(f"{repository}{sep}{reference}: not in the registry")
        self.repository, self.reference = repository, reference


class ContentMismatch(ServiceError):
    """A registry sent bytes that do not hash to the digest naming them. `verify` reports it as what differs
    (exit 1): the content there is not what was published."""


class Problems(StackctlError):
    """Several independent failures of one run (pin and target), every one reported; the run exits with
    the most severe code among them: a service failure (3) over bad input (2) over a failed check (1)."""

    def __init__(self, errors: tuple[StackctlError, ...]) -> None:
        self.errors = errors
        self.exit_code = max((e.exit_code for e in errors), default=EXIT_CHECK_FAILED)
        hint = next((e.hint for e in errors if e.hint), None)
        first = str(errors[0]) if errors else "failed"
        more = f" (and {len(errors) - 1} more, listed)" if len(errors) > 1 else ""
        super().__init__(first + more, hint=hint)

    @classmethod
    def of(cls, errors: list[StackctlError] | tuple[StackctlError, ...]) -> StackctlError:
        """One error as itself; several as one `Problems`, the most severe first; the failures of one service
        that did not answer (an index that is down fails every project on it) as one line for it."""
        alike: dict[tuple[str, str, str], list[Unreachable]] = {}
        kept: list[StackctlError | tuple[str, str, str]] = []
        for e in errors:
            if isinstance(e, Unreachable):
                key = (e.service, e.base, e.cause)
                if key not in alike:
                    kept.append(key)
                alike.setdefault(key, []).append(e)
            else:
                kept.append(e)
        said = [Unreachable.merged(alike[k]) if isinstance(k, tuple) else k for k in kept]
        ordered = sorted(said, key=lambda e: -e.exit_code)
        return ordered[0] if len(ordered) == 1 else cls(tuple(ordered))


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
