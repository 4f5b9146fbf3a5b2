"""`stackctl verify`: an image in a registry re-checked against its own records and, given one, a lock.

Nothing local is trusted: the manifest and config are hashed against their digests, the SBOM and the
installed distributions are read from the image's own layers, the SBOM and provenance from beside it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from stackctl.base.imageref import names_registry
from stackctl.base.words import count
from stackctl.errors import CheckFailed, ContentMismatch
from stackctl.image.app import FREEZE as APP_FREEZE
from stackctl.image.app import app_installed
from stackctl.image.labels import LABEL_EPOCH, LABEL_INSTALLED, LABEL_LOCK, LABEL_SBOM, LABEL_STACK, LABEL_TARGET, OCI
from stackctl.image.layout import iso
from stackctl.image.protocols import RegistryApi
from stackctl.image.render import INSTALLED_PATH, SBOM_PATH
from stackctl.image.sbom import SbomEntry, entries
from stackctl.resolve.lock import Lock
from stackctl.verify import remote
from stackctl.verify.rebuild import Rebuilt
from stackctl.verify.sign import (
    BUILD_TYPES,
    BUILDER_ID,
    CYCLONEDX_PREDICATE,
    SLSA_PROVENANCE,
    STATEMENT_V1,
    Opened,
    VerifyingKey,
    open_envelope,
    statement_materials,
)


@dataclass(frozen=True)
class Finding:
    check: str  # "labels", "sbom", "provenance", "base", "signature", "installed", "reproducible", "layers"
    ok: bool
    detail: str


@dataclass(frozen=True)
class Verification:
    ref: str
    digest: str
    config_digest: str
    lock_digest: str | None  # of the lock checked against, if any
    findings: tuple[Finding, ...]
    sbom_components: int
    provenance_materials: int
    rebuild: Rebuilt | None = None  # with --rebuild: what the rebuild compared and found

    @property
    def failed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.ok)

    def failure(self) -> CheckFailed | None:
        """The error `verify` exits with (1), naming the failed checks; None when every check passed."""
        if not self.failed:
            return None
        return CheckFailed(f"{self.ref} does not verify: " + "; ".join(f"{f.check}: {f.detail}"
                                                                       for f in self.failed[:8])
                           + (f"; and {len(self.failed) - 8} more" if len(self.failed) > 8 else ""))


def lock_distributions(lock: Lock, target: str) -> dict[str, tuple[str, str]]:
    """canonical name → (version, sha256) of every wheel the lock installs for `target`."""
    out: dict[str, tuple[str, str]] = {}
    for pin in lock.pins:
        for f in pin.files:
            if f.target == target and f.filename.endswith(".whl"):
                out[canonicalize_name(pin.name)] = (pin.version, f.sha256)
                break
    for c in lock.closure:
        if c.target == target and c.file is not None:
            out.setdefault(canonicalize_name(c.name), (c.version, c.file.sha256))
    return out


def _differences(what: str, have: Mapping[Any, str], want: Mapping[Any, str]) -> list[str]:
    out = []
    for name in sorted(set(have) | set(want)):
        if name not in have:
            out.append(f"{name} {want[name]} missing from {what}")
        elif name not in want:
            out.append(f"{name} {have[name]} in {what} but not expected")
        elif have[name] != want[name]:
            out.append(f"{name} is {have[name]} in {what}, expected {want[name]}")
    return out


def verify_image(registry: RegistryApi, repository: str, reference: str, lock: Lock | None, *,
                 stream_layers: bool = False, key: VerifyingKey | None = None) -> Verification:
    """Every check; content the registry holds that does not hash to its digest is a difference (exit 1):
    what is there is not what was published."""
    try:
        return _verify(registry, repository, reference, lock, stream_layers=stream_layers, key=key)
    except ContentMismatch as exc:
        raise CheckFailed(f"{repository}:{reference} does not verify: {exc}") from None



def _verify(registry: RegistryApi, repository: str, reference: str, lock: Lock | None, *,
            stream_layers: bool, key: VerifyingKey | None) -> Verification:
    """Reads stay here, in the order the checks use them; each check is a function of what was read."""
    digest, manifest, config = remote.remote_image(registry, repository, reference)
    labels: dict[str, str] = (config.get("config") or {}).get("Labels") or {}
    want = lock_distributions(lock, labels.get(LABEL_TARGET, "")) if lock is not None else None
    files = remote.image_files(registry, repository, manifest, (SBOM_PATH, INSTALLED_PATH, APP_FREEZE))
    findings = _findings("labels", _label_problems(labels, lock, want, files.get(SBOM_PATH)),
                         "stackctl's labels are present" + (", and agree with the lock" if lock else ""))
    sbom = _Sbom.of(files.get(SBOM_PATH), remote.fetch_artifact(registry, repository, digest, "sbom", remote.SBOM_TYPE))
    findings += _findings("sbom", _sbom_problems(sbom, labels, digest, want),
                          f"{len(sbom.components)} components; in the image, beside it and under its label alike"
                          + (", as the lock has them" if lock else ""))
    # an [image.app] image: the whole gate's record, the lock's wheels and what the app's own build installed
    installed = files.get(APP_FREEZE, files.get(INSTALLED_PATH))
    findings += _findings("installed", _installed_problems(installed, sbom, want),
                          "the distributions installed in the image are " + ("the lock's" if lock else "the SBOM's"))
    found = statements(registry, repository, digest, key)
    prov, sbom_st = found.get(SLSA_PROVENANCE), found.get(CYCLONEDX_PREDICATE)
    materials = statement_materials(prov.statement) if prov is not None else []
    findings += _findings("provenance", _provenance_problems(prov, digest, labels, config, want, sbom)
                          + _sbom_statement_problems(sbom_st, digest, sbom, key),
                          f"in-toto statement about {digest[:19]}; {len(materials)} materials agree "
                          "with the labels, the config and the SBOM")
    base = next((m for m in materials if m.get("name") == "base-image"), None)
    if base is not None:
        findings += _findings("base", *base_in_registry(registry, base, config))
    if key is not None:
        findings += _findings("signature", _signature_problems(prov, sbom_st, key),
                              f"the provenance and SBOM statements are signed by key {key.keyid[:16]}")
    epoch = labels.get(LABEL_EPOCH, "")
    findings += _findings("reproducible", _epoch_problems(config, epoch), f"config times are SOURCE_DATE_EPOCH {epoch}")
    if stream_layers:
        ids = list((config.get("rootfs") or {}).get("diff_ids") or [])
        findings += _findings("layers", remote.compare_with_build(registry, repository, digest, ids, labels),
                              f"{count(len(ids), 'layer')} hash to their digests and unpack to their diff_ids")
    return Verification(f"{repository}@{digest}", digest, manifest["config"]["digest"],
                        lock.digest() if lock else None, tuple(findings), len(sbom.components), len(materials))


def _findings(kind: str, problems: list[str], ok_text: str) -> list[Finding]:
    """One failed finding per problem, or one that passed."""
    return [Finding(kind, False, p) for p in problems] or [Finding(kind, True, ok_text)]


def _label_problems(labels: Mapping[str, str], lock: Lock | None, want: Mapping[str, tuple[str, str]] | None,
                    sbom_in_image: bytes | None) -> list[str]:
    """stackctl's own labels are there, and with a lock they name it, its stack and its distributions (and
    those the app phase installed, as the SBOM in the image lists them)."""
    needed = (LABEL_STACK, LABEL_LOCK, LABEL_TARGET, LABEL_SBOM, LABEL_INSTALLED, f"{OCI}.revision")
    problems = [f"label {k} is missing" for k in needed if not labels.get(k)]
    if lock is None or want is None:
        return problems
    target = labels.get(LABEL_TARGET, "")
    # a missing label is said once, above, as missing: compared here only when the image has one
    if labels.get(LABEL_LOCK) and labels.get(LABEL_LOCK) != lock.digest():
        problems.append(f"label {LABEL_LOCK} is {labels.get(LABEL_LOCK)}, the lock's digest is {lock.digest()}")
    if labels.get(LABEL_STACK) not in (None, "", lock.stack):
        problems.append(f"label {LABEL_STACK} is {labels.get(LABEL_STACK)}, the lock is of {lock.stack}")
    if not want:
        problems.append(f"the lock has no wheels for the image's target {target}" if target else
                        f"the image names no target (label {LABEL_TARGET}), so no wheels of the lock compare")
    try:
        label_installed = {canonicalize_name(k): str(v) for k, v in
                           json.loads(labels.get(LABEL_INSTALLED) or "{}").items()}
    except (ValueError, RecursionError, AttributeError):
        label_installed = {}
        problems.append(f"label {LABEL_INSTALLED} is not a JSON object")
    return problems + [f"label {LABEL_INSTALLED}: {d}" for d in
                       _differences("the label", label_installed, {k: v for k, (v, _) in want.items()}
                                    | app_installed(sbom_in_image))]


def _sbom_entries(raw: bytes | None) -> tuple[SbomEntry, ...] | None:
    """The components of an SBOM; None when it is not a CycloneDX JSON document."""
    if raw is None:
        return None
    try:
        return entries(json.loads(raw))
    except (ValueError, RecursionError, AttributeError):
        return None


@dataclass(frozen=True)
class _Sbom:
    """The SBOM as the image carries it and as it sits beside the image, and the components read from it."""

    in_image: bytes | None
    beside: bytes | None
    readable: bool  # the document (in the image, else beside it) parses; components are () when not
    components: tuple[SbomEntry, ...]

    @classmethod
    def of(cls, in_image: bytes | None, beside: bytes | None) -> _Sbom:
        found = _sbom_entries(in_image if in_image is not None else beside)
        return cls(in_image, beside, found is not None, found or ())

    @property
    def document(self) -> bytes | None:
        return self.in_image if self.in_image is not None else self.beside


def _sbom_problems(sbom: _Sbom, labels: Mapping[str, str], digest: str,
                   want: Mapping[str, tuple[str, str]] | None) -> list[str]:
    """The SBOM in the image is the one its label hashes and the one beside it, and lists the lock's wheels."""
    problems = []
    if sbom.in_image is None:
        problems.append(f"{SBOM_PATH} is not in the image's top layers")
    elif remote.sha256(sbom.in_image) != labels.get(LABEL_SBOM):
        problems.append(f"{SBOM_PATH} hashes to {remote.sha256(sbom.in_image)}, label {LABEL_SBOM} says "
                        f"{labels.get(LABEL_SBOM)}")
    if sbom.beside is None:
        problems.append(f"no SBOM beside the image (tag {remote.artifact_tag(digest, 'sbom')})")
    elif sbom.in_image is not None and sbom.beside != sbom.in_image:
        problems.append("the SBOM beside the image is not the one inside it")
    if sbom.document is not None and not sbom.readable:
        problems.append("the SBOM is not JSON")
    if want is not None and sbom.document is not None:
        from_app = app_installed(sbom.document)  # an [image.app] image: what its own build installed, not the lock
        have = {canonicalize_name(c.name): f"{c.version} sha256:{c.sha256}" for c in sbom.components
                if canonicalize_name(c.name) not in from_app}
        problems += [f"SBOM: {d}" for d in _differences("the SBOM", have, {k: f"{v} sha256:{h}"
                                                                             for k, (v, h) in want.items()})]
    return problems


