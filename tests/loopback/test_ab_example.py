"""docs/ab.md's example that runs anywhere, word for word: two virtual environments of this host's `python3`
holding tinymath 1.0 and 1.1 (examples/ab/), and `ab --python` over the plan beside the profiles: the gate and
the suite pass on both legs, the benchmark improves on a metric and on its inverse alike, and swapped, it
regresses with the error line the doc quotes."""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO
from tests.support.cli import Cli


def example_commands() -> list[str]:
    """Every command of the section's `sh` block, in order, as written; a line ending in a backslash goes on on
    the next."""
    text = (REPO / "docs" / "ab.md").read_text()
    section = text.split("## An example that runs anywhere", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [c.strip() for b in blocks for c in re.sub(r"\\\n\s*", "", b).splitlines() if c.strip()]


def _mirrored(a: float, b: float) -> bool:
    """Two changes in percent that undo each other: (1 + a) * (1 + b) = 1."""
    return math.isclose(math.log1p(a / 100), -math.log1p(b / 100), rel_tol=1e-9, abs_tol=1e-9)


def test_the_docs_example_runs_as_written(cli: Cli, tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples" / "ab", tmp_path / "examples" / "ab",
                    ignore=shutil.ignore_patterns("__pycache__"))
    commands = example_commands()
    assert [shlex.split(c)[0] for c in commands] == ["python3", "python3", "build/ab-example/control/bin/python",
                                                     "build/ab-example/candidate/bin/python", "stackctl", "stackctl",
                                                     "stackctl"]
    results = []
    for command in commands:
        words = shlex.split(command)
        if words[0] == "stackctl":
            results.append(cli(*words[1:], cwd=tmp_path))
            continue
        done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    first, markdown, swapped = results

    assert first.code == 0, first.err
    assert first.out.rstrip().endswith("ab passed")
    record = json.loads((tmp_path / "build" / "tinymath-1.1.ab.json").read_text())["result"]
    assert [(g["leg"], g["ok"]) for g in record["gates"]] == [("control", True), ("candidate", True)]
    unit, speed = record["trials"]
    assert unit["verdict"] == "pass" and unit["tests"]["candidate"]["passed"] == 3
    assert speed["verdict"] == "improved" and all(o["equal"] for o in speed["outputs"])
    work, passes = speed["metrics"]
    assert (work["metric"], passes["metric"]) == ("work_ms", "passes_per_s")
    assert work["verdict"] == passes["verdict"] == "improved" and work["delta_pct"] < -50
    # one measurement and its inverse: the interval turned round, the same band told
    assert _mirrored(work["delta_pct"], passes["delta_pct"])
    assert _mirrored(work["low_pct"], passes["high_pct"]) and _mirrored(work["high_pct"], passes["low_pct"])

    assert markdown.code == 0, markdown.err
    assert "### Validation summary: tinymath-1.1 (passed)" in markdown.out
    assert re.search(r"^\| speed \| tinymath.total\(n\) for n up to 499, best of 3 \| exact outputs: answer.txt \| "
                     r"work_ms -\S+% \[.*\]; passes_per_s \+\S+% \[.*\] \| Improved \|$", markdown.out, re.M), \
        markdown.out

    assert swapped.code == 1
    assert "error: ab tinymath-1.1 → tinymath-1.0: speed: regressed (work_ms +" in swapped.err
    assert "passes_per_s -" in swapped.err and "wholly beyond ±5% (-4.76% to +5%)" in swapped.err
