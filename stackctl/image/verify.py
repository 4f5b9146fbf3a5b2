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

from stackctl.errors import CheckFailed
from stackctl.image import attest
from stackctl.image.labels import LABEL_EPOCH, LABEL_INSTALLED, LABEL_LOCK, LABEL_SBOM, LABEL_STACK, LABEL_TARGET, OCI
from stackctl.image.protocols import RegistryApi
from stackctl.image.render import SBOM_PATH
from stackctl.image.sbom import SbomEntry, entries
from stackctl.resolve.lock import Lock


@dataclass(frozen=True)
class Finding:
    check: str  # "labels", "sbom", "provenance", "installed", "reproducible", "layers"
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

    @property
    def failed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.ok)


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


def _json_object(raw: bytes | str | None) -> dict[str, Any] | None:
    """A JSON object read from an image or a registry; None for anything else (absent, not JSON, a list)."""
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _sbom_entries(raw: bytes | str | None) -> tuple[SbomEntry, ...] | None:
    """The components of an SBOM; None when it is not a CycloneDX JSON document."""
    if raw is None:
        return None
    try:
        return entries(json.loads(raw))
    except (ValueError, AttributeError):
        return None


def _findings(kind: str, problems: list[str], ok_text: str) -> list[Finding]:
    """One failed finding per problem, or one that passed."""
    return [Finding(kind, False, p) for p in problems] or [Finding(kind, True, ok_text)]


def _label_problems(labels: Mapping[str, str], lock: Lock | None,
                    want: dict[str, tuple[str, str]] | None) -> list[str]:
    """stackctl's own labels are there, and with a lock they name it and its distributions."""
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
    except (ValueError, AttributeError):
        label_installed = {}
        problems.append(f"label {LABEL_INSTALLED} is not a JSON object")
    return problems + [f"label {LABEL_INSTALLED}: {d}" for d in
                       _differences("the label", label_installed, {k: v for k, (v, _) in want.items()})]


@dataclass(frozen=True)
class _Sbom:
    in_image: bytes | None
    beside: bytes | None
    components: tuple[SbomEntry, ...]

    @property
    def document(self) -> bytes | None:
        return self.in_image if self.in_image is not None else self.beside


def _sbom_problems(sbom: _Sbom, labels: Mapping[str, str], digest: str,
                   want: dict[str, tuple[str, str]] | None) -> list[str]:
    """The SBOM in the image is the one its label hashes and the one beside it, and lists the lock's wheels."""
    problems = []
    if sbom.in_image is None:
        problems.append(f"{SBOM_PATH} is not in the image's top layers")
    elif attest.sha256(sbom.in_image) != labels.get(LABEL_SBOM):
        problems.append(f"{SBOM_PATH} hashes to {attest.sha256(sbom.in_image)}, label {LABEL_SBOM} says "
                        f"{labels.get(LABEL_SBOM)}")
    if sbom.beside is None:
        problems.append(f"no SBOM beside the image (tag {attest.artifact_tag(digest, 'sbom')})")
    elif sbom.in_image is not None and sbom.beside != sbom.in_image:
        problems.append("the SBOM beside the image is not the one inside it")
    if sbom.document is not None and _sbom_entries(sbom.document) is None:
        problems.append("the SBOM is not JSON")
    if want is not None and sbom.document is not None:
        have = {canonicalize_name(c.name): f"{c.version} sha256:{c.sha256}" for c in sbom.components}
        problems += [f"SBOM: {d}" for d in _differences("the SBOM", have, {k: f"{v} sha256:{h}"
                                                                             for k, (v, h) in want.items()})]
    return problems


def _installed_problems(raw: bytes | None, components: tuple[SbomEntry, ...],
                        want: dict[str, tuple[str, str]] | None) -> list[str]:
    """The distributions the gate recorded in the image are the lock's (without a lock: the SBOM's)."""
    if raw is None:
        return [f"{attest.INSTALLED_PATH} is not in the image's top layers"]
    problems = []
    try:
        installed = {canonicalize_name(k): str(v) for k, v in json.loads(raw).items()}
    except (ValueError, AttributeError):
        installed = {}
        problems.append(f"{attest.INSTALLED_PATH} is not a JSON object")
    expected = ({k: v for k, (v, _) in want.items()} if want is not None else
                {canonicalize_name(c.name): c.version for c in components})
    return problems + _differences("the image", installed, expected)


