"""docs/commands.md is the command line's own help: regenerating it changes nothing, and each section is what
`stackctl COMMAND --help` prints; docs/usage.md's table of common flags lists every command that takes each."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from stackctl.cli import docgen
from tests.conftest import REPO
from tests.support.cli import Cli


def _sections(text: str) -> dict[str, str]:
    return {m[1]: m[2] for m in re.finditer(r"^## (.+?)\n\n```text\n(.*?)\n```$", text, re.S | re.M)}


def test_commands_md_is_what_the_generator_writes() -> None:
    assert (REPO / "docs" / "commands.md").read_text(encoding="utf-8") == docgen.render(), \
        "docs/commands.md drifted from the CLI's help: run `python -m stackctl.cli.docgen`"


def test_every_section_is_the_commands_help_as_printed(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "132")  # any terminal of 80 columns or more prints the same help
    monkeypatch.setenv("NO_COLOR", "1")
    sections = _sections((REPO / "docs" / "commands.md").read_text(encoding="utf-8"))
    r = cli("--help")
    assert r.code == 0 and r.out.rstrip() == sections.pop("stackctl")
    listed = re.findall(r"^  ([a-z-]+) {2,}", r.out.split("Commands:", 1)[1], re.M)
    assert [f"stackctl {name}" for name in listed] == list(sections)  # every command, in --help's order
    for title, text in sections.items():
        r = cli(*title.split()[1:], "--help")
        assert r.code == 0 and r.out.rstrip() == text, f"{title} --help differs from docs/commands.md"


def test_check_mode_fails_on_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    doc, usage = tmp_path / "commands.md", tmp_path / "usage.md"
    usage.write_text((REPO / "docs" / "usage.md").read_text(encoding="utf-8"))
    monkeypatch.setattr(docgen, "DOC", doc)
    monkeypatch.setattr(docgen, "USAGE", usage)
    assert docgen.main(["--check"]) == 1 and "python -m stackctl.cli.docgen" in capsys.readouterr().err
    assert docgen.main([]) == 0 and docgen.main(["--check"]) == 0
    doc.write_text(doc.read_text().replace("Prove every pin", "Prove some pins"))
    assert docgen.main(["--check"]) == 1
    assert docgen.main([]) == 0
    usage.write_text(usage.read_text().replace(", ab, bisect, report |", ", report |", 1))
    assert docgen.main(["--check"]) == 1 and "usage.md differs" in capsys.readouterr().err


def _flag_rows() -> dict[str, list[str]]:
    text = (REPO / "docs" / "usage.md").read_text(encoding="utf-8")
    table = text.split(docgen.FLAGS_BEGIN, 1)[1].split(docgen.FLAGS_END, 1)[0]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    return {flag.lstrip("| "): commands.split(", ") for flag, commands, *_ in rows}


def test_usage_md_names_every_command_that_takes_each_common_flag() -> None:
    """A reader looks up `--markdown` in the table and trusts the list: each command there takes the flag (its
    --help names it) and each command whose --help names it is there."""
    helps = docgen.command_help()
    commands = [name for name in helps if name != "stackctl"]
    for shown, listed in _flag_rows().items():
        flags = re.findall(r"`(--[a-z-]+)", shown)
        taking = [name for name in commands if any(re.search(rf"(?<![\w-]){f}(?![\w-])", helps[name].split(
            "Options", 1)[-1]) for f in flags)]
        assert listed == (["every command"] if taking == commands else taking), shown


def test_every_option_three_commands_share_is_a_common_flag() -> None:
    shown = " ".join(_flag_rows())
    options = docgen.command_options()
    shared = {o for opts in options.values() for o in opts
              if sum(o in other for other in options.values()) >= 3 and o not in ("--help",)}
    assert not sorted(o for o in shared if f"`{o}" not in shown)


def test_readme_is_short_and_says_what_stackctl_is_for_first() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    purpose = text.split("\n\n")[1]
    assert purpose.startswith("stackctl ") and "```" not in purpose and purpose.count(". ") == 0


def test_every_relative_link_of_the_documentation_names_a_file() -> None:
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            path = (page.parent / target).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken


def test_every_python_name_the_documentation_gives_exists() -> None:
    """A reader imports what the text names (`stackctl.resolve.fetch_wheelhouse`): each dotted name is a module,
    or a module's attribute, of this tree."""
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md")),
             REPO / "benchmarks" / "README.md"]
    missing = []
    for page in pages:
        for name in set(re.findall(r"(?<![\w.-])stackctl(?:\.[A-Za-z_]\w*)+", page.read_text(encoding="utf-8"))):
            module, _, attr = name.rpartition(".")
            try:
                importlib.import_module(name)
            except ModuleNotFoundError:
                try:
                    found = hasattr(importlib.import_module(module), attr)
                except ModuleNotFoundError:
                    found = False
                if not found:
                    missing.append(f"{page.relative_to(REPO)}: {name}")
    assert not missing
