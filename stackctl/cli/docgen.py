"""docs/commands.md, and the table of common flags in docs/usage.md, written from the command line itself so
neither can drift from it.

    python -m stackctl.cli.docgen            # rewrite both
    python -m stackctl.cli.docgen --check    # exit 1 when either is not what the commands say

docs/commands.md is click's plain help at the width `stackctl COMMAND --help` prints in any terminal of 80
columns or more, never coloured, with commands in `stackctl --help`'s order: the same tree gives the same file
on any machine. In the table of common flags the meanings are written here and the commands that take each
flag are read from the commands' options.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackctl.base import write_atomic
from stackctl.cli import click_group

WIDTH = 78  # click wraps help at min(terminal columns, 80) - 2: any terminal of 80 columns or more prints this
DOC = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
USAGE = DOC.parent / "usage.md"

_HEAD = """\
# Command reference

Generated from `stackctl --help` and each command's `--help` by `python -m stackctl.cli.docgen`; do not
edit by hand. What the commands do together is in the [README](../README.md); the behaviour behind each
is described in the files of this directory.

"""


def _help(command: Any, name: str, parent: Any) -> str:
    ctx = command.context_class(command, info_name=name, parent=parent, terminal_width=WIDTH)
    return str(command.get_help(ctx)).rstrip()


def command_help() -> dict[str, str]:
    """`stackctl --help` (under "stackctl") and every command's `--help`, in the order `--help` lists them."""
    group: Any = click_group([])
    root = group.context_class(group, info_name="stackctl", terminal_width=WIDTH)
    out = {"stackctl": _help(group, "stackctl", None)}
    for name in group.list_commands(root):
        out[name] = _help(group.commands[name], name, root)
    return out


def render() -> str:
    """The whole of docs/commands.md."""
    helps = command_help()
    parts = [_HEAD, "| command | what it does |\n| --- | --- |\n"]
    for name, text in helps.items():
        if name != "stackctl":
            summary = text.split("\n\n", 2)[1].strip().replace("\n", " ").replace("|", "\\|") if "\n\n" in text else ""
            parts.append(f"| [`stackctl {name}`](#stackctl-{name}) | {summary} |\n")
    for name, text in helps.items():
        title = name if name == "stackctl" else f"stackctl {name}"
        parts.append(f"\n## {title}\n\n```text\n{text}\n```\n")
    return "".join(parts)


@dataclass(frozen=True)
class Flag:
    """A row of docs/usage.md's table of common flags: the commands column lists every command that takes one
    of `options`."""

    shown: str  # the flag as the table names it
    options: tuple[str, ...]
    meaning: str


