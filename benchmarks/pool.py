"""Engine pool benchmark: a sibling stack on a second engine, with the registry as the shared cache, against
the same build cold on that engine (what a second build host does without it), in the same run.

1. engine A builds post1 (`stackctl build --all post1 --engine a=...`): cold, and pushes its layer-group
   stages to the registry;
2. engine B builds post2 (the sibling: the top-of-stack pin moves, everything else byte-identical) with the
   registry as its cache: seconds, stage images pulled and their compressed bytes, steps taken from cache;
3. engine B builds post2 again with `--no-cache`: what B does when nothing tells it what A pushed.

    python benchmarks/pool.py [--core-mb 300] [--installer uv|pip] [--json]
    STACKCTL_POOL_A=unix:///run/stackctl-d26c.sock STACKCTL_POOL_B=unix:///run/stackctl-dbench.sock \
        python benchmarks/pool.py          # BuildKit: bake on each engine, BuildKit's registry cache between them

Needs the engines, registry and base image `.ci/services.sh` starts (the second engine: `.ci/engine2.sh`).
The stack is the synthetic, torch-shaped one of benchmarks/image.py: a big vendor train of incompressible
bytes, a closure, a patcher and the top-of-stack pin that moves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import docker  # noqa: E402
from image import fatten, relock  # noqa: E402

from tests.support.engine import _engine_shared, dangling_stage_images, remove_new_stage_images  # noqa: E402
from tests.support.imagestack import make_stack_repo  # noqa: E402
from tests.support.imagetest import remove_images  # noqa: E402

# STACKCTL_POOL_A / STACKCTL_POOL_B: other engines, e.g. two Docker 26 engines of the containerd store, where
# `build --all` bakes through BuildKit and shares its registry cache instead of stage images
FIRST = os.environ.get("STACKCTL_POOL_A") or "unix:///var/run/docker.sock"
SECOND = os.environ.get("STACKCTL_POOL_B") or os.environ.get("STACKCTL_TEST_ENGINE2") or "unix:///run/stackctl-engine2.sock"
REGISTRY = os.environ.get("STACKCTL_TEST_REGISTRY") or "127.0.0.1:5000"
BASE = "stackctl-base:bookworm"


def stacks(tmp: Path, repository: str, core_mb: int, installer: str) -> Path:
    seed = uuid.uuid4().hex[:8]
    one = make_stack_repo(tmp, "post1", repository, nonce=seed, commit=False, installer=installer)
    two = make_stack_repo(tmp, "post2", repository, {"toplib": "0.4.0"}, nonce=seed, commit=False, installer=installer)
    fatten(one.wheelhouse, "corelib-ext", one.versions["corelib-ext"], "corelib_ext", core_mb, seed)
    fatten(one.wheelhouse, "helperdep", one.versions["helperdep"], "helperdep_data", max(core_mb // 10, 1), seed,
           keep={"helperdep.py": "X = 1\n"})
    relock(one)
    relock(two)
    subprocess.run(["git", "add", "-A"], cwd=one.root, check=True)
    subprocess.run(["git", "commit", "-qm", "stacks"], cwd=one.root, check=True)
    return one.root


def build(root: Path, tmp: Path, stack: str, engine: str, *extra: str) -> tuple[float, dict[str, Any]]:
    cmd = [sys.executable, "-m", "stackctl", "build", "--all", f"stacks/{stack}.toml", "--engine", engine,
           "--wheelhouse", str(tmp / "wheelhouse"), "--record-dir", str(tmp / "build" / stack), "--json", *extra]
    t = time.monotonic()
    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    took = time.monotonic() - t
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return took, json.loads(r.stdout)["cells"][0]


def written(client: Any, image: str) -> int:
    """Bytes of the image's layers above the base image (what a build on this engine wrote)."""
    return int(client.images.get(image).attrs["Size"]) - int(client.images.get(BASE).attrs["Size"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--core-mb", type=int, default=300, help="size of the big vendor wheel's payload")
    ap.add_argument("--installer", choices=("uv", "pip"), default="uv")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    a, b = docker.DockerClient(base_url=FIRST), docker.DockerClient(base_url=SECOND)
    repository = f"{REGISTRY}/stackctl-bench/pool-{uuid.uuid4().hex[:10]}"
    # A test session ending meanwhile removes the stage images it thinks are its own, unless it sees us here.
    with _engine_shared() as alone:
        return run(args, a, b, repository, alone)


def run(args: argparse.Namespace, a: Any, b: Any, repository: str, alone: Any) -> int:
    before = {id(c): dangling_stage_images(c) for c in (a, b)}
    try:
        with tempfile.TemporaryDirectory(prefix="stackctl-bench-pool-") as d:
            tmp = Path(d)
            root = stacks(tmp, repository, args.core_mb, args.installer)
            a_secs, a_cell = build(root, tmp, "post1", f"a={FIRST}")
            warm_secs, warm = build(root, tmp, "post2", f"b={SECOND}")
            warm_written = written(b, warm["tag"])
            b.images.remove(warm["tag"], force=True)
            cold_secs, cold = build(root, tmp, "post2", f"b={SECOND}", "--no-cache")
            cold_written = written(b, cold["tag"])
    finally:
        for c in (a, b):
            remove_images(c, repository)
            if alone():
                remove_new_stage_images(c, before[id(c)])
    result = {
        "core_mb": args.core_mb, "installer": args.installer,
        "a_post1": {"seconds": round(a_secs, 1), "build_seconds": a_cell["seconds"], "pushed": a_cell["cache_pushed"]},
        "b_post2_registry_cache": {"seconds": round(warm_secs, 1), "build_seconds": warm["seconds"],
                                   "stages_pulled": warm["cache_pulled"], "bytes_pulled": warm["cache_bytes"],
                                   "steps_cached": f"{warm['steps_cached']}/{warm['steps']}",
                                   "bytes_above_base": warm_written},
        "b_post2_cold": {"seconds": round(cold_secs, 1), "build_seconds": cold["seconds"],
                         "steps_cached": f"{cold['steps_cached']}/{cold['steps']}", "bytes_written": cold_written},
    }
    result["ratio_seconds_warm_over_cold"] = round(warm["seconds"] / cold["seconds"], 2)
    result["ratio_bytes_pulled_over_built"] = round(warm["cache_bytes"] / cold_written, 2)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    mb = 1 << 20
    print(f"engine A, post1 cold, stages pushed    {a_cell['seconds']:7.1f} s   {a_cell['cache_pushed']} stages")
    print(f"engine B, post2 from the registry     {warm['seconds']:7.1f} s   {warm['steps_cached']}/{warm['steps']} "
          f"steps cached, {warm['cache_pulled']} stages pulled, {warm['cache_bytes'] / mb:.1f} MB")
    print(f"engine B, post2 cold (--no-cache)     {cold['seconds']:7.1f} s   {cold_written / mb:.1f} MB written")
    print(f"warm / cold: {result['ratio_seconds_warm_over_cold']}x seconds; "
          f"pulled / built: {result['ratio_bytes_pulled_over_built']}x bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
