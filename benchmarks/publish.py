"""Build and publish benchmark: stackctl against the hand-written Dockerfile and `docker push`, one run.

On the local engine and the registry `.ci/services.sh` starts (127.0.0.1:5000), in one run:

1. cold build of stackctl's image and of the hand-written one (benchmarks/image.py's peer);
2. rebuild of each after the top pin moved (rebuild / cold);
3. cold publish: `stackctl publish` (in this process: the build's OCI layout copied by skopeo) against
   `docker push` of the hand image to a fresh repository, with the bytes each sent;
4. publish after the pin moved: stackctl's image of step 2 to the same repository, against `docker push`
   of the hand image's rebuild; beside it, how long the build's copy into its layout took (the export
   and compression publish no longer does: the build does it once, timed in its steps);
5. the same build published again, then into another repository: one manifest digest all three times.

    python benchmarks/publish.py --stack torch [--bytecode false]    # the real torch 2.13.0+cpu wheel
    python benchmarks/publish.py [--core-mb 300]                      # synthetic, torch-shaped
    DOCKER_HOST=unix:///run/stackctl-d26c.sock python benchmarks/publish.py --stack torch --builder buildkit
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# benchmarks/image.py: the stacks, the peer and both builds
import image as bench

REGISTRY = "127.0.0.1:5000"


def stackctl_publish(repo: Any, build_record: Path, out: Path, repository: str | None = None
                     ) -> tuple[float, dict[str, Any]]:
    """`stackctl publish` as the command runs it: the build's layout copied by skopeo, checked, tagged."""
    from stackctl.usecases.publish import publish_image

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    pub = publish_image(repo.stack, repo.lock, out / "publications.jsonl", repository, build_record=build_record)
    return time.perf_counter() - t0, {"digest": pub.digest, "bytes": pub.pushed_bytes, "layers": pub.layers_pushed,
                                      "present": pub.layers_present}


def docker_push(client: Any, image: str, target: str,
                before: frozenset[str] = frozenset()) -> tuple[float, dict[str, Any]]:
    """`docker push` as the engine does it: its gzip, one layer stream at a time, its own skip and mount.
    Bytes sent: the manifest's layers not in `before` (the digests of the peer's previous push)."""
    from stackctl.engine.registry import Registry

    repository, tag = target.rsplit(":", 1)
    client.api.tag(image, repository, tag=tag)
    pushed = 0
    t0 = time.perf_counter()
    for ev in client.api.push(repository, tag=tag, stream=True, decode=True):
        if "error" in ev:
            raise SystemExit(f"docker push {target}: {ev['error']}")
        pushed += ev.get("status") == "Pushed"
    seconds = time.perf_counter() - t0
    got = Registry().manifest(repository, tag)
    assert got is not None
    doc = json.loads(got[1])
    if "manifests" in doc:  # buildx's default provenance makes an index: the image is its one platform's entry
        image = next(m for m in doc["manifests"] if m.get("platform", {}).get("os") != "unknown")
        inner = Registry().manifest(repository, image["digest"])
        assert inner is not None
        doc = json.loads(inner[1])
    layers = doc["layers"]
    sent = sum(x["size"] for x in layers if x["digest"] not in before)
    return seconds, {"bytes": sent, "layers": pushed, "digests": sorted(x["digest"] for x in layers)}


def reload(root: Path) -> Any:
    """A stack repository a previous run left (--keep): its profile, lock and wheelhouse."""
    from stackctl.profile.loader import load_stack
    from tests.support.imagestack import StackRepo

    profile = root / "repo" / "stacks" / "bench.toml"
    return StackRepo(root / "repo", profile, profile.with_suffix(".lock"), root / "wheelhouse", load_stack(profile))


