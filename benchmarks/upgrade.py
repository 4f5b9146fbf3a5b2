"""The whole upgrade, timed: propose → resolve → abi → build → publish → scan → report, each as the
`stackctl` command a user runs (a process each, start-up included), against loopback indexes serving two
releases of a small stack and the real engine and registry.

    python benchmarks/upgrade.py [--runs 3] [--example]

Prints the wall time of each step, of the whole flow, and the engine's share (build and publish). The peer
is the same work by hand, which is not a program; what this measures is how much of the flow is stackctl's
own time and how much is the engine's. Needs what `.ci/services.sh` starts (engine, registry on
127.0.0.1:5000, stackctl-base:bookworm). The old stack is resolved and built first (the report's image diff
compares the two images); that is not part of the flow's time.

`--example` runs the steps that need no engine on the reference stacks against the example vendor index
(`examples/vendor_index.py`; their base image is the vendor's, which is not here): propose from
torch-2.11-post1, resolve the proposal (closure by uv), abi with the example base inventory, the wheel diff
of deep_ep, scan, report.
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
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.gitrepo import git  # noqa: E402
from tests.support.imagestack import VERSIONS, build_wheels, make_stack_repo  # noqa: E402
from tests.support.imagetest import delete_from_registry  # noqa: E402
from tests.support.index_server import IndexServer  # noqa: E402

STACKCTL = [sys.executable, "-m", "stackctl"]
NEW = {**VERSIONS, "corelib": "2.0.1+vendor1", "corelib-ext": "2.0.1+vendor1", "toplib": "0.3.1"}
T0 = datetime(2026, 9, 1, 8, 0, tzinfo=timezone.utc)
REGISTRY = "127.0.0.1:5000"


def run_flow(tmp: Path) -> dict[str, float]:
    repository = f"{REGISTRY}/stackctl-bench/upgrade-{uuid.uuid4().hex[:10]}"
    repo = make_stack_repo(tmp, "flow-old", repository, nonce=uuid.uuid4().hex, commit=False)
    repo.lock.unlink()
    (repo.root / ".stackctl-scan-allow").write_text("stacks/flow-old.*\n")
    (repo.root / ".gitignore").write_text("build/\n")
    build_wheels(tmp / "wheelhouse-new", NEW, nonce=uuid.uuid4().hex, toplib_attr="0.3.0")
    vendor, public = IndexServer(html_only=True).start(), IndexServer().start()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STACKCTL_CACHE_DIR": str(tmp / "cache")}
    times: dict[str, float] = {}

    def step(name: str, *args: str, ok: tuple[int, ...] = (0,)) -> None:
        start = time.monotonic()
        proc = subprocess.run([*STACKCTL, *args], cwd=repo.root, env=env, capture_output=True, text=True, check=False)
        times[name] = time.monotonic() - start
        if proc.returncode not in ok:
            raise SystemExit(f"{name} exited {proc.returncode}: {proc.stderr[-2000:]}")

    try:
        for month, (versions, wheelhouse) in enumerate(((VERSIONS, repo.wheelhouse), (NEW, tmp / "wheelhouse-new"))):
            for i, name in enumerate(VERSIONS):
                if month and versions[name] == VERSIONS[name]:
                    continue
                wheel = next(wheelhouse.glob(f"{name.replace('-', '_')}-{versions[name]}-*.whl"))
                (vendor if name.startswith("corelib") else public).add(
                    wheel, upload_time=T0 + timedelta(days=30 * month, minutes=i))
        idx = ("--index", f"vendor={vendor.url}", "--index", f"public={public.url}")
        step("resolve old", "resolve", "flow-old", *idx)
        git(repo.root, "add", "-A")
        git(repo.root, "commit", "-q", "-m", "old")
        step("build old", "build", "flow-old", *idx)
        flow = time.monotonic()
        step("propose", "propose", "flow-old", "--name", "flow-new", *idx)
        step("resolve", "resolve", "flow-new", *idx)
        git(repo.root, "add", "-A")
        git(repo.root, "commit", "-q", "-m", "new")
        step("abi", "abi", "flow-new", *idx, "--record", "build/flow-new.abi.json")
        step("build", "build", "flow-new", *idx)
        step("publish", "publish", "flow-new")
        step("scan", "scan", ".", "--stack", "flow-new", "--since", "flow-old", "--record", "build/flow-new.scan.json")
        step("report", "report", "flow-new", "--markdown")
        times["flow"] = time.monotonic() - flow
        return times
    finally:
        vendor.stop()
        public.stop()
        records = repo.root / "build" / "publications.jsonl"
        for line in records.read_text().splitlines() if records.exists() else []:
            delete_from_registry(REGISTRY, repository, json.loads(line)["digest"])
        ids = subprocess.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repository],
                             capture_output=True, text=True, check=False).stdout.split()
        if ids:
            subprocess.run(["docker", "image", "rm", "-f", *ids], capture_output=True, check=False)


def run_example(tmp: Path) -> dict[str, float]:
    import shutil

    from examples.vendor_index import build_indexes, write_inventory

    work = tmp / "work"
    (work / "stacks").mkdir(parents=True)
    for name in ("torch-2.11-post1", "torch-2.11-post2"):
        shutil.copy(ROOT / "stacks" / f"{name}.toml", work / "stacks")
    write_inventory(work / "base.json")
    times: dict[str, float] = {}
    with build_indexes(tmp / "indexes") as ex:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "STACKCTL_CACHE_DIR": str(tmp / "cache"),
               "STACKCTL_INDEX_MUSA_URL": ex.musa.url, "STACKCTL_INDEX_PUBLIC_URL": ex.public.url}

        def step(name: str, *args: str, ok: tuple[int, ...] = (0,)) -> str:
            start = time.monotonic()
            proc = subprocess.run([*STACKCTL, *args], cwd=work, env=env, capture_output=True, text=True, check=False)
            times[name] = times.get(name, 0.0) + time.monotonic() - start
            if proc.returncode not in ok:
                raise SystemExit(f"{name} exited {proc.returncode}: {proc.stderr[-2000:]}")
            return proc.stdout

        step("resolve old", "resolve", "torch-2.11-post1")
        flow = time.monotonic()
        step("propose", "propose", "torch-2.11-post1", "--name", "proposed")
        step("resolve", "resolve", "proposed")
        step("abi", "abi", "proposed", "--inventory", "base.json", "--record", "build/proposed.abi.json")
        old = json.loads((work / "stacks" / "torch-2.11-post1.lock").read_text())
        new = json.loads((work / "stacks" / "proposed.lock").read_text())
        url = {(d, p["name"]): p["files"][0]["url"] for d, lock in (("old", old), ("new", new)) for p in lock["pins"]}
        step("wheel-diff", "wheel-diff", url[("old", "deep_ep")], url[("new", "deep_ep")], "--record",
             "build/proposed.wheel-diff.json")
        step("scan", "scan", ".", "--stack", "proposed", "--since", "torch-2.11-post1", "--record",
             "build/proposed.scan.json", ok=(0, 1))
        step("report", "report", "proposed", "--markdown")
        times["flow"] = time.monotonic() - flow
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--example", action="store_true", help="the reference stacks on the example vendor index, "
                    "without the engine")
    args = ap.parse_args()
    if args.example:
        for n in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="stackctl-upgrade-") as tmp:
                t = run_example(Path(tmp))
            print(f"run {n + 1}: flow without the engine {t['flow']:.1f} s; "
                  + ", ".join(f"{k} {v:.2f} s" for k, v in t.items() if k != "flow"))
        return
    results = []
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="stackctl-upgrade-") as tmp:
            t = run_flow(Path(tmp))
        engine = t["build"] + t["publish"]
        results.append(t)
        own = t["flow"] - engine
        print(f"run {n + 1}: flow {t['flow']:.1f} s, engine (build + publish) {engine:.1f} s "
              f"({100 * engine / t['flow']:.0f} %), the rest {own:.1f} s; "
              + ", ".join(f"{k} {v:.2f} s" for k, v in t.items() if k not in ("flow",)))


if __name__ == "__main__":
    main()
