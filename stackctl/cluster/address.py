"""A Ray cluster named by the user (`--cluster ADDRESS`, or STACKCTL_CLUSTER), reached.

The address is a running cluster's head, `HOST:PORT` (a driver on a machine of the cluster) or
`ray://HOST:PORT` (Ray's client, from a machine outside it). stackctl never starts a head and never asks Ray to
find one ("auto"): a cluster is always the one the user named. Ray is an optional extra, imported only here and
only when a cluster is named. stackctl's own package travels to the nodes as Ray's runtime environment
(`py_modules`), so a node runs the caller's stackctl, not whatever it has installed.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackctl.errors import InputError, ServiceError

if TYPE_CHECKING:
    from stackctl.cluster.tasks import RayCluster

ENV = "STACKCTL_CLUSTER"
EXTRA = "pip install 'stackctl[cluster]'"
ANSWER_WITHIN = 10.0  # seconds a head's port has to accept a connection; Ray's own start-up comes after
_HOSTPORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})):(?P<port>[0-9]{1,5})")


@dataclass(frozen=True)
class ClusterAddress:
    text: str  # as the user gave it
    host: str
    port: int
    client: bool  # ray://: Ray's client, for a machine that is not a node of the cluster

    def __str__(self) -> str:
        return self.text


def parse_address(value: str, where: str = "--cluster") -> ClusterAddress:
    """`HOST:PORT` or `ray://HOST:PORT`; anything else is a usage error naming the option."""
    text = value.strip()
    rest, client = (text[len("ray://"):], True) if text.startswith("ray://") else (text, False)
    m = _HOSTPORT.fullmatch(rest)
    if m is None or not 0 < int(m["port"]) < 65536:
        raise InputError(f"{where} {value!r}: give a Ray head's HOST:PORT or ray://HOST:PORT "
                         "(e.g. 10.0.0.5:6379 or ray://10.0.0.5:10001)")
    return ClusterAddress(text, m["host"].strip("[]"), int(m["port"]), client)


def cluster_address(given: str | None, env: Mapping[str, str] | None = None) -> ClusterAddress | None:
    """The cluster asked for: the option, else STACKCTL_CLUSTER; None runs everything in this process."""
    env = os.environ if env is None else env
    if given:
        return parse_address(given)
    if env.get(ENV, "").strip():
        return parse_address(env[ENV], ENV)
    return None


def import_ray() -> Any:
    """Ray, or a usage error saying how to install it: a cluster named without the extra is exit 2."""
    try:
        import ray
    except ImportError:
        raise InputError("--cluster: Ray is not installed in this Python environment",
                         hint=f"install the cluster extra: {EXTRA} (its Ray must be the cluster's version)") from None
    return ray


def check_answers(address: ClusterAddress, within: float = ANSWER_WITHIN) -> None:
    """The head's port accepts a connection within `within` seconds; else one error naming the address (Ray's
    own connect would retry for minutes before saying anything)."""
    try:
        with socket.create_connection((address.host, address.port), timeout=within):
            pass
    except OSError as exc:
        cause = "no answer in time" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ServiceError(f"cluster {address}: does not answer ({cause})",
                           hint="start the head (`ray start --head`) or check the address") from None


def package_dir() -> Path:
    import stackctl

    return Path(stackctl.__file__).parent


def shipped_package(into: Path) -> Path:
    """stackctl as a wheel lays it out, in `into`: the package with its assets (Dockerfile.in, templates/,
    gates/) as `stackctl/_assets`, which a source checkout keeps beside the package instead."""
    import shutil

    from stackctl.base.assets import asset_root

    dest = into / "stackctl"
    shutil.copytree(package_dir(), dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if not (dest / "_assets").is_dir():
        root = asset_root()
        (dest / "_assets").mkdir()
        shutil.copy2(root / "Dockerfile.in", dest / "_assets" / "Dockerfile.in")
        for name in ("templates", "gates"):
            shutil.copytree(root / name, dest / "_assets" / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def connect(address: ClusterAddress) -> RayCluster:
    """The cluster at `address`, connected, with stackctl's package as the tasks' runtime environment."""
    ray = import_ray()
    check_answers(address)
    import logging

    from stackctl.cluster.tasks import RayCluster

    target = address.text if address.client else f"{address.host}:{address.port}"
    # Ray's driver prints what the cluster reports (a node that died) on standard output, where a command's
    # --json goes: while connected, standard output is standard error; the command prints after `close`.
    stdout, sys.stdout = sys.stdout, sys.stderr

    def restore() -> None:
        sys.stdout = stdout

    try:
        with tempfile.TemporaryDirectory(prefix="stackctl-ship-") as tmp:  # uploaded by init, then not needed
            ray.init(address=target, namespace="stackctl", logging_level=logging.ERROR, log_to_driver=False,
                     runtime_env={"py_modules": [str(shipped_package(Path(tmp)))]})
    except (ConnectionError, RuntimeError, TimeoutError, ValueError) as exc:  # Ray's words for a failed connect
        restore()
        first = (str(exc).strip().splitlines() or ["no reason given"])[0][:300]
        raise ServiceError(f"cluster {address}: cannot connect: {first}",
                           hint="the client's Ray must be the cluster's version (`ray --version` on the head)"
                           ) from None
    except BaseException:
        restore()
        raise
    return RayCluster(address.text, ray.__version__, restore)
