"""Publication: the build's artefact (an OCI image layout) copied to the registry by digest, the registry's
copy checked against it, the SBOM and provenance attached, the tag moved, and only then recorded.

Nothing here asks an engine anything: the image, its config and labels come from the layout the build
named in its record. The copy and the registry come in through Protocols (engine/skopeo.py,
engine/registry.py); the checks and the record are values.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from stackctl.base.files import write_atomic
from stackctl.base.times import now_iso
from stackctl.base.words import count
from stackctl.errors import CheckFailed, ContentMismatch, InputError, ServiceError
from stackctl.image.artefact import Artefact, check_blobs, from_record
from stackctl.image.buildlog import ImageFacts
from stackctl.image.labels import LABEL_EPOCH, LABEL_LOCK, LABEL_SBOM, LABEL_STACK, OCI, ImageRef
from stackctl.image.protocols import RegistryApi
from stackctl.image.record import build_entry
from stackctl.profile.model import Stack
from stackctl.publish.attest import Material
from stackctl.resolve.lock import Lock
from stackctl.verify.sign import BUILD_TYPE, SigningKey, build_type

SMALL_LAYER = 64 << 20  # a layer read whole for the image's own records (the SBOM lives in a small top layer)


class PushApi(RegistryApi, Protocol):
    def blob_size(self, repository: str, digest: str) -> int | None: ...


class Copier(Protocol):
    """Copies a layout's image to `repository` under its manifest digest only (no tag), keeping every digest."""

    def __call__(self, layout: Path, repository: str, digest: str) -> None: ...


@dataclass(frozen=True)
class Evidence:
    """What the provenance statement names besides the image itself; gathered by the caller."""

    parameters: tuple[tuple[str, Any], ...]
    materials: tuple[Material, ...]
    builder: tuple[tuple[str, str], ...]
    base_layers: tuple[str, ...] = ()  # the base image's diff_ids: the image must be built on them
    invocation: str = ""  # the build's own id (its build record's)
    timing: tuple[tuple[str, str], ...] = ()  # ("started" | "finished", ISO time) of the build
    build_type: str = BUILD_TYPE  # what built the image (verify.sign.build_type of the record's builder)


@dataclass(frozen=True)
class Publication:
    tag: str  # repository:tag
    digest: str  # sha256:... of the manifest the tag names in the registry: the artefact's own
    image_id: str  # the engine's id of the image built (the build record's)
    revision: str
    lock_digest: str | None
    stack: str | None
    time: str  # ISO 8601 UTC
    config_digest: str | None = None  # the reproducible config: the id a pull gives
    source_date_epoch: int | None = None
    reproducible: str | None = None  # how anyone re-checks `digest`
    verified: tuple[str, ...] = ()  # what was compared through the registry API
    sbom: str | None = None  # repository:tag@digest of the SBOM beside the image
    provenance_ref: str | None = None  # likewise, the provenance statement
    artifact_bytes: int | None = None  # bytes of the SBOM and the statement documents pushed
    provenance: dict[str, Any] | None = None  # the in-toto statement itself
    signed_by: str | None = None  # keyid (sha256 of the public key) the statements are signed with
    pushed_bytes: int | None = None  # compressed layer bytes the registry lacked before this publish
    layers_pushed: int | None = None  # layers the registry lacked (skopeo sent them)
    layers_present: int | None = None  # layers the repository had already (skopeo skipped them)
    layout: str | None = None  # the OCI image layout published from
    command: str = ""  # the command line that published (no credentials): how `report` says to run it again

    @property
    def pinned_ref(self) -> str:
        return f"{self.tag.rsplit(':', 1)[0]}@{self.digest}"


def stale(labels: Mapping[str, str], expect: Mapping[str, str]) -> list[str]:
    """The labels in which a built image differs from what the current profile and lock would build."""
    return [f"{key} {labels.get(key)!r} is not the current {want!r}" for key, want in expect.items()
            if labels.get(key) != want]


def _config(artefact: Artefact) -> dict[str, Any]:
    try:
        data = json.loads(artefact.blob_path(artefact.config.digest).read_bytes())
    except (OSError, ValueError, RecursionError):
        raise InputError(f"{artefact.layout}: config {artefact.config.digest} is not a JSON document",
                         hint="run `stackctl build` again, then publish") from None
    return data if isinstance(data, dict) else {}


