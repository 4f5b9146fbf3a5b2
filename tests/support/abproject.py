"""A tiny project for `stackctl ab`: a library (`mylib`) with its test suite and benchmark installed beside it
(`mylib_tests`, run with `pytest --pyargs` and `python -m mylib_tests.bench`), in variants a candidate can
differ by, the two stacks' profiles and the validation plan.

The same files go into an image's dist-packages (tests/services) or a venv's site-packages (tests/loopback), so
one plan runs in both kinds of leg.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import textwrap
from pathlib import Path

VARIANTS = ("base", "broken", "added", "removed", "slow", "slow5", "flaky")

LIB = '''\
"""mylib {variant}"""
__version__ = "1.0"
FLAKY = {flaky}
EXTRA = {extra}


def work(n):
    total = sum(i * i for i in range(n + 1))
    if EXTRA:  # the slow variants: the same answer, 30% (or 5%) more work
        sum(i * i for i in range(n // 2, n // 2 + int(n * EXTRA)))  # numbers of the loop's own sizes
    return total {broken}
'''

TESTS = '''\
import os

import mylib


def test_work_small():
    assert mylib.work(3) == 14


def test_work_zero():
    assert mylib.work(0) == 0


def test_version():
    assert mylib.__version__ == "1.0"


def test_sometimes():
    # fails on the first run in a leg (AB_RUN=0) where the library is the flaky build; passes on the rerun
    assert not (mylib.FLAKY and os.environ.get("AB_RUN") == "0")
'''

EXTRA_TEST = '''\
import mylib


def test_new_feature():
    assert mylib.work(1) == 1
'''

BENCH = '''\
"""Time mylib.work: 6 samples, each the best of 5 calls, as JSON lines; the answer into OUT/answer.txt.

The time is the thread's CPU time: on a shared machine (CI's two cores, other jobs beside) the wall clock also
counts the slices other processes take, which is the host's noise, not the library's speed."""
import json
import sys
import time
from pathlib import Path

import mylib

for _ in range(6):
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        mylib.work(40000)
        best = min(best, time.thread_time() - start)
    print(json.dumps({"work_ms": best * 1000}))
Path(sys.argv[1], "answer.txt").write_text(str(mylib.work(1000)) + "\\n")
'''

PLAN = '''\
[plan]
name = "mylib"
description = "mylib's suite and benchmark on both stacks"
env = { AB_RUN = "{run}", PYTHONDONTWRITEBYTECODE = "1" }

[[trial]]
name = "unit"
kind = "tests"
config = "pytest --pyargs mylib_tests"
command = ["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "mylib_tests",
           "--junitxml={out}/junit.xml"]
timeout = 120

[[trial]]
name = "speed"
kind = "bench"
config = "mylib.work(40000), best of 5"
command = ["{python}", "-m", "mylib_tests.bench", "{out}"]
repeat = 3
max_repeat = 12
timeout = 120
outputs = ["answer.txt"]

[[trial.metric]]
name = "work_ms"
unit = "ms"
better = "lower"
band = 10
statistic = "best"  # a CI host's neighbours only ever slow a run: its best sample is its least disturbed
'''


def write_site(site: Path, variant: str) -> Path:
    """`mylib` (with its dist-info, for the gate) and `mylib_tests`, as `variant` has them, into `site`."""
    assert variant in VARIANTS, variant
    extra = {"slow": 0.3, "slow5": 0.05}.get(variant, 0)
    lib = LIB.format(variant=variant, flaky=variant == "flaky", extra=extra,
                     broken="+ (1 if n == 0 else 0)" if variant == "broken" else "")
    (site / "mylib").mkdir(parents=True, exist_ok=True)
    (site / "mylib" / "__init__.py").write_text(lib)
    info = site / "mylib-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mylib\nVersion: 1.0\n")
    tests = site / "mylib_tests"
    tests.mkdir(exist_ok=True)
    (tests / "__init__.py").write_text("")
    suite = TESTS if variant != "removed" else TESTS.replace("def test_version():", "def _test_version():")
    (tests / "test_lib.py").write_text(suite)
    if variant == "added":
        (tests / "test_extra.py").write_text(EXTRA_TEST)
    (tests / "bench.py").write_text(BENCH)
    return site


def profile(name: str, devices: str = "") -> str:
    return textwrap.dedent(f"""\
        [stack]
        name = "{name}"

        [targets]
        python = ["3.11"]
        platforms = ["linux_x86_64"]

        [indexes.public]
        from_pip = true

        [gate.extra.mylib]
        order = 1
        check = "exact"
        expect = "1.0"

        [[gate.probe]]
        name = "mylib answers"
        kind = "expr"
        expr = "mylib.work(3) == 14"
        """) + devices


# The device-node form of [devices] (the MUSA toolkit's shape: nodes, a runtime, an environment), with what every
# engine has: /dev/zero as the node, runc as the runtime. The device phase proves the container was given them.
DEVICES = textwrap.dedent("""\

    [devices]
    nodes = ["/dev/zero:/dev/abdev0"]
    runtime = "runc"
    env = { ABDEV_VISIBLE_DEVICES = "0" }
    name = "a device node"

    [[gate.probe]]
    name = "the device node and its variable are in the leg"
    kind = "expr"
    expr = "os.path.exists('/dev/abdev0') and os.environ.get('ABDEV_VISIBLE_DEVICES') == '0'"
    phase = "device"
    """)


def write_project(root: Path, devices: bool = False) -> Path:
    """stacks/control.toml, stacks/candidate.toml and stacks/validation/plan.toml under `root`."""
    stacks = root / "stacks"
    (stacks / "validation").mkdir(parents=True, exist_ok=True)
    for name in ("control", "candidate"):
        (stacks / f"{name}.toml").write_text(profile(name, DEVICES if devices else ""))
    (stacks / "validation" / "plan.toml").write_text(PLAN)
    return stacks


def copy_pytest(site: Path) -> None:
    """pytest and what it needs, from this interpreter's installation (pure Python: the image's 3.11 reads it)."""
    for name in ("pytest", "pluggy", "iniconfig", "packaging", "pygments"):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in dist.files or ():
            src = Path(str(dist.locate_file(f)))
            if "__pycache__" in f.parts or not src.is_file() or ".." in f.parts:
                continue
            dst = site / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
