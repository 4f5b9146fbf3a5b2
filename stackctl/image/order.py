"""What the user asked a build for, as one value: `stackctl build PROFILE` and `build --all` take the same
order (a single build is the order of one profile and at most one target), `verify --rebuild` and `bisect`
make one of their own. Every later request of the build (a cell's, the matrix's) carries it as it is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class BuildOrder:
    """A build's options as given; `overrides` the --index NAME=URL overrides, parsed."""

    profiles: tuple[str, ...] = ()  # PROFILE arguments; with `every` none means every profile in ./stacks/
    targets: tuple[str, ...] = ()
    every: bool = False  # --all: stacks by targets, here or on a cluster's build nodes
    lock: Path | None = None
    wheelhouse: Path | None = None
    fetch: bool = False  # --fetch: the wheelhouse may be made
    overrides: Mapping[str, str] = field(default_factory=dict)
    context: Path | None = None  # a single build's context dir (default: RECORD_DIR/STACK/context)
    repository: str | None = None
    cache_repository: str | None = None  # --all: the registry cache the engines share
    allow_dirty: bool = False
    revision: str | None = None
    ref: str | None = None
    created: str | None = None
    record_dir: Path = Path("build")
    no_cache: bool = False
    send_wheels: bool = False
    command: str = ""  # the command line as given (no credentials), kept in the build record for `report`
    builder: str | None = None  # --builder; None: STACKCTL_BUILDER, else auto
    cluster: str | None = None  # --all --cluster ADDRESS: a Ray cluster's build nodes build the cells

    @property
    def target(self) -> str | None:
        """A single build's target: the one given, else None (the image's python)."""
        return self.targets[0] if self.targets else None