def layout_files(artefact: Artefact, wanted: tuple[str, ...]) -> dict[str, bytes]:
    """The members named in `wanted` from the image's small top layers, read from the layout (the top
    layer's copy of a path wins)."""
    from stackctl.image.layers import tar_files

    found: dict[str, bytes] = {}
    for blob in reversed(artefact.layers):
        if blob.size > SMALL_LAYER or len(found) == len(wanted):
            break
        raw = artefact.blob_path(blob.digest).read_bytes()
        try:
            tar = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            for path, data in tar_files(tar, wanted).items():
                found.setdefault(path, data)
        except (OSError, EOFError, ValueError):
            continue
    return found


def check_copy(registry: PushApi, repository: str, artefact: Artefact, diff_ids: tuple[str, ...],
               labels: Mapping[str, str]) -> list[str]:
    """What differs between the registry's copy and the artefact: the manifest by digest (byte for byte), the
    config (size, diff_ids and labels) and each layer blob's presence and size. The layers' bytes are the
    digests the registry checked as skopeo uploaded them, and the layout's were hashed before the copy."""
    from stackctl.verify.remote import compare_with_build

    try:  # bytes that do not hash to their digest are a forged copy: a failed check, not a service fault
        got = registry.manifest(repository, artefact.digest)
    except ContentMismatch as exc:
        return [str(exc)]
    if got is None:
        return [f"the registry has no manifest {artefact.digest}"]
    if got[1] != artefact.blob_path(artefact.digest).read_bytes():
        return [f"the registry's manifest {artefact.digest} is not the artefact's"]
    problems = []
    size = registry.blob_size(repository, artefact.config.digest)
    if size != artefact.config.size:
        problems.append(f"config {artefact.config.digest[:19]} is " + (
            "not in the registry" if size is None else f"{size} bytes in the registry, {artefact.config.size} built"))
    try:
        problems += compare_with_build(registry, repository, artefact.digest, diff_ids, labels, stream_layers=False)
    except ContentMismatch as exc:
        problems.append(str(exc))
    for n, blob in enumerate(artefact.layers, 1):
        size = registry.blob_size(repository, blob.digest)
        if size != blob.size:
            problems.append(f"layer {n} ({blob.digest[:19]}) is " + (
                "not in the registry" if size is None else f"{size} bytes in the registry, {blob.size} built"))
    return problems