def _installed_problems(raw: bytes | None, sbom: _Sbom, want: Mapping[str, tuple[str, str]] | None) -> list[str]:
    """The distributions the gate recorded in the image are the lock's and the app phase's (without a lock:
    the SBOM's)."""
    if raw is None:
        return [f"{INSTALLED_PATH} is not in the image's top layers"]
    problems = []
    try:
        installed = {canonicalize_name(k): str(v) for k, v in json.loads(raw).items()}
    except (ValueError, RecursionError, AttributeError):
        installed = {}
        problems.append(f"{INSTALLED_PATH} is not a JSON object")
    expected = ({k: v for k, (v, _) in want.items()} | app_installed(sbom.document) if want is not None else
                {canonicalize_name(c.name): c.version for c in sbom.components})
    return problems + _differences("the image", installed, expected)


def _provenance_problems(prov: Opened | None, digest: str, labels: Mapping[str, str], config: Mapping[str, Any],
                         want: Mapping[str, tuple[str, str]] | None, sbom: _Sbom) -> list[str]:
    """The provenance statement beside the image is about it, holds against its labels, config and a lock,
    and names the wheels the SBOM names."""
    if prov is None:
        return [f"no provenance statement beside the image (tag {remote.artifact_tag(digest, 'att')})"]
    doc = prov.statement
    problems = retargeted("the provenance statement", doc, digest) + provenance_problems(doc, labels, config, want)
    wheels = {str(m.get("name")): str((m.get("digest") or {}).get("sha256")) for m in statement_materials(doc)
              if str(m.get("name", "")).endswith(".whl")}
    sbom_wheels = {c.filename: c.sha256 for c in sbom.components if c.filename}
    if sbom.document is not None and wheels != sbom_wheels:
        missing = sorted(set(sbom_wheels) ^ set(wheels)) or sorted(k for k in wheels if wheels[k] != sbom_wheels[k])
        problems.append(f"provenance and SBOM name different wheels: {', '.join(missing[:5])}")
    return problems


