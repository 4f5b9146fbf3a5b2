"""Image build benchmark: stackctl's layered Dockerfile vs a hand-written single-install Dockerfile.

Both build the same hash-locked wheels from the same wheelhouse on the same engine, in the same run:

1. cold build (no cache) of each;
2. rebuild after the top-of-stack pin moves: seconds, steps cached, layers reused, bytes of new layers;
3. final image size against the sum of what is installed, and the wheelhouse's size (it must cost nothing);
4. with --sibling (synthetic stack): a sibling stack that moves the vendor release train, built after the
   first on the same engine: layers reused, bytes its new layers wrote, against the moved wheels' installed
   bytes.

    python benchmarks/image.py --stack torch [--installer uv] [--keep]     # the real torch 2.13.0+cpu wheel
    python benchmarks/image.py --stack torch --installer default          # ... with the default [image]
    python benchmarks/image.py [--core-mb 300] [--sibling]                 # synthetic, torch-shaped
    DOCKER_HOST=unix:///run/stackctl-d26.sock python benchmarks/image.py --builder buildkit
    STACKCTL_BENCH_ENGINE=1 bash .ci/engine26.sh    # an engine of the benchmarks' own (containerd store)
    DOCKER_HOST=unix:///run/stackctl-dbench.sock python benchmarks/image.py --stack torch --builder buildkit \
        --repeat 3 --prune-build-cache   # its build cache emptied before each cold build
        # both through BuildKit: stackctl's build (its OCI layout included) against the hand Dockerfile built by
        # `docker buildx build --load`

Needs the engine and base image that `.ci/services.sh` starts. `--stack torch` takes torch 2.13.0+cpu (cp311,
the base image's python), its dependencies, torchada 0.1.103 (0.1.102 for the rebuild: the top pin moves)
and uv through `pip download` with this machine's pip configuration. The synthetic stack is shaped like
the real one: a big vendor train (incompressible bytes), a closure, a small patcher and a top-of-stack pin.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stackctl.base.files import sha256_file  # noqa: E402
from tests.support.engine import dangling_stage_images, remove_new_stage_images  # noqa: E402
from tests.support.imagestack import StackRepo, make_stack_repo  # noqa: E402
from tests.support.wheels import build_wheel  # noqa: E402

BASE = "stackctl-base:bookworm"
BUILDER = "classic"  # --builder
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
    """The lock's sha256 must match the (fattened) wheels: rewrite it from the wheelhouse. The profile
    names this run's alias of the base image, so the lock is remade for its digest too."""
    from dataclasses import replace

    from stackctl.profile.loader import load_stack
    from stackctl.resolve.lock import read_lock, write_lock

    lock = read_lock(repo.lock)
    by_name = {p.name: p for p in repo.wheelhouse.glob("*.whl")}

    def fix(f: Any) -> Any:
        w = by_name[f.filename]
        return replace(f, sha256=sha256_file(w), size=w.stat().st_size)

    text = repo.profile.read_text()
    repo.profile.write_text(text.replace('base = "stackctl-base:bookworm"', f'base = "{BASE}"'))
    repo.stack = load_stack(repo.profile)
    lock = replace(lock, profile_digest=repo.stack.digest())
    pins = tuple(replace(p, files=tuple(fix(f) for f in p.files)) for p in lock.pins)
    closure = tuple(replace(c, file=fix(c.file) if c.file else None,
                            hashes=(f"sha256:{sha256_file(by_name[c.file.filename])}",) if c.file else ())
                    for c in lock.closure)
    write_lock(repo.lock, replace(lock, pins=pins, closure=closure))


