"""What publish writes to a registry beside the image: the provenance statement, the SBOM and the DSSE envelopes
pushed as artifacts (cosign's layout, a `subject` for the referrers API). The image itself, its config
already made reproducible by the build in its OCI layout, is copied there as it is (`stackctl.publish.publication`).

Everything here talks to a registry through `RegistryApi` (`stackctl.image.protocols`; the one real adapter
is `stackctl.engine.registry.Registry`); the documents are values. Reading them back and comparing the
registry's image with the build is `stackctl.verify.remote`'s: verify does it, and publish checks its copy
with the same reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stackctl.image.layout import canonical
from stackctl.image.protocols import RegistryApi
from stackctl.verify.remote import SBOM_TYPE, artifact_tag, sha256
from stackctl.verify.sign import BUILD_TYPE, BUILDER_ID, Layer, SigningKey

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY_CONFIG = "application/vnd.oci.empty.v1+json"


@dataclass(frozen=True)
class Artifact:
    kind: str  # "sbom" | "att"
    tag: str
    digest: str  # of the artifact's manifest
    blob: str  # of the document
    size: int  # bytes of the document


def push_artifact(registry: RegistryApi, repository: str, subject: tuple[str, int, str], kind: str,
                  document: bytes, media_type: str) -> Artifact:
    """An OCI manifest whose one layer is the document and whose `subject` is the image (the referrers
    API indexes it where the registry has one); tagged `sha256-<hex>.<kind>` for registries without."""
    digest, size, subject_type = subject
    blob = registry.put_blob(repository, document)
    empty = registry.put_blob(repository, b"{}")
    manifest = {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": media_type,
        "config": {"mediaType": EMPTY_CONFIG, "digest": empty, "size": 2},
        "layers": [{"mediaType": media_type, "digest": blob, "size": len(document)}],
        "subject": {"mediaType": subject_type, "digest": digest, "size": size},
        "annotations": {"io.stackctl.kind": kind},
    }
    tag = artifact_tag(digest, kind)
    pushed = registry.put_manifest(repository, tag, canonical(manifest), OCI_MANIFEST)
    return Artifact(kind, tag, pushed, blob, len(document))



@dataclass(frozen=True)
class Material:
    """One resolvedDependency of the provenance: what went into the image, by digest."""

    name: str
    uri: str
    digest: tuple[tuple[str, str], ...]  # (algorithm, hex)
    annotations: tuple[tuple[str, Any], ...] = ()


def statement(*, subject: str, digest: str, parameters: Mapping[str, Any], internal: Mapping[str, Any],
              materials: Sequence[Material], builder: Mapping[str, str], invocation: str, started: str | None,
              finished: str, byproducts: Sequence[Material] = (), build_type: str = BUILD_TYPE) -> dict[str, Any]:
    """An in-toto Statement v1 carrying a SLSA Provenance v1 predicate (written from the two specs: the
    documents are plain JSON, and their reference Python bindings would bring protobuf for ~40 lines).
    `build_type`: what built the image (`sign.build_type` of the build record's builder)."""

    def rd(m: Material) -> dict[str, Any]:
        out: dict[str, Any] = {"name": m.name, "uri": m.uri, "digest": dict(m.digest)}
        if m.annotations:
            out["annotations"] = dict(m.annotations)
        return out

    metadata = {"invocationId": invocation, "finishedOn": finished}
    if started:
        metadata["startedOn"] = started
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": subject, "digest": {"sha256": digest.removeprefix("sha256:")}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {"buildType": build_type, "externalParameters": dict(parameters),
                                "internalParameters": dict(internal),
                                "resolvedDependencies": [rd(m) for m in materials]},
            "runDetails": {"builder": {"id": BUILDER_ID, "version": dict(builder)}, "metadata": metadata,
                           "byproducts": [rd(m) for m in byproducts]},
        },
    }



def push_attestations(registry: RegistryApi, repository: str, subject: tuple[str, int, str],
                      layers: Sequence[Layer]) -> Artifact:
    """The `.att` manifest as cosign lays it out: one layer per DSSE envelope (`sign.Layer`), each with
    the predicate type in its annotations, under `sha256-<hex>.att`; `subject` also names the image
    for registries that index referrers."""
    from stackctl.verify.sign import COSIGN_CONFIG, ENVELOPE_TYPE

    digest, size, subject_type = subject
    blobs = [registry.put_blob(repository, layer.data) for layer in layers]
    config = canonical({"architecture": "", "os": "", "config": {},
                        "rootfs": {"type": "layers", "diff_ids": blobs}})
    config_digest = registry.put_blob(repository, config)
    manifest = {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": COSIGN_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": ENVELOPE_TYPE, "digest": blob, "size": len(layer.data),
                    "annotations": layer.annotations} for blob, layer in zip(blobs, layers, strict=True)],
        "subject": {"mediaType": subject_type, "digest": digest, "size": size},
    }
    tag = artifact_tag(digest, "att")
    pushed = registry.put_manifest(repository, tag, canonical(manifest), OCI_MANIFEST)
    return Artifact("att", tag, pushed, blobs[0] if blobs else "", sum(len(x.data) for x in layers))



def attach(registry: RegistryApi, repository: str, subject: tuple[str, int, str], sbom: bytes,
           statement: Callable[[Material], dict[str, Any]],
           key: SigningKey | None = None) -> tuple[Artifact, dict[str, Any], Artifact]:
    """Everything published beside an image once the image itself is in place and checked: the SBOM as the
    `.sbom` artifact; then, under `.att`, two DSSE envelopes (signed with `key` when given): the provenance
    statement (`statement` makes it, given the SBOM as a byproduct) and the SBOM as an in-toto statement
    with a CycloneDX predicate. Returns the SBOM's artifact, the provenance statement and the `.att`
    artifact."""
    from stackctl.verify.sign import attestation_layers, sbom_statement

    sbom_art = push_artifact(registry, repository, subject, "sbom", sbom, SBOM_TYPE)
    doc = statement(Material("sbom", f"oci://{repository}@{sbom_art.digest}",
                             (("sha256", sha256(sbom).removeprefix("sha256:")),)))
    sbom_doc = sbom_statement(repository, subject[0], json.loads(sbom))
    layers = attestation_layers((canonical(doc), canonical(sbom_doc)), key)
    return sbom_art, doc, push_attestations(registry, repository, subject, layers)
