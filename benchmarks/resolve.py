"""Resolve a post2-sized stack (20 pins, two targets) against a loopback index with network latency.

    python benchmarks/resolve.py [--latency 0.03] [--repeat 3] [--only stackctl]

Measures, in the same run and against the same server:
  stackctl  `stackctl resolve --no-closure` (pins proved per target: file, sha256, upload time, Requires-Dist)
  uv        `uv pip compile --no-deps --generate-hashes`, once per target
  pip       `pip install --dry-run --report --no-deps`, once per target
each cold (empty cache) and warm (the cache of the cold run), and prints the ratios. `--only` runs some of
the tools (while working on one; recorded figures come from all three).

stackctl's modules are byte-compiled first, as `pip install` leaves an installed copy (and as pip's own
are): otherwise, with PYTHONDONTWRITEBYTECODE set, every run would compile the checkout's sources again
(`--no-compile` times that instead: remove stackctl/**/__pycache__ first).
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.index_server import IndexServer  # noqa: E402
from tests.support.wheels import build_wheel  # noqa: E402

PINS = 20
TARGETS = (("3.10", "cp310"), ("3.12", "cp312"))
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def populate(server: IndexServer, wheels: Path) -> list[tuple[str, str]]:
    """20 projects, 6 versions each, a wheel per target: pages about as long as a vendor index's."""
    pins = []
    for i in range(PINS):
        name = f"pkg{i:02d}"
        for minor in range(6):
            version = f"1.{minor}.0+musa5.2.0" if i % 2 else f"1.{minor}.0"
            for _, abi in TARGETS:
                w = build_wheel(wheels, name, version, tag=f"{abi}-{abi}-manylinux_2_28_x86_64",
                                requires_dist=[f"pkg{(i + 1) % PINS:02d}"],
                                files={f"{name}/__init__.py": "x = 1\n" * 50})
                server.add(w, upload_time=T0 + timedelta(days=minor, minutes=i))
        pins.append((name, version))
    return pins