def _sbom_statement_problems(sbom_st: Opened | None, digest: str, sbom: _Sbom,
                             key: VerifyingKey | None) -> list[str]:
    """The SBOM statement beside the image is about it and carries the SBOM in it; with a key it must be there."""
    if sbom_st is None:
        return [] if key is None else [f"no SBOM statement beside the image (tag {remote.artifact_tag(digest, 'att')})"]
    problems = retargeted("the SBOM statement", sbom_st.statement, digest)
    if sbom.document is not None and sbom_st.statement.get("predicate") != _json_or_none(sbom.document):
        problems.append("the SBOM statement's predicate is not the SBOM in the image")
    return problems


def _signature_problems(prov: Opened | None, sbom_st: Opened | None, key: VerifyingKey) -> list[str]:
    """Both statements are there, signed, and one of each one's signatures verifies with `key`."""
    problems = []
    for name, opened in (("provenance", prov), ("SBOM", sbom_st)):
        if opened is None:
            problems.append(f"no {name} statement to check the signature of")
        elif opened.signatures == 0:
            problems.append(f"the {name} statement is unsigned")
        elif not opened.signed_by_key:
            problems.append(f"the {name} statement is wrongly signed: no signature verifies with key "
                            f"{key.keyid[:16]}")
    return problems