def publish(artefact: Artefact, ref: ImageRef, registry: PushApi, copy: Copier, *,
            expect: Mapping[str, str] | None = None, now: datetime | None = None,
            evidence: Evidence | None = None, key: SigningKey | None = None, image_id: str = "",
            move_tag: bool = True) -> Publication:
    """`expect`: labels the image must carry (the current profile and lock digests) before any copy: a tag
    that does not move when a pin does must not carry an image built before the change. The layout's image
    goes to the registry by digest (`copy`), is checked there against the layout, gets its SBOM and provenance
    beside it, and only then the tag (a cluster's node: `move_tag` False). Any failure before leaves the tag
    where it was."""
    from stackctl.image.render import SBOM_PATH
    from stackctl.publish import attest
    from stackctl.verify.remote import sha256

    config = _config(artefact)
    labels: dict[str, str] = dict((config.get("config") or {}).get("Labels") or {})
    diff_ids = tuple(str(d) for d in (config.get("rootfs") or {}).get("diff_ids") or ())
    revision = labels.get(f"{OCI}.revision")
    if not revision:
        raise CheckFailed(f"{ref}: has no {OCI}.revision label; only images built by stackctl are published")
    old = stale(labels, expect or {})
    if old:
        raise CheckFailed(f"{ref} was built from another profile or lock: " + "; ".join(old),
                          hint="run `stackctl build` again, then publish")
    evidence = evidence or Evidence((), (), ())
    if evidence.base_layers and diff_ids[:len(evidence.base_layers)] != evidence.base_layers:
        raise CheckFailed(f"{ref} is not built on the base image the profile names (its first layers differ)",
                          hint="run `stackctl build` again, then publish")
    epoch_label = labels.get(LABEL_EPOCH) or ""
    if not epoch_label.isdigit():
        raise CheckFailed(f"{ref}: has no {LABEL_EPOCH} label; run `stackctl build` again, then publish")
    epoch = int(epoch_label)
    bad = check_blobs(artefact)
    if bad:
        raise CheckFailed(f"{artefact.layout}: the layout is not the image the build made: " + "; ".join(bad),
                          hint="run `stackctl build` again, then publish")
    sbom = layout_files(artefact, (SBOM_PATH,)).get(SBOM_PATH)
    if sbom is None:
        raise CheckFailed(f"{ref}: {SBOM_PATH} is not in the image's top layers")
    if sha256(sbom) != labels.get(LABEL_SBOM):
        raise CheckFailed(f"{SBOM_PATH} in the image hashes to {sha256(sbom)}, the label says "
                          f"{labels.get(LABEL_SBOM)}")
    when = now_iso(now)
    repo = ref.repository
    # 1. the image by digest; the registry's blobs are counted first (skopeo skips those it has)
    had = [b for b in artefact.layers if registry.blob_size(repo, b.digest) == b.size]
    copy(artefact.layout, repo, artefact.digest)
    # 2. the registry's copy against the artefact
    problems = check_copy(registry, repo, artefact, diff_ids, labels)
    if problems:
        raise CheckFailed(f"{ref}@{artefact.digest} in the registry is not what was built: " + "; ".join(problems))
    # 3. what is published beside the image (signed DSSE envelopes when a key is given)
    subject = (artefact.digest, artefact.manifest.size, artefact.manifest.media_type)
    timing = dict(evidence.timing)
    sbom_art, doc, att = attest.attach(registry, repo, subject, sbom, lambda sbom_ref: attest.statement(
        subject=repo, digest=artefact.digest, parameters=dict(evidence.parameters),
        internal={"source_date_epoch": epoch, "layout": artefact.made_by},
        materials=evidence.materials, builder=dict(evidence.builder), invocation=evidence.invocation or when,
        started=timing.get("started"), finished=timing.get("finished") or when, byproducts=[sbom_ref],
        build_type=evidence.build_type), key)
    # 4. only now the tag
    if move_tag:
        registry.put_manifest(repo, ref.tag, artefact.blob_path(artefact.digest).read_bytes(),
                              artefact.manifest.media_type)
    check = (f"build the same lock at revision {revision} and its layout's manifest digest is {artefact.digest} "
             f"again (config times = SOURCE_DATE_EPOCH {epoch}); `stackctl verify {repo}@{artefact.digest} --lock "
             "LOCK --rebuild` re-checks it")
    verified = (f"manifest {artefact.digest} byte for byte the layout's; config {artefact.config.digest} by size, "
                "diff_ids and labels",
                f"{count(len(artefact.layers), 'layer')}: each hashed in the layout before the copy and in the "
                "registry by digest and size",
                f"{SBOM_PATH} hashes to the {LABEL_SBOM} label")
    sent = [b for b in artefact.layers if b not in had]
    return Publication(str(ref), artefact.digest, image_id or artefact.config.digest, revision,
                       labels.get(LABEL_LOCK), labels.get(LABEL_STACK), when,
                       config_digest=artefact.config.digest, source_date_epoch=epoch, reproducible=check,
                       verified=verified, sbom=f"{repo}:{sbom_art.tag}@{sbom_art.digest}",
                       provenance_ref=f"{repo}:{att.tag}@{att.digest}", artifact_bytes=sbom_art.size + att.size,
                       signed_by=key.keyid if key else None, provenance=doc,
                       pushed_bytes=sum(b.size for b in sent), layers_pushed=len(sent), layers_present=len(had),
                       layout=str(artefact.layout))


def publish_stack(stack: Stack, lock: Path, record: Path, build_record: Path, repository: str | None = None, *,
                  registry: PushApi, copy: Copier, builder: Mapping[str, str] | None = None,
                  key: SigningKey | None = None, stack_image: bool = False, command: str = "",
                  make_layout: Callable[[Path, bool], None] | None = None, move_tag: bool = True) -> Publication:
    """`stackctl publish` as one call: the artefact the build record names, refused when stale, copied under
    the profile's (or another) repository and tag; then the publication record appended. `make_layout` makes
    the layout a build left to be made when first needed, once the inputs are checked: a typo costs no copy
    out of the engine."""
    from stackctl.image.app import stack_image_ref
    from stackctl.image.labels import LABEL_PROFILE, image_ref
    from stackctl.resolve.lock import read_lock

    locked = read_lock(lock)
    locked.require_made_from(stack)
    expect = {LABEL_PROFILE: stack.digest(), LABEL_LOCK: locked.digest()}
    check_record_writable(record)
    # stack_image: under [image.app], the stack image beneath the project's (tagged TAG-stack)
    ref = (stack_image_ref if stack_image else image_ref)(stack, repository)
    from stackctl.base.imageref import parse_image_ref

    if parse_image_ref(str(ref)).host is None:
        raise InputError(f"{ref}: names no registry host; publish copies to host[:port]/name (--repository)")
    node = build_entry(build_record, stack_image)[0].get("built_on")
    if isinstance(node, dict):  # a cluster's node built it: its layout stayed there, its digest is in the registry
        raise InputError(f"{build_record}: built on the cluster's node {node.get('host')} and pushed as "
                         f"{node.get('digest')}; its layout is not on this machine",
                         hint="publish it with `stackctl publish --all` (it checks the digest and moves the tag)")
    if make_layout is not None:
        make_layout(build_record, stack_image)
    build, entry = build_entry(build_record, stack_image)
    artefact = from_record(entry.get("artefact"), str(build_record))
    labels: dict[str, str] = dict((_config(artefact).get("config") or {}).get("Labels") or {})
    facts = ImageFacts(str(entry.get("image_id") or artefact.config.digest), tuple(sorted(labels.items())), (), 0,
                       tuple(str(d) for d in (_config(artefact).get("rootfs") or {}).get("diff_ids") or ()))
    evidence = gather_evidence(stack, locked, lock, facts, base_facts(build, stack), builder or {}, build)
    pub = publish(artefact, ref, registry, copy, expect=expect, evidence=evidence, key=key, image_id=facts.id,
                  move_tag=move_tag)
    pub = replace(pub, command=command)
    append_record(record, pub)
    return pub


