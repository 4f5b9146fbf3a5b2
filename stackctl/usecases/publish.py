"""`stackctl publish` and `publish --all`: the build's OCI layout copied by skopeo, checked through the registry
client, the SBOM and the statements put beside it, the tag moved, the publication recorded. The image is the
build's OCI layout, the artefact the build record names: no engine is asked anything, except for a layout the
build left to be made when first needed (`made_layout`). The publish stage decides what is copied and checked;
this module picks the adapters and where the records are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackctl.errors import InputError, Problems, StackctlError
from stackctl.profile.model import Stack
from stackctl.publish.publication import Copier, Publication, publication_of

if TYPE_CHECKING:
    from stackctl.image.matrix import Event
    from stackctl.verify.sign import SigningKey

PUBLICATIONS = "publications.jsonl"  # RECORD_DIR's publication record


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
                  command: str = "", move_tag: bool = True) -> Publication:
    """Copy the stack's built artefact (the OCI layout `build_record` names) to its repository, check it, put
    the SBOM and provenance (signed with `sign_key` when given) beside it and move the tag.
    `stack_image`: under [image.app], the stack image beneath the project's (TAG-stack)."""
    from stackctl.engine.registry import Registry, check_registry, parse_ref
    from stackctl.image.app import stack_image_ref
    from stackctl.image.labels import image_ref
    from stackctl.publish.publication import publish_stack
    from stackctl.verify.sign import read_signing_key

    key = read_signing_key(sign_key) if sign_key is not None else None  # a bad key file costs no copy
    target = (stack_image_ref if stack_image else image_ref)(stack, repository)
    parsed = parse_ref(str(target))
    if parsed is None:
        raise InputError(f"{target}: names no registry host; publish copies to host[:port]/name",
                         hint="set the profile's [image] repository, or pass --repository HOST[:PORT]/NAME")
    check_registry(str(target))  # before anything is copied
    copy = _copier(parsed.registry)
    return publish_stack(stack, lock, record, build_record, repository, registry=Registry(),
                         copy=copy, builder=builder_facts(), key=key, stack_image=stack_image, command=command,
                         make_layout=made_layout, move_tag=move_tag)


def made_layout(build_record: Path, stack_image: bool = False) -> None:
    """The OCI layout a build left to be made when first needed (an engine whose builder writes none: the
    classic builder, BuildKit on overlay2), copied out of the engine that holds the image, once."""
    from stackctl.image.build import layout_pending, made_artefact

    pending, url = layout_pending(build_record, stack_image)
    if pending:
        from stackctl.engine.docker import DockerEngine

        made_artefact(build_record, DockerEngine(url), stack_image)


@dataclass(frozen=True)
class Published:
    """`stackctl publish PROFILE`: under [image.app] the stack image's publication (`below`) and the final
    image's; `record` the publication record they were appended to."""

    publication: Publication
    below: Publication | None
    record: Path


def publish_built(profile: str | None, *, lock: Path | None = None, record_dir: Path = Path("build"),
                  record: Path | None = None, repository: str | None = None, sign_key: Path | None = None,
                  command: str = "") -> Published:
    """What `stackctl build PROFILE` built (RECORD_DIR/STACK.build.json), published: under [image.app] the stack
    image first (the final image names it as its base: a reader of the final image's provenance can then fetch
    it), then the final image. The profile is resolved once; its lock is `lock` or the one beside it; the
    publications go to `record` (the older --record spelling) or RECORD_DIR/publications.jsonl."""
    from stackctl.profile.locate import stack_ref
    from stackctl.resolve.lock import lock_path

    if profile is None:
        raise InputError("publish: give a PROFILE, or --all")
    ref = stack_ref(profile)
    stack, locked = ref.stack, lock_path(ref, lock)
    where = record or record_dir / PUBLICATIONS
    build_record = record_dir / f"{stack.name}.build.json"
    below = (publish_image(stack, locked, where, repository, sign_key=sign_key, build_record=build_record,
                           stack_image=True, command=command) if stack.app is not None else None)
    pub = publish_image(stack, locked, where, repository, sign_key=sign_key, build_record=build_record,
                        command=command)
    return Published(pub, below, where)


