"""Publication: push by digest, check the registry's copy, attach the SBOM and provenance, move the tag,
and only then record.

`publish` takes an `Engine` (the Protocol in image/buildlog.py); the checks and the record are values.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from stackctl.base.files import write_atomic
from stackctl.base.progress import Progress
from stackctl.base.times import now_iso
from stackctl.base.words import count
from stackctl.errors import CheckFailed, InputError, ServiceError, StackctlError
from stackctl.image.attest import Material
from stackctl.image.buildlog import ImageFacts
from stackctl.image.labels import LABEL_EPOCH, LABEL_LOCK, LABEL_SBOM, LABEL_STACK, OCI, ImageRef
from stackctl.image.protocols import Engine
from stackctl.image.sign import SigningKey
from stackctl.profile.model import Stack
from stackctl.resolve.lock import Lock

if TYPE_CHECKING:
    from stackctl.image.upload import LayerSource, PushApi


class PublishingEngine(Engine, Protocol):
    """An engine publish pushes from: it hands over the image's layer tars (its export stream, or its own
    layer store where this process can read it)."""

    def export(self, ref: str) -> Iterator[bytes]: ...
    def layer_store(self) -> LayerSource | str: ...


@dataclass(frozen=True)
class Evidence:
    """What the provenance statement names besides the image itself; gathered by the caller."""

    parameters: tuple[tuple[str, Any], ...]
    materials: tuple[Material, ...]
    builder: tuple[tuple[str, str], ...]
    base_layers: tuple[str, ...] = ()  # the base image's diff_ids: the image must be built on them
    invocation: str = ""  # the build's own id (its build record's)
    timing: tuple[tuple[str, str], ...] = ()  # ("started" | "finished", ISO time) of the build


@dataclass(frozen=True)
class Publication:
    tag: str  # repository:tag
    digest: str  # sha256:... of the manifest the tag names in the registry (the reproducible one)
    image_id: str  # the local engine's id of the image built
    revision: str
    lock_digest: str | None
    stack: str | None
    time: str  # ISO 8601 UTC
    engine_digest: str | None = None  # the manifest `docker push` wrote (records of earlier publishes)
    config_digest: str | None = None  # the reproducible manifest's config: the id a pull gives
    source_date_epoch: int | None = None
    reproducible: str | None = None  # how anyone re-checks `digest`
    verified: tuple[str, ...] = ()  # what was compared through the registry API, without the local copy
    sbom: str | None = None  # repository:tag@digest of the SBOM beside the image
    provenance_ref: str | None = None  # likewise, the provenance statement
    artifact_bytes: int | None = None  # bytes of the SBOM and the statement documents pushed
    provenance: dict[str, Any] | None = None  # the in-toto statement itself
    signed_by: str | None = None  # keyid (sha256 of the public key) the statements are signed with
    pushed_bytes: int | None = None  # compressed layer bytes uploaded by this publish
    layers_pushed: int | None = None  # layers compressed and uploaded
    layers_present: int | None = None  # layers the registry had (in this repository or mounted from another)
    layers_read_from: str | None = None  # the engine's layer store, or its export and why

    @property
    def pinned_ref(self) -> str:
        return f"{self.tag.rsplit(':', 1)[0]}@{self.digest}"


def mismatches(local: ImageFacts, pulled: ImageFacts) -> list[str]:
    """What differs between the image we built and the one the registry gave back."""
    out = []
    if local.id != pulled.id:
        out.append(f"image id {pulled.id} is not the pushed {local.id}")
    for key in (f"{OCI}.revision", LABEL_LOCK):
        if local.label(key) != pulled.label(key):
            out.append(f"label {key} {pulled.label(key)!r} is not the pushed {local.label(key)!r}")
    return out


def stale(local: ImageFacts, expect: Mapping[str, str]) -> list[str]:
    """The labels in which a local image differs from what the current profile and lock would build."""
    return [f"{key} {local.label(key)!r} is not the current {want!r}" for key, want in expect.items()
            if local.label(key) != want]


def publish(engine: PublishingEngine, ref: ImageRef, *, expect: Mapping[str, str] | None = None,
            now: datetime | None = None, registry: PushApi | None = None,
            evidence: Evidence | None = None, key: SigningKey | None = None, transfer: Progress | None = None,
            known_file: Path | None = None) -> Publication:
    """`expect`: labels the local image must carry (the current profile and lock digests) before any push:
    a tag that does not move when a pin does must not carry an image built before the change.

    With `registry` (a repository on a registry host), stackctl pushes the image itself, by digest: layers
    compressed here, the reproducible config and manifest; then checks the registry's copy digest by
    digest, pushes the SBOM and provenance beside it, and only then moves the tag. Any failure before
    leaves the tag where it was. Without, the engine pushes and the image is pulled back and compared."""
    local = engine.facts(str(ref))
    if local is None:
        raise InputError(f"{ref}: no such image in the engine; run `stackctl build` first")
    revision = local.label(f"{OCI}.revision")
    if not revision:
        raise CheckFailed(f"{ref}: has no {OCI}.revision label; only images built by stackctl are published")
    old = stale(local, expect or {})
    if old:
        raise CheckFailed(f"{ref} was built from another profile or lock: " + "; ".join(old),
                          hint="run `stackctl build` again, then publish")
    if evidence is not None and evidence.base_layers and local.layers[:len(evidence.base_layers)] != \
            evidence.base_layers:
        raise CheckFailed(f"{ref} is not built on the base image the profile names (its first layers differ)",
                          hint="run `stackctl build` again, then publish")
    when = now_iso(now)
    if registry is None:
        digest = engine.push(ref.repository, ref.tag)
        pulled = engine.pull(f"{ref.repository}@{digest}")
        bad = mismatches(local, pulled)
        if bad:
            raise CheckFailed(f"{ref}@{digest} pulled back is not what was pushed: " + "; ".join(bad))
        return Publication(str(ref), digest, local.id, revision, local.label(LABEL_LOCK),
                           local.label(LABEL_STACK), when, verified=("pulled back through the engine",))
    return _publish_reproducibly(engine, registry, ref, local, when, evidence or Evidence((), (), ()),
                                 transfer, known_file, key)


def _publish_reproducibly(engine: PublishingEngine, registry: PushApi, ref: ImageRef, local: ImageFacts, when: str,
                          evidence: Evidence, transfer: Progress | None, known_file: Path | None,
                          key: SigningKey | None = None) -> Publication:
    from stackctl.image import attest
    from stackctl.image.layers import COMPRESSOR
    from stackctl.image.render import SBOM_PATH
    from stackctl.image.upload import check_pushed, push_image

    epoch_label = local.label(LABEL_EPOCH) or ""
    if not epoch_label.isdigit():
        raise CheckFailed(f"{ref}: has no {LABEL_EPOCH} label; run `stackctl build` again, then publish")
    epoch = int(epoch_label)
    repo = ref.repository
    # 1. every blob, the config and the manifest, by digest: the tag is untouched
    store = engine.layer_store()
    pushed = push_image(engine, registry, repo, str(ref), local.id, local.layers, epoch, known_file=known_file,
                        wanted_files=(SBOM_PATH,), transfer=transfer, store=None if isinstance(store, str) else store)
    # 2. the registry's copy against the build
    problems = check_pushed(registry, repo, pushed, local.layers, dict(local.labels))
    sbom = pushed.files.get(SBOM_PATH)
    if sbom is None:  # its layer was not read from the engine: the registry has it, and it is small
        sbom = attest.image_files(registry, repo, json.loads(pushed.manifest), (SBOM_PATH,)).get(SBOM_PATH)
    if sbom is None:
        problems.append(f"{SBOM_PATH} is not in the image's top layers")
    elif attest.sha256(sbom) != local.label(LABEL_SBOM):
        problems.append(f"{SBOM_PATH} in the image hashes to {attest.sha256(sbom)}, the label says "
                        f"{local.label(LABEL_SBOM)}")
    if problems:
        raise CheckFailed(f"{ref}@{pushed.digest} in the registry is not what was built: " + "; ".join(problems))
    assert sbom is not None
    # 3. what is published beside the image (signed DSSE envelopes when a key is given)
    subject = (pushed.digest, len(pushed.manifest), pushed.media_type)
    timing = dict(evidence.timing)
    sbom_art, doc, att = attest.attach(registry, repo, subject, sbom, lambda sbom_ref: attest.statement(
        subject=repo, digest=pushed.digest, parameters=dict(evidence.parameters),
        internal={"source_date_epoch": epoch, "layer_compression": COMPRESSOR},
        materials=evidence.materials, builder=dict(evidence.builder), invocation=evidence.invocation or when,
        started=timing.get("started"), finished=timing.get("finished") or when, byproducts=[sbom_ref]), key)
    # 4. only now the tag
    registry.put_manifest(repo, ref.tag, pushed.manifest, pushed.media_type)
    check = (f"build the same lock at revision {local.label(f'{OCI}.revision')} and publish it: the manifest "
             f"digest is {pushed.digest} again (config times = SOURCE_DATE_EPOCH {epoch}, layers compressed "
             f"with {COMPRESSOR}); `stackctl verify {repo}@{pushed.digest} --lock LOCK` re-checks it from the "
             "registry")
    verified = (f"manifest {pushed.digest} and config {pushed.config_digest} hash to their digests",
                f"{count(len(local.layers), 'layer')}: each blob hashed here from the engine's layer tar (its "
                "diff_id) and in the registry by digest and size",
                "labels equal the build's", f"{SBOM_PATH} hashes to the {LABEL_SBOM} label")
    return Publication(str(ref), pushed.digest, local.id, local.label(f"{OCI}.revision") or "",
                       local.label(LABEL_LOCK), local.label(LABEL_STACK), when,
                       config_digest=pushed.config_digest, source_date_epoch=epoch, reproducible=check,
                       verified=verified, sbom=f"{repo}:{sbom_art.tag}@{sbom_art.digest}",
                       provenance_ref=f"{repo}:{att.tag}@{att.digest}", artifact_bytes=sbom_art.size + att.size,
                       signed_by=key.keyid if key else None,
                       provenance=doc, pushed_bytes=pushed.sent_bytes,
                       layers_pushed=pushed.compressed, layers_present=pushed.found + pushed.mounted,
                       layers_read_from=read_from(pushed.exported, pushed.compressed, store))


def read_from(exported: bool, compressed: int, store: LayerSource | str) -> str:
    """Where publish read the layers it sent, in words: the export is the slow way (the whole image)."""
    if exported:
        why = store if isinstance(store, str) else "the engine's layer store lacked a layer or the config"
        return f"the engine's export ({why})"
    return "the engine's layer store" if compressed else "nothing (no layer to send)"


def publish_stack(stack: Stack, lock: Path, engine: PublishingEngine, record: Path, repository: str | None = None, *,
                  registry: PushApi | None = None, builder: Mapping[str, str] | None = None,
                  key: SigningKey | None = None, build_record: Path | None = None,
                  stack_image: bool = False, transfer: Progress | None = None) -> Publication:
    """`stackctl publish` as one call: refuse a stale image, push under the profile's (or another) name;
    with `registry` (a name on a registry host) move the tag to the reproducible manifest, check the
    registry's copy digest by digest and push the SBOM and provenance beside it, else pull back by
    digest and compare; then append the publication record."""
    from stackctl.image.app import stack_image_ref
    from stackctl.image.labels import LABEL_PROFILE, image_ref
    from stackctl.resolve.lock import read_lock

    locked = read_lock(lock)
    locked.require_made_from(stack)
    expect = {LABEL_PROFILE: stack.digest(), LABEL_LOCK: locked.digest()}
    check_record_writable(record)
    # stack_image: under [image.app], the stack image beneath the project's (tagged TAG-stack)
    name = stack_image_ref if stack_image else image_ref
    built, ref = name(stack), name(stack, repository)
    moved: tuple[ImageFacts | None] | None = None
    if ref != built:
        # The other name follows the current build: an older image left under it must not be pushed.
        there, source = engine.facts(str(ref)), engine.facts(str(built))
        if (there is None or stale(there, expect)) and source is not None and there != source:
            engine.tag(str(built), ref.repository, ref.tag)
            moved = (there,)
    evidence = None
    local = engine.facts(str(ref))
    if local is None:  # said here, where the repository's origin is known: a build may have used another
        again = f"stackctl build {stack.name}" + (f" --repository {repository}" if repository else "")
        also = "" if repository else "; if it was built with --repository, pass publish the same --repository"
        raise InputError(f"{ref}: no such image in the engine; run `{again}` first{also}")
    if registry is not None:
        base = engine.facts(stack.image.base) if stack.image else None
        evidence = gather_evidence(stack, locked, lock, local, base, builder or {},
                                   read_build_record(build_record, local))
    try:
        from stackctl.image.layers import default_known_file

        pub = publish(engine, ref, expect=expect, registry=registry if evidence is not None else None,
                      evidence=evidence, key=key, transfer=transfer, known_file=default_known_file())
    except StackctlError:
        if moved is not None:  # a failed publish leaves the other name as it found it
            if moved[0] is None:
                engine.remove(str(ref))
            else:
                engine.tag(moved[0].id, ref.repository, ref.tag)
        raise
    append_record(record, pub)
    return pub


def read_signing_key(path: Path) -> SigningKey:
    """The PEM private key `--sign-key` names; messages name the file, never its content."""
    from stackctl.image.sign import load_private_key

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the signing key: {exc.strerror or exc}") from None
    return load_private_key(data, str(path))


def check_record_writable(path: Path) -> None:
    """Before any push: a publication that cannot be recorded must not happen at all."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the publication record: {exc.strerror or exc}") from None
    if (path.exists() and not path.is_file()) or not os.access(path.parent, os.W_OK):
        raise InputError(f"{path}: cannot write the publication record here")


