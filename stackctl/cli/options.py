"""Options several commands share, spelled and explained once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

IndexOpt = Annotated[list[str] | None, typer.Option(
    "--index", metavar="NAME=URL",
    help="NAME=URL: the index NAME is at URL for this run (its credentials go to that origin only; "
    "also STACKCTL_INDEX_<NAME>_URL).")]
LockOpt = Annotated[Path | None, typer.Option(
    "--lock", metavar="PATH", help="Lock file (default: the .lock beside the profile; stacks/NAME.lock for a "
    "stack name).")]
ProfileArg = Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")]


def overrides(index: list[str] | None) -> dict[str, str]:
    """`--index NAME=URL` options as the index stage takes them."""
    from stackctl.index.config import parse_overrides

    return parse_overrides(index or [])
