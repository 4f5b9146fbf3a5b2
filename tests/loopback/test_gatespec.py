"""The gate spec rendered from profiles, and `stackctl gate --python` against a real virtualenv."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from stackctl.errors import InputError
from stackctl.image.gatespec import gate_spec, installed_pins
from stackctl.profile.loader import load_stack
from stackctl.resolve.lock import Lock, LockedFile, LockedPin, read_lock
from tests.conftest import STACKS
from tests.support.cli import Cli
from tests.support.imagestack import TARGET, VERSIONS, build_wheels, make_stack_repo, unpack


def test_reference_stack_spec_order_and_checks() -> None:
    spec = gate_spec(load_stack(STACKS / "torch-2.11-post2.toml"))
    dists = [e["dist"] for e in spec["entries"]]
    assert dists.index("torchada") < dists.index("torch")
    torch = next(e for e in spec["entries"] if e["dist"] == "torch")
    assert torch == {"dist": "torch", "module": "torch", "mode": "import", "check": "exact",
                     "expected": "2.11.0.post2+musa5.2.0", "note": ""}
    numpy = next(e for e in spec["entries"] if e["dist"] == "numpy")
    assert (numpy["check"], numpy["expected"]) == ("prefix", "1.26.")
    tile = next(e for e in spec["entries"] if e["dist"] == "tilelang_musa")
    # Its import needs a GPU: the image finds the module and checks the version, without importing it.
    assert (tile["module"], tile["mode"], tile["expected"]) == ("tilelang", "spec", "0.1.12+musa.2")
    assert spec["probes"] == [{"name": "torchada fused-MoE configs", "kind": "file-count", "package": "torchada",
                               "glob": "triton/autotune/fused_moe/configs/*.json", "count": 100}]
    assert {"dist": "deep_ep", "version": "1.1.0+musa5.2.0torch2.11.0.post2"} in spec["preserve"]


SKIP = """
[stack]
name = "s"
[targets]
python = ["3.10"]
platforms = ["linux_x86_64"]
[indexes.vendor]
url = "https://vendor.example/simple/"
[pins.torch_musa]
version = "{musa}"
index = "vendor"
gate = {{ order = 1 }}
[pins.flash_mla]
version = "1.0"
index = "vendor"
gate = {{ order = 2, skip_import_if = "{cond}" }}
"""


@pytest.mark.parametrize(("musa", "cond", "mode"), [
    ("2.9.1.post1+musa5.2.0", "torch_musa<2.11", "version"),  # the local label and .post compare as PEP 440 says
    ("2.11.0.post2+musa5.2.0", "torch_musa<2.11", "import"),
    ("2.11.0.post2+musa5.2.0", "torch_musa>=2.11.0.post2", "version"),
    ("2.11.0.post1+musa5.2.0", "torch-musa>=2.11.0.post2", "import"),  # names compare normalized
])
def test_skip_import_if_is_decided_against_the_exact_pin(tmp_path: Path, musa: str, cond: str, mode: str) -> None:
    p = tmp_path / "s.toml"
    p.write_text(textwrap.dedent(SKIP.format(musa=musa, cond=cond)))
    e = gate_spec(load_stack(p))["entries"][1]
    assert e["mode"] == mode
    assert (e["note"] == f"import skipped: {cond}") == (mode == "version")


def test_skip_import_if_naming_no_pin_is_an_input_error(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(textwrap.dedent(SKIP.format(musa="2.11", cond="torch_musa<2")))
    stack = load_stack(p)  # the loader refuses this too; gate_spec must not trust its input
    pin = stack.pins[1]
    assert pin.gate is not None
    odd = replace(stack, pins=(stack.pins[0], replace(pin, gate=replace(pin.gate, skip_import_if="torchaudio<2"))))
    with pytest.raises(InputError, match="names torchaudio, which this stack does not pin"):
        gate_spec(odd)


def test_preserve_covers_the_lock_closure(tmp_path: Path) -> None:
    repo = make_stack_repo(tmp_path, "g", "127.0.0.1:5000/t/g", commit=False)
    pins = dict(installed_pins(repo.stack, read_lock(repo.lock), TARGET))
    assert pins == {"patcher": "1.0.0", "corelib": "2.0.0+vendor1", "corelib-ext": "2.0.0+vendor1",
                    "toplib": "0.3.0", "helperdep": "1.4"}


def test_preserve_expects_the_version_the_wheel_installs(tmp_path: Path) -> None:
    # common.txt pins numpy==1.26; the wheel pip installs for it says 1.26.0, and so will its metadata.
    stack = load_stack(STACKS / "torch-2.11-post2.toml")
    numpy = stack.pin("numpy")
    assert numpy is not None and numpy.version == "1.26"
    lock = Lock(stack.name, stack.digest(), (LockedPin("numpy", "1.26", "public", (
        LockedFile("cp310-linux_x86_64", "numpy-1.26.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                   "http://127.0.0.1:9/numpy.whl", "0" * 64),)),))
    assert dict(installed_pins(stack, lock, "cp310-linux_x86_64"))["numpy"] == "1.26.0"
    assert dict(installed_pins(stack, None, None))["numpy"] == "1.26"  # no lock: only the pin is known


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    v = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(v)], check=True)
    site = next(v.glob("lib/python*/site-packages"))
    unpack(build_wheels(tmp_path / "wh", VERSIONS), site)
    return v / "bin" / "python"


def test_cli_gate_passes_a_virtualenv(tmp_path: Path, venv: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "g", "127.0.0.1:5000/t/g", commit=False)
    r = cli("gate", str(repo.profile), "--python", str(venv), "--lock", str(repo.lock))
    assert r.code == 0, r.out + r.err
    assert "PASS import patcher version=1.0.0" in r.out
    assert "PASS spec corelib_ext version=2.0.0+vendor1" in r.out
    assert "PASS preserve helperdep==1.4" in r.out
    r = cli("gate", str(repo.profile), "--python", str(venv), "--json")
    data = json.loads(r.out)
    assert r.code == 0 and data["failed"] == 0 and data["passed"] == 10


def test_cli_gate_fails_on_wrong_order_and_wrong_pin(tmp_path: Path, venv: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "g", "127.0.0.1:5000/t/g", {"toplib": "0.3.1"}, commit=False,
                           orders={"patcher": 2, "corelib": 1})
    r = cli("gate", str(repo.profile), "--python", str(venv))
    assert r.code == 1
    assert "FAIL import corelib: ImportError: corelib needs patcher imported first" in r.out
    assert "FAIL import toplib version=0.3.0 expected=0.3.1" in r.out
    assert "error: gate of g under" in r.err and "checks failed" in r.err


def test_cli_gate_bad_interpreter_is_input_error(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "g", "127.0.0.1:5000/t/g", commit=False)
    r = cli("gate", str(repo.profile), "--python", str(tmp_path / "nope"))
    assert r.code == 2 and "no such interpreter" in r.err


def test_cli_gate_that_never_ran_is_not_a_pass(tmp_path: Path, cli: Cli) -> None:
    # An "interpreter" that exits 0 without running the script printed no summary: that is no gate at all.
    repo = make_stack_repo(tmp_path, "g", "127.0.0.1:5000/t/g", commit=False)
    r = cli("gate", str(repo.profile), "--python", "/bin/true")
    assert r.code == 2
    assert "error: gate of g under /bin/true did not run (exit 0, no gate output)" in r.err
    r = cli("gate", str(repo.profile), "--python", "/bin/true", "--json")
    assert r.code == 2 and json.loads(r.out)["finished"] is False


def test_cli_gate_names_a_crashing_import(tmp_path: Path, venv: Path, cli: Cli) -> None:
    # corelib's import kills the interpreter (as a GPU library can without its device): exit 1, the signal
    # named, the PASS lines before it kept, and faulthandler's dump naming the module on stderr.
    site = next(venv.parent.parent.glob("lib/python*/site-packages"))
    (site / "corelib" / "__init__.py").write_text("import ctypes\nctypes.string_at(0)\n")
    repo = make_stack_repo(tmp_path, "g", "127.0.0.1:5000/t/g", commit=False)
    r = cli("gate", str(repo.profile), "--python", str(venv))
    assert r.code == 1, r.out + r.err
    assert "PASS import patcher version=1.0.0" in r.out
    assert "was killed by SIGSEGV after 1 check, last 'PASS import patcher version=1.0.0'" in r.err
    assert "corelib/__init__.py" in r.err


def test_cli_gate_spec_only_renders_a_real_stack_without_running(
        tmp_path: Path, cli: Cli) -> None:
    r = cli("gate", str(STACKS / "torch-2.11-post2.toml"), "--spec-only", "--python", "/nonexistent/python")
    assert r.code == 0, r.err
    spec = json.loads(r.out)
    assert [e["dist"] for e in spec["entries"]][:3] == ["torchada", "numpy", "torch"]
    out = tmp_path / "spec.json"
    r = cli("gate", str(STACKS / "torch-2.11-post2.toml"), "--spec-only", "--spec-out", str(out))
    assert r.code == 0 and r.out == "" and json.loads(out.read_text()) == spec


@pytest.mark.parametrize(("written", "rendered"), [("1.26.", "1.26."), ("1.26", "1.26."), ("==1.26.*", "1.26."),
                                                   (" == 1.26.* ", "1.26."), (">=1.26", None), ("1.26.*", None)])
def test_prefix_forms(tmp_path: Path, written: str, rendered: str | None) -> None:
    p = tmp_path / "s.toml"
    p.write_text(textwrap.dedent(SKIP.format(musa="2.11", cond="torch_musa<2")).replace(
        "gate = { order = 1 }", f"gate = {{ order = 1, check = \"prefix\", prefix = \"{written}\" }}"))
    stack = load_stack(p)
    if rendered is None:
        with pytest.raises(InputError, match="is not a version prefix"):
            gate_spec(stack)
    else:
        assert gate_spec(stack)["entries"][0]["expected"] == rendered


def test_spec_out_that_cannot_be_written(cli: Cli) -> None:
    r = cli("gate", str(STACKS / "torch-2.11-post2.toml"), "--spec-only", "--spec-out", "/proc/stackctl-nope/s.json")
    assert r.code == 2 and "cannot write the gate spec" in r.err
