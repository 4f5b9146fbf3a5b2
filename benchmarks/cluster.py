"""What a Ray cluster buys and what it costs (`--cluster`), each against the same command run here, in the same run.

1. sweep: a four-cell `[trial.matrix]` sweep (bs = 1, 4, 16, 64) whose runs sleep, a GPU kernel's stand-in that
   takes no CPU, run by `stackctl ab --python PY --python PY --cluster ADDRESS` on a loopback cluster of 2 nodes
   x 2 declared GPUs (each cell a task holding one card for its whole schedule, the cells side by side), against
   the same sweep run here (`ab` without --cluster: one cell after another, a stand-in nvidia-smi on PATH so this
   host shows four cards). The runs' latency depends only on the cell, so every cell is decided from its first
   brackets and both sides run the same schedule. Target: the cluster's wall time <= 0.35x the local one.
2. build: a one-cell `stackctl build --all --cluster ADDRESS` on a one-node cluster (the node's DOCKER_HOST the
   engine of --docker-host, declaring `stackctl-engine`), against the same `build --all` here on that engine,
   each followed by `publish --all`. The node also pushes the image by digest (its OCI layout, made from the
   engine first where the builder wrote none), which `build --all` here leaves to `publish --all`; so besides
   build against build, the node's build is set against the build and the publish here (the same work), and the
   whole against the whole (after the cluster's build, publish checks the digest in the registry and moves the
   tag; where that publish fails, its error is printed and the whole is not compared). The lock's wheel URLs are
   served
   by a loopback HTTP server, so the node fetches them as a build node would. The cluster is started before the
   runs and not counted; each run's connection, task submission and result return are. The first run of each
   side is a warm-up (the engine's cache, the node's wheel cache), not counted; unless --no-cache, the counted
   builds take what they can from the engine's cache (the steps cached are printed), so the cluster's own cost
   is as large a share as it gets. Target: build --all on the cluster <= 1.3x the local one.

The order of the two sides alternates across repetitions (cluster first in the first); the figures are medians.

    python benchmarks/cluster.py [--repeat 3] [--sleep 2.5] [--only sweep|build] [--no-cache] [--json]
    python benchmarks/cluster.py --only build --docker-host unix:///run/stackctl-d26c.sock   # BuildKit

Needs Ray (`pip install 'stackctl[cluster]'`); the build part needs the engine, registry and base image
`.ci/services.sh` starts. Every node is on 127.0.0.1 (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, as the tests' cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REGISTRY = os.environ.get("STACKCTL_TEST_REGISTRY") or "127.0.0.1:5000"
DEFAULT_ENGINE = "unix:///var/run/docker.sock"


def _order(i: int) -> tuple[str, str]:
    return ("cluster", "here") if i % 2 == 0 else ("here", "cluster")


def _median(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]  # a run that failed is NaN
    return statistics.median(xs) if xs else float("nan")


# --- 1. the sweep ------------------------------------------------------------------------------------------------

def sweep(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    from tests.support.raycluster import fake_gpu_bin, run, start_cluster, sweep_project

    # every verdict decided by the first `repeat` brackets: both sides run C T C ... C per cell
    root = sweep_project(tmp / "sweep", sleep=args.sleep, repeat=args.repeat, max_repeat=args.repeat)
    here_env = {"PATH": f"{fake_gpu_bin(tmp / 'here-bin')}:{os.environ.get('PATH', '')}"}
    argv = ("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", sys.executable, "--python",
            sys.executable, "--no-record", "--json")
    times: dict[str, list[float]] = {"cluster": [], "here": []}
    verdicts: dict[str, list[str]] = {}
    places: list[int] = []
    startup: list[float] = []  # a task's seconds less its runs': its worker's start, the legs rebuilt, the return
    with contextlib.contextmanager(start_cluster)(tmp / "ray-sweep", {}, gpu_nodes=2, gpus=2) as cluster:
        for i in range(args.runs):
            for side in _order(i):
                r = run(cluster if side == "cluster" else None, *argv, cwd=root,
                        env=None if side == "cluster" else here_env, timeout=1800)
                if r.code != 0:
                    sys.exit(f"ab ({side}) exited {r.code}:\n{r.err[-3000:]}")
                doc = json.loads(r.out)
                times[side].append(r.seconds)
                verdicts[side] = [t["verdict"] for t in doc["trials"]]
                if side == "cluster":
                    places.append(len({(t["node"], tuple(t["devices"])) for t in doc["cluster"]["tasks"]}))
                    for t in doc["cluster"]["tasks"]:
                        ran = sum(x["seconds"] for x in doc["runs"] if x["trial"] == t["task"])
                        startup.append(t["seconds"] - ran)
                print(f"  sweep run {i + 1} {side:7s} {r.seconds:6.1f} s", file=sys.stderr, flush=True)
    runs_per_cell = 2 * args.repeat + 1
    return {"cells": 4, "runs_per_cell": runs_per_cell, "sleep_s": args.sleep,
            "least_wall_s": round(runs_per_cell * args.sleep, 1),
            "cluster_s": [round(x, 1) for x in times["cluster"]], "here_s": [round(x, 1) for x in times["here"]],
            "ratios": [round(c / h, 3) for c, h in zip(times["cluster"], times["here"], strict=True)],
            "median_cluster_s": round(_median(times["cluster"]), 1),
            "median_here_s": round(_median(times["here"]), 1),
            "median_ratio": round(_median([c / h for c, h in zip(times["cluster"], times["here"], strict=True)]), 3),
            "task_beyond_runs_s": round(_median(startup), 1), "places_per_run": places,
            "same_verdicts": verdicts.get("cluster") == verdicts.get("here")}


# --- 2. the build ------------------------------------------------------------------------------------------------

def build(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    import docker

    from tests.support.engine import _engine_shared, dangling_stage_images, remove_new_stage_images
    from tests.support.imagestack import make_stack_repo
    from tests.support.imagetest import remove_images
    from tests.support.raycluster import run, served, start_cluster

    repository = f"{REGISTRY}/stackctl-bench/cluster-{uuid.uuid4().hex[:10]}"
    client = docker.DockerClient(base_url=args.docker_host)
    engine_env = {"DOCKER_HOST": args.docker_host}
    # the node's wheel cache (~/.cache/stackctl/node) under this run's directory: the raylet's environment is ours
    os.environ["STACKCTL_CACHE_DIR"] = str(tmp / "cache" / "http")
    extra = ("--no-cache",) if args.no_cache else ()
    steps = ("build", "publish")
    publish_errors: list[str] = []
    times: dict[str, dict[str, list[float]]] = {s: {k: [] for k in steps} for s in ("cluster", "here")}
    cells: dict[str, Any] = {}
    cell_s: dict[str, list[float]] = {"cluster": [], "here": []}  # the cell's seconds as the matrix records them
    with _engine_shared() as alone:
        before = dangling_stage_images(client)
        try:
            with served(tmp / "wheelhouse") as files:
                repo = make_stack_repo(tmp, "s1", repository, nonce=uuid.uuid4().hex[:8], files=files)
                one_node = contextlib.contextmanager(start_cluster)(tmp / "ray-build", {"build": args.docker_host})
                with one_node as cluster:
                    def once(side: str, n: int) -> dict[str, float]:
                        where = tmp / "records" / f"{side}-{n}"
                        on = cluster if side == "cluster" else None
                        b = run(on, "build", "--all", "stacks/s1.toml", "--record-dir", str(where), "--json",
                                *extra, cwd=repo.root, env=engine_env, timeout=1800)
                        if b.code != 0:
                            sys.exit(f"build --all ({side}) exited {b.code}:\n{b.err[-3000:]}\n{b.out[-2000:]}")
                        cells[side] = json.loads(b.out)["cells"][0]
                        p = run(None, "publish", "--all", "--record-dir", str(where), "--json", cwd=repo.root,
                                env=engine_env, timeout=1800)
                        if p.code != 0 and side == "here":
                            sys.exit(f"publish --all ({side}) exited {p.code}:\n{p.err[-3000:]}")
                        if p.code != 0:
                            said = [ln for ln in p.err.splitlines() if ln.startswith("error:")]
                            publish_errors.append(f"exit {p.code}: {(said or [p.err[-300:]])[0]}")
                        return {"build": b.seconds, "publish": p.seconds if p.code == 0 else float("nan")}

                    for side in ("cluster", "here"):  # warm-up: the engine's cache, the node's wheels
                        took = once(side, 0)
                        print(f"  build warm-up {side:7s} {_said(took)}", file=sys.stderr, flush=True)
                    for i in range(args.runs):
                        for side in _order(i):
                            took = once(side, i + 1)
                            for k, v in took.items():
                                times[side][k].append(v)
                            cell_s[side].append(cells[side]["seconds"])
                            print(f"  build run {i + 1} {side:7s} {_said(took)}", file=sys.stderr, flush=True)
        finally:
            remove_images(client, repository)
            if alone():
                remove_new_stage_images(client, before)
            client.close()

    def ratios(what: Callable[[str, int], float]) -> list[float]:
        return [round(what("cluster", i) / what("here", i), 3) for i in range(args.runs)]

    out: dict[str, Any] = {"engine": args.docker_host, "no_cache": args.no_cache,
                           "steps_cached": {s: f"{c['steps_cached']}/{c['steps']}" for s, c in cells.items()},
                           "builder": {s: c.get("builder") for s, c in cells.items()}}
    for side in ("cluster", "here"):
        out[side] = {k: [round(x, 1) for x in v] for k, v in times[side].items()}
        for k in steps:
            out[side][f"median_{k}_s"] = round(_median(times[side][k]), 1)
        out[side]["cell_s"] = cell_s[side]
    out["build_ratios"] = ratios(lambda s, i: times[s]["build"][i])
    out["median_build_ratio"] = round(_median(out["build_ratios"]), 3)
    # the node's build pushed the image: the same work here is the build and the publish
    out["same_work_ratios"] = [round(times["cluster"]["build"][i] / (times["here"]["build"][i] +
                                                                      times["here"]["publish"][i]), 3)
                               for i in range(args.runs)]
    out["median_same_work_ratio"] = round(_median(out["same_work_ratios"]), 3)
    out["cluster_publish_errors"] = sorted(set(publish_errors))
    if not publish_errors:
        out["whole_ratios"] = ratios(lambda s, i: times[s]["build"][i] + times[s]["publish"][i])
        out["median_whole_ratio"] = round(_median(out["whole_ratios"]), 3)
    return out


def _said(took: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:6.1f} s" for k, v in took.items())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", dest="runs", type=int, default=3, help="runs of each side (default 3)")
    ap.add_argument("--sleep", type=float, default=2.5, help="seconds each sweep run sleeps (default 2.5)")
    ap.add_argument("--brackets", dest="repeat", type=int, default=3,
                    help="the sweep's repeat: brackets a cell (default 3: C T C T C T C, 7 runs)")
    ap.add_argument("--only", choices=("sweep", "build"), help="run one part (default: both)")
    ap.add_argument("--docker-host", default=os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE,
                    help="the build part's engine, here and on the node (default: DOCKER_HOST, else the default "
                    "socket)")
    ap.add_argument("--no-cache", action="store_true", help="the build part's builds with --no-cache (cold)")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args()
    try:
        import ray  # noqa: F401
    except ImportError:
        sys.exit("needs Ray: pip install 'stackctl[cluster]'")
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "cores": os.cpu_count(), "load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="stackctl-bench-cluster-") as d:
        tmp = Path(d)
        if args.only in (None, "sweep"):
            result["sweep"] = sweep(tmp, args)
        if args.only in (None, "build"):
            result["build"] = build(tmp, args)
    result["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['date']}, {result['cores']} cores, load average {result['load_before']:.1f} before, "
          f"{result['load_after']:.1f} after")
    if "sweep" in result:
        s = result["sweep"]
        print(f"sweep of 4 cells, {s['runs_per_cell']} runs of {s['sleep_s']} s each (one cell alone: "
              f"{s['least_wall_s']} s)")
        print(f"  on 2 nodes x 2 GPUs   {s['median_cluster_s']:7.1f} s   runs {s['cluster_s']}")
        print(f"  here, one by one      {s['median_here_s']:7.1f} s   runs {s['here_s']}")
        print(f"  cluster / here        {s['median_ratio']:7.3f}x  runs {s['ratios']} (target <= 0.35)")
        print(f"  a task's seconds beyond its runs' (median) {s['task_beyond_runs_s']} s")
        print(f"  (node, card) places per cluster run {s['places_per_run']}; same verdicts: {s['same_verdicts']}")
    if "build" in result:
        b = result["build"]
        print(f"build --all, one cell, {b['engine']}{' --no-cache' if b['no_cache'] else ''}, "
              f"steps cached {b['steps_cached']}")
        for side, label in (("cluster", "one-node cluster"), ("here", "here")):
            c = b[side]
            print(f"  {label:18s}  build --all {c['median_build_s']:6.1f} s, publish --all "
                  f"{c['median_publish_s']:6.1f} s   runs {c['build']} / {c['publish']}; the cell's own seconds "
                  f"{c['cell_s']}")
        print(f"  build --all, cluster / here            {b['median_build_ratio']:.3f}x  runs {b['build_ratios']} "
              "(target <= 1.3)")
        print(f"  the node's build / build + publish here {b['median_same_work_ratio']:.3f}x  "
              f"runs {b['same_work_ratios']}")
        if "median_whole_ratio" in b:
            print(f"  build + publish, cluster / here        {b['median_whole_ratio']:.3f}x  runs {b['whole_ratios']}")
        for error in b["cluster_publish_errors"]:
            print(f"  publish --all after the cluster's build failed: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
