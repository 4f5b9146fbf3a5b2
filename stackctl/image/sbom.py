"""The image's SBOM: a CycloneDX document of every distribution the image installs, made from the lock.

Name, version, purl, the sha256 of the wheel the lock pinned, the index and URL it came from, and the
licences the wheel's own metadata declares. Deterministic (no clock, no random ids): it is a file in an
image layer, and the same lock must give the same layer. `licences` reads the wheels of a wheelhouse
(only their METADATA member); without them the SBOM says nothing about licences.
"""

from __future__ import annotations

import json
import uuid
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from stackctl.base.urls import strip_userinfo
from stackctl.image.render import LayerGroup

SBOM_NAMESPACE = uuid.UUID("6f1c3f0e-59d4-4f0c-9d0b-7d0f8a5c3e21")  # serial numbers are uuid5 in it
PROPERTY_INDEX = "stackctl:index"
PROPERTY_GROUP = "stackctl:layer-group"
PROPERTY_FILE = "stackctl:file"


@dataclass(frozen=True)
class SbomEntry:
    """One component, as `verify` compares it."""

    name: str
    version: str
    sha256: str
    filename: str


def licences(wheel: Path) -> tuple[str, ...]:
    """License-Expression, else the License field when it is one short line, else the licence classifiers."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            name = next((n for n in zf.namelist() if n.count("/") == 1
                         and n.split("/")[0].endswith(".dist-info") and n.endswith("/METADATA")), None)
            if name is None:
                return ()
            meta = HeaderParser().parsestr(zf.read(name).decode("utf-8", "replace"))
    except (OSError, zipfile.BadZipFile, KeyError):
        return ()
    if meta.get("License-Expression"):
        return (str(meta["License-Expression"]).strip(),)
    text = str(meta.get("License") or "").strip()
    if text and "\n" not in text and len(text) <= 80 and text.upper() != "UNKNOWN":
        return (text,)
    return tuple(sorted({c.rsplit("::", 1)[1].strip() for c in meta.get_all("Classifier") or []
                         if str(c).startswith("License ::") and str(c).count("::") >= 2}))


def depends_on(requires: Mapping[str, tuple[str, ...] | None], installed: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """canonical name → the installed distributions its Requires-Dist names (extras' requirements left
    out: the image installs none). A name whose Requires-Dist the lock does not know is left out, so the
    SBOM says nothing rather than "no dependencies"."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    present = {canonicalize_name(n) for n in installed}
    out: dict[str, tuple[str, ...]] = {}
    for name, reqs in requires.items():
        if reqs is None:
            continue
        deps = set()
        for text in reqs:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and "extra" in str(req.marker):
                continue
            dep = canonicalize_name(req.name)
            if dep in present and dep != canonicalize_name(name):
                deps.add(dep)
        out[canonicalize_name(name)] = tuple(sorted(deps))
    return out


def make_sbom(*, stack: str, target: str, lock_digest: str, groups: tuple[LayerGroup, ...],
              index_urls: Mapping[str, str], licences_of: Mapping[str, tuple[str, ...]], epoch: int,
              requires: Mapping[str, tuple[str, ...] | None] | None = None) -> str:
    """The CycloneDX 1.6 JSON text. `index_urls`: profile index name → URL (those the profile names);
    `licences_of`: wheel file name → licences; `requires`: distribution name → its Requires-Dist as
    the lock records it (None: unknown), from which each component's dependsOn is made."""
    import warnings

    from cyclonedx.contrib.license.factories import LicenseFactory
    from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.bom_ref import BomRef
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    bom = Bom(serial_number=uuid.uuid5(SBOM_NAMESPACE, f"{stack}\0{target}\0{lock_digest}"))
    bom.metadata.timestamp = datetime.fromtimestamp(epoch, timezone.utc)
    root = Component(name=stack, type=ComponentType.CONTAINER, bom_ref=BomRef(f"image:{stack}:{target}"),
                     properties=[Property(name="stackctl:lock-digest", value=lock_digest),
                                 Property(name="stackctl:target", value=target)])
    bom.metadata.component = root
    factory = LicenseFactory()
    members = []
    for group in groups:
        for item in group.items:
            index_url = strip_userinfo(index_urls.get(item.index, "")) if item.index else ""
            qualifiers = {"file_name": item.filename}
            if index_url:
                qualifiers["repository_url"] = index_url
            purl = PackageURL(type="pypi", name=item.name, version=item.version, qualifiers=qualifiers)
            refs = [ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(strip_userinfo(item.url)),
                                      hashes=[HashType(alg=HashAlgorithm.SHA_256, content=item.sha256)])
                    ] if item.url else []
            props = [Property(name=PROPERTY_FILE, value=item.filename),
                     Property(name=PROPERTY_GROUP, value=group.name),
                     Property(name=PROPERTY_INDEX, value=item.index or "closure")]
            members.append(Component(
                name=item.name, version=item.version, type=ComponentType.LIBRARY, purl=purl,
                bom_ref=BomRef(f"pkg:pypi/{item.name}@{item.version}"),
                hashes=[HashType(alg=HashAlgorithm.SHA_256, content=item.sha256)],
                licenses=[factory.make_from_string(x) for x in licences_of.get(item.filename, ())],
                external_references=refs, properties=props))
    for c in members:
        bom.components.add(c)
    bom.register_dependency(root, members)
    from packaging.utils import canonicalize_name

    by_name: dict[str, Any] = {canonicalize_name(str(c.name)): c for c in members}
    for name, deps in depends_on(requires or {}, by_name).items():
        if name in by_name:
            bom.register_dependency(by_name[name], [by_name[d] for d in deps])
    with warnings.catch_warnings():  # the library warns about graphs it cannot check; ours is flat on purpose
        warnings.simplefilter("ignore")
        text = JsonV1Dot6(bom).output_as_string(indent=None)
    return json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"


def entries(sbom: Mapping[str, Any]) -> tuple[SbomEntry, ...]:
    """The components of a CycloneDX document, as `verify` compares them."""
    out = []
    for c in sbom.get("components") or []:
        sha = next((h.get("content", "") for h in c.get("hashes") or [] if h.get("alg") == "SHA-256"), "")
        props = {p.get("name"): p.get("value") for p in c.get("properties") or []}
        out.append(SbomEntry(str(c.get("name", "")), str(c.get("version", "")), str(sha),
                             str(props.get(PROPERTY_FILE, ""))))
    return tuple(sorted(out, key=lambda e: e.name.lower()))

