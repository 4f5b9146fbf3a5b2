"""Signed statements: in-toto statements in DSSE envelopes, laid out as cosign stores attestations.

The envelope is DSSE v1 (payloadType `application/vnd.in-toto+json`, the signature over the
pre-authentication encoding of type and payload); keys are PEM, ECDSA P-256 (SHA-256, DER signatures, as
cosign writes them) or Ed25519. Every signature operation is `cryptography`'s; this module only frames
the bytes. Values in, values out (`load_private_key` takes bytes), but for the one reader of a key file
that both `publish --sign-key` and `verify --key` use (`read_signing_key`, `read_verifying_key`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackctl.errors import CheckFailed, InputError

PAYLOAD_TYPE = "application/vnd.in-toto+json"
ENVELOPE_TYPE = "application/vnd.dsse.envelope.v1+json"
STATEMENT_V1 = "https://in-toto.io/Statement/v1"
SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"
CYCLONEDX_PREDICATE = "https://cyclonedx.org/bom"
# cosign's annotations on each layer of an `.att` manifest: the predicate type, and an empty signature
# (the signature lives inside the envelope).
PREDICATE_ANNOTATION = "predicateType"
COSIGN_SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
COSIGN_CONFIG = "application/vnd.oci.image.config.v1+json"
# the provenance statement's build type and builder: publish writes them (publish/attest.py), verify holds a
# statement to them
# A build type a builder: the statement says what built the image (the engine API's classic builder, or BuildKit
# through buildx), as the build record's `builder` names it; what externalParameters mean is the same for both.
BUILD_TYPES = {"classic": "urn:stackctl:build:docker-classic:v1", "buildkit": "urn:stackctl:build:buildkit:v1"}
BUILD_TYPE = BUILD_TYPES["classic"]  # a build record older than its `builder` field was the classic builder's
BUILDER_ID = "urn:stackctl:builder"


def build_type(builder: str) -> str:
    """The provenance's buildType for the build record's `builder` ("classic" | "buildkit")."""
    return BUILD_TYPES.get(builder, BUILD_TYPE)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what is signed, so that type and body cannot be swapped."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


@dataclass(frozen=True)
class SigningKey:
    """A private key read from PEM; `keyid` is the sha256 of its public key (SubjectPublicKeyInfo DER)."""

    key: Any  # cryptography's EllipticCurvePrivateKey | Ed25519PrivateKey
    keyid: str

    def __repr__(self) -> str:  # never the key material, wherever a key object ends up printed
        return f"SigningKey(keyid={self.keyid[:16]}...)"

    def sign(self, data: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        if isinstance(self.key, ec.EllipticCurvePrivateKey):
            return bytes(self.key.sign(data, ec.ECDSA(hashes.SHA256())))
        return bytes(self.key.sign(data))


@dataclass(frozen=True)
class VerifyingKey:
    key: Any  # EllipticCurvePublicKey | Ed25519PublicKey
    keyid: str

    def verifies(self, signature: bytes, data: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        try:
            if isinstance(self.key, ec.EllipticCurvePublicKey):
                self.key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
            else:
                self.key.verify(signature, data)
        except (InvalidSignature, ValueError):
            return False
        return True


def _keyid(public: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def _supported(key: Any, where: str) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        if not isinstance(key.curve, ec.SECP256R1):
            raise InputError(f"{where}: an ECDSA key on {key.curve.name}; stackctl signs with P-256 or Ed25519")
        return
    if isinstance(key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)):
        return
    raise InputError(f"{where}: a {type(key).__name__.removeprefix('_')} key; stackctl signs with ECDSA P-256 "
                     "or Ed25519")


def load_private_key(pem: bytes, where: str) -> SigningKey:
    """`where` names the file in messages; nothing of the key's content ever goes into one."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:
        raise InputError(f"{where}: the private key is encrypted; give an unencrypted PEM key file "
                         "(keep it readable by you only)") from None
    except (ValueError, UnsupportedAlgorithm):
        raise InputError(f"{where}: not a PEM private key") from None
    _supported(key, where)
    return SigningKey(key, _keyid(key.public_key()))


def load_public_key(pem: bytes, where: str) -> VerifyingKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, UnsupportedAlgorithm):
        raise InputError(f"{where}: not a PEM public key (`openssl pkey -pubout` writes one from the "
                         "private key)") from None
    _supported(key, where)
    return VerifyingKey(key, _keyid(key))


