"""verify's findings read as sentences: a missing label is said missing once, an empty target is named."""

from __future__ import annotations

import json
from typing import Any

from stackctl.image.layout import canonical
from stackctl.resolve.lock import Lock, LockedFile, LockedPin
from stackctl.verify.remote import sha256
from stackctl.verify.verification import verify_image


class Unlabelled:
    """A registry holding one image with no labels and no layers: the one `verify` is pointed at."""

    def __init__(self) -> None:
        self.config = canonical({"config": {"Labels": {}}, "rootfs": {"diff_ids": []}})
        self.manifest_doc = canonical({"schemaVersion": 2, "config": {"digest": sha256(self.config)}, "layers": []})

    def manifest(self, repository: str, reference: str) -> tuple[str, bytes] | None:
        return (sha256(self.manifest_doc), self.manifest_doc) if reference == "t" else None

    def blob(self, repository: str, digest: str) -> bytes:
        return self.config

    def layer(self, repository: str, digest: str) -> tuple[str, int]:
        raise AssertionError("no layers")

    def layer_files(self, repository: str, digest: str, wanted: tuple[str, ...]) -> dict[str, bytes]:
        return {}

    def put_blob(self, repository: str, data: bytes) -> str:
        raise AssertionError("verify writes nothing")

    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> str:
        raise AssertionError("verify writes nothing")

    def referrers(self, repository: str, digest: str) -> list[dict[str, Any]] | None:
        return []


def test_an_image_without_labels_is_said_so_without_none_or_quotes() -> None:
    lock = Lock("s", "d", (LockedPin("a", "1", "public", (LockedFile("cp310-linux_x86_64", "a-1-py3-none-any.whl",
                                                                     "http://i.test/a.whl", "0" * 64),)),))
    result = verify_image(Unlabelled(), "r.test/s", "t", lock)
    details = [f.detail for f in result.findings if f.check == "labels"]
    assert "label io.stackctl.lock-digest is missing" in details  # said once, as missing, not `is None`
    assert not [d for d in details if d.startswith("label io.stackctl.lock-digest is ")
                and not d.endswith("missing")]
    text = json.dumps(details)
    assert "None" not in text and "''" not in text, details
    assert any(d.startswith("the image names no target (label ") for d in details), details


def test_a_reference_the_registry_does_not_hold_is_a_failed_check_named_as_given() -> None:
    """The registry answered: the image is not there, which is the check failing (exit 1), not the service
    (exit 3); the reference is said as the user wrote it, `@` for a digest."""
    import pytest

    from stackctl.errors import CheckFailed

    gone = "sha256:" + "0" * 64
    with pytest.raises(CheckFailed, match=f"^r.test/s@{gone}: not in the registry"):
        verify_image(Unlabelled(), "r.test/s", gone, None)
    with pytest.raises(CheckFailed, match=r"^r\.test/s:v9: not in the registry"):
        verify_image(Unlabelled(), "r.test/s", "v9", None)
