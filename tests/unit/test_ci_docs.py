"""docs/ci.md and .pre-commit-hooks.yaml name only commands and options stackctl has."""

from __future__ import annotations

import re

import pytest
import typer

from tests.conftest import REPO

_CALL = re.compile(r"\bstackctl ([a-z][a-z-]+)([^|;&>\n`]*)")


def _options() -> dict[str, set[str]]:
    from stackctl.cli import app, register

    register([])  # every command
    group = typer.main.get_command(app)
    return {name: {o for p in cmd.params for o in p.opts} for name, cmd in group.commands.items()}  # type: ignore[attr-defined]


@pytest.mark.parametrize("doc", ["docs/ci.md", ".pre-commit-hooks.yaml"])
def test_every_command_line_names_real_options(doc: str) -> None:
    known = _options()
    text = (REPO / doc).read_text()
    # the command lines: the Markdown's code blocks, the hooks' entries
    code = "\n".join(re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S)) if doc.endswith(".md") else \
        "\n".join(re.findall(r"^  entry: (.*)$", text, re.M))
    calls = [(m.group(1), re.findall(r"(?<!\S)(--[a-z-]+)", m.group(2))) for m in _CALL.finditer(code)]
    assert len(calls) >= 3
    for command, opts in calls:
        assert command in known, f"{doc}: no command {command!r}"
        assert set(opts) <= known[command], f"{doc}: stackctl {command} has no {set(opts) - known[command]}"


def test_the_hooks_are_the_documented_ones() -> None:
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert re.findall(r"^- id: (\S+)", text, re.M) == ["stackctl-validate", "stackctl-check", "stackctl-scan"]
