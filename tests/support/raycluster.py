"""A Ray cluster of several nodes on this machine, every node on loopback (no test traffic leaves 127.0.0.1): build
nodes whose DOCKER_HOST are the engines `.ci/services.sh` starts, each declaring `stackctl-engine`, and GPU nodes
declaring GPUs that do not exist, for trials that only read CUDA_VISIBLE_DEVICES (a stand-in `nvidia-smi` on
their PATH names the cards, as a real host's would).

stackctl runs against it as a user would, in a process of its own (`run`), with `--cluster` naming the head.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine import unavailable

# Ray takes a node's address from the route to the outside; a cluster of one machine stays on loopback
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
REPO = Path(__file__).resolve().parents[2]

FAKE_SMI = """#!/bin/sh
# the GPU host's tool, as far as stackctl asks it: four cards
case "$*" in
  *index,uuid*) for i in 0 1 2 3; do echo "$i, GPU-fake-$i"; done ;;
  *) for i in 0 1 2 3; do echo "Fake GPU, 555.42"; done ;;
esac
"""


def fake_gpu_bin(where: Path) -> Path:
    """A directory holding the stand-in nvidia-smi."""
    where.mkdir(parents=True, exist_ok=True)
    tool = where / "nvidia-smi"
    tool.write_text(FAKE_SMI)
    tool.chmod(0o755)
    return where


@dataclass
class LocalCluster:
    cluster: Any  # ray.cluster_utils.Cluster
    fake_bin: Path
    nodes: dict[str, Any] = field(default_factory=dict)  # name -> ray Node
    envs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> add_node arguments

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add(self, name: str, **args: Any) -> Any:
        args = {"num_cpus": 1, "node_ip_address": "127.0.0.1", **args}
        self.envs[name] = args
        self.nodes[name] = self.cluster.add_node(**args)
        self.cluster.wait_for_nodes()
        return self.nodes[name]

    def name_of(self, node_id: str) -> str:
        return next(n for n, node in self.nodes.items() if node.node_id.startswith(node_id))

    def kill(self, name: str) -> None:
        """The node's raylet and workers killed at once, as a machine that loses power."""
        self.cluster.remove_node(self.nodes.pop(name), allow_graceful=False)

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**os.environ, **LOOPBACK, "PYTHONPATH": str(REPO), **(extra or {})}


def start_cluster(tmp: Path, builds: Mapping[str, str], gpu_nodes: int = 0, gpus: int = 2) -> Iterator[LocalCluster]:
    """A head (no CPU of its own, so no task lands on it), a build node per engine in `builds` (name ->
    DOCKER_HOST), `gpu_nodes` nodes of `gpus` GPUs each; shut down whole at the end."""
    try:
        from ray.cluster_utils import Cluster
    except ImportError:
        unavailable("Ray is not installed (pip install -e '.[test]' brings it)")
    os.environ.update(LOOPBACK)  # the head and nodes started below read it, and so does the driver
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1",
                                                             "include_dashboard": False})
    local = LocalCluster(cluster, fake_gpu_bin(tmp / "bin"))
    try:
        for name, host in builds.items():
            local.add(name, resources={"stackctl-engine": 1}, env_vars={"DOCKER_HOST": host})
        for i in range(gpu_nodes):
            local.add(f"gpu{i}", num_cpus=gpus, num_gpus=gpus,
                      env_vars={"PATH": f"{local.fake_bin}:{os.environ.get('PATH', '')}"})
        yield local
    finally:
        cluster.shutdown()


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str
    seconds: float


def run(cluster: LocalCluster | None, *args: str, cwd: Path, env: Mapping[str, str] | None = None,
        timeout: float = 900) -> Ran:
    """`stackctl ARGS` in a process of its own, with `--cluster` naming the head when a cluster is given."""
    argv = [sys.executable, "-m", "stackctl", *args, *(["--cluster", cluster.address] if cluster else [])]
    started = time.monotonic()
    base = cluster.env(env) if cluster else {**os.environ, **LOOPBACK, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.run(argv, cwd=cwd, env=base, capture_output=True, text=True, timeout=timeout, check=False)
    return Ran(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


@pytest.fixture(scope="session")
def build_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A build node per engine `.ci/services.sh` starts (20.10, Docker 26 on overlay2 and on containerd)."""
    from tests.support.engines import _engines, engine_up

    engines = {name: engine_up(case).host for name, case in _engines().items()}
    yield from start_cluster(tmp_path_factory.mktemp("ray"), engines)


@pytest.fixture
def fake_gpus(tmp_path: Path) -> dict[str, str]:
    """The environment of a host whose nvidia-smi names four cards."""
    return {"PATH": f"{fake_gpu_bin(tmp_path / 'bin')}:{os.environ.get('PATH', '')}"}


PROFILE = """\
[stack]
name = "{name}"

[targets]
python = ["3.11"]
platforms = ["linux_x86_64"]

[indexes.public]
from_pip = true
"""

# Each run sleeps (a GPU kernel's stand-in: it takes no CPU) and prints a latency that depends only on the cell,
# so every verdict is decided by the first brackets, here and on the cluster.
PLAN = """\
[plan]
name = "sweep"

[[trial]]
name = "lat"
kind = "bench"
command = ["{{python}}", "-c",
           "'{tag}'; import json, time; time.sleep({sleep}); print(json.dumps({{'lat_ms': 10.0 * {{bs}}}}))"]
repeat = {repeat}
max_repeat = {max_repeat}
devices = {devices}
timeout = 300

[trial.matrix]
bs = {cells}

[[trial.metric]]
name = "lat_ms"
better = "lower"
band = 5
"""


def sweep_project(root: Path, *, sleep: float = 0.3, repeat: int = 2, max_repeat: int = 4, devices: int = 1,
                  cells: tuple[int, ...] = (1, 4, 16, 64), tag: str = "") -> Path:
    """Two profiles of nothing but a target and a plan whose trial is a `[trial.matrix]` sweep, one cell a value
    of `cells`, each needing `devices` cards; `tag` is in every run's command line (to find its processes)."""
    (root / "stacks" / "validation").mkdir(parents=True, exist_ok=True)
    for name in ("control", "candidate"):
        (root / "stacks" / f"{name}.toml").write_text(PROFILE.format(name=name))
    plan = PLAN.format(sleep=sleep, repeat=repeat, max_repeat=max_repeat, devices=devices, cells=list(cells),
                       tag=tag)
    (root / "stacks" / "validation" / "plan.toml").write_text(plan)
    return root


@contextlib.contextmanager
def served(directory: Path) -> Iterator[str]:
    """`directory` over HTTP on 127.0.0.1, on a free port: where a test's locks say their wheels are, for the
    nodes to fetch."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

    directory.mkdir(parents=True, exist_ok=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
