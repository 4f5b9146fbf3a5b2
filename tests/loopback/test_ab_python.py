"""`stackctl ab --python`: both legs under interpreters of this host (venvs that differ in one library, as on a GPU
host without an engine), the same plan as the engine's legs run; and the plan's FILE:LINE errors."""

from __future__ import annotations

import json
import shutil
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


def test_the_gate_sees_what_the_trials_see_when_pythonpath_shadows_the_venv(cli: Cli, tmp_path: Path,
                                                                           envs: dict[str, str]) -> None:
    """The plan puts a mylib 0.9 first on PYTHONPATH: every trial imports it, so the gate must see it too and fail
    the pin 1.0, rather than certify the venv's 1.0 that no trial runs."""
    stacks = write_project(tmp_path)
    shadow = stacks / "validation" / "shadow"
    write_site(shadow, "base")
    shutil.rmtree(shadow / "mylib_tests")  # the library alone: the suite is the venv's
    lib = shadow / "mylib" / "__init__.py"
    lib.write_text(lib.read_text().replace('__version__ = "1.0"', '__version__ = "0.9"'))
    (shadow / "mylib-1.0.dist-info").rename(shadow / "mylib-0.9.dist-info")
    (shadow / "mylib-0.9.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: mylib\nVersion: 0.9\n")
    plan = stacks / "validation" / "plan.toml"
    text = plan.read_text().replace('env = { AB_RUN = "{run}", PYTHONDONTWRITEBYTECODE = "1" }',
                                    'files = ["shadow"]\nenv = { AB_RUN = "{run}", PYTHONDONTWRITEBYTECODE = "1", '
                                    'PYTHONPATH = "{work}/shadow" }')
    text += ('\n[[trial]]\nname = "which"\nkind = "bench"\nrepeat = 2\ncommand = ["{python}", "-c", '
             '"import json, mylib; print(json.dumps({\'version\': float(mylib.__version__)}))"]\n'
             '[[trial.metric]]\nname = "version"\nbetter = "higher"\nband = 1\n')
    plan.write_text(text)
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", envs["base"], "--python",
              envs["base"], "--trial", "which", "--json", "--no-record", cwd=tmp_path)
    assert res.code == 1, res.err
    result = json.loads(res.out)
    failed = [ln for g in result["gates"] for ln in g["lines"] if ln.startswith("FAIL ")]
    assert any("mylib" in ln and "0.9" in ln for ln in failed), result["gates"]
    # every trial run imported the shadow, which the gate saw and refused
    assert {x for r in result["runs"] for _, v in r["samples"] for x in v} == {0.9}
    assert "gate of the control (all)" in res.err.splitlines()[-1]
    # the reverse: the venv's copy gone from the plan's view, the shadow pinned, the gate passes
    for name in ("control", "candidate"):
        p = stacks / f"{name}.toml"
        p.write_text(p.read_text().replace('expect = "1.0"', 'expect = "0.9"'))
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", envs["base"], "--python",
              envs["base"], "--trial", "which", "--json", "--no-record", cwd=tmp_path)
    assert [g["ok"] for g in json.loads(res.out)["gates"]] == [True, True], res.out


def _chromium() -> str:
    from tests.support.engine import unavailable

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        unavailable("no chromium to open the report in (Debian's package `chromium`)")
    return found


def _fits_1280_px(browser: str, page: Path) -> None:
    """Laid out by the browser in a 1280-px window: the page is no wider than the window, and every table's
    last column (the validation table's device) ends inside it, unclipped."""
    import re

    probe = page.with_name("measured.html")
    probe.write_text(page.read_text().replace("</body>", (
        "<script>const cells=[...document.querySelectorAll('th,td')];"
        "const right=Math.max(0,...cells.map(c=>c.getBoundingClientRect().right));"
        "const clipped=cells.filter(c=>c.scrollWidth>c.clientWidth+1).length;"
        "document.body.insertAdjacentHTML('beforeend','<p id=\"measured\" data-inner=\"'+innerWidth+"
        "'\" data-scroll=\"'+document.documentElement.scrollWidth+'\" data-right=\"'+Math.ceil(right)+"
        "'\" data-clipped=\"'+clipped+'\"></p>')</script></body>")))
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          "--window-size=1280,900", "--dump-dom", probe.as_uri()], capture_output=True, text=True,
                         timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'id="measured" data-inner="(\d+)" data-scroll="(\d+)" data-right="(\d+)" '
                      r'data-clipped="(\d+)"', dom.stdout)
    assert found, dom.stdout[-2000:]
    inner, scroll, right, clipped = (int(g) for g in found.groups())
    assert inner == 1280 and scroll <= inner and right <= inner and clipped == 0, (inner, scroll, right, clipped)
    assert "device" in dom.stdout  # the column the page once cut