def make(tmp: Path, repository: str, toplib: str, seed: str, core_mb: int, like: Any = None,
         installer: str = "uv", core: str | None = None) -> Any:
    """A stack; with `like`, the same wheels as that one (byte for byte) except toplib, or, with `core`,
    except the vendor train (corelib, corelib-ext at version `core`, new bytes): a sibling stack."""
    versions = {"toplib": toplib, **({"corelib": core, "corelib-ext": core} if core else {})}
    repo = make_stack_repo(tmp, "bench", repository, versions, nonce=seed, commit=False, installer=installer)
    shared = ("corelib_ext", "helperdep", "uv")
    if core is not None:
        fatten(repo.wheelhouse, "corelib-ext", core, "corelib_ext", core_mb, seed + core)
        shared = ("helperdep", "uv")
    if like is None:
        fatten(repo.wheelhouse, "corelib-ext", repo.versions["corelib-ext"], "corelib_ext", core_mb, seed)
        fatten(repo.wheelhouse, "helperdep", repo.versions["helperdep"], "helperdep_data", max(core_mb // 10, 1),
               seed, keep={"helperdep.py": "X = 1\n"})
    else:
        for name in shared:
            for w in like.wheelhouse.glob(f"{name}-*.whl"):
                (repo.wheelhouse / w.name).unlink(missing_ok=True)
                os.link(w, repo.wheelhouse / w.name)
    relock(repo)
    return repo


TORCH = "2.13.0+cpu"
TORCHADA = ("0.1.103", "0.1.102")  # cold build, then the top pin moves
UV = "0.13.9"


def torch_wheels(dest: Path) -> Path:
    """torch, its dependencies, two torchada releases and uv, through pip and its configuration."""
    dest.mkdir(parents=True, exist_ok=True)
    runs = [["torch==2.13.0", f"torchada=={TORCHADA[0]}"], ["--no-deps", f"torchada=={TORCHADA[1]}"],
            ["--no-deps", f"uv=={UV}"]]
    for args in runs:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(dest), *args],
                       check=True)
    return dest


def torch_profile(repository: str, torchada: str, installer: str, bytecode: str = "default") -> str:
    uv = f'\n[pins.uv]\nversion = "{UV}"\nindex = "public"\n' if installer == "uv" else ""
    return f"""\
[stack]
name = "bench"
description = "torch {TORCH} and torchada: the image benchmark's torch-sized stack"

[targets]
python = ["3.11"]
platforms = ["linux_x86_64"]

[indexes.vendor]
url = "http://127.0.0.1:9/simple/"

[indexes.public]
from_pip = true

[pins.torchada]
version = "{torchada}"
index = "public"
gate = {{ order = 1 }}

[pins.torch]
version = "{TORCH}"
index = "vendor"
train = "torch"
gate = {{ order = 2 }}
{uv}
[image]
base = "{BASE}"
repository = "{repository}"
python = "3.11"
tag = "py{{python}}_torch_{{pins[torch]}}_torchada_{{pins[torchada]}}"
{"" if installer == "default" else f'installer = "{installer}"'}
{"" if bytecode == "default" else f'bytecode = {json.dumps(bytecode) if bytecode == "pins" else bytecode}'}
"""


