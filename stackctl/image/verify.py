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
from stackctl.image.app import FREEZE as APP_FREEZE
from stackctl.image.app import app_installed
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


def verify_image(registry: RegistryApi, repository: str, reference: str, lock: Lock | None, *,
                 stream_layers: bool = False) -> Verification:
    digest, manifest, config = attest.remote_image(registry, repository, reference)
    labels: dict[str, str] = (config.get("config") or {}).get("Labels") or {}
    findings: list[Finding] = []
    files = attest.image_files(registry, repository, manifest, (SBOM_PATH, attest.INSTALLED_PATH, APP_FREEZE))

    def check(kind: str, problems: list[str], ok_text: str) -> None:
        findings.extend(Finding(kind, False, p) for p in problems)
        if not problems:
            findings.append(Finding(kind, True, ok_text))

    # Labels: stackctl's own, and against the lock.
    needed = (LABEL_STACK, LABEL_LOCK, LABEL_TARGET, LABEL_SBOM, LABEL_INSTALLED, f"{OCI}.revision")
    problems = [f"label {k} is missing" for k in needed if not labels.get(k)]
    target = labels.get(LABEL_TARGET, "")
    want: dict[str, tuple[str, str]] | None = None
    if lock is not None:
        want = lock_distributions(lock, target)
        if labels.get(LABEL_LOCK) != lock.digest():
            problems.append(f"label {LABEL_LOCK} is {labels.get(LABEL_LOCK)}, the lock's digest is {lock.digest()}")
        if labels.get(LABEL_STACK) not in (None, lock.stack):
            problems.append(f"label {LABEL_STACK} is {labels.get(LABEL_STACK)!r}, the lock is of {lock.stack!r}")
        if not want:
            problems.append(f"the lock has no wheels for the image's target {target!r}")
        try:
            label_installed = {canonicalize_name(k): str(v) for k, v in
                               json.loads(labels.get(LABEL_INSTALLED) or "{}").items()}
        except (ValueError, AttributeError):
            label_installed = {}
            problems.append(f"label {LABEL_INSTALLED} is not a JSON object")
        problems += [f"label {LABEL_INSTALLED}: {d}" for d in
                     _differences("the label", label_installed, {k: v for k, (v, _) in want.items()}
                                  | app_installed(files.get(SBOM_PATH)))]
    check("labels", problems, "stackctl's labels are present" + (", and agree with the lock" if lock else ""))

    # The image's own records, from its layers.
    in_image = files.get(SBOM_PATH)
    problems = []
    if in_image is None:
        problems.append(f"{SBOM_PATH} is not in the image's top layers")
    elif attest.sha256(in_image) != labels.get(LABEL_SBOM):
        problems.append(f"{SBOM_PATH} hashes to {attest.sha256(in_image)}, label {LABEL_SBOM} says "
                        f"{labels.get(LABEL_SBOM)}")
    beside = attest.fetch_artifact(registry, repository, digest, "sbom", attest.SBOM_TYPE)
    if beside is None:
        problems.append(f"no SBOM beside the image (tag {attest.artifact_tag(digest, 'sbom')})")
    elif in_image is not None and beside != in_image:
        problems.append("the SBOM beside the image is not the one inside it")
    components: tuple[SbomEntry, ...] = ()
    sbom_doc = in_image if in_image is not None else beside
    if sbom_doc is not None:
        try:
            components = entries(json.loads(sbom_doc))
        except (ValueError, AttributeError):
            problems.append("the SBOM is not JSON")
    if want is not None and sbom_doc is not None:
        from_app = app_installed(sbom_doc)  # an [image.app] image: what its own build installed, not the lock
        have = {canonicalize_name(c.name): f"{c.version} sha256:{c.sha256}" for c in components
                if canonicalize_name(c.name) not in from_app}
        problems += [f"SBOM: {d}" for d in _differences("the SBOM", have, {k: f"{v} sha256:{h}"
                                                                             for k, (v, h) in want.items()})]
    check("sbom", problems, f"{len(components)} components; in the image, beside it and under its label alike"
          + (", as the lock has them" if lock else ""))

    # Installed distributions, as the gate recorded them in the image.
    problems = []
    raw = files.get(APP_FREEZE, files.get(attest.INSTALLED_PATH))  # the whole gate's record, in an app image
    if raw is None:
        problems.append(f"{attest.INSTALLED_PATH} is not in the image's top layers")
    else:
        try:
            installed = {canonicalize_name(k): str(v) for k, v in json.loads(raw).items()}
        except (ValueError, AttributeError):
            installed = {}
            problems.append(f"{attest.INSTALLED_PATH} is not a JSON object")
        expected = ({k: v for k, (v, _) in want.items()} | app_installed(sbom_doc) if want is not None else
                    {canonicalize_name(c.name): c.version for c in components})
        problems += _differences("the image", installed, expected)
    check("installed", problems, "the distributions installed in the image are "
          + ("the lock's" if lock else "the SBOM's"))

    # Provenance beside the image.
    problems = []
    materials: list[dict[str, Any]] = []
    doc_raw = attest.fetch_artifact(registry, repository, digest, "att", attest.STATEMENT_TYPE)
    if doc_raw is None:
        problems.append(f"no provenance statement beside the image (tag {attest.artifact_tag(digest, 'att')})")
    else:
        try:
            doc = json.loads(doc_raw)
        except ValueError:
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
        sbom_wheels = {c.filename: c.sha256 for c in components if c.filename}
        if sbom_doc is not None and wheels != sbom_wheels:
            missing = sorted(set(sbom_wheels) ^ set(wheels)) or sorted(k for k in wheels
                                                                       if wheels[k] != sbom_wheels[k])
            problems.append(f"provenance and SBOM name different wheels: {', '.join(missing[:5])}")
    check("provenance", problems, f"in-toto statement about {digest[:19]}; {len(materials)} materials agree "
          "with the labels and the SBOM")

    # The published config carries SOURCE_DATE_EPOCH: the digest anyone rebuilding gets again.
    epoch = labels.get(LABEL_EPOCH, "")
    problems = []
    if not epoch.isdigit():
        problems.append(f"label {LABEL_EPOCH} is missing")
    elif config.get("created") != attest.iso(int(epoch)):
        problems.append(f"config created {config.get('created')} is not SOURCE_DATE_EPOCH {epoch} "
                        f"({attest.iso(int(epoch))}): not the reproducible manifest `stackctl publish` writes")
    check("reproducible", problems, f"config times are SOURCE_DATE_EPOCH {epoch}")

    if stream_layers:
        ids = list((config.get("rootfs") or {}).get("diff_ids") or [])
        problems = attest.compare_with_build(registry, repository, digest, ids, labels)
        check("layers", problems, f"{len(ids)} layers hash to their digests and unpack to their diff_ids")
    return Verification(f"{repository}@{digest}", digest, manifest["config"]["digest"],
                        lock.digest() if lock else None, tuple(findings), len(components), len(materials))


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
    components: tuple[SbomEntry, ...] = ()
    if sbom is not None:
        try:
            components = entries(json.loads(sbom))
        except (ValueError, AttributeError):
            components = ()
    doc: dict[str, Any] = {}
    if att is not None:
        try:
            doc = json.loads(att)
        except ValueError:
            doc = {}
    materials = tuple((str(m.get("name")), ",".join(f"{k}:{v}" for k, v in (m.get("digest") or {}).items()))
                      for m in attest.statement_materials(doc))
    builder = ((doc.get("predicate") or {}).get("runDetails") or {}).get("builder") if doc else None
    return Attached(attest.artifact_tag(digest, "sbom") if sbom is not None else None, components,
                    attest.artifact_tag(digest, "att") if att is not None else None,
                    doc.get("predicateType") if doc else None, builder, materials)
