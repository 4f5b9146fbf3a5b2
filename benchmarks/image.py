"""Image build benchmark: stackctl's layered Dockerfile vs a hand-written single-install Dockerfile.

Both build the same hash-locked wheels from the same wheelhouse on the same engine, in the same run:

1. cold build (no cache) of each;
2. rebuild after the top-of-stack pin (`toplib`) moves: seconds, steps cached, layers reused, bytes of new layers;
3. final image size against the sum of what is installed, and the wheelhouse's size (it must cost nothing).

    python benchmarks/image.py [--core-mb 300] [--keep]

Needs the engine and base image that `.ci/services.sh` starts. The stack is synthetic but shaped like the
real one: a big vendor train (torch-like, incompressible bytes), a closure of ordinary dependencies, a
small patcher and a small top-of-stack package.
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

from tests.support.imagestack import make_stack_repo  # noqa: E402
from tests.support.imagetest import dangling_stage_images, remove_new_stage_images  # noqa: E402
from tests.support.wheels import build_wheel, sha256_file  # noqa: E402

BASE = "stackctl-base:bookworm"
STACKCTL = [sys.executable, "-m", "stackctl"]

PEER = """\
# What one writes by hand: one install step, one COPY of the whole environment.
FROM {base} AS build
RUN python3 -m venv /opt/venv
COPY wheelhouse/ /tmp/wheelhouse/
COPY requirements.txt /tmp/requirements.txt
RUN /opt/venv/bin/python -m pip install --no-index --find-links /tmp/wheelhouse --require-hashes --no-deps \\
        --disable-pip-version-check --no-cache-dir --root-user-action=ignore -r /tmp/requirements.txt

FROM {base}
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"""


def fatten(wheelhouse: Path, name: str, version: str, module: str, mb: int, seed: str,
           keep: dict[str, str] | None = None) -> None:
    """Replace a test wheel by one carrying `mb` MB of incompressible data (as .so files are, mostly)."""
    for old in wheelhouse.glob(f"{name.replace('-', '_')}-{version}-*.whl"):
        old.unlink()
    chunk = 16 << 20
    files: dict[str, bytes | str] = {f"{module}/__init__.py": f"SEED = {seed!r}\n", **(keep or {})}
    left, n = mb << 20, 0
    while left > 0:
        files[f"{module}/lib/part{n}.so"] = os.urandom(min(chunk, left))
        left -= chunk
        n += 1
    build_wheel(wheelhouse, name, version, files=files)


def relock(repo: Any) -> None:
    """The lock's sha256 must match the (fattened) wheels: rewrite it from the wheelhouse."""
    from stackctl.resolve.lock import read_lock, write_lock

    lock = read_lock(repo.lock)
    by_name = {p.name: p for p in repo.wheelhouse.glob("*.whl")}

    def fix(f: Any) -> Any:
        from dataclasses import replace

        w = by_name[f.filename]
        return replace(f, sha256=sha256_file(w), size=w.stat().st_size)

    from dataclasses import replace

    pins = tuple(replace(p, files=tuple(fix(f) for f in p.files)) for p in lock.pins)
    closure = tuple(replace(c, file=fix(c.file) if c.file else None,
                            hashes=(f"sha256:{sha256_file(by_name[c.file.filename])}",) if c.file else ())
                    for c in lock.closure)
    write_lock(repo.lock, replace(lock, pins=pins, closure=closure))