def base_facts(build: Mapping[str, Any], stack: Stack) -> ImageFacts | None:
    """The base image as the build saw it (its record's fingerprint): no engine is asked at publish time."""
    fp = build.get("fingerprint")
    if not isinstance(fp, dict) or not fp.get("base_image_id") or stack.image is None:
        return None
    return ImageFacts(str(fp["base_image_id"]), (), tuple(str(d) for d in fp.get("base_image_digests") or ()), 0,
                      tuple(str(d) for d in build.get("base_layers") or ()))


def check_record_writable(path: Path) -> None:
    """Before any push: a publication that cannot be recorded must not happen at all."""
    from stackctl.base.files import check_output

    check_output(path, "--record")  # its directory is there (RECORD_DIR holds the build record) or a typo
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


_FIELDS = frozenset(Publication.__dataclass_fields__)


def publication_of(data: Mapping[str, Any]) -> Publication:
    """A publication as a record or a node's task keeps it (JSON), back as a value; a field of an earlier
    version (engine_digest, layers_read_from) is kept in the file, not read."""
    fields = {k: v for k, v in data.items() if k in _FIELDS}
    fields["verified"] = tuple(fields.get("verified") or ())
    return Publication(**fields)


def _manifest_layer(registry: PushApi, repository: str, reference: str) -> bytes:
    """The one layer of an artifact manifest (the SBOM's), by the manifest's digest."""
    got = registry.manifest(repository, reference)
    if got is None:
        raise CheckFailed(f"{repository}@{reference}: not in the registry")
    layers = json.loads(got[1]).get("layers") or []
    if len(layers) != 1 or not isinstance(layers[0], dict):
        raise CheckFailed(f"{repository}@{reference}: not an SBOM artifact (one layer)")
    return registry.blob(repository, str(layers[0].get("digest")))


def finish_publication(pub: Publication, stack: Stack, lock: Path, ref: ImageRef, registry: PushApi,
                       key: SigningKey | None = None, now: datetime | None = None) -> Publication:
    """What a node published by digest (`publish(move_tag=False)`), made a publication here: the manifest is
    still in `ref`'s repository, its labels name this profile and lock, its statements are signed with `key`
    (the SBOM and the provenance the node pushed, signed again here: a key never goes to a node), and only
    then the tag moves."""
    from stackctl.image.labels import LABEL_PROFILE
    from stackctl.publish import attest
    from stackctl.resolve.lock import read_lock

    repo = ref.repository
    node_repo = pub.tag.rsplit(":", 1)[0]
    if node_repo != repo:
        raise InputError(f"{ref}: the node pushed {node_repo}@{pub.digest}, not to {repo}",
                         hint="publish with the repository the cells were built for (build --all --repository)")
    locked = read_lock(lock)
    locked.require_made_from(stack)
    got = registry.manifest(repo, pub.digest)
    if got is None:
        raise CheckFailed(f"{repo}@{pub.digest}: not in the registry; the node pushed it, something removed it",
                          hint="build the cell again (stackctl build --all --cluster ...)")
    manifest = got[1]
    try:
        doc = json.loads(manifest)
        media_type = str(doc["mediaType"])
        config = json.loads(registry.blob(repo, str(doc["config"]["digest"])))
    except (ValueError, KeyError, TypeError):
        raise CheckFailed(f"{repo}@{pub.digest}: its manifest or config is not an image's") from None
    labels: dict[str, str] = dict((config.get("config") or {}).get("Labels") or {})
    old = stale(labels, {LABEL_PROFILE: stack.digest(), LABEL_LOCK: locked.digest()})
    if old:
        raise CheckFailed(f"{repo}@{pub.digest} was built from another profile or lock: " + "; ".join(old),
                          hint="run `stackctl build --all` again, then publish --all")
    signed: dict[str, Any] = {}
    if key is not None and pub.sbom and pub.provenance is not None:
        sbom = _manifest_layer(registry, repo, pub.sbom.rpartition("@")[2])
        statement = pub.provenance
        sbom_art, _doc, att = attest.attach(registry, repo, (pub.digest, len(manifest), media_type), sbom,
                                            lambda _material: statement, key)
        signed = {"signed_by": key.keyid, "provenance_ref": f"{repo}:{att.tag}@{att.digest}",
                  "sbom": f"{repo}:{sbom_art.tag}@{sbom_art.digest}"}
    registry.put_manifest(repo, ref.tag, manifest, media_type)
    return replace(pub, tag=str(ref), time=now_iso(now), **signed)


