"""Each check `verify` makes, held to the words a user reads when it fails."""

from __future__ import annotations

import json

from stackctl.image.app import FROM_APP, PROPERTY_SOURCE
from stackctl.image.render import INSTALLED_PATH
from stackctl.resolve.lock import Lock, LockedFile, LockedPin
from stackctl.verify.remote import artifact_tag, sha256
from stackctl.verify.sign import Opened, VerifyingKey
from stackctl.verify.verification import (
    Finding,
    _findings,
    _installed_problems,
    _label_problems,
    _Sbom,
    _sbom_problems,
    _sbom_statement_problems,
    _signature_problems,
    lock_distributions,
)

SHA = "ab" * 32
DIGEST = f"sha256:{'cd' * 32}"
TARGET = "cp311-linux_x86_64"
LOCK = Lock("s", "d", (LockedPin("x", "1.0", "public", (LockedFile(TARGET, "x-1.0-py3-none-any.whl", "u", SHA,
                                                                   upload_time=None),)),))
WANT = lock_distributions(LOCK, TARGET)
SBOM = json.dumps({"components": [{"name": "x", "version": "1.0", "hashes": [{"alg": "SHA-256", "content": SHA}],
                                   "properties": [{"name": "stackctl:file", "value": "x-1.0-py3-none-any.whl"}]}]})
LABELS = {"io.stackctl.stack": "s", "io.stackctl.lock-digest": LOCK.digest(), "io.stackctl.target": TARGET,
          "io.stackctl.sbom-digest": sha256(SBOM.encode()), "io.stackctl.installed": '{"x": "1.0"}',
          "org.opencontainers.image.revision": "c" * 40}
KEY = VerifyingKey(None, "f" * 64)


def test_labels_that_match_the_lock_pass_and_a_missing_one_is_said_once() -> None:
    assert _label_problems(LABELS, LOCK, WANT, None) == []
    without = {k: v for k, v in LABELS.items() if k != "io.stackctl.lock-digest"}
    assert _label_problems(without, LOCK, WANT, None) == ["label io.stackctl.lock-digest is missing"]
    other = {**LABELS, "io.stackctl.lock-digest": "sha256:0", "io.stackctl.installed": '{"x": "2.0"}'}
    assert _label_problems(other, LOCK, WANT, None) == [
        f"label io.stackctl.lock-digest is sha256:0, the lock's digest is {LOCK.digest()}",
        "label io.stackctl.installed: x is 2.0 in the label, expected 1.0"]
    assert _label_problems({**LABELS, "io.stackctl.installed": "[1]"}, LOCK, WANT, None)[0] == (
        "label io.stackctl.installed is not a JSON object")


def test_an_sbom_that_is_not_json_is_said_and_counts_no_components() -> None:
    good = _Sbom.of(SBOM.encode(), SBOM.encode())
    assert len(good.components) == 1 and _sbom_problems(good, LABELS, DIGEST, WANT) == []
    bad = _Sbom.of(b"{", None)
    assert bad.components == ()
    assert _sbom_problems(bad, LABELS, DIGEST, None)[1:] == [
        f"no SBOM beside the image (tag {artifact_tag(DIGEST, 'sbom')})", "the SBOM is not JSON"]
    assert "the SBOM beside the image is not the one inside it" in _sbom_problems(
        _Sbom.of(SBOM.encode(), b"{}"), LABELS, DIGEST, WANT)


def test_installed_distributions_are_held_to_the_lock_else_the_sbom() -> None:
    sbom = _Sbom.of(SBOM.encode(), None)
    assert _installed_problems(b'{"X": "1.0"}', sbom, WANT) == []
    assert _installed_problems(b'{"x": "1.1"}', sbom, None) == ["x is 1.1 in the image, expected 1.0"]
    assert _installed_problems(b"[]", _Sbom.of(None, None), WANT) == [
        f"{INSTALLED_PATH} is not a JSON object", "x 1.0 missing from the image"]
    assert _installed_problems(None, sbom, WANT) == [f"{INSTALLED_PATH} is not in the image's top layers"]


def test_what_the_app_phase_installed_is_expected_beside_the_lock() -> None:
    doc = json.loads(SBOM)
    doc["components"].append({"name": "Y", "version": "2.0",
                              "properties": [{"name": PROPERTY_SOURCE, "value": FROM_APP}]})
    sbom = _Sbom.of(json.dumps(doc).encode(), None)
    assert _installed_problems(b'{"x": "1.0", "y": "2.0"}', sbom, WANT) == []
    assert _installed_problems(b'{"x": "1.0"}', sbom, WANT) == ["y 2.0 missing from the image"]
    labels = {**LABELS, "io.stackctl.installed": '{"x": "1.0"}'}
    assert _label_problems(labels, LOCK, WANT, sbom.document) == [
        "label io.stackctl.installed: y 2.0 missing from the label"]


def test_the_sbom_statement_is_required_only_with_a_key_and_carries_the_sbom() -> None:
    sbom = _Sbom.of(SBOM.encode(), None)
    assert _sbom_statement_problems(None, DIGEST, sbom, None) == []
    assert _sbom_statement_problems(None, DIGEST, sbom, KEY) == [
        f"no SBOM statement beside the image (tag {artifact_tag(DIGEST, 'att')})"]
    about = {"subject": [{"digest": {"sha256": DIGEST.removeprefix("sha256:")}}]}
    carrying = Opened(b"", {**about, "predicate": json.loads(SBOM)}, 1, True)
    assert _sbom_statement_problems(carrying, DIGEST, sbom, KEY) == []
    assert _sbom_statement_problems(Opened(b"", {**about, "predicate": {}}, 1, True), DIGEST, sbom, KEY) == [
        "the SBOM statement's predicate is not the SBOM in the image"]


def test_each_statement_must_be_there_signed_and_signed_by_the_key() -> None:
    signed, unsigned, wrong = Opened(b"", {}, 1, True), Opened(b"", {}, 0, False), Opened(b"", {}, 2, False)
    assert _signature_problems(signed, signed, KEY) == []
    assert _signature_problems(unsigned, None, KEY) == ["the provenance statement is unsigned",
                                                        "no SBOM statement to check the signature of"]
    assert _signature_problems(signed, wrong, KEY) == [
        f"the SBOM statement is wrongly signed: no signature verifies with key {'f' * 16}"]


def test_a_check_with_no_problems_is_one_finding_that_passed() -> None:
    assert _findings("labels", [], "fine") == [Finding("labels", True, "fine")]
    assert _findings("labels", ["a", "b"], "fine") == [Finding("labels", False, "a"), Finding("labels", False, "b")]