def test_pictures_beside_the_record_and_the_html_report_in_a_browser(cli: Cli, tmp_path: Path,
                                                                      envs: dict[str, str]) -> None:
    write_project(tmp_path)
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", envs["base"], "--python",
              envs["base"], "--trial", "speed", "--allow-undecided", "--markdown", cwd=tmp_path)
    assert res.code == 0, res.err
    picture = tmp_path / "build" / "candidate.ab.speed.work_ms.svg"
    svg = picture.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    # each run's samples in its leg's colour, the brackets' deltas, the band and the interval, the verdict
    assert "#1f77b4" in svg and "#d62728" in svg
    for words in ("bracket delta", "band ±10%", "run, in schedule order", "work_ms (ms), lower is better"):
        assert words in svg, words
    assert "![candidate.ab.speed.work_ms.svg](build/candidate.ab.speed.work_ms.svg)" in res.out
    assert "1 picture(s) beside it" in res.err
    # drawn again from the same record, the same bytes: a picture in a pull request does not churn
    from stackctl.ab.plot import pictures

    record = json.loads((tmp_path / "build" / "candidate.ab.json").read_text())
    assert pictures(record["result"], "build/candidate.ab.json") == {"build/candidate.ab.speed.work_ms.svg": svg}

    page = cli("report", "stacks/candidate.toml", "--html", cwd=tmp_path)
    assert page.code == 0, page.err
    written = cli("report", "stacks/candidate.toml", "--html", "--out", "report.html", cwd=tmp_path)
    assert (written.code, written.out) == (0, "wrote report.html\n"), written.err
    assert (tmp_path / "report.html").read_text() == page.out  # --out writes what --html prints
    assert page.out.count("<svg") == 1 and "<figcaption>build/candidate.ab.speed.work_ms.svg</figcaption>" in page.out
    browser = _chromium()
    _fits_1280_px(browser, tmp_path / "report.html")
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          (tmp_path / "report.html").as_uri()], capture_output=True, text=True, timeout=120,
                         check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # the browser parsed the page into the sections, the tables and the picture inline
    assert '<section id="validation">' in dom.stdout and "Validation summary" in dom.stdout
    assert dom.stdout.count("<svg") == 1 and "bracket delta" in dom.stdout
    shot = tmp_path / "report.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1200,2400", f"--screenshot={shot}", (tmp_path / "report.html").as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert shot.stat().st_size > 20_000  # a page with a drawn picture, not a blank one


def test_the_html_report_of_a_gpu_host_ab_with_image_legs_fits_a_1280_px_window(tmp_path: Path) -> None:
    """The GPU host's recorded A/B (benchmarks/gpu-host/results), its legs as images by digest as an engine A/B
    names them: every column, the device last, laid out inside a 1280-px window."""
    import dataclasses

    from stackctl.base.evidence import read_evidence
    from stackctl.cli.report import render_html
    from stackctl.review import Report
    from stackctl.review.validation import validation_section

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu-host" / "results" / "ab-decode-blocking.json"
    record = read_evidence(path, "ab")
    assert record is not None
    section = validation_section(record, str(path), {}, "h200-blocking", frozenset())
    images = (f"127.0.0.1:5000/stackctl/torch-2.11-post1@sha256:{'a' * 64} → "
              f"127.0.0.1:5000/stackctl/torch-2.11-post2@sha256:{'b' * 64}")
    summary, *rest = section.tables
    column = summary.columns.index("images (control → candidate)")
    rows = tuple((*r[:column], images, "1" * 40 + " → " + "2" * 40, *r[column + 2:]) for r in summary.rows)
    section = dataclasses.replace(section, tables=(dataclasses.replace(summary, rows=rows), *rest))
    page = tmp_path / "report.html"
    page.write_text(render_html(Report("h200-blocking", "h200", "an A/B on the GPU host", (section,))))
    _fits_1280_px(_chromium(), page)


def test_report_html_excludes_the_other_formats(cli: Cli, tmp_path: Path) -> None:
    write_project(tmp_path)
    res = cli("report", "stacks/candidate.toml", "--html", "--json", cwd=tmp_path)
    assert res.code == 2 and "error: --html excludes --json and --markdown: pick one" in res.err


def test_a_sweep_runs_each_cell_and_gives_the_summary_one_row(cli: Cli, tmp_path: Path, envs: dict[str, str]) -> None:
    stacks = write_project(tmp_path)
    plan = stacks / "validation" / "plan.toml"
    plan.write_text(plan.read_text() + (
        '\n[[trial]]\nname = "scale"\nkind = "bench"\nrepeat = 2\nmax_repeat = 2\nconfig = "n = {n}"\n'
        'command = ["{python}", "-c", "import json, os; [print(json.dumps({\'n\': int(os.environ[\'N\'])})) '
        'for _ in range(3)]"]\nenv = { N = "{n}" }\n[trial.matrix]\nn = [10, 20]\n'
        '[[trial.metric]]\nname = "n"\nbetter = "lower"\nband = 1\n'))
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", envs["base"], "--python",
              envs["base"], "--trial", "scale", "--json", "--no-record",
              cwd=tmp_path)
    assert res.code == 0, res.err
    result = json.loads(res.out)
    assert [(t["trial"], t["sweep"], t["verdict"]) for t in result["trials"]] == [
        ("scale[n=10]", "scale", "neutral"), ("scale[n=20]", "scale", "neutral")]
    # each cell's runs saw its own value
    assert {r["trial"]: r["samples"][0][1][0] for r in result["runs"]} == {"scale[n=10]": 10.0, "scale[n=20]": 20.0}
    md = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", envs["base"], "--python",
             envs["base"], "--trial", "scale", "--markdown", "--no-record", cwd=tmp_path)
    assert "| scale | sweep n = 10, 20 | — | +0.000% to +0.000%, all neutral | Neutral |" in md.out