def profile(directory: Path, pins: list[tuple[str, str]]) -> Path:
    text = '[stack]\nname = "bench"\n\n[targets]\npython = ["3.10", "3.12"]\nplatforms = ["linux_x86_64"]\n\n'
    text += '[indexes.bench]\nurl = "http://127.0.0.1:9/simple/"\n\n'
    text += "".join(f'[pins.{n}]\nversion = "{v}"\nindex = "bench"\n\n' for n, v in pins)
    path = directory / "bench.toml"
    path.write_text(text)
    return path


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.03, help="seconds added to every request")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", action="append", choices=("stackctl", "uv", "pip"),
                    help="run only this tool (repeatable); default: all three")
    ap.add_argument("--no-compile", action="store_true", help="do not byte-compile the checkout first")
    args = ap.parse_args()
    if not args.no_compile:
        compileall.compile_dir(ROOT / "stackctl", quiet=1)
    bindir = Path(sys.executable).parent
    uv = shutil.which("uv", path=str(bindir)) or shutil.which("uv") or "uv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "STACKCTL_"))}
    env["PIP_CONFIG_FILE"] = os.devnull  # the peer runs with the same (empty) configuration as we do
    env["PYTHONPATH"] = str(ROOT)  # this checkout's stackctl, not whichever one is installed

    with tempfile.TemporaryDirectory(prefix="stackctl-bench-") as tmp_s:
        tmp = Path(tmp_s)
        server = IndexServer(latency=args.latency)
        pins = populate(server, tmp / "wheels")
        prof = profile(tmp, pins)
        reqs = tmp / "reqs.txt"
        reqs.write_text("".join(f"{n}=={v}\n" for n, v in pins))
        with server:
            url = server.url

            def ours(cache: Path) -> list[str]:
                return [sys.executable, "-m", "stackctl", "resolve", str(prof), "--no-closure", "--index",
                        f"bench={url}", "--cache-dir", str(cache), "--lock", str(tmp / "bench.lock"), "--json"]

            def uv_runs(cache: Path) -> list[list[str]]:
                return [[uv, "pip", "compile", str(reqs), "--no-deps", "--generate-hashes", "--no-config", "--quiet",
                         "--default-index", url, "--python-version", py, "--python-platform",
                         "x86_64-manylinux_2_35", "--no-python-downloads", "--cache-dir", str(cache),
                         "-o", str(tmp / f"uv-{py}.txt")] for py, _ in TARGETS]

            def pip_runs(cache: Path) -> list[list[str]]:
                return [[sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--ignore-installed",
                         "--no-deps", "--quiet", "--report", str(tmp / f"pip-{py}.json"), "--index-url", url,
                         "--python-version", py, "--platform", "manylinux_2_28_x86_64", "--only-binary=:all:",
                         "--disable-pip-version-check", "--target", str(tmp / f"pip-target-{py}"),
                         "--cache-dir", str(cache), "-r", str(reqs)]
                        for py, _ in TARGETS]

            tools = {"stackctl": lambda c: [ours(c)], "uv": uv_runs, "pip": pip_runs}
            tools = {k: v for k, v in tools.items() if not args.only or k in args.only}
            results: dict[tuple[str, str], list[float]] = {}
            for r in range(args.repeat):
                for name, make in tools.items():
                    cache = tmp / f"cache-{name}-{r}"
                    results.setdefault((name, "cold"), []).append(sum(timed(c, env) for c in make(cache)))
                    results.setdefault((name, "warm"), []).append(sum(timed(c, env) for c in make(cache)))
            requests = len(server.log)
            # Where a warm run's time goes: start-up (`stackctl --help` imports the command table only),
            # every import the warm resolve makes, and the rest (one round of revalidations, the lock).
            start = [min(timed([sys.executable, "-m", "stackctl", "--help"], env) for _ in range(args.repeat))]
            bare = min(timed([sys.executable, "-c", "pass"], env) for _ in range(args.repeat))
            warm_cache = tmp / "cache-stackctl-0"
            trace = subprocess.run([sys.executable, "-X", "importtime", *ours(warm_cache)[1:]], env=env,
                                   capture_output=True, text=True, check=True).stderr
            top: dict[str, int] = {}
            for line in trace.splitlines():
                parts = line.split("|")
                top_level = len(parts) == 3 and parts[2].startswith(" ") and not parts[2].startswith("  ")
                if line.startswith("import time:") and top_level and parts[1].strip().isdigit():
                    top[parts[2].strip()] = int(parts[1])

    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"{PINS} pins x {len(TARGETS)} targets, {args.latency * 1000:.0f} ms per request, "
          f"median of {args.repeat}; {requests} requests served")
    print(f"{'':10}{'cold s':>9}{'warm s':>9}")
    for name in tools:
        print(f"{name:10}{med[(name, 'cold')]:9.2f}{med[(name, 'warm')]:9.2f}")
    for peer in ("uv", "pip"):
        if peer not in tools or "stackctl" not in tools:
            continue
        for phase in ("cold", "warm"):
            print(f"{peer}/stackctl {phase}: {med[(peer, phase)] / med[('stackctl', phase)]:.2f}x")
    if "stackctl" in tools:
        print(f"stackctl warm / cold: {med[('stackctl', 'warm')] / med[('stackctl', 'cold')]:.2f}x")
    heavy = sorted(top.items(), key=lambda kv: -kv[1])[:8]
    print(f"warm run: start-up (--help, best of {args.repeat}) {start[0]:.3f} s (`python -c pass` {bare:.3f} s); "
          "imports of the warm resolve "
          f"{sum(top.values()) / 1e6:.3f} s (-X importtime, top level: "
          + ", ".join(f"{n} {us / 1e3:.0f} ms" for n, us in heavy) + ")")


if __name__ == "__main__":
    main()
