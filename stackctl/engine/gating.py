"""`gate --image` wired to the real engine: the gate in a container of any image on it."""

from __future__ import annotations

from stackctl.image.gaterun import GateRun


def gate_image(image: str, spec: str, python: str | None = None) -> GateRun:
    """Run the gate `spec` in a container of `image` (no network) on the engine of DOCKER_HOST."""
    from stackctl.engine.docker import DockerEngine, check_local_ref
    from stackctl.image.app import gate_in_container

    check_local_ref(image)
    return gate_in_container(DockerEngine(), image, spec, python)
