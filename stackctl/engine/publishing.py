"""`publish` and `verify` wired to the real adapters: skopeo for the copy, the registry client for the checks,
the SBOM, the statements and the tag. The image is the build's OCI layout: no engine is asked anything at
publish time, except for the layout a build left to be made when first needed (`made_layout`). The image
stage decides what is copied and checked; this module only picks the adapters."""

from __future__ import annotations

from pathlib import Path

from stackctl.base.progress import Steps
from stackctl.errors import InputError
from stackctl.profile.model import Stack
from stackctl.publish.publication import Copier, Publication
from stackctl.resolve.lock import Lock
from stackctl.verify.verification import Verification


def _copier(host: str) -> Copier:
    from stackctl.engine.skopeo import copy_to_registry

    def copy(layout: Path, repository: str, digest: str) -> None:
        copy_to_registry(layout, host, repository, digest)

    return copy


def builder_facts() -> dict[str, str]:
    """What the provenance names as the builder on the publishing side: stackctl and skopeo, which copied the
    layout (the engine's, the builder's and buildx's versions come from the build record)."""
    import stackctl
    from stackctl.engine.skopeo import skopeo_version

    return {"stackctl": getattr(stackctl, "__version__", ""), "skopeo": skopeo_version()}


def publish_image(stack: Stack, lock: Path, record: Path, repository: str | None = None, *,
                  sign_key: Path | None = None, build_record: Path, stack_image: bool = False,
                  command: str = "") -> Publication:
    """Copy the stack's built artefact (the OCI layout `build_record` names) to its repository, check it, put
    the SBOM and provenance (signed with `sign_key` when given) beside it and move the tag.
    `stack_image`: under [image.app], the stack image beneath the project's (TAG-stack)."""
    from stackctl.engine.registry import Registry, check_registry, parse_ref
    from stackctl.image.app import stack_image_ref
    from stackctl.image.labels import image_ref
    from stackctl.publish.publication import publish_stack, read_signing_key

    key = read_signing_key(sign_key) if sign_key is not None else None  # a bad key file costs no copy
    target = (stack_image_ref if stack_image else image_ref)(stack, repository)
    parsed = parse_ref(str(target))
    if parsed is None:
        raise InputError(f"{target}: names no registry host; publish copies to host[:port]/name",
                         hint="set the profile's [image] repository, or pass --repository HOST[:PORT]/NAME")
    check_registry(str(target))  # before anything is copied
    made_layout(build_record, stack_image)
    copy = _copier(parsed.registry)
    return publish_stack(stack, lock, record, build_record, repository, registry=Registry(),
                         copy=copy, builder=builder_facts(), key=key, stack_image=stack_image, command=command)


def made_layout(build_record: Path, stack_image: bool = False) -> None:
    """The OCI layout a build left to be made when first needed (an engine whose builder writes none: the
    classic builder, BuildKit on overlay2), copied out of the engine that holds the image, once."""
    from stackctl.image.build import layout_pending, made_artefact

    pending, url = layout_pending(build_record, stack_image)
    if pending:
        from stackctl.engine.docker import DockerEngine

        made_artefact(build_record, DockerEngine(url), stack_image)


def publish_built(stack: Stack, lock: Path, record: Path, repository: str | None = None, *,
                  sign_key: Path | None = None, build_record: Path,
                  command: str = "") -> tuple[Publication | None, Publication]:
    """What `stackctl build` built, published: under [image.app] the stack image first (the final image names
    it as its base: a reader of the final image's provenance can then fetch it), then the final image.
    (stack image's publication or None, the image's publication)."""
    below = (publish_image(stack, lock, record, repository, sign_key=sign_key, build_record=build_record,
                           stack_image=True, command=command) if stack.app is not None else None)
    return below, publish_image(stack, lock, record, repository, sign_key=sign_key, build_record=build_record,
                                command=command)


def verify_remote(ref: str, lock: Lock | None, *, stream_layers: bool = False, key: Path | None = None,
                  rebuild_from: Path | None = None, wheelhouse: Path | None = None,
                  builder: str | None = None, on_step: Steps | None = None) -> Verification:
    """An image in a registry re-checked from the registry alone (and against `lock` when given); with
    `key` (a PEM public key file) its statements must be signed by it; with `rebuild_from` (a git work
    tree) the image is rebuilt from its revision on the Docker engine, with `builder` chosen as `build` chooses
    it, and its layout's manifest digest compared with the registry's."""
    import dataclasses

    from stackctl.engine.registry import Registry, parse_ref
    from stackctl.verify.verification import read_key, verify_image

    parsed = parse_ref(ref)
    if parsed is None:
        raise InputError(f"{ref}: names no registry host; verify reads host[:port]/name[:tag|@digest]")
    public = read_key(key) if key is not None else None
    registry, repository = Registry(), f"{parsed.registry}/{parsed.name}"
    result = verify_image(registry, repository, parsed.reference, lock, stream_layers=stream_layers, key=public)
    if rebuild_from is None:
        return result
    from stackctl.engine.building import open_engine
    from stackctl.verify.rebuild import rebuild_and_compare
    from stackctl.verify.verification import named_profiles, with_rebuild

    rebuilt = rebuild_and_compare(registry, open_engine(builder), repository, result.digest, source=rebuild_from,
                                  profiles=named_profiles(registry, repository, result.digest),
                                  wheelhouse=wheelhouse, on_step=on_step)
    return dataclasses.replace(result, findings=with_rebuild(rebuilt, result.findings), rebuild=rebuilt)
