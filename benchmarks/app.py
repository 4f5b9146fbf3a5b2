"""Rebuild cost of the image a project ships ([image.app]): examples/app on the public example stack.

Three builds of `stackctl build public-example-app`, in a scratch repository, on the local engine:

1. cold (no cache);
2. after only the app's source changed (a commit to examples/app/src): the stack's layers must all be reused
   and none of its install steps rerun;
3. after one pin moved (cffi 1.17.1 -> 1.17.0, resolved again): only that pin's layer, those above it and
   the app's are new.

The peer, in the same run from the same wheels: the Dockerfile one writes by hand for the same image, one
`pip install` of the whole wheelhouse and the app copied on top, built cold and after the same two changes.
For each: seconds, steps taken from the cache, layers reused and new (by diff_id against the build before).

    python benchmarks/app.py

Needs the engine, the base image and a pip configuration that reaches the public index (as the public
example does). Removes every image it tags.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STACKCTL = [sys.executable, "-m", "stackctl"]
BASE = "stackctl-base:bookworm"

PEER = """\
# What one writes by hand: the stack's wheels in one install, the app copied on top.
FROM {base}
RUN python3 -m venv /opt/venv
COPY wheelhouse/ /tmp/wheelhouse/
COPY requirements.txt /tmp/requirements.txt
RUN /opt/venv/bin/python -m pip install --no-index --find-links /tmp/wheelhouse --no-deps \\
        --disable-pip-version-check --no-cache-dir --root-user-action=ignore -r /tmp/requirements.txt \\
 && rm -rf /tmp/wheelhouse
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY examples/app/src/ /opt/app/
COPY examples/app/greeter-app.pth /opt/venv/lib/python3.11/site-packages/greeter-app.pth
"""


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})},
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done


def layers(ref: str) -> list[str]:
    out = subprocess.run(["docker", "image", "inspect", ref, "--format", "{{json .RootFS.Layers}}"],
                         capture_output=True, text=True, check=True).stdout
    return list(json.loads(out))


def commit(repo: Path, message: str) -> None:
    run(["git", "add", "-A"], repo)
    run(["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid", "commit", "-qm", message], repo)


def stackctl_build(repo: Path, repository: str, record: Path, cache: Path, *, cold: bool) -> dict[str, Any]:
    argv = [*STACKCTL, "build", "public-example-app", "--repository", repository, "--record-dir", str(record),
            "--json", *(["--no-cache"] if cold else [])]
    start = time.monotonic()
    done = run(argv, repo, {"STACKCTL_CACHE_DIR": str(cache)})
    seconds = time.monotonic() - start
    rec = json.loads(done.stdout)
    return {"seconds": seconds, "record": rec, "final": layers(rec["image"]),
            "stack": layers(rec["stack_image"]["image"])}


def peer_build(repo: Path, tag: str, wheelhouse: Path, lock: dict[str, Any], *, cold: bool) -> dict[str, Any]:
    ctx = repo / ".peer"
    shutil.rmtree(ctx, ignore_errors=True)
    (ctx / "wheelhouse").mkdir(parents=True)
    names = []
    for pin in lock["pins"]:
        for f in pin["files"]:
            shutil.copy2(wheelhouse / f["filename"], ctx / "wheelhouse" / f["filename"])
            names.append(f"{pin['name']}=={pin['version']}")
    (ctx / "requirements.txt").write_text("\n".join(dict.fromkeys(names)) + "\n")
    shutil.copytree(repo / "examples", ctx / "examples")
    (ctx / "Dockerfile").write_text(PEER.format(base=BASE))
    start = time.monotonic()
    done = run(["docker", "build", "-t", tag, *(["--no-cache"] if cold else []), str(ctx)], repo,
               {"DOCKER_BUILDKIT": "0"})
    seconds = time.monotonic() - start
    steps = sum(1 for ln in done.stdout.splitlines() if ln.startswith("Step "))
    cached = done.stdout.count("---> Using cache")
    return {"seconds": seconds, "steps": steps, "cached": cached, "final": layers(tag)}


def reuse(before: list[str], after: list[str]) -> str:
    kept = sum(1 for layer in after if layer in before)
    return f"{kept} / {len(after) - kept}"


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="stackctl-bench-app-"))
    repo, cache, record = scratch / "repo", scratch / "cache", scratch / "build"
    (repo / "stacks").mkdir(parents=True)
    for name in ("public-example.toml", "public-example-app.toml"):
        shutil.copy(ROOT / "stacks" / name, repo / "stacks" / name)
    shutil.copytree(ROOT / "examples" / "app", repo / "examples" / "app")
    run(["git", "init", "-q", "-b", "main"], repo)
    run([*STACKCTL, "resolve", "public-example-app"], repo, {"STACKCTL_CACHE_DIR": str(cache)})
    commit(repo, "lock")
    tag = uuid.uuid4().hex[:8]
    repository, peer = f"stackctl-bench/app-{tag}", f"stackctl-bench/app-peer-{tag}:latest"
    results: dict[str, dict[str, Any]] = {}
    try:
        results["cold"] = stackctl_build(repo, repository, record, cache, cold=True)
        lock = json.loads((repo / "stacks" / "public-example-app.lock").read_text())
        wheelhouse = record / "public-example-app" / "wheelhouse"
        results["peer cold"] = peer_build(repo, peer, wheelhouse, lock, cold=True)

        source = repo / "examples" / "app" / "src" / "greeter" / "__init__.py"
        source.write_text(source.read_text().replace('return f"hello', 'return f"hello,'))
        commit(repo, "app: a comma")
        results["app source"] = stackctl_build(repo, repository, record, cache, cold=False)
        results["peer app source"] = peer_build(repo, peer, wheelhouse, lock, cold=False)

        stack = repo / "stacks" / "public-example.toml"
        stack.write_text(stack.read_text().replace('version = "1.17.1"', 'version = "1.17.0"')
                         .replace('value = "1.17.1"', 'value = "1.17.0"'))
        run([*STACKCTL, "resolve", "public-example-app"], repo, {"STACKCTL_CACHE_DIR": str(cache)})
        commit(repo, "cffi 1.17.0")
        results["pin moved"] = stackctl_build(repo, repository, record, cache, cold=False)
        lock = json.loads((repo / "stacks" / "public-example-app.lock").read_text())
        results["peer pin moved"] = peer_build(repo, peer, wheelhouse, lock, cold=False)
    finally:
        for ref in subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}",
                                   f"stackctl-bench/app-*{tag}*"], capture_output=True, text=True).stdout.split():
            subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, check=False)
        shutil.rmtree(scratch, ignore_errors=True)

    print("| build | stackctl s | stack steps cached | stack layers reused / new | app+final steps cached "
          "| final layers reused / new | peer s | peer steps cached | peer layers reused / new |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    before: dict[str, Any] | None = None
    peer_before: dict[str, Any] | None = None
    for name in ("cold", "app source", "pin moved"):
        r, p = results[name], results[f"peer {name}"]
        rec = r["record"]
        st = rec["stack_image"]
        app_steps = rec["app"]["steps"] + rec["steps"]
        app_cached = rec["app"]["cached_steps"] + rec["cached_steps"]
        print(f"| {name} | {r['seconds']:.1f} | {st['cached_steps']} of {st['steps']} "
              f"| {reuse(before['stack'], r['stack']) if before else '-'} | {app_cached} of {app_steps} "
              f"| {reuse(before['final'], r['final']) if before else '-'} | {p['seconds']:.1f} "
              f"| {p['cached']} of {p['steps']} | {reuse(peer_before['final'], p['final']) if peer_before else '-'} |")
        before, peer_before = r, p


if __name__ == "__main__":
    main()
