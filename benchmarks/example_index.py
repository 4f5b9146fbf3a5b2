"""The reference stacks against the example vendor index: resolve time, and what `resolve --verify` costs.

    python benchmarks/example_index.py [--latency 0.03] [--repeat 3] [--pad-mb 8]

Serves `examples/vendor_index.py`'s two indexes (HTML-only vendor index, JSON public index) with a
fixed per-request latency, then, for each stack in `stacks/` that pins vendor wheels:

  resolve   `stackctl resolve STACK` (closure through uv included), cold (empty caches) and warm
  verify    `stackctl resolve STACK --verify`, warm: every locked file downloaded and sha256-checked;
            its bytes and time
  pip       the peer a user would pick to check hashes: `pip download --no-deps --require-hashes` of
            `name @ URL --hash=sha256:...` lines for every locked file, once per target

`--pad-mb` adds an incompressible member to each torch and torch_musa wheel so downloads are not all
latency. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.vendor_index import build_indexes  # noqa: E402
from stackctl.index.client import ClientOptions, IndexClient  # noqa: E402
from stackctl.index.config import endpoints  # noqa: E402
from stackctl.profile.loader import load_stack  # noqa: E402
from stackctl.resolve.lock import read_lock  # noqa: E402
from stackctl.resolve.wheelhouse import verify_lock  # noqa: E402

STACKS = ("torch-2.9-control", "torch-2.11-post1", "torch-2.11-post2")


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return took


def pad(ex_root: Path, musa: object, mb: int) -> None:
    """Grow each torch / torch_musa wheel by `mb` MiB of random bytes (stored, so the size is real)."""
    import hashlib
    import zipfile

    files = musa.files  # type: ignore[attr-defined]
    for name, f in files.items():
        if not name.startswith(("torch-", "torch_musa-")) or mb <= 0:
            continue
        with zipfile.ZipFile(f.path, "a", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr(f"{name.split('-')[0]}/lib/_pad.bin", os.urandom(mb << 20))
        data = f.path.read_bytes()
        f.sha256, f.size = hashlib.sha256(data).hexdigest(), len(data)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.03)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pad-mb", type=int, default=8)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="stackctl-bench-") as tmp:
        work = Path(tmp)
        ex = build_indexes(work / "indexes")
        pad(work, ex.musa, args.pad_mb)
        ex.musa.latency = ex.public.latency = args.latency
        (work / "repo" / "stacks").mkdir(parents=True)
        for p in (ROOT / "stacks").glob("*.toml"):
            (work / "repo" / "stacks" / p.name).write_text(p.read_text())
        with ex:
            base_env = {**os.environ, "PYTHONPATH": str(ROOT), "STACKCTL_INDEX_MUSA_URL": ex.musa.url,
                        "STACKCTL_INDEX_PUBLIC_URL": ex.public.url, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
            stackctl = [sys.executable, "-m", "stackctl"]
            for stack in STACKS:
                cold, warm, verify, peer, verify_only = [], [], [], [], []
                verified_bytes = 0
                for i in range(args.repeat):
                    env = {**base_env, "STACKCTL_CACHE_DIR": str(work / f"cache-{stack}-{i}" / "http")}
                    cold.append(run([*stackctl, "resolve", stack], env, work / "repo"))
                    warm.append(run([*stackctl, "resolve", stack], env, work / "repo"))
                    verify.append(run([*stackctl, "resolve", stack, "--verify"], env, work / "repo"))
                    lock = read_lock(work / "repo" / "stacks" / f"{stack}.lock")
                    # the verification alone, as --verify runs it after resolving: every locked file
                    # downloaded concurrently and hashed
                    os.environ["STACKCTL_INDEX_MUSA_URL"] = ex.musa.url
                    os.environ["STACKCTL_INDEX_PUBLIC_URL"] = ex.public.url
                    st = load_stack(work / "repo" / "stacks" / f"{stack}.toml")
                    t = time.perf_counter()
                    done = verify_lock(lock, st, IndexClient(ClientOptions()), endpoints(st))
                    verify_only.append(time.perf_counter() - t)
                    verified_bytes = done.bytes
                    took = 0.0
                    for label in sorted({f.target for p in lock.pins for f in p.files}):
                        py = label.split("-")[0].removeprefix("cp")
                        req = work / f"req-{stack}-{label}.txt"
                        req.write_text("".join(f"{f.filename.split('-')[0]} @ {f.url} --hash=sha256:{f.sha256}\n"
                                               for f in lock.wheels_for(label)))
                        took += run([sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
                                     "--no-cache-dir", "--only-binary=:all:", "--python-version", py,
                                     "--platform", "linux_x86_64", "--platform", "any", "-d",
                                     str(work / f"dl-{stack}-{label}-{i}"), "-r", str(req)], base_env, work)
                    peer.append(took)
                files = {f.url: f for t in ("cp310-linux_x86_64", "cp312-linux_x86_64") for f in lock.wheels_for(t)}
                size = verified_bytes
                v_only = statistics.median(verify_only)
                rows.append((stack, len(files), size, statistics.median(cold), statistics.median(warm),
                             statistics.median(verify), v_only, statistics.median(peer)))
    print(f"latency {args.latency * 1000:.0f} ms, median of {args.repeat}, torch wheels padded by {args.pad_mb} MiB\n")
    print("| stack | files | bytes verified | resolve cold | resolve warm | resolve --verify | verify alone "
          "| pip download --require-hashes | pip / verify |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for stack, n, size, c, w, v, vo, peer_s in rows:
        print(f"| {stack} | {n} | {size / 2**20:.1f} MiB | {c:.2f} s | {w:.2f} s | {v:.2f} s | {vo:.2f} s "
              f"| {peer_s:.2f} s | {peer_s / max(vo, 1e-3):.1f}x |")


if __name__ == "__main__":
    main()
