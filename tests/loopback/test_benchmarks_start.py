"""Every script in benchmarks/ starts as CONTRIBUTING tells a reader to start it (`python benchmarks/X.py`, from
the checkout's root): `--help` prints its usage and exits 0, so a script that stops starting (a name that
shadows the standard library, an import that moved) fails the suite rather than the next reader."""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPTS = sorted((REPO / "benchmarks").glob("*.py"))


def _started_as_a_user_would(script: Path) -> subprocess.CompletedProcess[str]:
    """`python benchmarks/X.py --help` from the root, under -S. Python puts the script's directory first on
    sys.path, so benchmarks/NAME.py is what `import NAME` finds for the script and for every module it
    imports. Without -S, a .pth file of the environment that imports the standard library at start-up
    (certifi's, through tempfile, imports random and bisect) would have those modules loaded before the
    script's directory is searched and hide the shadowing; PYTHONPATH names what site would have added."""
    path = [str(REPO), *site.getsitepackages(), site.getusersitepackages()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([sys.executable, "-S", str(script.relative_to(REPO)), "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_there_are_benchmarks_to_start() -> None:
    assert len(SCRIPTS) >= 13


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_each_benchmark_starts_and_says_its_usage(script: Path) -> None:
    done = _started_as_a_user_would(script)
    assert done.returncode == 0, f"python {script.relative_to(REPO)} --help failed:\n{done.stderr[-3000:]}"
    assert done.stdout.startswith(f"usage: {script.name} "), done.stdout[:500]
    assert "--help" in done.stdout and not done.stderr


def test_no_script_is_named_as_a_standard_library_module() -> None:
    """A script of benchmarks/ or examples/ (a .py file outside any package) is run by path, its directory
    first on sys.path: named like a standard library module, it replaces that module for everything it imports."""
    scripts = [p for top in ("benchmarks", "examples") for p in (REPO / top).rglob("*.py")
               if not (p.parent / "__init__.py").exists()]
    shadowing = sorted(str(p.relative_to(REPO)) for p in scripts if p.stem in sys.stdlib_module_names)
    assert not shadowing, f"these scripts shadow the standard library: {shadowing}"


def test_contributing_names_every_benchmark() -> None:
    section = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8").split("## Benchmarks", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"(?:`|benchmarks/)(\w+\.py)`", section))
    assert sorted(s.name for s in SCRIPTS if s.name not in named) == []