@dataclass(frozen=True)
class PublishedCell:
    stack: str
    target: str
    engine: str | None
    tag: str
    result: str  # published | failed
    digest: str | None = None
    image_id: str | None = None
    error: str | None = None
    exit_code: int = 0


@dataclass(frozen=True)
class PublishedCells:
    """`publish --all`: each cell's publication or failure."""

    cells: tuple[PublishedCell, ...]

    def failure(self) -> StackctlError | None:
        """Every cell that failed, each with its own exit code; the run exits with the most severe."""
        failed = []
        for c in self.cells:
            if c.exit_code:
                error = StackctlError(f"{c.stack} {c.target}: {c.error}")
                error.exit_code = c.exit_code
                failed.append(error)
        return Problems.of(failed) if failed else None


def publish_cells(record_dir: Path, repository: str | None, on_event: Event, *, sign_key: Path | None = None,
                  profile: str | None = None, lock: Path | None = None, record: Path | None = None,
                  command: str = "") -> PublishedCells:
    """Every cell the last `build --all` built (RECORD_DIR/matrix.json), published: a cell built here from its
    OCI layout, as `publish` does; a cell a cluster's node built and pushed by digest is checked in the registry,
    signed here (the key never leaves this machine) and tagged (`finish_pushed`). A cell that fails to publish
    is the cell's result (with its error and exit code); the others go on. The cells name their own profiles,
    locks and records: `profile`, `lock` and `record` (a single publish's) are refused."""
    from stackctl.image.matrix import MATRIX_RECORD, read_matrix
    from stackctl.profile.locate import load_profile
    from stackctl.verify.sign import read_signing_key

    if profile is not None or lock is not None or record is not None:
        raise InputError("publish --all takes the cells of RECORD_DIR/matrix.json: no PROFILE, --lock or --record")
    cells = [c for c in read_matrix(record_dir / MATRIX_RECORD) if c.result == "built"]
    if not cells:
        raise InputError(f"{record_dir / MATRIX_RECORD}: no built cell to publish")
    key = read_signing_key(sign_key) if sign_key is not None else None  # a bad key file costs no copy
    out: list[PublishedCell] = []
    for c in cells:
        where = c.host or c.engine or ""
        try:
            stack = load_profile(c.profile or c.stack)
            if c.published is not None:
                pub = finish_pushed(stack, Path(c.lock or ""), c.published, record_dir / PUBLICATIONS, repository,
                                    key=key, command=command)
            else:
                pub = publish_image(stack, Path(c.lock or ""), record_dir / PUBLICATIONS, repository,
                                    sign_key=sign_key, command=command,
                                    build_record=Path(c.record or record_dir / f"{c.stack}.build.json"))
            on_event(where, f"{c.stack} {c.target}", f"published {pub.tag} {pub.digest}")
            out.append(PublishedCell(c.stack, c.target, c.engine, pub.tag, "published", pub.digest, pub.image_id))
        except StackctlError as exc:
            out.append(PublishedCell(c.stack, c.target, c.engine, c.image, "failed", None, c.image_id, str(exc),
                                     exc.exit_code))
    return PublishedCells(tuple(out))


def finish_pushed(stack: Stack, lock: Path, pushed: Mapping[str, Any], record: Path, repository: str | None, *,
                  key: SigningKey | None = None, command: str = "") -> Publication:
    """A node's publication by digest made whole: the registry still holds that manifest, built from this
    profile and lock (its labels), its statements signed here where a key is given, then the tag moved and
    the publication recorded. Nothing is copied: the node pushed the image, its SBOM and its provenance."""
    from stackctl.engine.registry import Registry, check_registry
    from stackctl.image.labels import image_ref
    from stackctl.publish.publication import append_record, check_record_writable, finish_publication

    pub = publication_of(pushed)
    target = image_ref(stack, repository)
    check_record_writable(record)
    check_registry(str(target))
    done = finish_publication(pub, stack, lock, target, Registry(), key)
    done = replace(done, command=command)
    append_record(record, done)
    return done