def one_run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import docker.errors

    from stackctl.engine.docker import DockerEngine
    from stackctl.image.labels import image_ref

    client = DockerEngine().client
    seed = args.reuse[1] if args.reuse else uuid.uuid4().hex[:8]
    repository = f"{REGISTRY}/stackctl-bench/{seed}"
    target = f"{args.registry}/stackctl-bench/{seed}-{uuid.uuid4().hex[:4]}"
    before = bench.dangling_stage_images(client)
    out: dict[str, Any] = {}
    if args.reuse:  # the images and stacks a run with --keep left: publish only
        src = Path(args.reuse[0])
        a, b = reload(src / "a"), reload(src / "b")
        hand_a, hand_b = {"id": f"{repository}-hand:a"}, {"id": f"{repository}-hand:b"}
        built_b = {"tag": str(image_ref(b.stack))}
    elif args.stack == "torch":
        a = bench.torch_stack(tmp / "a", repository, bench.TORCHADA[0], args.wheels, "uv", args.bytecode)
        b = bench.torch_stack(tmp / "b", repository, bench.TORCHADA[1], args.wheels, "uv", args.bytecode)
    else:
        a = bench.make(tmp / "a", repository, "0.3.0", seed, args.core_mb)
        b = bench.make(tmp / "b", repository, "0.4.0", seed, args.core_mb, like=a)
    try:
        if not args.reuse:
            s_cold, built_a = bench.stackctl_build(a, tmp / "a", True)
            p_cold, hand_a = bench.peer_build(a, tmp / "a", True)
            client.api.tag(hand_a["id"], f"{repository}-hand", tag="a")
            s_warm, built_b = bench.stackctl_build(b, tmp / "b", False)
            p_warm, hand_b = bench.peer_build(b, tmp / "b", False)
            client.api.tag(hand_b["id"], f"{repository}-hand", tag="b")
            out["build"] = {"stackctl_cold": s_cold, "hand_cold": p_cold, "stackctl_rebuild": s_warm,
                            "hand_rebuild": p_warm, "image_mb": built_a["size"] / 1e6,
                            "hand_mb": hand_a["size"] / 1e6}
            print("build: " + json.dumps(out["build"]), flush=True)

        if args.reuse:
            built_a = {"record": src / "a" / "records" / f"{a.stack.name}.build.json", "layout_s": 0.0}
            built_b = {**built_b, "record": src / "b" / "records" / f"{b.stack.name}.build.json", "layout_s": 0.0}
        cache = tmp / "cache"
        s_pub, s_info = stackctl_publish(a, built_a["record"], cache, target)
        h_pub, h_info = docker_push(client, hand_a["id"], f"{target}-hand:a")
        out["cold_publish"] = {"stackctl_s": s_pub, "docker_push_s": h_pub, "stackctl": s_info, "docker": h_info}
        print("cold publish: " + json.dumps(out["cold_publish"]), flush=True)

        s_move, m_info = stackctl_publish(b, built_b["record"], cache, target)
        h_move, hm_info = docker_push(client, hand_b["id"], f"{target}-hand:b", frozenset(h_info["digests"]))
        out["moved_publish"] = {"stackctl_s": s_move, "docker_push_s": h_move, "stackctl": m_info,
                                "docker": hm_info, "layout_in_build_s": [built_a["layout_s"], built_b["layout_s"]]}
        print("moved publish: " + json.dumps(out["moved_publish"]), flush=True)

        s_again, again = stackctl_publish(a, built_a["record"], cache, target)
        s_fresh, fresh = stackctl_publish(a, built_a["record"], tmp / "cache2", f"{target}-fresh")
        out["again"] = {"same_cache_s": s_again, "empty_cache_s": s_fresh,
                        "digests": [s_info["digest"], again["digest"], fresh["digest"]],
                        "one_digest": len({s_info["digest"], again["digest"], fresh["digest"]}) == 1}
    finally:
        if not args.keep:
            with contextlib.suppress(docker.errors.APIError):
                for name in (repository, f"{repository}-hand", target, f"{target}-hand", f"{target}-fresh"):
                    for image in client.images.list(name=name):
                        for tag in image.tags:
                            if tag.startswith((repository, target)):
                                client.images.remove(tag, force=True)
                bench.remove_new_stage_images(client, before)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stack", choices=("synthetic", "torch"), default="synthetic")
    ap.add_argument("--bytecode", nargs="?", const="true", default="default",
                    choices=("default", "false", "true", "pins"))
    ap.add_argument("--wheels", type=Path, default=Path.home() / ".cache" / "stackctl-bench" / "torch")
    ap.add_argument("--core-mb", type=int, default=300)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--registry", default=REGISTRY, help="where to publish (a registry on loopback; the engine "
                    "pushes to it over plain HTTP)")
    ap.add_argument("--reuse", nargs=2, metavar=("DIR", "SEED"),
                    help="publish only: the stacks and images a run with --keep left in DIR under SEED")
    ap.add_argument("--builder", choices=("classic", "buildkit"), default="classic",
                    help="both builds through this builder (buildkit: `docker buildx build` on DOCKER_HOST)")
    args = ap.parse_args()
    bench.BUILDER = args.builder
    import docker.errors

    from stackctl.engine.docker import DockerEngine

    if args.stack == "torch":
        bench.torch_wheels(args.wheels)
    client = DockerEngine().client
    alias = f"stackctl-bench/base:{uuid.uuid4().hex[:8]}"
    client.api.tag(bench.BASE, *alias.split(":"))
    bench.BASE = alias
    try:
        with tempfile.TemporaryDirectory(prefix="stackctl-bench-") as t:
            if args.keep:
                print(f"kept: --reuse {t} SEED (the seed is the image repository's last part)", flush=True)
            r = one_run(args, Path(t))
    finally:
        with contextlib.suppress(docker.errors.APIError):
            if not args.keep:
                client.api.remove_image(alias)
    print(json.dumps(r, indent=1))
    c, m, g = r["cold_publish"], r["moved_publish"], r["again"]
    mb = 1e6
    print(f"\n{args.stack} stack (bytecode {args.bytecode}), one run, publishing to {args.registry}")
    print(f"{'':34}{'stackctl':>12}{'peer':>12}{'ratio':>8}")
    if "build" in r:
        b = r["build"]
        print(f"{'cold build (s)':34}{b['stackctl_cold']:>12.1f}{b['hand_cold']:>12.1f}"
              f"{b['stackctl_cold'] / b['hand_cold']:>8.2f}")
        print(f"{'rebuild, top pin moved (s)':34}{b['stackctl_rebuild']:>12.1f}{b['hand_rebuild']:>12.1f}")
        print(f"{'rebuild / cold':34}{b['stackctl_rebuild'] / b['stackctl_cold']:>12.3f}"
              f"{b['hand_rebuild'] / b['hand_cold']:>12.3f}")
    print(f"{'cold publish / docker push (s)':34}{c['stackctl_s']:>12.1f}{c['docker_push_s']:>12.1f}"
          f"{c['stackctl_s'] / c['docker_push_s']:>8.2f}")
    print(f"{'  compressed bytes sent (MB)':34}{c['stackctl']['bytes'] / mb:>12.1f}{c['docker']['bytes'] / mb:>12.1f}")
    print(f"{'publish after pin moved (s)':34}{m['stackctl_s']:>12.1f}{m['docker_push_s']:>12.1f}"
          f"{m['stackctl_s'] / m['docker_push_s']:>8.2f}")
    print(f"{'  compressed bytes sent (MB)':34}{m['stackctl']['bytes'] / mb:>12.2f}{m['docker']['bytes'] / mb:>12.1f}")
    lay = m["layout_in_build_s"]
    print(f"{'  layout copy in build, a / b (s)':34}{lay[0]:>12.1f}{lay[1]:>12.1f}")
    print(f"{'publish again, same / new repo (s)':34}{g['same_cache_s']:>12.1f}{g['empty_cache_s']:>12.1f}")
    print(f"one digest for three publishes of one build: {g['one_digest']} ({g['digests'][0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
