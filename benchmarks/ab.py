"""`stackctl ab`'s benchmark verdicts on a noisy host: many A/Bs of one small benchmark while both cores are
loaded in bursts, as on a shared CI host, and what each A/B decided.

    python benchmarks/ab.py [--runs 10] [--cases slow30,same,slow5] [--band 3] [--repeat 5] [--max-repeat 12]

The legs are two venvs of this interpreter (`ab --python`, tests/support/abproject.py's library and benchmark:
`mylib.work(40000)`, 6 samples a run, each the best of 5 calls), the candidate's library 30% slower, identical,
or 5% slower. The load: two processes that each spin or sleep for 1-6 s at random for the whole A/B, so the
host changes under the runs rather than staying steadily busy (a steady load drifts little). The noise is the
case: the benchmark's work is kept small on purpose.

The peer is what a pooled two-sample comparison says of the same runs (every sample of every run in one
Mann-Whitney U, as benchstat compares; "~" when p >= alpha, which such a report leaves for a reader to take
as no change), computed from the same A/B's samples.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.abproject import write_project, write_site  # noqa: E402

CASES = {"slow30": "slow", "same": "base", "slow5": "slow5"}


def _venv(root: Path, variant: str) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    write_site(Path(site), variant)
    Path(site, "host.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return str(python)


def _burst(seed: int, stop: Any) -> None:
    """Spin or sleep for 1-6 s at random until told to stop."""
    rng = random.Random(seed)
    while not stop.is_set():
        until = time.monotonic() + rng.uniform(1, 6)
        if rng.random() < 0.5:
            while time.monotonic() < until and not stop.is_set():
                sum(i * i for i in range(10000))
        else:
            stop.wait(until - time.monotonic())


def _plan(project: Path, band: float, repeat: int, max_repeat: int, statistic: str) -> None:
    plan = project / "stacks" / "validation" / "plan.toml"
    text = plan.read_text()
    text = text.replace("repeat = 3\nmax_repeat = 12\n", f"repeat = {repeat}\nmax_repeat = {max_repeat}\n")
    text = text.replace("band = 10\n", f"band = {band:g}\n").replace('statistic = "best"', f'statistic = "{statistic}"')
    plan.write_text(text)


def _peer(metric: dict[str, Any], alpha: float) -> str:
    """The pooled comparison's call: a difference where Mann-Whitney's p < alpha, else "~"."""
    if metric["p"] >= alpha:
        return "~"
    worse = metric["pooled_delta_pct"] > 0 if metric["better"] == "lower" else metric["pooled_delta_pct"] < 0
    return "worse" if worse else "better"


def one_ab(project: Path, control: str, candidate: str, seed: int) -> dict[str, Any]:
    stop = multiprocessing.Event()
    load = [multiprocessing.Process(target=_burst, args=(seed * 2 + i, stop), daemon=True) for i in range(2)]
    for p in load:
        p.start()
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "stackctl", "ab", "stacks/control.toml", "stacks/candidate.toml",
                               "--python", control, "--python", candidate, "--trial", "speed", "--json",
                               "--no-record"], cwd=project, capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        stop.set()
        for p in load:
            p.join()
    wall = time.monotonic() - start
    result = json.loads(proc.stdout)
    m = result["trials"][0]["metrics"][0]
    runs = [r for r in result["runs"] if r["trial"] == "speed"]
    samples = [x for r in runs for _, v in r["samples"] for x in v]
    return {"brackets_raw": [(b["before"], b["candidate"], b["after"]) for b in m["brackets"]],
            "exit": proc.returncode, "verdict": m["verdict"],
            "delta": m["delta_pct"], "low": m["low_pct"],
            "high": m["high_pct"], "brackets": len(m["brackets"]), "pooled": _peer(m, 0.05),
            "pooled_delta": m["pooled_delta_pct"], "p": m["p"], "drift": m["drift_pct"], "wall": wall,
            "cv": statistics.stdev(samples) / statistics.fmean(samples) * 100}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cases", default="slow30,same,slow5")
    ap.add_argument("--band", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-repeat", type=int, default=12)
    ap.add_argument("--save", metavar="FILE", help="write every A/B's figures and bracket deltas as JSON")
    ap.add_argument("--statistic", default="median", help="what each run says of the metric (the plan's key)")
    args = ap.parse_args()
    saved: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="stackctl-bench-ab-") as tmp:
        root = Path(tmp)
        envs = {v: _venv(root / v, v) for v in {CASES[c] for c in args.cases.split(",")} | {"base"}}
        project = root / "project"
        write_project(project)
        _plan(project, args.band, args.repeat, args.max_repeat, args.statistic)
        print(f"band ±{args.band:g}%, repeat {args.repeat}, max_repeat {args.max_repeat}, each run's "
              f"{args.statistic}, {os.cpu_count()} cores, "
              f"both loaded in 1-6 s bursts; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
        print("| case | A/B | verdict | exit | delta [interval] | brackets | pooled (peer) | sample CV | wall |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for case in args.cases.split(","):
            got = []
            for i in range(args.runs):
                r = one_ab(project, envs["base"], envs[CASES[case]], seed=i)
                got.append(r)
                iv = (f"[{r['low']:+.1f}, {r['high']:+.1f}]" if r["low"] is not None else "[unbounded]")
                print(f"| {case} | {i + 1} | {r['verdict']} | {r['exit']} | {r['delta']:+.1f}% {iv} | {r['brackets']} "
                      f"| {r['pooled']} ({r['pooled_delta']:+.1f}%, p={r['p']:.2g}) | {r['cv']:.0f}% "
                      f"| {r['wall']:.0f} s |", flush=True)
            saved[case] = got
            if args.save:
                Path(args.save).write_text(json.dumps(saved, indent=1))
            verdicts = [r["verdict"] for r in got]
            print(f"summary {case}: " + ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))
                  + f"; exit 1 in {sum(r['exit'] == 1 for r in got)}; brackets median "
                  f"{statistics.median(r['brackets'] for r in got):g}, max {max(r['brackets'] for r in got)}; "
                  "pooled peer: " + ", ".join(f"{v} {[r['pooled'] for r in got].count(v)}"
                                              for v in sorted({r['pooled'] for r in got}))
                  + f"; wall median {statistics.median(r['wall'] for r in got):.0f} s", flush=True)


if __name__ == "__main__":
    main()