def torch_stack(tmp: Path, repository: str, torchada: str, wheels: Path, installer: str,
                bytecode: str = "default") -> StackRepo:
    """The profile, a wheelhouse of hard links and the lock written from the wheels' own hashes."""
    from packaging.utils import canonicalize_name, parse_wheel_filename

    from stackctl.profile.loader import load_stack
    from stackctl.resolve.lock import ClosureEntry, Lock, LockedFile, LockedPin, write_lock

    root = tmp / "repo"
    (root / "stacks").mkdir(parents=True, exist_ok=True)
    profile = root / "stacks" / "bench.toml"
    profile.write_text(torch_profile(repository, torchada, installer, bytecode))
    stack = load_stack(profile)
    house = tmp / "wheelhouse"
    house.mkdir(parents=True, exist_ok=True)
    target = stack.targets[0].label
    pinned = {p.key: p for p in stack.pins}
    files: dict[str, LockedFile] = {}
    closure = []
    for w in sorted(wheels.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(w.name)
        pin = pinned.get(canonicalize_name(name))
        if (pin and str(version) != pin.version) or (not pin and name in ("torchada", "uv")):
            continue
        os.link(w, house / w.name)
        f = LockedFile(target, w.name, f"http://127.0.0.1:9/files/{w.name}", sha256_file(w), w.stat().st_size)
        if pin:
            files[pin.key] = f
        else:
            closure.append(ClosureEntry(target, str(name), str(version), f, (f"sha256:{f.sha256}",)))
    lock = Lock(stack.name, stack.digest(), tuple(LockedPin(p.name, p.version, p.index, (files[p.key],))
                                                  for p in stack.pins), tuple(closure))
    write_lock(profile.with_suffix(".lock"), lock)
    return StackRepo(root, profile, profile.with_suffix(".lock"), house, stack)


def stackctl_build(repo: Any, tmp: Path, nocache: bool) -> tuple[float, dict[str, Any]]:
    """What `stackctl build` does, in this process (to time each step): the render, the context (with each
    wheel's sha256 checked where the install stages do not check it: the classic builder's wheel server, or
    under BuildKit the stage's own --require-hashes), the build, the build record."""
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.build import BuildRequest, build_image
    from stackctl.image.order import BuildOrder
    from stackctl.image.prepare import prepare_build

    t0 = time.perf_counter()
    marks: list[tuple[float, str]] = [(0.0, "render, hash the wheels, send the context")]

    def step(n: int, of: int, instruction: str) -> None:
        marks.append((time.perf_counter() - t0, instruction.strip()[:60]))

    class Engine(DockerEngine):
        def build(self, *args: Any, **kwargs: Any) -> Any:
            result = super().build(*args, **kwargs)
            marks.append((time.perf_counter() - t0, "after the build: inspect, the gate's lines"))
            return result

        def layout(self, *args: Any, **kwargs: Any) -> Any:
            marks.append((time.perf_counter() - t0, "the image copied into its OCI layout (skopeo)"))
            got = super().layout(*args, **kwargs)
            marks.append((time.perf_counter() - t0, "the layout's config made reproducible, the record"))
            return got

    engine: Any = Engine()
    if BUILDER == "buildkit":
        from stackctl.engine.buildx import BuildxEngine

        class Buildx(BuildxEngine):
            def build(self, *args: Any, **kwargs: Any) -> Any:
                result = super().build(*args, **kwargs)
                marks.append((time.perf_counter() - t0, "after the build (and its layout): the record"))
                return result

        engine = Buildx(DockerEngine())

    prep = prepare_build(repo.stack, repo.lock, None, "bench", "bench", None, None, os.environ)
    req = BuildRequest(prep, repo.lock, BuildOrder(wheelhouse=repo.wheelhouse, no_cache=nocache), tmp / "records",
                       tmp / "ctx")
    built = build_image(req, engine, on_step=step)
    seconds = time.perf_counter() - t0
    marks.append((seconds, "end"))
    steps = [(b[0] - a[0], a[1]) for a, b in itertools.pairwise(marks)]
    attrs = engine.client.api.inspect_image(built.result.image_id)
    return seconds, {"tag": built.image, "id": built.result.image_id, "steps": built.result.steps,
                     "cached": built.result.cached_steps, "layers": attrs["RootFS"]["Layers"],
                     "size": attrs["Size"], "step_seconds": steps, "wheels": built.record["wheels"],
                     "record": built.record_path,
                     "layout_s": sum(d for d, what in steps if what.startswith("the image copied"))}


def peer_build(repo: Any, tmp: Path, nocache: bool) -> tuple[float, dict[str, Any]]:
    """The hand-written Dockerfile, given the same wheels and one hash-checked requirement file."""
    ctx = tmp / "peer"
    if ctx.exists():
        subprocess.run(["rm", "-rf", str(ctx)], check=True)
    (ctx / "wheelhouse").mkdir(parents=True)
    lines = []
    tool = repo.stack.installer_pin
    for w in sorted(repo.wheelhouse.glob("*.whl")):
        if tool is not None and w.name.startswith(f"{tool.name}-"):
            continue  # the peer installs with the base image's pip
        os.link(w, ctx / "wheelhouse" / w.name)
        name, version = w.name.split("-")[:2]
        lines.append(f"{name}=={version} --hash=sha256:{sha256_file(w)}")
    (ctx / "requirements.txt").write_text("\n".join(lines) + "\n")
    (ctx / "Dockerfile").write_text(PEER.format(base=BASE))
    return engine_build(ctx, f"{repo.stack.image.repository}:peer", nocache)


def buildx_build(ctx: Path, tag: str, nocache: bool) -> tuple[float, dict[str, Any]]:
    """The hand Dockerfile through `docker buildx build --load`, as its author would build it."""
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.rawjson import parse_rawjson

    engine = DockerEngine()
    t0 = time.perf_counter()
    done = subprocess.run(["docker", "buildx", "build", "--progress=rawjson", "--load", "-t", tag,
                           *(["--no-cache"] if nocache else []), str(ctx)], capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - t0
    attrs = engine.client.api.inspect_image(tag)
    result = parse_rawjson(done.stderr, attrs["Id"], done.returncode == 0)
    return seconds, {"tag": tag, "id": result.image_id, "steps": result.steps, "cached": result.cached_steps,
                     "layers": attrs["RootFS"]["Layers"], "size": attrs["Size"], "step_seconds": []}


def engine_build(ctx: Path, tag: str, nocache: bool) -> tuple[float, dict[str, Any]]:
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.buildlog import parse_build_stream

    if BUILDER == "buildkit":
        return buildx_build(ctx, tag, nocache)
    engine = DockerEngine()
    t0 = time.perf_counter()
    events = engine.client.api.build(path=str(ctx), tag=tag, rm=True, forcerm=True, decode=True, nocache=nocache)
    marks: list[tuple[float, str]] = [(0.0, "send the context")]

    repository, name = tag.rsplit(":", 1)
    run = uuid.uuid4().hex[:6]

    def timed(stream: Any) -> Any:
        for event in stream:  # when each step starts: where a build's seconds go
            text = event.get("stream", "") if isinstance(event, dict) else ""
            if text.startswith("Step "):
                marks.append((time.perf_counter() - t0, text.split(" : ", 1)[-1].strip()[:60]))
            # Tag each step's image as soon as it exists: other test runs on a shared engine remove
            # untagged stage images they did not see before, which would break this build's
            # `COPY --from` (and take the rebuild's cache away).
            m = re.match(r"\s*---> ([0-9a-f]{12})\s*$", text)
            if m:
                engine.client.api.tag(m.group(1), repository, f"step-{name}-{run}-{len(marks)}")
            yield event

    result = parse_build_stream(timed(events))
    seconds = time.perf_counter() - t0
    marks.append((seconds, "end"))
    steps = [(b[0] - a[0], a[1]) for a, b in itertools.pairwise(marks)]
    attrs = engine.client.api.inspect_image(result.image_id)
    return seconds, {"tag": tag, "id": result.image_id, "steps": result.steps, "cached": result.cached_steps,
                     "layers": attrs["RootFS"]["Layers"], "size": attrs["Size"], "step_seconds": steps}


def new_layer_bytes(before: dict[str, Any], after: dict[str, Any]) -> tuple[int, int, int]:
    """(layers reused, layers new, bytes written by the steps the rebuild did not take from cache)."""
    import docker.errors

    from stackctl.engine.docker import DockerEngine

    api = DockerEngine().client.api

    def history(image: dict[str, Any]) -> list[dict[str, Any]]:
        # the containerd store names an image by its manifest digest, which its history does not answer to
        try:
            return list(api.history(image["id"]))
        except docker.errors.NotFound:
            return list(api.history(image["tag"]))

    old = set(before["layers"])
    reused = sum(1 for layer in after["layers"] if layer in old)
    entries = history(after)
    if all(h["Id"] == "<missing>" for h in entries[1:]):
        # the containerd store names no step images: each layer's size is that of the history entry that made
        # it (oldest first; an entry makes a layer when it has bytes or is a RUN, COPY or ADD)
        made = [h["Size"] for h in reversed(entries)
                if h["Size"] > 0 or re.match(r"(/bin/sh -c )?(RUN|COPY|ADD)\b", h["CreatedBy"].lstrip())]
        if len(made) == len(after["layers"]):
            fresh = sum(size for size, layer in zip(made, after["layers"], strict=True) if layer not in old)
            return reused, len(after["layers"]) - reused, fresh
    old_ids = {h["Id"] for h in history(before) if h["Id"] != "<missing>"}
    fresh_bytes = sum(h["Size"] for h in entries if h["Id"] not in old_ids)
    return reused, len(after["layers"]) - reused, fresh_bytes


def installed_bytes(image: str, paths: str) -> int:
    from stackctl.engine.docker import DockerEngine

    out = DockerEngine().client.containers.run(image, ["sh", "-c", f"du -sb {paths} | awk '{{s+=$1}} END {{print s}}'"],
                                               remove=True, network_disabled=True)
    return int(out.decode().strip())


def one_run(args: argparse.Namespace, tmp: Path, base_size: int, hand_first: bool = False) -> dict[str, Any]:
    import docker.errors

    from stackctl.engine.docker import DockerEngine

    client = DockerEngine().client
    seed = uuid.uuid4().hex[:8]
    repository = f"stackctl-bench/{seed}"
    results: dict[str, Any] = {}
    before = dangling_stage_images(client)
    if args.stack == "torch":
        a = torch_stack(tmp / "a", repository, TORCHADA[0], args.wheels, args.installer, args.bytecode)
        b = torch_stack(tmp / "b", repository, TORCHADA[1], args.wheels, args.installer, args.bytecode)
    else:
        a = make(tmp / "a", repository, "0.3.0", seed, args.core_mb, installer=args.installer)
        b = make(tmp / "b", repository, "0.4.0", seed, args.core_mb, like=a, installer=args.installer)
    tool = a.stack.installer_pin
    wheelhouse_bytes = sum(p.stat().st_size for p in a.wheelhouse.glob("*.whl")
                           if tool is None or not p.name.startswith(f"{tool.name}-"))
    try:
        builds = [("stackctl", stackctl_build), ("hand-written", peer_build)]
        # Which goes first alternates from run to run: on a shared machine the load drifts over the minutes
        # between the two, and a fixed order would hand that drift to one side every time.
        for name, fn in builds[::-1] if hand_first else builds:
            if args.prune_build_cache:  # each cold build from an empty build cache, neither finds the other's
                prune_build_cache()
            # one build directory, as a user's checkout has: the rebuild finds the cold build's layout
            try:
                cold_s, cold = fn(a, tmp / "build", True)
            except Exception as exc:
                # measured on the shared containerd-store engine: a cold build right after the prune sometimes
                # fails with BuildKit's "failed to solve: not found" (1 build in 8); it is run again, once
                if not args.prune_build_cache or "not found" not in str(exc):
                    raise
                print(f"{name} cold build failed after the prune ({exc}); run again", flush=True)
                prune_build_cache()
                cold_s, cold = fn(a, tmp / "build", True)
            warm_s, warm = fn(b, tmp / "build", False)
            reused, fresh, fresh_bytes = new_layer_bytes(cold, warm)
            results[name] = {"cold_s": cold_s, "rebuild_s": warm_s, "ratio": warm_s / cold_s,
                             "steps": warm["steps"], "cached": warm["cached"], "layers_reused": reused,
                             "layers_new": fresh, "new_layer_mb": fresh_bytes / 1e6,
                             "image_mb": warm["size"] / 1e6, "tag": warm["tag"], "cold_tag": cold["tag"],
                             "cold_steps_s": cold["step_seconds"], "rebuild_steps_s": warm["step_seconds"]}
        layered = results["stackctl"]["tag"]
        results["sizes"] = {
            "base_mb": base_size / 1e6,
            "image_mb": results["stackctl"]["image_mb"],
            "added_mb": results["stackctl"]["image_mb"] - base_size / 1e6,
            "installed_mb": installed_bytes(layered, "/opt/stack/* /opt/venv /opt/stackctl") / 1e6,
            "wheelhouse_mb": wheelhouse_bytes / 1e6,
        }
        if args.sibling:
            results["sibling"] = sibling(args, tmp, repository, seed, a)
    finally:
        if not args.keep:
            try:  # others share the engine: an image listed a moment ago may be gone
                for image in client.images.list(name=repository):
                    # only this run's names: a step image of a FROM is the base image itself, whose own
                    # names (stackctl-base:bookworm, its registry copy) must stay
                    for tag in image.tags:
                        if tag.startswith(f"{repository}:"):
                            client.images.remove(tag, force=True)
                remove_new_stage_images(client, before)
            except docker.errors.APIError as exc:
                print(f"cleanup: {exc}", file=sys.stderr)
    return results


def prune_build_cache() -> None:
    """The engine's build cache emptied (`docker buildx prune -af`: the build cache only, no image)."""
    subprocess.run(["docker", "buildx", "prune", "-af"], check=True, capture_output=True)


def sibling(args: argparse.Namespace, tmp: Path, repository: str, seed: str, first: Any) -> dict[str, Any]:
    """The first stack is built; its sibling moves the vendor train (corelib, corelib-ext: new bytes)."""
    s = make(tmp / "s", repository, "0.3.0", seed, args.core_mb, like=first, installer=args.installer,
             core="2.0.1+vendor1")
    _, built = stackctl_build(first, tmp / "a", False)  # from cache: the first stack as the engine has it
    seconds, sib = stackctl_build(s, tmp / "s", False)
    reused, fresh, fresh_bytes = new_layer_bytes(built, sib)
    moved = installed_bytes(sib["tag"], "/opt/stack/train-core")
    return {"seconds": seconds, "layers": len(sib["layers"]), "layers_reused": reused, "layers_new": fresh,
            "written_mb": fresh_bytes / 1e6, "moved_installed_mb": moved / 1e6,
            "written_over_moved": fresh_bytes / moved}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stack", choices=("synthetic", "torch"), default="synthetic")
    ap.add_argument("--installer", choices=("uv", "pip", "default"), default="uv",
                    help="stackctl's install step (--stack torch, default: none written, as a new profile has it)")
    ap.add_argument("--bytecode", nargs="?", const="true", default="default",
                    choices=("default", "false", "true", "pins"),
                    help="--stack torch: the profile's [image] bytecode (bare: true; default: none written)")
    ap.add_argument("--wheels", type=Path, default=Path.home() / ".cache" / "stackctl-bench" / "torch",
                    help="where --stack torch keeps the wheels pip downloads")
    ap.add_argument("--core-mb", type=int, default=300, help="size of the big vendor wheel's payload")
    ap.add_argument("--sibling", action="store_true", help="also build a sibling that moves the vendor train")
    ap.add_argument("--repeat", type=int, default=1, help="runs; the table shows medians")
    ap.add_argument("--keep", action="store_true", help="keep the images")
    ap.add_argument("--prune-build-cache", action="store_true",
                    help="`docker buildx prune -af` (the build cache only) before each cold build, so no cold build "
                    "finds the steps an earlier one built "
                    "(both stacks are the same from run to run): only on an engine of the benchmark's own")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--builder", choices=("classic", "buildkit"), default="classic",
                    help="buildkit: both builds through `docker buildx build` on DOCKER_HOST's engine")
    args = ap.parse_args()
    global BUILDER
    BUILDER = args.builder
    if args.sibling and args.stack != "synthetic":
        ap.error("--sibling needs the synthetic stack (one torch release is on this machine)")
    from stackctl.engine.docker import DockerEngine

    if args.stack == "torch":
        torch_wheels(args.wheels)
    # A name of this run's own for the base image: a shared engine's other users may re-tag or remove
    # stackctl-base:bookworm while the benchmark runs.
    import docker.errors

    global BASE
    client = DockerEngine().client
    alias = f"stackctl-bench/base:{uuid.uuid4().hex[:8]}"
    for _ in range(60):  # it may be between a removal and its re-import
        try:
            client.api.tag(BASE, *alias.split(":"))
            break
        except docker.errors.ImageNotFound:
            time.sleep(5)
    else:
        raise SystemExit(f"{BASE}: no such image on the engine")
    BASE = alias
    base_size = client.api.inspect_image(BASE)["Size"]
    runs = []
    try:  # the alias goes however the runs end (a shared engine's other users may break one)
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="stackctl-bench-") as t:
                hand_first = len(runs) % 2 == 1
                runs.append(one_run(args, Path(t), base_size, hand_first))
                r = runs[-1]
                first = "hand, then stackctl" if hand_first else "stackctl, then hand"
                print(f"run {len(runs)} ({first}): cold {r['stackctl']['cold_s']:.1f} s / "
                      f"{r['hand-written']['cold_s']:.1f} s "
                      f"({r['stackctl']['cold_s'] / r['hand-written']['cold_s']:.2f}x), rebuild "
                      f"{r['stackctl']['rebuild_s']:.1f} s / {r['hand-written']['rebuild_s']:.1f} s "
                      f"(rebuild / cold {r['stackctl']['ratio']:.2f})", flush=True)
                print("  " + json.dumps(r), flush=True)
    finally:
        with contextlib.suppress(docker.errors.APIError):
            client.api.remove_image(BASE)  # the alias only

    def med(*path: str) -> float:
        values = []
        for r in runs:
            v: Any = r
            for k in path:
                v = v[k]
            values.append(v)
        return float(statistics.median(values))

    last = runs[-1]
    if args.json:
        print(json.dumps(runs, indent=2))
    s, p, z = last["stackctl"], last["hand-written"], last["sizes"]
    print(f"{args.stack} stack, stackctl installs with {args.installer} (bytecode {args.bytecode}); "
          f"medians of {len(runs)} run(s)")
    print(f"{'':28}{'stackctl':>14}{'hand-written':>14}")
    print(f"{'cold build (s)':28}{med('stackctl', 'cold_s'):>14.1f}{med('hand-written', 'cold_s'):>14.1f}")
    print(f"{'rebuild, top pin moved (s)':28}{med('stackctl', 'rebuild_s'):>14.1f}"
          f"{med('hand-written', 'rebuild_s'):>14.1f}")
    print(f"{'rebuild / cold':28}{med('stackctl', 'ratio'):>14.2f}{med('hand-written', 'ratio'):>14.2f}")
    print(f"{'steps cached on rebuild':28}{s['cached']:>11}/{s['steps']:<2}{p['cached']:>11}/{p['steps']:<2}")
    print(f"{'layers reused / new':28}{s['layers_reused']:>10} / {s['layers_new']:<1}{p['layers_reused']:>10} / "
          f"{p['layers_new']:<1}")
    print(f"{'new layer bytes (MB)':28}{s['new_layer_mb']:>14.2f}{p['new_layer_mb']:>14.2f}")
    print(f"{'image size (MB)':28}{s['image_mb']:>14.1f}{p['image_mb']:>14.1f}")
    raw = [(r["stackctl"]["cold_s"], r["hand-written"]["cold_s"], r["stackctl"]["rebuild_s"],
            r["hand-written"]["rebuild_s"]) for r in runs]
    print("raw runs (stackctl cold, hand cold, stackctl rebuild, hand rebuild; s): "
          + "; ".join(", ".join(f"{x:.1f}" for x in run) for run in raw))
    print(f"cold / hand cold, per run: {', '.join(f'{sc / hc:.2f}' for sc, hc, _, _ in raw)} (median "
          f"{statistics.median(sc / hc for sc, hc, _, _ in raw):.2f}x); rebuild / cold, per run: "
          f"{', '.join(f'{sr / sc:.3f}' for sc, _, sr, _ in raw)} (median "
          f"{statistics.median(sr / sc for sc, _, sr, _ in raw):.3f})")
    print(f"cold build / hand-written: {med('stackctl', 'cold_s') / med('hand-written', 'cold_s'):.2f}x; "
          f"rebuild speed-up over the hand-written Dockerfile: "
          f"{med('hand-written', 'rebuild_s') / med('stackctl', 'rebuild_s'):.1f}x")
    print(f"size: base {z['base_mb']:.1f} MB + installed {z['installed_mb']:.1f} MB; image adds {z['added_mb']:.1f} MB "
          f"over the base ({z['added_mb'] - z['installed_mb']:+.1f} MB beyond what is installed); "
          f"wheelhouse {z['wheelhouse_mb']:.1f} MB")
    for phase in ("cold", "rebuild"):
        print(f"stackctl {phase}, seconds per step over 0.5 s (last run):")
        for sec, what in last["stackctl"][f"{phase}_steps_s"]:
            if sec > 0.5:
                print(f"  {sec:6.1f}  {what}")
    if args.sibling:
        sib = last["sibling"]
        print(f"sibling (vendor train moved): {med('sibling', 'seconds'):.1f} s; layers reused {sib['layers_reused']} "
              f"of {sib['layers']}, new {sib['layers_new']}; wrote {med('sibling', 'written_mb'):.1f} MB for "
              f"{med('sibling', 'moved_installed_mb'):.1f} MB of moved wheels installed "
              f"({med('sibling', 'written_over_moved'):.2f}x, target <= 1.1x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