def read_records(path: Path) -> list[Publication]:
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(publication_of(json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise InputError(f"{path}:{n}: not a publication record ({exc})") from None
    return out


def gather_evidence(stack: Stack, lock: Lock, lock_file: Path, local: ImageFacts, base: ImageFacts | None,
                    builder: Mapping[str, str], build: Mapping[str, Any] | None = None) -> Evidence:
    """The provenance's materials: the git revision (and whether the tree was dirty) at the repository's
    remote, the lock by digest, the base image by manifest digest (by image id where it was never in a
    registry), and every wheel the image installs by sha256; from the build record, its times and id."""
    from stackctl.base.urls import strip_userinfo
    from stackctl.image.labels import LABEL_TARGET
    from stackctl.image.render import plan_layers
    from stackctl.publish.attest import Material

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
    # the builder as the build record names it (engine, builder, buildx) over the publishing side's facts
    made_by = build.get("engine")
    builder = {**builder, **({str(k): str(v) for k, v in made_by.items()} if isinstance(made_by, dict) else {})}
    # what built the image, as the build record says (a record older than its `builder` field: classic)
    return Evidence(parameters, tuple(materials), tuple(sorted(builder.items())),
                    base.layers if base is not None else (), str(build.get("invocation") or ""), timing,
                    build_type(str(build.get("builder") or "classic")))


def base_material(name: str, base: ImageFacts) -> Material:
    """The base image by the manifest digest a registry knows it by (`repo@sha256:...`, the engine's
    RepoDigests); an image never pushed or pulled has none, and is named by its image id, marked so."""
    from stackctl.publish.attest import Material

    pinned = sorted(base.repo_digests)
    annotations: tuple[tuple[str, Any], ...] = (("name", name), ("image_id", base.id), ("layers", len(base.layers)))
    if pinned:
        repo, _, digest = pinned[0].partition("@")
        return Material("base-image", f"oci://{repo}@{digest}", (("sha256", digest.removeprefix("sha256:")),),
                        annotations)
    return Material("base-image", f"docker-image-id:{base.id}", (("sha256", base.id.removeprefix("sha256:")),),
                    (*annotations, ("local_only", True)))


def app_materials(labels: Mapping[str, str]) -> list[Material]:
    """The provenance's materials of an [image.app] image: the stack image it was built on, the project's
    Dockerfile by digest and its build context at the revision built (empty for a stack image)."""
    from stackctl.image.app import LABEL_APP_CONTEXT, LABEL_APP_DOCKERFILE, LABEL_APP_DOCKERFILE_PATH, LABEL_STACK_IMAGE

    dockerfile, stack_id = labels.get(LABEL_APP_DOCKERFILE), labels.get(LABEL_STACK_IMAGE)
    if not dockerfile or not stack_id:
        return []
    context, _, revision = labels.get(LABEL_APP_CONTEXT, "").rpartition("@")
    commit = revision.removesuffix("-dirty")
    return [Material("stack-image", f"docker-image:{labels.get(f'{OCI}.base.name', '')}",
                     (("sha256", stack_id.removeprefix("sha256:")),)),
            Material("app-dockerfile", "file:" + labels.get(LABEL_APP_DOCKERFILE_PATH, "Dockerfile"),
                     (("sha256", dockerfile.removeprefix("sha256:")),)),
            Material("app-context", f"git:{commit}", (("gitCommit", commit),), (("path", context or "."),))]
