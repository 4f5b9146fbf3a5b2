"""`publish` and `verify` wired to the real adapters: the Docker engine, and the registry when the image's
name is on a registry host. The image stage decides what is pushed and checked; this module only picks
the adapters it works through."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from stackctl.base.progress import Progress
from stackctl.errors import InputError
from stackctl.image.publish import Publication
from stackctl.image.verify import Verification
from stackctl.profile.model import Stack
from stackctl.resolve.lock import Lock

if TYPE_CHECKING:
    from stackctl.engine.docker import DockerEngine


def publish_image(stack: Stack, lock: Path, record: Path, repository: str | None = None, *,
                  transfer: Progress | None = None, engine: DockerEngine | None = None) -> Publication:
    """Push the stack's built image; on a registry host through its API as well (the reproducible manifest,
    SBOM and provenance), else pulled back through the engine (`engine`, else DOCKER_HOST's: the one that
    built it). `transfer` sees each layer's bytes."""
    from stackctl.engine.docker import DockerEngine
    from stackctl.engine.registry import Registry, check_registry, parse_ref
    from stackctl.image.labels import image_ref
    from stackctl.image.publish import publish_stack

    engine = engine or DockerEngine()
    target = image_ref(stack, repository)
    check_registry(str(target))  # before anything is tagged or pushed
    registry = Registry() if parse_ref(str(target)) is not None else None
    builder = engine.versions() if registry is not None else None
    engine.transfer = transfer
    return publish_stack(stack, lock, engine, record, repository, registry=registry, builder=builder,
                         transfer=transfer)


def verify_remote(ref: str, lock: Lock | None, *, stream_layers: bool = False) -> Verification:
    """An image in a registry re-checked from the registry alone (and against `lock` when given)."""
    from stackctl.engine.registry import Registry, parse_ref
    from stackctl.image.verify import verify_image

    parsed = parse_ref(ref)
    if parsed is None:
        raise InputError(f"{ref}: names no registry host; verify reads host[:port]/name[:tag|@digest]")
    return verify_image(Registry(), f"{parsed.registry}/{parsed.name}", parsed.reference, lock,
                        stream_layers=stream_layers)
