"""CI annotations: GitHub workflow commands (escaped as the runner decodes them) and GitLab Code Quality."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackctl.base.annotations import (
    Annotation,
    Level,
    escape_data,
    escape_property,
    github_command,
    gitlab_report,
    relative,
)
from tests.conftest import DATA, STACKS
from tests.support.cli import Cli

TWO_ERRORS = """\
[stack]
name = "two"

[targets]
python = ["3.12"]
platforms = ["linux_x86_64"]

[indexes.public]
from_pip = true

[pins.torch]
version = "2.9.0"
index = "public"
verison = "2.9.0"

[imagee]
base = "x"
repository = "r"
tag = "t"
"""


def _unescape(text: str) -> str:
    """What the runner does to a property or message (its decoder reverses the five escapes)."""
    for raw, escaped in (("\r", "%0D"), ("\n", "%0A"), (":", "%3A"), (",", "%2C"), ("%", "%25")):
        text = text.replace(escaped, raw)
    return text


def test_escaping_follows_the_workflow_command_rules() -> None:
    assert escape_data("50% done\r\nnext: a, b") == "50%25 done%0D%0Anext: a, b"
    assert escape_property("C:\\a,b%\n") == "C%3A\\a%2Cb%25%0A"
    # already-escaped text is escaped again, so the runner shows it as written
    assert escape_data("%0A") == "%250A"
    line = github_command(Annotation(Level.WARNING, "line one\nline 100%", "dir, x/a:b.toml", 7, "t: x"))
    assert line == "::warning file=dir%2C x/a%3Ab.toml,line=7,title=t%3A x::line one%0Aline 100%25"
    head, _, message = line[2:].partition("::")
    assert "\n" not in line and _unescape(message) == "line one\nline 100%"
    props = dict(p.split("=", 1) for p in head.split(" ", 1)[1].split(","))
    assert {k: _unescape(v) for k, v in props.items()} == {"file": "dir, x/a:b.toml", "line": "7", "title": "t: x"}


def test_properties_left_out_when_unknown() -> None:
    assert github_command(Annotation(Level.ERROR, "whole file", "a.lock")) == "::error file=a.lock::whole file"
    assert github_command(Annotation(Level.NOTICE, "no file")) == "::notice::no file"


def test_paths_are_relative_to_the_repository() -> None:
    assert relative("stacks/a.toml", "/repo", "/repo") == "stacks/a.toml"
    assert relative("a.toml", "/repo", "/repo/stacks") == "stacks/a.toml"
    assert relative("/repo/stacks/../stacks/a.toml", "/repo", "/elsewhere") == "stacks/a.toml"
    assert relative("/other/a.toml", "/repo", "/repo") == "/other/a.toml"  # outside: as given
    assert relative("../repo2/a.toml", "/repo", "/repo") == "../repo2/a.toml"


def test_gitlab_report_has_one_issue_per_problem_with_a_file() -> None:
    items = [Annotation(Level.ERROR, "bad key", "stacks/a.toml", 3, "stackctl validate"),
             Annotation(Level.ERROR, "bad key", "stacks/a.toml", 4, "stackctl validate"),
             Annotation(Level.ERROR, "bad key", "stacks/a.toml", 3, "stackctl validate"),  # the same again
             Annotation(Level.WARNING, "stale", "README.md", None, "stackctl scan"),
             Annotation(Level.ERROR, "no file at all")]
    report = gitlab_report(items)
    assert [(i["location"]["path"], i["location"]["lines"]["begin"], i["severity"]) for i in report] == [
        ("stacks/a.toml", 3, "major"), ("stacks/a.toml", 4, "major"), ("README.md", 1, "minor")]
    assert len({i["fingerprint"] for i in report}) == 3
    assert all(set(i) == {"description", "check_name", "fingerprint", "severity", "location"} for i in report)


@pytest.fixture
def two_errors(tmp_path: Path) -> Path:
    (tmp_path / "stacks").mkdir()
    profile = tmp_path / "stacks" / "two.toml"
    profile.write_text(TWO_ERRORS)
    return profile


def test_validate_under_github_actions_annotates_each_problem(
        cli: Cli, two_errors: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(two_errors.parent.parent))
    r = cli("validate", str(two_errors))
    assert r.code == 2
    assert r.out.splitlines() == [
        "::error file=stacks/two.toml,line=14,title=stackctl validate::pins.torch.verison: unknown key; "
        "did you mean 'version'?",
        "::error file=stacks/two.toml,line=16,title=stackctl validate::imagee: unknown key; did you mean 'image'?"]
    # the terminal's output is the same as without annotations
    assert [ln.split(" ", 2)[2] for ln in r.err.splitlines()] == [
        "pins.torch.verison: unknown key; did you mean 'version'?", "imagee: unknown key; did you mean 'image'?"]
    monkeypatch.delenv("GITHUB_ACTIONS")
    plain = cli("validate", str(two_errors))
    assert plain.code == 2 and plain.out == "" and plain.err == r.err


def test_annotations_go_to_stderr_when_json_claims_stdout(
        cli: Cli, two_errors: Path) -> None:
    r = cli("validate", str(two_errors), "--json", "--annotations", "github")
    assert r.code == 2
    assert json.loads(r.out)["exit_code"] == 2
    assert sum(ln.startswith("::error file=") for ln in r.err.splitlines()) == 2


def test_a_good_profile_prints_no_annotation(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    r = cli("validate", str(STACKS / "public-example.toml"))
    assert r.code == 0 and "::" not in r.out and r.out.startswith("ok ")
    off = cli("validate", str(DATA / "bad-everything" / "stack.toml"), "--annotations", "none")
    assert off.code == 2 and off.out == ""


def test_gitlab_report_is_written_for_failures_and_for_a_clean_run(
        cli: Cli, two_errors: Path, tmp_path: Path) -> None:
    report = tmp_path / "out" / "gl-code-quality.json"
    r = cli("validate", str(two_errors), "--annotations", f"gitlab={report}", cwd=tmp_path)
    assert r.code == 2 and r.out == ""  # no GitHub commands unless asked
    issues = json.loads(report.read_text())
    assert [(i["location"]["path"], i["location"]["lines"]["begin"]) for i in issues] == [
        ("stacks/two.toml", 14), ("stacks/two.toml", 16)]
    assert issues[0]["check_name"] == "stackctl validate"
    assert cli("validate", str(STACKS / "public-example.toml"), "--annotations", f"gitlab={report}").code == 0
    assert json.loads(report.read_text()) == []
    assert not [p for p in report.parent.iterdir() if p.name != report.name]  # written atomically, no leftovers


def test_a_bad_annotations_value_is_a_usage_error(cli: Cli, two_errors: Path) -> None:
    r = cli("validate", str(two_errors), "--annotations", "jenkins")
    assert r.code == 2
    assert r.err.strip() == "error: --annotations 'jenkins': use github, gitlab=PATH or none"
