"""DSSE envelopes: what is signed, what verifies, and what `verify --key` tells apart."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from stackctl.errors import CheckFailed, InputError
from stackctl.verify.sign import (
    CYCLONEDX_PREDICATE,
    ENVELOPE_TYPE,
    PAYLOAD_TYPE,
    attestation_layers,
    envelope,
    load_private_key,
    load_public_key,
    open_envelope,
    pae,
    read_signing_key,
    read_verifying_key,
    sbom_statement,
)

STATEMENT = json.dumps({"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://slsa.dev/provenance/v1",
                        "subject": [{"name": "r", "digest": {"sha256": "ab" * 32}}]}).encode()


def pem_pair(kind: str) -> tuple[bytes, bytes]:
    key: Any = ec.generate_private_key(ec.SECP256R1()) if kind == "p256" else (
        ed25519.Ed25519PrivateKey.generate() if kind == "ed25519" else ec.generate_private_key(ec.SECP384R1()))
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


def test_pae_is_the_dsse_encoding() -> None:
    # The example in DSSE's protocol document.
    assert pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


@pytest.mark.parametrize("kind", ["p256", "ed25519"])
def test_a_signed_envelope_verifies_with_its_key_only(kind: str) -> None:
    private, public = pem_pair(kind)
    key = load_private_key(private, "k.pem")
    data = envelope(STATEMENT, key)
    doc = json.loads(data)
    assert doc["payloadType"] == PAYLOAD_TYPE and base64.b64decode(doc["payload"]) == STATEMENT
    assert doc["signatures"][0]["keyid"] == key.keyid == load_public_key(public, "p.pem").keyid

    opened = open_envelope(data, load_public_key(public, "p.pem"), "att")
    assert opened.signed_by_key is True and opened.payload == STATEMENT and opened.signatures == 1
    other = load_public_key(pem_pair(kind)[1], "other.pem")
    assert open_envelope(data, other, "att").signed_by_key is False
    # Without a key the statement is read, and nothing is claimed about the signature.
    assert open_envelope(data, None, "att").signed_by_key is None


def test_a_changed_payload_or_type_no_longer_verifies() -> None:
    private, public = pem_pair("p256")
    pub = load_public_key(public, "p.pem")
    doc = json.loads(envelope(STATEMENT, load_private_key(private, "k.pem")))
    retargeted = STATEMENT.replace(b"ab" * 32, b"cd" * 32)
    forged = {**doc, "payload": base64.b64encode(retargeted).decode()}
    assert open_envelope(json.dumps(forged).encode(), pub, "att").signed_by_key is False
    with pytest.raises(CheckFailed, match="payload type"):
        open_envelope(json.dumps({**doc, "payloadType": "application/json"}).encode(), pub, "att")
    garbage = {**doc, "signatures": [{"sig": "!!"}, {"sig": ""}]}
    assert open_envelope(json.dumps(garbage).encode(), pub, "att").signed_by_key is False


def test_an_unsigned_envelope_carries_no_signature() -> None:
    _, public = pem_pair("ed25519")
    opened = open_envelope(envelope(STATEMENT, None), load_public_key(public, "p.pem"), "att")
    assert opened.signatures == 0 and opened.signed_by_key is False


@pytest.mark.parametrize("data", [b"", b"[]", b'{"payload": "x"}', b'{"payloadType": "%s", "payload": "e30=", '
                                  b'"signatures": {}}' % PAYLOAD_TYPE.encode()])
def test_what_is_not_an_envelope_is_a_failed_check(data: bytes) -> None:
    with pytest.raises(CheckFailed, match="not a DSSE envelope"):
        open_envelope(data, None, "repo:sha256-x.att")


def test_keys_stackctl_does_not_sign_with_are_refused_by_file_name() -> None:
    p384, _ = pem_pair("p384")
    with pytest.raises(InputError, match="secp384r1; stackctl signs with P-256 or Ed25519"):
        load_private_key(p384, "k.pem")
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    with pytest.raises(InputError, match=r"k\.pem: a RSAPrivateKey key"):
        load_private_key(rsa_key, "k.pem")
    with pytest.raises(InputError, match=r"k\.pem: not a PEM private key"):
        load_private_key(b"-----BEGIN NOTHING-----", "k.pem")
    secret = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"))
    with pytest.raises(InputError, match=r"k\.pem: the private key is encrypted") as exc:
        load_private_key(secret, "k.pem")
    assert "BEGIN" not in str(exc.value)
    with pytest.raises(InputError, match=r"p\.pem: not a PEM public key"):
        load_public_key(p384, "p.pem")


def test_a_signing_key_never_shows_its_material() -> None:
    private, _ = pem_pair("p256")
    key = load_private_key(private, "k.pem")
    assert "PRIVATE" not in repr(key) and repr(key).startswith("SigningKey(keyid=")


def test_layers_carry_the_predicate_type_as_cosign_annotates_it() -> None:
    sbom = sbom_statement("reg/x", "sha256:" + "ab" * 32, {"bomFormat": "CycloneDX"})
    layers = attestation_layers((STATEMENT, json.dumps(sbom).encode()), None)
    assert [x.predicate_type for x in layers] == ["https://slsa.dev/provenance/v1", CYCLONEDX_PREDICATE]
    assert layers[1].annotations == {"dev.cosignproject.cosign/signature": "", "predicateType": CYCLONEDX_PREDICATE}
    assert json.loads(base64.b64decode(json.loads(layers[1].data)["payload"]))["predicate"] == {
        "bomFormat": "CycloneDX"}
    assert ENVELOPE_TYPE == "application/vnd.dsse.envelope.v1+json"


def test_key_files_that_cannot_be_used_are_one_input_error_before_any_connection(
        tmp_path: Any, cli: Any) -> None:
    missing = tmp_path / "missing.pub"
    r = cli("verify", "127.0.0.1:9/x/y:1", "--key", str(missing))
    assert r.code == 2 and r.err.count("error:") == 1 and f"{missing}: cannot read the public key" in r.err
    private, _ = pem_pair("p256")
    wrong = tmp_path / "private.pem"
    wrong.write_bytes(private)
    r = cli("verify", "127.0.0.1:9/x/y:1", "--key", str(wrong), "--json")
    assert r.code == 2 and f"{wrong}: not a PEM public key" in r.err and "PRIVATE" not in r.out + r.err


def test_one_reader_gives_publish_and_verify_the_pair_that_signs_and_checks(tmp_path: Any) -> None:
    private, public = pem_pair("ed25519")
    (tmp_path / "k.pem").write_bytes(private)
    (tmp_path / "k.pub").write_bytes(public)
    key = read_signing_key(tmp_path / "k.pem")
    assert key.keyid == read_verifying_key(tmp_path / "k.pub").keyid
    opened = open_envelope(envelope(STATEMENT, key), read_verifying_key(tmp_path / "k.pub"), "att")
    assert opened.signed_by_key is True
    with pytest.raises(InputError, match=r"k\.gone: cannot read the signing key") as info:
        read_signing_key(tmp_path / "k.gone")
    assert info.value.exit_code == 2
    with pytest.raises(InputError, match=r"k\.pub: not a PEM private key"):  # the halves swapped
        read_signing_key(tmp_path / "k.pub")
