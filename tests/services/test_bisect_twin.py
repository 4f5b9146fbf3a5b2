"""`stackctl bisect` on the twin of the MUSA stacks the walkthrough's example index serves (examples/vendor_index.py),
on the real engine, on CPU.

The twins are `stacks/torch-2.11-post1.toml` and `stacks/torch-2.11-post2.toml` with the same pins, trains and
gate, adjusted to the base image here: one target, cp311 (the base image's Python), deep_ep built for it too (the
vendor's is cp310 only), the base image and a repository of the test's own, deep_ep's extension checked by
find_spec in post1 as post2 does and the MUSA run time (`libmusart.so.5`) taken as coming with the device (a CPU
host has none to load it). The example index builds its wheels from the twins, so for cp311. torchada is the
test's own: 0.1.90 does about 40 % more work in the call the plan's benchmark times.

post1 → post2 moves two units: the musa-torch train with deep_ep (whose local label names its torch) and
torchada. Bisect names torchada alone, never the train.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.vendor_index import ExampleIndexes, build_indexes
from tests.conftest import REPO
from tests.support.cli import Cli
from tests.support.engine import unique_tag
from tests.support.gitrepo import git
from tests.support.wheels import build_wheel

pytestmark = pytest.mark.integration

# torchada patches torch at import; `dispatch(n)` stands for the work its shims add to every call
TORCHADA = '''\
__version__ = {version!r}
EXTRA = {extra}


def dispatch(n):
    total = sum(i * i for i in range(n + 1))
    if EXTRA:  # the slow release: the same answer, more work
        sum(i * i for i in range(n // 2, n // 2 + int(n * EXTRA)))
    return total
'''
SLOWER = {"0.1.83": 0, "0.1.90": 0.4}
CONFIGS = "torchada/triton/autotune/fused_moe/configs"  # post2's gate probe counts 100 of them

BENCH = '''\
"""torchada.dispatch timed: 6 samples, each the best of 5 calls (the thread's CPU time), as JSON lines."""
import json
import time

import torchada

for _ in range(6):
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        torchada.dispatch(40000)
        best = min(best, time.thread_time() - start)
    print(json.dumps({"dispatch_ms": best * 1000}))
'''

PLAN = '''\
[plan]
name = "musa-twin"
files = ["suite"]
gate = false   # each image's build ran the gate already

[[trial]]
name = "dispatch"
kind = "bench"
command = ["{python}", "suite/bench.py"]
repeat = 3
max_repeat = 12
timeout = 120

[[trial.metric]]
name = "dispatch_ms"
unit = "ms"
better = "lower"
band = 10
statistic = "best"
'''


def _once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the profile no longer has {old!r} once: update the twin"
    return text.replace(old, new)


def twin_post1(base_image: str, repository: str) -> str:
    """stacks/torch-2.11-post1.toml, pins and trains as they are, its targets and image those of this host."""
    text = (REPO / "stacks" / "torch-2.11-post1.toml").read_text()
    for old, new in (
            ('python = ["3.10", "3.12"]', 'python = ["3.11"]  # the twin: the base image\'s Python'),
            ('python = ["3.10"]                   # the vendor builds deep_ep for cp310 only',
             'python = ["3.11"]                   # the twin builds deep_ep for its one target'),
            # its extension needs the MUSA run time, which a CPU host lacks: found, as post2 checks it
            ("gate = { order = 14 }", 'gate = { order = 14, mode = "spec" }'),
            ('provides = { rdma = ["libmlx5.so*", "libibverbs.so*"] }',
             'provides = { rdma = ["libmlx5.so*", "libibverbs.so*"], musa = ["libmusart.so*"] }'),
            ('base = "musa-runtime:5.2.0-ubuntu22.04"', f'base = "{base_image}"'),
            ('repository = "vllm-musa"', f'repository = "{repository}"'),
            ('python = "3.10"', 'python = "3.11"')):
        text = _once(text, old, new)
    return text


def own_torchada(root: Path, ex: ExampleIndexes) -> None:
    """The example index's torchada wheels replaced by the test's own, under the same names and upload times."""
    for version, extra in SLOWER.items():
        files: dict[str, bytes | str] = {"torchada/__init__.py": TORCHADA.format(version=version, extra=extra)}
        files.update({f"{CONFIGS}/E={e},N={n}.json": "{}\n" for e in range(10) for n in range(10)})
        wheel = build_wheel(root / "own", "torchada", version, files=files, requires_dist=("packaging",))
        ex.public.add(wheel, upload_time=ex.public.files[wheel.name].upload_time, metadata=True)


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory, docker_client: Any, base_image: str
         ) -> Iterator[tuple[Path, ExampleIndexes]]:
    """A repository with the twins, the plan beside them, and the example index built from the twins."""
    from tests.support.imagetest import remove_images

    root = tmp_path_factory.mktemp("twin")
    repository = unique_tag("stackctl-twin")
    repo = root / "repo"
    (repo / "stacks" / "validation" / "suite").mkdir(parents=True)
    (repo / "stacks" / "torch-2.11-post1.toml").write_text(twin_post1(base_image, repository))
    (repo / "stacks" / "torch-2.11-post2.toml").write_text((REPO / "stacks" / "torch-2.11-post2.toml").read_text())
    (repo / "stacks" / "validation" / "plan.toml").write_text(PLAN)
    (repo / "stacks" / "validation" / "suite" / "bench.py").write_text(BENCH)
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "init", "-q", "-b", "main")
    ex = build_indexes(root / "indexes", repo / "stacks")
    own_torchada(root, ex)
    try:
        with ex:
            yield repo, ex
    finally:
        remove_images(docker_client, repository)


def test_the_musa_twin_bisect_names_torchada_not_the_torch_train(
        cli: Cli, twin: tuple[Path, ExampleIndexes], base_image: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo, ex = twin
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(repo.parent / "cache"))
    index = ("--index", f"musa={ex.musa.url}", "--index", f"public={ex.public.url}")
    for stack in ("torch-2.11-post1", "torch-2.11-post2"):
        res = cli("resolve", stack, *index, cwd=repo)
        assert res.code == 0, res.err
    # the ABI check of each stack between looks in the base image, as the README's public example does
    res = cli("inventory", base_image, "--out", "build/base.json", cwd=repo)
    assert res.code == 0, res.err
    lock = json.loads((repo / "stacks" / "torch-2.11-post2.lock").read_text())
    assert "cp311" in json.dumps(lock) and "cp310" not in json.dumps(lock)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the twins, locked")

    started = time.monotonic()
    res = cli("bisect", "torch-2.11-post1", "torch-2.11-post2", "--trial", "dispatch", "--metric", "dispatch_ms",
              "--inventory", "build/base.json", "--json", *index, cwd=repo)
    took = time.monotonic() - started
    result = json.loads(res.out)
    with capsys.disabled():  # what the host could tell, in the CI log
        print(f"\nbisect of the MUSA twin: exit {res.code}; {result['conclusion']}; {result['comparisons']} "
              f"comparisons, {result['builds']} builds, {took:.0f} s")
        for s in result["steps"]:
            delta = "" if s["delta_pct"] is None else f", {s['delta_pct']:+.1f} %"
            print(f"  {s['role']}: {' + '.join(s['units'])}: {s['outcome']} ({s['verdict']}{delta}), "
                  f"{s['seconds']:.0f} s")
    assert res.code == 0, (res.err[-3000:], result["steps"])
    # two units: the train, with deep_ep coupled to it by its local label, and torchada
    assert [u["pins"] for u in result["units"]] == [
        ["torch", "torch_musa", "torchvision", "torchaudio", "deep_ep"], ["torchada"]]
    assert any("musa-torch" in why for why in result["units"][0]["why"])
    assert any("deep_ep" in why and "torch" in why for why in result["units"][0]["why"]), result["units"][0]
    culprits = [(c["kind"], c["pins"], c["alone"], c["without"]) for c in result["culprits"]]
    assert culprits == [("culprit", ["torchada"], "bad", "good")], result["steps"]
    assert result["culprits"][0]["moves"] == [{"pin": "torchada", "before": "0.1.83", "after": "0.1.90"}]
    slowed = [s["delta_pct"] for s in result["steps"] if s["verdict"] == "regressed"]
    assert slowed and all(d > 10 for d in slowed), result["steps"]
    train = [s for s in result["steps"] if s["units"] == [result["units"][0]["name"]]]
    assert [s["outcome"] for s in train] == ["good"], result["steps"]
    assert result["conclusion"] == "culprit: torchada (torchada 0.1.83 → 0.1.90)"
