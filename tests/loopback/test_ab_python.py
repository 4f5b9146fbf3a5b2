"""`stackctl ab --python`: both legs under interpreters of this host (venvs that differ in one library, as on a GPU
host without an engine), the same plan as the engine's legs run; and the plan's FILE:LINE errors."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.abproject import write_project, write_site
from tests.support.cli import Cli


def _venv(root: Path, variant: str) -> str:
    """A venv that sees this interpreter's packages (pytest) and holds `variant` of the library."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    write_site(Path(site), variant)
    # the system site (pytest) is this interpreter's, which may itself be a venv: reach it by path
    Path(site, "host.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return str(python)


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("ab-envs")
    return {v: _venv(root / v, v) for v in ("base", "removed", "broken")}


def test_python_legs_same_environment_pass_and_record(cli: Cli, tmp_path: Path, envs: dict[str, str]) -> None:
    write_project(tmp_path)
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", envs["base"], "--python",
              envs["base"], "--trial", "unit", "--json", cwd=tmp_path)
    assert res.code == 0, res.err
    result = json.loads(res.out)
    assert result["control"]["kind"] == "python" and result["control"]["ref"] == envs["base"]
    assert result["trials"][0]["verdict"] == "pass"
    assert [g["ok"] for g in result["gates"]] == [True, True]  # the gate, under each leg's interpreter
    assert " ab unit 1/2 control: 4 tests, 0 failed" in res.err  # a timestamped line a run
    assert (tmp_path / "build" / "candidate.ab.json").is_file()


def test_python_legs_a_test_removed_is_not_the_same_inventory(cli: Cli, tmp_path: Path, envs: dict[str, str]) -> None:
    write_project(tmp_path)
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", envs["base"], "--python",
              envs["removed"], "--trial", "unit", "--no-record", cwd=tmp_path)
    assert res.code == 1
    assert "only on the control: test_lib::test_version" in res.out
    assert "error: ab control → candidate: unit: inventory changed" in res.err
    assert not (tmp_path / "build").exists()


def test_python_legs_a_regression_with_markdown(cli: Cli, tmp_path: Path, envs: dict[str, str]) -> None:
    write_project(tmp_path)
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", envs["base"], "--python",
              envs["broken"], "--trial", "unit", "--markdown", "--no-record", cwd=tmp_path)
    assert res.code == 1
    assert "| unit | pytest --pyargs mylib_tests | control: 4 passed, 0 skipped, 0 failed of 4 collected; " \
           "candidate: 3 passed, 0 skipped, 1 failed of 4 collected; fails only on the candidate: " \
           "test_lib::test_work_zero | not a perf test | Regressed |" in res.out
    assert "| unit | candidate candidate | 3 passed, 0 skipped, 1 failed of 4 collected in " in res.out


def test_python_legs_need_two_interpreters(cli: Cli, tmp_path: Path, envs: dict[str, str]) -> None:
    write_project(tmp_path)
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", envs["base"], cwd=tmp_path)
    assert res.code == 2
    assert "--python: give it twice, the control's first and the candidate's second (got 1)" in res.err


def test_plan_errors_name_file_line_and_key(cli: Cli, tmp_path: Path) -> None:
    stacks = write_project(tmp_path)
    (stacks / "validation" / "plan.toml").write_text(
        '[plan]\nname = "p"\n\n[[trial]]\nname = "unit"\nkind = "test"\ncommand = ["{pyhton}"]\n'
        'reepat = 2\n\n[[trial]]\nname = "speed"\nkind = "bench"\ncommand = ["x"]\n')
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", "python3", "--python", "python3",
              cwd=tmp_path)
    assert res.code == 2
    plan = str(Path("stacks") / "validation" / "plan.toml")
    for line in (f"{plan}:8 trial.0.reepat: unknown key; did you mean 'repeat'?",
                 f"{plan}:6 trial.0.kind: 'test' is not a trial kind; use \"tests\" or \"bench\"",
                 f"{plan}:7 trial.0.command.0: {{pyhton}} is not a placeholder",
                 f"{plan}:10 trial.1.metric: missing: a bench trial names its metrics"):
        assert line in res.err, res.err
    assert "Traceback" not in res.err