def _key_file(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None


def read_signing_key(path: Path) -> SigningKey:
    """The PEM private key `publish --sign-key` names; messages name the file, never its content."""
    return load_private_key(_key_file(path, "signing key"), str(path))


def read_verifying_key(path: Path) -> VerifyingKey:
    """The PEM public key `verify --key` names."""
    return load_public_key(_key_file(path, "public key"), str(path))


def envelope(statement: bytes, key: SigningKey | None) -> bytes:
    """A DSSE envelope around the statement's exact bytes; without a key, one with no signatures (still the
    layout cosign-compatible tools read, and `verify --key` refuses it as unsigned)."""
    signatures = [] if key is None else [{"keyid": key.keyid,
                                          "sig": base64.b64encode(key.sign(pae(PAYLOAD_TYPE, statement))).decode()}]
    doc = {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(statement).decode(), "signatures": signatures}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Opened:
    """An envelope read back: the statement's bytes and parsed form, and what its signatures say."""

    payload: bytes
    statement: dict[str, Any]
    signatures: int  # how many signatures the envelope carries
    signed_by_key: bool | None  # None: no key to check against


def open_envelope(data: bytes, key: VerifyingKey | None, what: str) -> Opened:
    """Parse an envelope; with `key`, check that one of its signatures verifies. CheckFailed on anything
    malformed: what a registry holds beside an image is the publisher's claim, and a bad claim fails."""
    try:
        doc = json.loads(data)
        payload = base64.b64decode(doc["payload"], validate=True)
        payload_type = str(doc["payloadType"])
        sigs = doc["signatures"]  # required, even when empty
        if not isinstance(sigs, list):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError):
        raise CheckFailed(f"{what}: not a DSSE envelope") from None
    if payload_type != PAYLOAD_TYPE:
        raise CheckFailed(f"{what}: payload type {payload_type!r}, not {PAYLOAD_TYPE}")
    try:
        statement = json.loads(payload)
        if not isinstance(statement, dict):
            raise TypeError
    except (ValueError, RecursionError, TypeError):
        raise CheckFailed(f"{what}: the envelope's payload is not a JSON statement") from None
    signed: bool | None = None
    if key is not None:
        message = pae(payload_type, payload)
        signed = False
        for s in sigs:
            try:
                raw = base64.b64decode(str((s or {}).get("sig", "")), validate=True)
            except (ValueError, AttributeError):
                continue
            if raw and key.verifies(raw, message):
                signed = True
                break
    return Opened(payload, statement, len(sigs), signed)


def sbom_statement(subject: str, digest: str, sbom: Mapping[str, Any]) -> dict[str, Any]:
    """The SBOM as an in-toto statement about the image, with the CycloneDX document as its predicate."""
    return {"_type": STATEMENT_V1,
            "subject": [{"name": subject, "digest": {"sha256": digest.removeprefix("sha256:")}}],
            "predicateType": CYCLONEDX_PREDICATE, "predicate": dict(sbom)}


@dataclass(frozen=True)
class Layer:
    """One layer of an `.att` manifest: an envelope and the annotations cosign puts beside it."""

    data: bytes
    predicate_type: str

    @property
    def annotations(self) -> dict[str, str]:
        return {COSIGN_SIGNATURE_ANNOTATION: "", PREDICATE_ANNOTATION: self.predicate_type}


def attestation_layers(statements: Sequence[bytes], key: SigningKey | None) -> tuple[Layer, ...]:
    """What goes beside an image under its `.att` tag: each statement (exact bytes) in an envelope,
    signed with `key` when one is given. The caller pushes each `Layer.data` as a blob and names them
    in one manifest (`stackctl.publish.attest.push_attestations` does both)."""
    out = []
    for raw in statements:
        try:
            predicate = str(json.loads(raw).get("predicateType") or "")
        except (ValueError, RecursionError, AttributeError):
            raise InputError("a statement to sign is not a JSON object") from None
        out.append(Layer(envelope(raw, key), predicate))
    return tuple(out)


def statement_materials(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    deps = ((doc.get("predicate") or {}).get("buildDefinition") or {}).get("resolvedDependencies")
    return [d for d in deps or [] if isinstance(d, dict)]
