"""The two shapes of progress callback the core reports through (counted work, and a build's steps as they
start), and a build's set of them; the CLI decides how each looks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Progress = Callable[[str, int, int], None]  # what is being done, how many done (items or bytes), of how many
# A build: step N of M starts, named briefly (streamed as it happens); N == PHASE: a phase after the steps starts
# (an exporter, the layout, the record), M the steps there were, the name saying what the phase is.
Steps = Callable[[int, int, str], None]
PHASE = 0


def is_phase(n: int) -> bool:
    """Whether a `Steps` call says a phase after the steps rather than a step."""
    return n == PHASE


@dataclass(frozen=True)
class BuildProgress:
    """Where a build reports as it goes: wheels fetched, each wheel written into the context, each build step
    as the builder starts it."""

    fetch: Progress | None = None
    wheel: Callable[[str], None] | None = None
    step: Steps | None = None


class Phases:
    """A build's steps, then the phases after them (the exporters, the OCI layout, the engine's image, the
    record), said through one `Steps` callback: a CI log shows each with its time instead of a silence between
    the last step and the result. A phase is said as one (N == PHASE, with the number of steps there were), not
    numbered on as if it were a step, and its line says how long the step or phase before it took; `done`
    closes the last one.

    One build shares one Phases: `over` gives back the Phases it is given, so the engine's phases and the
    build's own are numbered in one sequence."""

    def __init__(self, on_step: Steps | None = None, clock: Callable[[], float] | None = None) -> None:
        import time

        self._on_step = on_step
        self._clock = clock or time.monotonic
        self._n = self._of = 0
        self._since: float | None = None
        self._last = ""
        self.took: list[tuple[str, float]] = []  # (step or phase, seconds), in order, once each has ended

    @classmethod
    def over(cls, on_step: Steps | None) -> Phases:
        return on_step if isinstance(on_step, Phases) else cls(on_step)

    def __call__(self, n: int, of: int, what: str) -> None:
        """A Dockerfile step starts (the builder's own numbering)."""
        self._n, self._of = max(self._n, n), max(self._of, of)
        self._close(f"step {n}")
        if self._on_step is not None:
            self._on_step(n, of, what)

    def phase(self, what: str, name: str | None = None) -> None:
        """A phase after the steps starts: `what` in words, `name` (default `what`) as the next line names it."""
        said = self._close(name or what)
        if self._on_step is not None:
            self._on_step(PHASE, max(self._n, self._of), f"{what} ({said})" if said else what)

    def done(self) -> None:
        """The last phase ends (its time goes to `took`; no line: the result is the build's next line)."""
        self._close("")

    def _close(self, name: str) -> str:
        """The running step or phase ended now: its time, in words; `name` runs from now."""
        now = self._clock()
        said = ""
        if self._since is not None and self._last:
            seconds = now - self._since
            self.took.append((self._last, seconds))
            # steps run side by side under BuildKit: from a step, only the time since it began is known
            said = (f"{seconds:.1f} s since {self._last} began" if self._last.startswith("step ") else
                    f"{self._last} took {seconds:.1f} s")
        self._since, self._last = now, name
        return said
