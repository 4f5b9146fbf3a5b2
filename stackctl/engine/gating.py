"""`gate --image` wired to the real engine: the gate in a container of any image on it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.image.gaterun import GateRun

if TYPE_CHECKING:
    from stackctl.engine.docker import DockerEngine
    from stackctl.profile.model import Devices


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
