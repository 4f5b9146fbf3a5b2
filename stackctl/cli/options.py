"""Options several commands share, spelled and explained once (and --verbose, which every command takes)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from stackctl.cli.app import Format, output


def _seen_json(value: bool) -> bool:
    output.as_json = value
    return value


def _seen_markdown(value: bool) -> bool:
    output.markdown = value
    return value


JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.", callback=_seen_json)]
MarkdownOpt = Annotated[bool, typer.Option("--markdown", help="Print a Markdown table for a pull request.",
                                           callback=_seen_markdown)]
IndexOpt = Annotated[list[str] | None, typer.Option(
    "--index", metavar="NAME=URL",
    help="NAME=URL: the index NAME is at URL for this run (its credentials go to that origin only; "
    "also STACKCTL_INDEX_<NAME>_URL).")]
LockOpt = Annotated[Path | None, typer.Option(
    "--lock", metavar="PATH", help="Lock file (default: the .lock beside the profile; stacks/NAME.lock for a "
    "stack name).")]
# `export` and `verify` read a lock only when given one: no default beside a profile.
ExportLockOpt = Annotated[Path | None, typer.Option(
    "--lock", metavar="PATH", help="Add each file's --hash lines from this lock (without it: the pins alone, "
                                   "no hashes).")]
VerifyLockOpt = Annotated[Path | None, typer.Option(
    "--lock", metavar="PATH", help="Also check the image against this lock.")]
ProfileArg = Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")]


NoRecordOpt = Annotated[bool, typer.Option(
    "--no-record", help="Record nothing for `stackctl report` (by default the result is recorded under build/).")]


def one_format(as_json: bool, markdown: bool, html: bool = False, *, out: Path | None = None) -> Format:
    """--json, --markdown and --html all claim stdout: a run prints one document, never a guess between them.
    `out` (--out FILE) takes the document instead of stdout: the --html page, else the Markdown body."""
    from stackctl.errors import InputError

    if as_json and markdown:
        raise InputError("--json and --markdown exclude each other: pick one")
    if html and (as_json or markdown):
        raise InputError("--html excludes --json and --markdown: pick one")
    if out is not None:
        from stackctl.base import check_output

        if as_json:
            raise InputError("--out writes the --html page or the Markdown body; --json prints to stdout")
        check_output(out, "--out")  # before any record is read
        return Format.HTML if html else Format.MARKDOWN
    return Format.JSON if as_json else Format.MARKDOWN if markdown else Format.HTML if html else Format.HUMAN


def overrides(index: list[str] | None) -> dict[str, str]:
    """`--index NAME=URL` options as the index stage takes them."""
    from stackctl.index import parse_overrides

    return parse_overrides(index or [])


def add_verbose(group: object) -> None:
    """Every command takes --verbose (tracebacks for errors): declared here once, added to each command as the
    group is built rather than as a parameter that 22 command functions would never read."""
    from typer.core import TyperOption

    def seen(value: bool) -> bool:
        output.verbose = value
        return value

    # click's Group (typer's own copy of click under recent releases): named through typer, never imported
    commands: dict[str, Any] = getattr(group, "commands", {})
    for command in commands.values():
        if not any(p.name == "verbose" for p in command.params):
            command.params.append(TyperOption(param_decls=["--verbose"], is_flag=True, default=False,
                                              expose_value=False, callback=lambda _c, _p, v: seen(bool(v)),
                                              help="Show tracebacks for errors."))
BuilderOpt = Annotated[str | None, typer.Option(
    "--builder", metavar="NAME", help="auto, buildkit or classic: BuildKit (`docker buildx build`, an OCI "
    "layout as the artefact) or the engine API's classic builder; auto: BuildKit when `docker buildx` runs "
    "(default: STACKCTL_BUILDER, else auto).")]

ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", metavar="ADDRESS", help="Run on this Ray cluster: its head's HOST:PORT or ray://HOST:PORT "
    "(default: STACKCTL_CLUSTER; neither: here, in this process). Needs the cluster extra.")]
