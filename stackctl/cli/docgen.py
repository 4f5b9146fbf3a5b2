"""docs/commands.md, written from the command line's own help so the reference cannot drift from it.

    python -m stackctl.cli.docgen            # rewrite docs/commands.md
    python -m stackctl.cli.docgen --check    # exit 1 when docs/commands.md is not what --help says

The text is click's plain help at the width `stackctl COMMAND --help` prints in any terminal of 80 columns or
more, never coloured, with commands in `stackctl --help`'s order: the same tree gives
the same file on any machine.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from stackctl.base import write_atomic
from stackctl.cli import click_group

WIDTH = 78  # click wraps help at min(terminal columns, 80) - 2: any terminal of 80 columns or more prints this
DOC = Path(__file__).resolve().parents[2] / "docs" / "commands.md"

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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args == ["--check"]:
        if DOC.is_file() and DOC.read_text(encoding="utf-8") == text:
            return 0
        print(f"{DOC} differs from the command line's --help: run `python -m stackctl.cli.docgen`", file=sys.stderr)
        return 1
    if args:
        print("usage: python -m stackctl.cli.docgen [--check]", file=sys.stderr)
        return 2
    write_atomic(DOC, text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
