"""The two shapes of progress callback the core reports through (counted work, and a build's steps as they
start); the CLI decides how each looks."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, int, int], None]  # what is being done, how many done (items or bytes), of how many
Steps = Callable[[int, int, str], None]  # a build: step N of M starts, with its instruction (streamed as it happens)
