"""`stackctl gate` wired to where it runs: under an interpreter here, or (`gate --image`) in a container of any
image on the real engine."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from stackctl.image.gaterun import GateRun, run_gate

if TYPE_CHECKING:
    from stackctl.engine.docker import DockerEngine
    from stackctl.profile.model import Devices, Stack


def gate_stack(stack: Stack, spec: str, *, python: str | None = None, image: str | None = None,
               device: bool = False) -> GateRun:
    """The gate `spec` of `stack` run under `python` (default: this interpreter), or with `image` in a container
    of it on the engine; `device` (the device phase) gives that container the profile's devices."""
    if image is None:
        return run_gate(stack, python or sys.executable, spec)
    # the device phase's container is given the profile's devices; the other phases run where none is
    return gate_image(image, spec, python, devices=stack.devices if device else None)


def gate_image(image: str, spec: str, python: str | None = None, *, devices: Devices | None = None,
               engine: DockerEngine | None = None) -> GateRun:
    """Run the gate `spec` in a container of `image` (no network) on the engine of DOCKER_HOST (or `engine`);
    with `devices` (the device phase), the container is given the profile's devices."""
    from stackctl.engine.docker import DockerEngine, check_local_ref
    from stackctl.image.app import gate_in_container

    check_local_ref(image)
    engine = engine or DockerEngine()
    if devices is None:
        return gate_in_container(engine, image, spec, python)
    from stackctl.base.assets import asset_root
    from stackctl.image.app import GATE_DIR, gate_argv

    files = {f"{GATE_DIR}/gate.py": (asset_root() / "gates" / "gate.py").read_bytes(),
             f"{GATE_DIR}/gate.json": spec.encode("utf-8")}
    status, out, err, _ = engine.run_with_files(image, files, gate_argv(f"{GATE_DIR}/gate.json", python=python or
                                                                        "python3"), devices=devices)
    return GateRun.from_output(f"{python or 'python3'} in {image}", status, out, err)