def _epoch_problems(config: Mapping[str, Any], epoch: str) -> list[str]:
    """The published config carries SOURCE_DATE_EPOCH: the digest anyone rebuilding gets again."""
    if not epoch.isdigit():
        return [f"label {LABEL_EPOCH} is missing"]
    if config.get("created") != iso(int(epoch)):
        return [f"config created {config.get('created')} is not SOURCE_DATE_EPOCH {epoch} "
                f"({iso(int(epoch))}): not the reproducible manifest `stackctl publish` writes"]
    return []


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def statements(registry: RegistryApi, repository: str, digest: str,
               key: VerifyingKey | None) -> dict[str, Opened]:
    """predicate type → the envelope beside the image carrying it (opened; with `key`, its signatures
    checked). An `.att` artifact of an older publication (a bare statement) reads as an unsigned one."""
    out: dict[str, Opened] = {}
    found = remote.fetch_attestations(registry, repository, digest)
    for predicate, data in found or []:
        opened = open_envelope(data, key, f"{repository}:{remote.artifact_tag(digest, 'att')}")
        out.setdefault(str(opened.statement.get("predicateType") or predicate), opened)
    if not out:
        bare = remote.fetch_artifact(registry, repository, digest, "att", remote.STATEMENT_TYPE)
        doc = _json_or_none(bare) if bare is not None else None
        if isinstance(doc, dict):
            out[str(doc.get("predicateType"))] = Opened(bare or b"", doc, 0, False if key is not None else None)
    return out


def retargeted(what: str, doc: Mapping[str, Any], digest: str) -> list[str]:
    subjects = [str((s.get("digest") or {}).get("sha256")) for s in doc.get("subject") or [] if isinstance(s, dict)]
    if digest.removeprefix("sha256:") in subjects:
        return []
    return [f"{what} is re-targeted: it is about {', '.join('sha256:' + x[:12] for x in subjects) or 'nothing'}, "
            f"not {digest}"]


