"""`publish` and `verify` wired to the real adapters: the Docker engine, and the registry when the image's
name is on a registry host. The image stage decides what is pushed and checked; this module only picks
the adapters it works through."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from stackctl.base.progress import Progress, Steps
from stackctl.errors import InputError
from stackctl.image.publish import Publication
from stackctl.image.verify import Verification
from stackctl.profile.model import Stack
from stackctl.resolve.lock import Lock

if TYPE_CHECKING:
    from stackctl.engine.docker import DockerEngine


def publish_image(stack: Stack, lock: Path, record: Path, repository: str | None = None, *,
                  transfer: Progress | None = None, engine: DockerEngine | None = None,
                  sign_key: Path | None = None, build_record: Path | None = None,
                  stack_image: bool = False) -> Publication:
    """Push the stack's built image; on a registry host through its API as well (the reproducible manifest,
    SBOM and provenance, signed with `sign_key` when given), else pulled back through the engine (`engine`,
    else DOCKER_HOST's: the one that built it). `transfer` sees each layer's bytes; `build_record` gives the
    provenance the build's times and id. `stack_image`: under [image.app], the stack image beneath the
    project's (TAG-stack)."""
    from stackctl.engine.docker import DockerEngine
    from stackctl.engine.registry import Registry, check_registry, parse_ref
    from stackctl.image.labels import image_ref
    from stackctl.image.publish import publish_stack, read_signing_key

    key = read_signing_key(sign_key) if sign_key is not None else None  # a bad key file costs no push
    engine = engine or DockerEngine()
    target = image_ref(stack, repository)
    check_registry(str(target))  # before anything is tagged or pushed
    registry = Registry() if parse_ref(str(target)) is not None else None
    builder = engine.versions() if registry is not None else None
    engine.transfer = transfer
    return publish_stack(stack, lock, engine, record, repository, registry=registry, builder=builder,
                         key=key, build_record=build_record, stack_image=stack_image, transfer=transfer)


def verify_remote(ref: str, lock: Lock | None, *, stream_layers: bool = False, key: Path | None = None,
                  rebuild_from: Path | None = None, wheelhouse: Path | None = None,
                  on_step: Steps | None = None) -> Verification:
    """An image in a registry re-checked from the registry alone (and against `lock` when given); with
    `key` (a PEM public key file) its statements must be signed by it; with `rebuild_from` (a git work
    tree) the image is rebuilt from its revision on the Docker engine and compared."""
    import dataclasses

    from stackctl.engine.registry import Registry, parse_ref
    from stackctl.image.verify import read_key, verify_image

    parsed = parse_ref(ref)
    if parsed is None:
        raise InputError(f"{ref}: names no registry host; verify reads host[:port]/name[:tag|@digest]")
    public = read_key(key) if key is not None else None
    registry, repository = Registry(), f"{parsed.registry}/{parsed.name}"
    result = verify_image(registry, repository, parsed.reference, lock, stream_layers=stream_layers, key=public)
    if rebuild_from is None:
        return result
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.rebuild import rebuild_and_compare
    from stackctl.image.verify import named_profiles, with_rebuild

    rebuilt = rebuild_and_compare(registry, DockerEngine(), repository, result.digest, source=rebuild_from,
                                  profiles=named_profiles(registry, repository, result.digest),
                                  wheelhouse=wheelhouse, on_step=on_step)
    return dataclasses.replace(result, findings=with_rebuild(rebuilt, result.findings), rebuild=rebuilt)