def append_record(path: Path, pub: Publication) -> None:
    """JSON lines, one publication each; the whole file is rewritten atomically so a crash leaves the old one."""
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        write_atomic(path, old + json.dumps(asdict(pub), sort_keys=True) + "\n")
    except OSError as exc:
        raise ServiceError(f"{path}: cannot write the publication record ({exc.strerror or exc}); "
                           f"{pub.pinned_ref} was pushed") from None


def read_records(path: Path) -> list[Publication]:
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                data = json.loads(line)
                data["verified"] = tuple(data.get("verified") or ())
                out.append(Publication(**data))
            except (ValueError, TypeError) as exc:
                raise InputError(f"{path}:{n}: not a publication record ({exc})") from None
    return out


def read_build_record(path: Path | None, local: ImageFacts) -> dict[str, Any]:
    """The build record of the image being published (start and end, invocation id, git remote); empty when
    there is none or it records another image (then the provenance says only what publish itself saw)."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("image_id") == local.id else {}


def gather_evidence(stack: Stack, lock: Lock, lock_file: Path, local: ImageFacts, base: ImageFacts | None,
                    builder: Mapping[str, str], build: Mapping[str, Any] | None = None) -> Evidence:
    """The provenance's materials: the git revision (and whether the tree was dirty) at the repository's
    remote, the lock by digest, the base image by manifest digest (by image id where it was never in a
    registry), and every wheel the image installs by sha256; from the build record, its times and id."""
    from stackctl.base.urls import strip_userinfo
    from stackctl.image.app import app_materials
    from stackctl.image.attest import Material
    from stackctl.image.labels import LABEL_TARGET
    from stackctl.image.render import plan_layers

    build = build or {}
    target = local.label(LABEL_TARGET) or ""
    revision = local.label(f"{OCI}.revision") or ""
    commit = revision.removesuffix("-dirty")
    source = strip_userinfo(str(build.get("source") or local.label(f"{OCI}.source") or ""))
    materials = [
        Material("source", f"git+{source}@{commit}" if source else f"git:{commit}", (("gitCommit", commit),),
                 (("dirty", revision.endswith("-dirty")), ("ref", local.label(f"{OCI}.version") or ""))),
        Material("lock", f"file:{lock_file.as_posix()}", (("sha256", lock.digest().removeprefix("sha256:")),)),
    ]
    if base is not None and stack.image is not None:
        materials.append(base_material(stack.image.base, base))
    for group in plan_layers(stack, lock, target):
        materials += [Material(i.filename, i.url or f"file:{i.filename}", (("sha256", i.sha256),),
                               (("name", i.name), ("version", i.version), ("index", i.index or "closure"),
                                ("layer_group", group.name))) for i in group.items]
    materials += app_materials(dict(local.labels))  # [image.app]: the stack image, Dockerfile and context
    parameters = (("stack", stack.name), ("target", target), ("profile", list(stack.sources)),
                  ("revision", revision), ("ref", local.label(f"{OCI}.version") or ""))
    timing = tuple((k, str(build[v])) for k, v in (("started", "started"), ("finished", "time")) if build.get(v))
    return Evidence(parameters, tuple(materials), tuple(sorted(builder.items())),
                    base.layers if base is not None else (), str(build.get("invocation") or ""), timing)


def base_material(name: str, base: ImageFacts) -> Material:
    """The base image by the manifest digest a registry knows it by (`repo@sha256:...`, the engine's
    RepoDigests); an image never pushed or pulled has none, and is named by its image id, marked so."""
    from stackctl.image.attest import Material

    pinned = sorted(base.repo_digests)
    annotations: tuple[tuple[str, Any], ...] = (("name", name), ("image_id", base.id), ("layers", len(base.layers)))
    if pinned:
        repo, _, digest = pinned[0].partition("@")
        return Material("base-image", f"oci://{repo}@{digest}", (("sha256", digest.removeprefix("sha256:")),),
                        annotations)
    return Material("base-image", f"docker-image-id:{base.id}", (("sha256", base.id.removeprefix("sha256:")),),
                    (*annotations, ("local_only", True)))
