"""gates/gate.py run for real, under real interpreters, against wheels unpacked into a site directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support.imagestack import VERSIONS, build_wheels, unpack

GATE = REPO / "gates" / "gate.py"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return unpack(build_wheels(tmp_path / "wh", VERSIONS), tmp_path / "site")


def entry(dist: str, module: str | None = None, mode: str = "import", check: str = "exact",
          expected: str | None = None) -> dict[str, Any]:
    return {"dist": dist, "module": module or dist.replace("-", "_"), "mode": mode, "check": check,
            "expected": expected if expected is not None or check != "exact" else VERSIONS[dist], "note": ""}


def run_gate(site: Path, spec: dict[str, Any], tmp_path: Path, python: str = sys.executable,
             *extra: str) -> tuple[int, list[str]]:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps({"format": 1, "stack": "t", "probes": [], "preserve": [], **spec}))
    env = {"PYTHONPATH": str(site), "PATH": os.environ["PATH"], "PYTHONNOUSERSITE": "1"}
    proc = subprocess.run([python, str(GATE), str(path), *extra], capture_output=True, text=True, env=env,
                          check=False, timeout=60)
    return proc.returncode, proc.stdout.splitlines()


def test_imports_in_order_and_exact_versions_pass(site: Path, tmp_path: Path) -> None:
    code, out = run_gate(site, {"entries": [entry("patcher"), entry("corelib"), entry("toplib")]}, tmp_path)
    assert code == 0, out
    assert "PASS import patcher version=1.0.0" in out
    assert "PASS import corelib version=2.0.0+vendor1" in out
    assert out[-1] == "gate ok: 3 passed, 0 failed"


def test_wrong_order_fails_the_import(site: Path, tmp_path: Path) -> None:
    code, out = run_gate(site, {"entries": [entry("corelib"), entry("patcher")]}, tmp_path)
    assert code == 1
    assert "FAIL import corelib: ImportError: corelib needs patcher imported first" in out
    assert "PASS import patcher version=1.0.0" in out


def test_failed_import_reports_no_version(site: Path, tmp_path: Path) -> None:
    # corelib_ext raises at import: in import mode it fails before any version is read ...
    code, out = run_gate(site, {"entries": [entry("corelib-ext", "corelib_ext")]}, tmp_path)
    assert code == 1
    assert out[1] == "FAIL import corelib_ext: RuntimeError: needs a GPU at import"
    # ... while spec mode finds it without importing, and version mode never touches the module.
    code, out = run_gate(site, {"entries": [entry("corelib-ext", "corelib_ext", mode="spec"),
                                            entry("corelib-ext", "corelib_ext", mode="version")]}, tmp_path)
    assert code == 0, out
    assert out[1:3] == ["PASS spec corelib_ext version=2.0.0+vendor1", "PASS version corelib-ext version=2.0.0+vendor1"]


def test_exact_prefix_present_and_missing(site: Path, tmp_path: Path) -> None:
    spec = {"entries": [entry("toplib", expected="0.3.1"), entry("helperdep", check="prefix", expected="1."),
                        entry("helperdep", check="prefix", expected="2."), entry("patcher", check="present"),
                        entry("absent", check="present", mode="version")]}
    code, out = run_gate(site, spec, tmp_path)
    assert code == 1
    assert "FAIL import toplib version=0.3.0 expected=0.3.1" in out
    assert "PASS import helperdep version=1.4" in out
    assert "FAIL import helperdep version=1.4 expected prefix=2." in out
    assert "PASS import patcher version=1.0.0" in out
    assert "FAIL version absent: distribution absent not installed" in out
    assert out[-1] == "gate FAILED: 2 passed, 3 failed"


def test_probes_and_preserve(site: Path, tmp_path: Path) -> None:
    spec = {"entries": [entry("patcher")],
            "probes": [{"name": "data", "kind": "file-count", "package": "corelib", "glob": "data/*.json", "count": 3},
                       {"name": "too many", "kind": "file-count", "package": "corelib", "glob": "data/*.json",
                        "count": 4},
                       {"name": "v", "kind": "attr", "module": "toplib", "attr": "__version__", "value": "0.3.0"},
                       {"name": "v2", "kind": "attr", "module": "toplib", "attr": "__version__", "value": "9"}],
            "preserve": [{"dist": "helperdep", "version": "1.4"}, {"dist": "corelib_ext", "version": "2.0.0+vendor1"},
                         {"dist": "toplib", "version": "0.2"}, {"dist": "notinstalled", "version": "1.0"}]}
    code, out = run_gate(site, spec, tmp_path)
    assert code == 1
    assert "PASS probe data: 3 files corelib/data/*.json expected=3" in out
    assert "FAIL probe too many: 3 files corelib/data/*.json expected=4" in out
    assert "PASS probe v: toplib.__version__='0.3.0' expected='0.3.0'" in out
    assert "FAIL probe v2: toplib.__version__='0.3.0' expected='9'" in out
    assert "PASS preserve helperdep==1.4" in out
    assert "PASS preserve corelib_ext==2.0.0+vendor1" in out  # names compare normalized
    assert "FAIL preserve toplib expected=0.2 found=0.3.0" in out
    assert "FAIL preserve notinstalled expected=1.0 found=(not installed)" in out


def test_freeze_and_bad_spec(site: Path, tmp_path: Path) -> None:
    code, _ = run_gate(site, {"entries": []}, tmp_path, sys.executable, "--freeze", str(tmp_path / "f.json"))
    assert code == 0
    frozen = json.loads((tmp_path / "f.json").read_text())
    assert frozen["corelib"] == "2.0.0+vendor1" and frozen["helperdep"] == "1.4"
    (tmp_path / "bad.json").write_text("{not json")
    proc = subprocess.run([sys.executable, str(GATE), str(tmp_path / "bad.json")], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and "cannot read spec" in proc.stderr


def _other_pythons() -> list[str]:
    """Real interpreters >= 3.8 on PATH or in the pyenv on PATH (its shims need their environment; skip them).

    The gate runs under each stack's target Python inside its image; CI has only the base image's, so a
    machine with more interpreters proves more.
    """
    pyenv = shutil.which("pyenv")
    root = os.environ.get("PYENV_ROOT") or (
        subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip() if pyenv else "")
    found = []
    for v in ("3.8", "3.9", "3.10", "3.12", "3.13"):
        managed = sorted(str(p) for p in Path(root).glob(f"versions/{v}*/bin/python{v}")) if root else []
        candidates = [*managed, shutil.which(f"python{v}")]
        exe = next((c for c in candidates if c and "/shims/" not in c and Path(c).is_file()), None)
        if exe and subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0:
            found.append(exe)
    return found


@pytest.mark.parametrize("python", _other_pythons() or [sys.executable])
def test_runs_under_other_interpreters(site: Path, tmp_path: Path, python: str) -> None:
    spec = {"entries": [entry("patcher"), entry("corelib"), entry("corelib-ext", "corelib_ext", mode="spec"),
                        entry("helperdep", check="prefix", expected="1.")],
            "probes": [{"name": "data", "kind": "file-count", "package": "corelib", "glob": "data/*.json", "count": 3},
                       {"name": "expression", "kind": "expr", "expr": "len(os.sep) == 1"}],
            "preserve": [{"dist": "toplib", "version": "0.3.0"}]}
    code, out = run_gate(site, spec, tmp_path, python)
    assert code == 0, out
    assert "PASS probe expression: len(os.sep) == 1 is true (len(os.sep) = 1)" in out
    assert out[-1] == "gate ok: 7 passed, 0 failed"


def test_prefix_ends_at_a_dot(site: Path, tmp_path: Path) -> None:
    spec = {"entries": [entry("helperdep", check="prefix", expected="1."),  # 1.4
                        entry("helperdep", check="prefix", expected="1"),
                        entry("helperdep", check="prefix", expected="1.4"),
                        entry("corelib", mode="version", check="prefix", expected="2.0.0"),  # 2.0.0+vendor1
                        entry("toplib", check="prefix", expected="0.3.0."),  # 0.3.0
                        entry("patcher", check="prefix", expected="1.0.0.1"),  # 1.0.0
                        entry("toplib", check="prefix", expected="0")]}
    code, out = run_gate(site, spec, tmp_path)
    assert "FAIL import patcher version=1.0.0 expected prefix=1.0.0.1" in out
    assert code == 1 and out[-1] == "gate FAILED: 6 passed, 1 failed"
    import importlib.util

    mod_spec = importlib.util.spec_from_file_location("stackctl_gate_script", GATE)
    assert mod_spec is not None and mod_spec.loader is not None
    gate = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(gate)
    assert not gate.has_prefix("1.260.0", "1.26.") and not gate.has_prefix("1.260", "1.26")
    assert gate.has_prefix("1.26", "1.26.") and gate.has_prefix("1.26.4", "1.26")
    assert gate.has_prefix("2.11.0.post2+musa5.2.0", "2.11.0.post2")


def test_a_build_steps_gate_gives_what_imports_wrote_the_epochs_time(tmp_path: Path) -> None:
    """A package that writes in its own directory on first import (torchada links configs there) must not
    put the build's clock in the image's last layer: the same stack would not build the same layer twice."""
    site, home, tmp = tmp_path / "site", tmp_path / "home", tmp_path / "tmp"
    for d in (site / "writer", home, tmp):
        d.mkdir(parents=True)
    (site / "writer" / "__init__.py").write_text(
        "import os, pathlib\nhere = pathlib.Path(__file__).parent\n"
        "os.symlink('__init__.py', here / 'alias.py')\n(here / 'cache').mkdir()\n"
        "(here / 'cache' / 'c.json').write_text('{}')\n"
        "pathlib.Path(os.path.expanduser('~'), '.writer').write_text('x')\n__version__ = '1.0'\n")
    (site / "writer-1.0.dist-info").mkdir()
    (site / "writer-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: writer\nVersion: 1.0\n")
    (site / "untouched.txt").write_text("old")
    old = 1_600_000_000
    for path in (*site.rglob("*"), site):
        os.utime(path, (old, old))
    spec = tmp_path / "gate.json"
    spec.write_text(json.dumps({"format": 1, "stack": "t", "probes": [], "preserve": [],
                                "entries": [entry("writer", expected="1.0")]}))
    env = {"PYTHONPATH": str(site), "PATH": os.environ["PATH"], "PYTHONNOUSERSITE": "1", "HOME": str(home),
           "TMPDIR": str(tmp)}
    epoch = 1_700_000_000
    proc = subprocess.run([sys.executable, "-B", str(GATE), str(spec), "--freeze", str(tmp_path / "out" / "i.json"),
                           "--epoch", str(epoch)], capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = [site / "writer", site / "writer" / "alias.py", site / "writer" / "cache",
               site / "writer" / "cache" / "c.json", home / ".writer", home, tmp_path / "out" / "i.json"]
    assert all(p.exists() or p.is_symlink() for p in written)
    assert {str(p.relative_to(tmp_path)): os.lstat(p).st_mtime for p in written} == {
        str(p.relative_to(tmp_path)): epoch for p in written}
    assert os.lstat(site / "untouched.txt").st_mtime == old
    assert os.lstat(site / "writer" / "__init__.py").st_mtime == old


# A device for the parity probe that any interpreter has: values that `.to("fakedev")` moves, where each op is
# computed as a framework computes it on another device (here: in float32, so it differs in the last bits).
FAKEDEV = '''
import struct


class T(list):
    device = "cpu"

    def to(self, device):
        out = T(self)
        out.device = device
        return out

    def softmax(self):
        import math

        e = [math.exp(x) for x in self]
        s = sum(e)
        values = [x / s for x in e]
        if self.device != "cpu":
            values = [struct.unpack("f", struct.pack("f", v))[0] for v in values]
        out = T(values)
        out.device = self.device
        return out

    def tolist(self):
        return list(self)


def wrong(x):
    out = T(v + (0.5 if x.device != "cpu" else 0) for v in x)
    out.device = x.device
    return out
'''


def test_expression_parity_and_raising_probes(site: Path, tmp_path: Path) -> None:
    (site / "fakedev.py").write_text(FAKEDEV)
    probes = [
        {"name": "count", "kind": "expr", "expr": "len(fakedev.T([1, 2])) >= 1"},
        {"name": "two", "kind": "expr", "expr": "len(fakedev.T([1])) >= 2"},
        {"name": "raises", "kind": "expr", "expr": "fakedev.T([])[3]"},
        {"name": "close", "kind": "parity", "setup": "x = fakedev.T([0.1, 0.2, 0.3])", "op": "x.softmax()",
         "device": "fakedev", "atol": 1e-6, "rtol": 1e-5},
        {"name": "far", "kind": "parity", "setup": "x = fakedev.T([0.1, 0.2])", "op": "fakedev.wrong(x)",
         "device": "fakedev", "atol": 1e-6, "rtol": 1e-5},
        {"name": "stayed", "kind": "parity", "setup": "x = fakedev.T([0.1])", "op": "fakedev.T(x)",
         "device": "fakedev"},
    ]
    code, out = run_gate(site, {"entries": [], "probes": probes}, tmp_path)
    assert code == 1
    assert "PASS probe count: len(fakedev.T([1, 2])) >= 1 is true (len(fakedev.T([1, 2])) = 2)" in out
    assert "FAIL probe two: len(fakedev.T([1])) >= 2 is false (len(fakedev.T([1])) = 1)" in out
    assert "FAIL probe raises: IndexError: list index out of range" in out
    close = next(ln for ln in out if ln.startswith(("PASS probe close", "FAIL probe close")))
    assert close.startswith("PASS probe close: fakedev vs cpu, 3 values, max |diff| ")
    assert "FAIL probe far: fakedev vs cpu, 2 values, max |diff| 0.5 at 0 (atol=1e-06, rtol=1e-05): 2 outside the " \
           "tolerance" in out
    # an op whose result never reached the device did not run there: no parity to speak of
    assert "FAIL probe stayed: the result is on cpu, not fakedev: the op did not run there" in out
    assert out[-1] == "gate FAILED: 2 passed, 4 failed"