def _provenance_problems(raw: bytes | None, digest: str, labels: Mapping[str, str], sbom: _Sbom,
                         ) -> tuple[list[str], list[dict[str, Any]]]:
    """The provenance statement beside the image is about it, is SLSA provenance v1, and names the lock,
    revision and wheels the labels and the SBOM name; and its materials."""
    if raw is None:
        return [f"no provenance statement beside the image (tag {attest.artifact_tag(digest, 'att')})"], []
    problems = []
    doc = _json_object(raw)
    if doc is None:
        doc = {}
        problems.append("the provenance statement is not JSON")
    subjects = [s.get("digest", {}).get("sha256") for s in doc.get("subject") or []]
    if digest.removeprefix("sha256:") not in subjects:
        problems.append(f"the provenance statement is about {subjects}, not {digest}")
    if doc.get("predicateType") != "https://slsa.dev/provenance/v1":
        problems.append(f"the provenance predicate is {doc.get('predicateType')!r}, not SLSA provenance v1")
    materials = attest.statement_materials(doc)
    by_name = {m.get("name"): m for m in materials}
    lock_hex = ((by_name.get("lock") or {}).get("digest") or {}).get("sha256")
    if f"sha256:{lock_hex}" != labels.get(LABEL_LOCK):
        problems.append(f"provenance names lock sha256:{lock_hex}, label {LABEL_LOCK} says "
                        f"{labels.get(LABEL_LOCK)}")
    commit = ((by_name.get("source") or {}).get("digest") or {}).get("gitCommit")
    if commit != (labels.get(f"{OCI}.revision") or "").removesuffix("-dirty"):
        problems.append(f"provenance names revision {commit}, the label {labels.get(f'{OCI}.revision')}")
    wheels = {str(m.get("name")): str((m.get("digest") or {}).get("sha256")) for m in materials
              if str(m.get("name", "")).endswith(".whl")}
    sbom_wheels = {c.filename: c.sha256 for c in sbom.components}
    if sbom.document is not None and wheels != sbom_wheels:
        missing = sorted(set(sbom_wheels) ^ set(wheels)) or sorted(k for k in wheels if wheels[k] != sbom_wheels[k])
        problems.append(f"provenance and SBOM name different wheels: {', '.join(missing[:5])}")
    return problems, materials


def _epoch_problems(config: Mapping[str, Any], epoch: str) -> list[str]:
    """The published config carries SOURCE_DATE_EPOCH: the digest anyone rebuilding gets again."""
    if not epoch.isdigit():
        return [f"label {LABEL_EPOCH} is missing"]
    if config.get("created") != attest.iso(int(epoch)):
        return [f"config created {config.get('created')} is not SOURCE_DATE_EPOCH {epoch} "
                f"({attest.iso(int(epoch))}): not the reproducible manifest `stackctl publish` writes"]
    return []


def verify_image(registry: RegistryApi, repository: str, reference: str, lock: Lock | None, *,
                 stream_layers: bool = False) -> Verification:
    """Each check of `stackctl verify`, read from the registry alone: labels, SBOM, installed distributions,
    provenance, the reproducible config, and with `stream_layers` every layer's bytes."""
    digest, manifest, config = attest.remote_image(registry, repository, reference)
    labels: dict[str, str] = (config.get("config") or {}).get("Labels") or {}
    want = lock_distributions(lock, labels.get(LABEL_TARGET, "")) if lock is not None else None
    files = attest.image_files(registry, repository, manifest)
    in_image = files.get(SBOM_PATH)
    beside = attest.fetch_artifact(registry, repository, digest, "sbom", attest.SBOM_TYPE)
    sbom = _Sbom(in_image, beside, _sbom_entries(in_image if in_image is not None else beside) or ())
    provenance, materials = _provenance_problems(
        attest.fetch_artifact(registry, repository, digest, "att", attest.STATEMENT_TYPE), digest, labels, sbom)
    epoch = labels.get(LABEL_EPOCH, "")
    findings = [
        *_findings("labels", _label_problems(labels, lock, want),
                   "stackctl's labels are present" + (", and agree with the lock" if lock else "")),
        *_findings("sbom", _sbom_problems(sbom, labels, digest, want),
                   f"{len(sbom.components)} components; in the image, beside it and under its label alike"
                   + (", as the lock has them" if lock else "")),
        *_findings("installed", _installed_problems(files.get(attest.INSTALLED_PATH), sbom.components, want),
                   "the distributions installed in the image are " + ("the lock's" if lock else "the SBOM's")),
        *_findings("provenance", provenance, f"in-toto statement about {digest[:19]}; {len(materials)} materials "
                   "agree with the labels and the SBOM"),
        *_findings("reproducible", _epoch_problems(config, epoch), f"config times are SOURCE_DATE_EPOCH {epoch}"),
    ]
    if stream_layers:
        ids = list((config.get("rootfs") or {}).get("diff_ids") or [])
        findings += _findings("layers", attest.compare_with_build(registry, repository, digest, ids, labels),
                              f"{len(ids)} layers hash to their digests and unpack to their diff_ids")
    return Verification(f"{repository}@{digest}", digest, manifest["config"]["digest"],
                        lock.digest() if lock else None, tuple(findings), len(sbom.components), len(materials))


def raise_if_failed(v: Verification) -> None:
    if v.failed:
        raise CheckFailed(f"{v.ref} does not verify: " + "; ".join(f"{f.check}: {f.detail}" for f in v.failed[:8])
                          + (f"; and {len(v.failed) - 8} more" if len(v.failed) > 8 else ""))


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
    sbom = attest.fetch_artifact(registry, repository, digest, "sbom", attest.SBOM_TYPE)
    att = attest.fetch_artifact(registry, repository, digest, "att", attest.STATEMENT_TYPE)
    components = _sbom_entries(sbom) or ()
    doc = _json_object(att) or {}
    materials = tuple((str(m.get("name")), ",".join(f"{k}:{v}" for k, v in (m.get("digest") or {}).items()))
                      for m in attest.statement_materials(doc))
    builder = ((doc.get("predicate") or {}).get("runDetails") or {}).get("builder") if doc else None
    return Attached(attest.artifact_tag(digest, "sbom") if sbom is not None else None, components,
                    attest.artifact_tag(digest, "att") if att is not None else None,
                    doc.get("predicateType") if doc else None, builder, materials)