def make(tmp: Path, repository: str, toplib: str, seed: str, core_mb: int, like: Any = None) -> Any:
    """A stack; with `like`, the same wheels as that one (byte for byte) except toplib."""
    repo = make_stack_repo(tmp, "bench", repository, {"toplib": toplib}, nonce=seed, commit=False)
    if like is None:
        fatten(repo.wheelhouse, "corelib-ext", repo.versions["corelib-ext"], "corelib_ext", core_mb, seed)
        fatten(repo.wheelhouse, "helperdep", repo.versions["helperdep"], "helperdep_data", max(core_mb // 10, 1),
               seed, keep={"helperdep.py": "X = 1\n"})
    else:
        for name in ("corelib_ext", "helperdep"):
            for w in like.wheelhouse.glob(f"{name}-*.whl"):
                (repo.wheelhouse / w.name).unlink()
                os.link(w, repo.wheelhouse / w.name)
    relock(repo)
    return repo


def stackctl_build(repo: Any, tmp: Path, nocache: bool) -> tuple[float, dict[str, Any]]:
    ctx = tmp / "ctx"
    r = subprocess.run([*STACKCTL, "render", str(repo.profile), "--out", str(ctx), "--wheelhouse",
                        str(repo.wheelhouse), "--revision", "bench", "--ref", "bench", "--json"],
                       capture_output=True, text=True, check=False, cwd=repo.root)
    if r.returncode != 0:
        raise SystemExit(f"stackctl render failed: {r.stderr}")
    return engine_build(ctx, f"{repo.stack.image.repository}:layered", nocache)


def peer_build(repo: Any, tmp: Path, nocache: bool) -> tuple[float, dict[str, Any]]:
    """The hand-written Dockerfile, given the same wheels and one hash-checked requirement file."""
    ctx = tmp / "peer"
    if ctx.exists():
        subprocess.run(["rm", "-rf", str(ctx)], check=True)
    (ctx / "wheelhouse").mkdir(parents=True)
    lines = []
    for w in sorted(repo.wheelhouse.glob("*.whl")):
        os.link(w, ctx / "wheelhouse" / w.name)
        name, version = w.name.split("-")[:2]
        lines.append(f"{name}=={version} --hash=sha256:{sha256_file(w)}")
    (ctx / "requirements.txt").write_text("\n".join(lines) + "\n")
    (ctx / "Dockerfile").write_text(PEER.format(base=BASE))
    return engine_build(ctx, f"{repo.stack.image.repository}:peer", nocache)


def engine_build(ctx: Path, tag: str, nocache: bool) -> tuple[float, dict[str, Any]]:
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.buildlog import parse_build_stream

    engine = DockerEngine()
    t0 = time.perf_counter()
    events = engine.client.api.build(path=str(ctx), tag=tag, rm=True, forcerm=True, decode=True, nocache=nocache)
    result = parse_build_stream(events)
    seconds = time.perf_counter() - t0
    attrs = engine.client.api.inspect_image(result.image_id)
    return seconds, {"tag": tag, "id": result.image_id, "steps": result.steps, "cached": result.cached_steps,
                     "layers": attrs["RootFS"]["Layers"], "size": attrs["Size"]}


def new_layer_bytes(before: dict[str, Any], after: dict[str, Any]) -> tuple[int, int, int]:
    """(layers reused, layers new, bytes written by the steps the rebuild did not take from cache)."""
    from stackctl.engine.docker import DockerEngine

    api = DockerEngine().client.api
    old_ids = {h["Id"] for h in api.history(before["id"]) if h["Id"] != "<missing>"}
    fresh_bytes = sum(h["Size"] for h in api.history(after["id"]) if h["Id"] not in old_ids)
    old = set(before["layers"])
    reused = sum(1 for layer in after["layers"] if layer in old)
    return reused, len(after["layers"]) - reused, fresh_bytes


def installed_bytes(image: str, paths: str) -> int:
    from stackctl.engine.docker import DockerEngine

    out = DockerEngine().client.containers.run(image, ["sh", "-c", f"du -sb {paths} | awk '{{s+=$1}} END {{print s}}'"],
                                               remove=True, network_disabled=True)
    return int(out.decode().strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--core-mb", type=int, default=300, help="size of the big vendor wheel's payload")
    ap.add_argument("--keep", action="store_true", help="keep the images")
    args = ap.parse_args()
    from stackctl.engine.docker import DockerEngine

    client = DockerEngine().client
    base_size = client.api.inspect_image(BASE)["Size"]
    seed = uuid.uuid4().hex[:8]
    repository = f"stackctl-bench/{seed}"
    results: dict[str, Any] = {}
    before = dangling_stage_images(client)
    with tempfile.TemporaryDirectory(prefix="stackctl-bench-") as t:
        tmp = Path(t)
        a = make(tmp / "a", repository, "0.3.0", seed, args.core_mb)
        b = make(tmp / "b", repository, "0.4.0", seed, args.core_mb, like=a)
        wheelhouse_bytes = sum(p.stat().st_size for p in a.wheelhouse.glob("*.whl"))
        try:
            for name, fn in (("stackctl", stackctl_build), ("hand-written", peer_build)):
                cold_s, cold = fn(a, tmp / "a", True)
                warm_s, warm = fn(b, tmp / "b", False)
                reused, fresh, fresh_bytes = new_layer_bytes(cold, warm)
                results[name] = {"cold_s": cold_s, "rebuild_s": warm_s, "ratio": warm_s / cold_s,
                                 "steps": warm["steps"], "cached": warm["cached"], "layers_reused": reused,
                                 "layers_new": fresh, "new_layer_mb": fresh_bytes / 1e6,
                                 "image_mb": warm["size"] / 1e6, "tag": warm["tag"], "cold_tag": cold["tag"]}
            layered = results["stackctl"]["tag"]
            results["sizes"] = {
                "base_mb": base_size / 1e6,
                "image_mb": results["stackctl"]["image_mb"],
                "added_mb": results["stackctl"]["image_mb"] - base_size / 1e6,
                "installed_mb": installed_bytes(layered, "/opt/stack/* /opt/venv /opt/stackctl") / 1e6,
                "wheelhouse_mb": wheelhouse_bytes / 1e6,
            }
        finally:
            if not args.keep:
                for image in client.images.list(name=repository):
                    for tag in image.tags:
                        client.images.remove(tag, force=True)
                remove_new_stage_images(client, before)
    s, p, z = results["stackctl"], results["hand-written"], results["sizes"]
    print(json.dumps(results, indent=2) if "--json" in sys.argv else "")
    print(f"{'':28}{'stackctl':>14}{'hand-written':>14}")
    print(f"{'cold build (s)':28}{s['cold_s']:>14.1f}{p['cold_s']:>14.1f}")
    print(f"{'rebuild, top pin moved (s)':28}{s['rebuild_s']:>14.1f}{p['rebuild_s']:>14.1f}")
    print(f"{'rebuild / cold':28}{s['ratio']:>14.2f}{p['ratio']:>14.2f}")
    print(f"{'steps cached on rebuild':28}{s['cached']:>11}/{s['steps']:<2}{p['cached']:>11}/{p['steps']:<2}")
    print(f"{'layers reused / new':28}{s['layers_reused']:>10} / {s['layers_new']:<1}{p['layers_reused']:>10} / "
          f"{p['layers_new']:<1}")
    print(f"{'new layer bytes (MB)':28}{s['new_layer_mb']:>14.2f}{p['new_layer_mb']:>14.2f}")
    print(f"{'image size (MB)':28}{s['image_mb']:>14.1f}{p['image_mb']:>14.1f}")
    print(f"rebuild speed-up over the hand-written Dockerfile: {p['rebuild_s'] / s['rebuild_s']:.1f}x")
    print(f"size: base {z['base_mb']:.1f} MB + installed {z['installed_mb']:.1f} MB; image adds {z['added_mb']:.1f} MB "
          f"over the base ({z['added_mb'] - z['installed_mb']:+.1f} MB beyond what is installed); "
          f"wheelhouse {z['wheelhouse_mb']:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