def provenance_problems(doc: Mapping[str, Any], labels: Mapping[str, str], config: Mapping[str, Any],
                        want: Mapping[str, tuple[str, str]] | None) -> list[str]:
    """Every field of the SLSA statement that can be held against the image itself (and a lock)."""
    problems = []
    if doc.get("_type") != STATEMENT_V1:
        problems.append(f"the statement's _type is {doc.get('_type')!r}, not {STATEMENT_V1}")
    if doc.get("predicateType") != SLSA_PROVENANCE:
        problems.append(f"the provenance predicate is {doc.get('predicateType')!r}, not SLSA provenance v1")
    predicate = doc.get("predicate") or {}
    definition = predicate.get("buildDefinition") or {}
    run = predicate.get("runDetails") or {}
    kind = definition.get("buildType")
    made_by = ((run.get("builder") or {}).get("version") or {}).get("builder")
    if kind not in BUILD_TYPES.values():
        problems.append(f"buildType is {kind!r}, not one of stackctl's ({', '.join(BUILD_TYPES.values())})")
    elif made_by in BUILD_TYPES and kind != BUILD_TYPES[made_by]:  # what built it is said twice: once alike
        problems.append(f"buildType is {kind!r}, but the builder's version names the {made_by} builder "
                        f"({BUILD_TYPES[made_by]})")
    builder = (run.get("builder") or {}).get("id")
    if builder != BUILDER_ID:
        problems.append(f"builder id is {builder!r}, not {BUILDER_ID}")
    params = definition.get("externalParameters") or {}
    for param, label in (("stack", LABEL_STACK), ("target", LABEL_TARGET), ("revision", f"{OCI}.revision")):
        if param in params and params[param] != labels.get(label):
            problems.append(f"externalParameters.{param} is {params[param]!r}, label {label} says "
                            f"{labels.get(label)!r}")
    by_name = {m.get("name"): m for m in statement_materials(doc)}
    lock_hex = ((by_name.get("lock") or {}).get("digest") or {}).get("sha256")
    if f"sha256:{lock_hex}" != labels.get(LABEL_LOCK):
        problems.append(f"provenance names lock sha256:{lock_hex}, label {LABEL_LOCK} says {labels.get(LABEL_LOCK)}")
    source = by_name.get("source") or {}
    commit = (source.get("digest") or {}).get("gitCommit")
    if commit != (labels.get(f"{OCI}.revision") or "").removesuffix("-dirty"):
        problems.append(f"provenance names revision {commit}, the label {labels.get(f'{OCI}.revision')}")
    dirty = (source.get("annotations") or {}).get("dirty")
    if dirty is not False or (labels.get(f"{OCI}.revision") or "").endswith("-dirty"):
        problems.append("the source tree was dirty (or the statement does not say it was clean): no checkout of "
                        "the revision holds what was built")
    problems += _base_problems(by_name.get("base-image"), config)
    if want is not None:
        wheels = {str(m.get("name")): str((m.get("digest") or {}).get("sha256")) for m in by_name.values()
                  if str(m.get("name", "")).endswith(".whl")}
        locked = {f"{v}:{h}" for v, h in want.values()}
        named = {f"{(by_name[w].get('annotations') or {}).get('version')}:{h}" for w, h in wheels.items()}
        if named != locked:
            problems.append(f"provenance materials name {len(named - locked)} wheels the lock does not, and "
                            f"miss {len(locked - named)} it has")
    return problems