COMMON_FLAGS = (
    Flag("`--json`", ("--json",), "one JSON object on stdout, whatever the exit code"),
    Flag("`--markdown`", ("--markdown",), "a table for a pull-request body (with `--json`: a usage error)"),
    Flag("`--lock PATH`", ("--lock",),
         "the lock (default: the `.lock` beside the profile; `export` adds its hashes and `verify` checks "
         "against one only when given; `outdated` reads one with `--from-lock`)"),
    Flag("`--index NAME=URL`", ("--index",),
         "the profile's index NAME at another URL for this run (also `STACKCTL_INDEX_<NAME>_URL`); said as an "
         "override, and recorded in the lock a resolve writes"),
    Flag("`--target LABEL`", ("--target",), "a target such as `cp310-linux_x86_64`"),
    Flag("`--wheelhouse DIR`", ("--wheelhouse",),
         "a directory holding the lock's wheels (verify: with `--rebuild`); render and build refuse one that is "
         "not there, unless build's `--fetch` creates and fills it"),
    Flag("`--out PATH`", ("--out",),
         "where the output goes: export's requirement files and render's build context (directories), "
         "inventory's file"),
    Flag("`--record-dir DIR`", ("--record-dir",),
         "where records go, or are read (default `build/`): `DIR/STACK.build.json`, `DIR/publications.jsonl`, "
         "`DIR/CANDIDATE.ab.json`, `DIR/CANDIDATE.bisect.json` (publish's older `--record FILE` still works)"),
    Flag("`--record FILE`, `--no-record`", ("--record", "--no-record"),
         "the result is recorded for `report` under `build/` by default; `--record` writes it elsewhere, "
         "`--no-record` nowhere"),
    Flag("`--annotations KIND`", ("--annotations",),
         "also report each problem where CI shows it: `github` (the default under `GITHUB_ACTIONS=true`), "
         "`gitlab=PATH`, `none` ([ci.md](ci.md))"),
    Flag("`--builder NAME`", ("--builder",),
         "`buildkit`, `classic` or `auto` (BuildKit when `docker buildx` runs); default: `STACKCTL_BUILDER`, "
         "else `auto` ([engines.md](engines.md))"),
    Flag("`--cluster ADDRESS`", ("--cluster",),
         "run on a Ray cluster (its head's `HOST:PORT` or `ray://HOST:PORT`, else `STACKCTL_CLUSTER`; neither: "
         "here) ([cluster.md](cluster.md))"),
    Flag("`--repository REPO`", ("--repository",), "the image repository instead of the profile's"),
    Flag("`--timeout S`, `--retries N`", ("--timeout", "--retries"),
         "the seconds one index request may take, retries included, and how often it is retried after a 5xx "
         "answer or a connection error"),
    Flag("`--no-cache`", ("--no-cache",),
         "resolve and outdated: the HTTP cache neither read nor written; build: every step built afresh"),
    Flag("`--verbose`", ("--verbose",), "the traceback of an error; with `--version`, the engine API and uv versions"),
)

FLAGS_BEGIN = "<!-- common flags: written by `python -m stackctl.cli.docgen` from the commands' options -->\n"
FLAGS_END = "<!-- end of common flags -->\n"


def command_options() -> dict[str, frozenset[str]]:
    """Every command's option names (`--record`, `--no-record`) as its --help shows them (a hidden option, an
    older spelling kept working, is left out), in `stackctl --help`'s order."""
    group: Any = click_group([])
    root = group.context_class(group, info_name="stackctl")
    return {name: frozenset(o for p in group.commands[name].params
                            if p.param_type_name == "option" and not getattr(p, "hidden", False)
                            for o in (*p.opts, *p.secondary_opts))
            for name in group.list_commands(root)}


def _commands(taking: Iterable[str], options: dict[str, frozenset[str]]) -> str:
    wanted = set(taking)
    names = [name for name, opts in options.items() if opts & wanted]
    if not names:
        raise ValueError(f"no command takes {' or '.join(sorted(wanted))}: its row in COMMON_FLAGS is stale")
    return "every command" if len(names) == len(options) else ", ".join(names)


def flags_table() -> str:
    """docs/usage.md's table of common flags, between its markers."""
    options = command_options()
    rows = "".join(f"| {f.shown} | {_commands(f.options, options)} | {f.meaning} |\n" for f in COMMON_FLAGS)
    return f"{FLAGS_BEGIN}| flag | commands | meaning |\n| --- | --- | --- |\n{rows}{FLAGS_END}"


def render_usage(text: str) -> str:
    """docs/usage.md (given as it is) with its table of common flags written afresh."""
    if FLAGS_BEGIN not in text or FLAGS_END not in text:
        raise ValueError(f"{USAGE} has lost the markers of its table of common flags ({FLAGS_BEGIN.strip()})")
    head, rest = text.split(FLAGS_BEGIN, 1)
    return head + flags_table() + rest.split(FLAGS_END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print("usage: python -m stackctl.cli.docgen [--check]", file=sys.stderr)
        return 2
    usage = USAGE.read_text(encoding="utf-8")
    wanted = {DOC: render(), USAGE: render_usage(usage)}
    if args == ["--check"]:
        drifted = [path for path, text in wanted.items()
                   if not path.is_file() or path.read_text(encoding="utf-8") != text]
        for path in drifted:
            print(f"{path} differs from the command line's options and help: run `python -m stackctl.cli.docgen`",
                  file=sys.stderr)
        return 1 if drifted else 0
    for path, text in wanted.items():
        write_atomic(path, text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
