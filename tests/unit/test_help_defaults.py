"""An option's --help says its default once: in its own words, or as `[default: X]`, never both (two defaults
in one line, `(default: stack and app) [default: all]`, leave the reader to guess which one runs)."""

from __future__ import annotations

import re
from typing import Any

from stackctl.cli import click_group
from tests.support.cli import Cli


def _option_help(help_text: str, option: str) -> str:
    """The paragraph of `option` in a command's --help: its line and the lines indented under it."""
    block = re.search(rf"^  {re.escape(option)}\b.*?(?=^  -|\Z)", help_text, re.S | re.M)
    assert block is not None, f"{option} is not in the help"
    return " ".join(block[0].split())


def test_gate_phase_says_one_default_and_what_it_runs(cli: Cli) -> None:
    r = cli("gate", "--help")
    phase = _option_help(r.out, "--phase")
    assert r.code == 0 and phase.count("default") == 1 and "[default: all]" in phase, phase
    assert "all (stack and app" in phase  # what the default runs: the device phase only when asked


def test_no_option_says_its_default_twice() -> None:
    group: Any = click_group([])
    root = group.context_class(group, info_name="stackctl")
    twice = []
    for name in group.list_commands(root):
        command = group.commands[name]
        ctx = command.context_class(command, info_name=name, parent=root)
        for param in command.params:
            record = param.get_help_record(ctx) if param.param_type_name == "option" else None
            if record is not None and "[default:" in record[1] and "default" in record[1].split("[default:")[0]:
                twice.append(f"{name} {record[0]}: {record[1]}")
    assert not twice