def base_in_registry(registry: RegistryApi, base: Mapping[str, Any],
                     config: Mapping[str, Any]) -> tuple[list[str], str]:
    """The base image the statement names by manifest digest, read from its registry: its layers must be
    the image's first ones. (problems, what was checked)"""
    uri = str(base.get("uri", ""))
    if not uri.startswith("oci://"):
        return [], f"the base image is named by image id only ({uri[:40]}): it was never in a registry to check"
    repository, _, digest = uri.removeprefix("oci://").rpartition("@")
    if not names_registry(repository):
        return [], f"the base image {repository} names no registry host: not read"
    _, _, base_config = remote.remote_image(registry, repository, digest)
    theirs = list((base_config.get("rootfs") or {}).get("diff_ids") or [])
    ours = list((config.get("rootfs") or {}).get("diff_ids") or [])
    if not theirs or ours[:len(theirs)] != theirs:
        return [f"the image is not built on the base the statement names ({repository}@{digest[:19]}): its first "
                f"{count(len(theirs), 'layer')} differ"], ""
    return [], f"built on {repository}@{digest[:19]}: the image starts with its {count(len(theirs), 'layer')}"


def _base_problems(base: Mapping[str, Any] | None, config: Mapping[str, Any]) -> list[str]:
    if base is None:
        return ["provenance names no base image"]
    notes = base.get("annotations") or {}
    uri, hexd = str(base.get("uri", "")), str((base.get("digest") or {}).get("sha256", ""))
    problems = []
    if notes.get("local_only"):
        if uri != f"docker-image-id:sha256:{hexd}":
            problems.append(f"base image {uri} does not name its image id sha256:{hexd[:12]}")
    elif not (uri.startswith("oci://") and uri.endswith(f"@sha256:{hexd}") and len(hexd) == 64):
        problems.append(f"base image {uri!r} is not named by a manifest digest")
    layers = notes.get("layers")
    ids = (config.get("rootfs") or {}).get("diff_ids") or []
    if not isinstance(layers, int) or not 0 < layers <= len(ids):
        problems.append(f"the base image's layer count {layers!r} does not fit the image's {count(len(ids), 'layer')}")
    return problems


def raise_if_failed(v: Verification) -> None:
    if (failure := v.failure()) is not None:
        raise failure


@dataclass(frozen=True)
class Attached:
    """What `inspect` shows of the SBOM and provenance beside an image."""

    sbom_tag: str | None
    sbom_components: tuple[SbomEntry, ...]
    provenance_tag: str | None
    predicate: str | None
    builder: dict[str, Any] | None
    materials: tuple[tuple[str, str], ...]  # (name, digest) of each resolved dependency


def attached(registry: RegistryApi, repository: str, digest: str) -> Attached:
    sbom = remote.fetch_artifact(registry, repository, digest, "sbom", remote.SBOM_TYPE)
    found = statements(registry, repository, digest, None)
    prov = found.get(SLSA_PROVENANCE)
    doc: dict[str, Any] = prov.statement if prov is not None else {}
    materials = tuple((str(m.get("name")), ",".join(f"{k}:{v}" for k, v in (m.get("digest") or {}).items()))
                      for m in statement_materials(doc))
    return Attached(remote.artifact_tag(digest, "sbom") if sbom is not None else None, _sbom_entries(sbom) or (),
                    remote.artifact_tag(digest, "att") if found else None, doc.get("predicateType"),
                    ((doc.get("predicate") or {}).get("runDetails") or {}).get("builder"), materials)


def named_profiles(registry: RegistryApi, repository: str, digest: str) -> tuple[str, ...]:
    """The profile files the image's provenance statement names (where a rebuild looks first)."""
    try:
        found = statements(registry, repository, digest, None).get(SLSA_PROVENANCE)
    except CheckFailed:
        return ()
    params = (((found.statement.get("predicate") or {}).get("buildDefinition") or {})
              .get("externalParameters") or {}) if found is not None else {}
    named = params.get("profile") if isinstance(params, dict) else None
    return tuple(str(x) for x in named) if isinstance(named, list) else ()


def with_rebuild(rebuilt: Rebuilt, findings: tuple[Finding, ...]) -> tuple[Finding, ...]:
    extra = [Finding("rebuild", False, d) for d in rebuilt.differences] or [
        Finding("rebuild", True, f"rebuilt in {rebuilt.seconds:.0f} s: the same manifest {rebuilt.rebuilt_digest[:19]} "
                f"(config {rebuilt.rebuilt_config[:19]}, {count(len(rebuilt.rebuilt_layers), 'layer')})")]
    return (*findings, *extra)
