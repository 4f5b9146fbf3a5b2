"""The layout a build leaves: one image named, the previous build's blobs that image does not use removed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from stackctl.errors import InputError
from stackctl.image.artefact import OCI_MANIFEST, read_layout, settle_layout


def _blob(layout: Path, data: bytes) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def _image(layout: Path, layers: list[bytes], tag: str) -> dict[str, object]:
    config = _blob(layout, json.dumps({"tag": tag}).encode())
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {**config, "mediaType": "application/vnd.oci.image.config.v1+json"},
                "layers": [{**_blob(layout, b), "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip"}
                           for b in layers]}
    return {**_blob(layout, json.dumps(manifest).encode()), "mediaType": OCI_MANIFEST}


def test_settle_keeps_the_built_image_and_drops_the_previous_ones_blobs(tmp_path: Path) -> None:
    layout = tmp_path / "oci"
    layout.mkdir()
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    old = _image(layout, [b"base", b"torch", b"torchada 0.1.103"], "old")
    new = _image(layout, [b"base", b"torch", b"torchada 0.1.102"], "new")
    # what the exporter leaves: the seeded blobs, and an index naming the new image (here also the old one)
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [old, new, new]}))

    artefact = settle_layout(layout, str(new["digest"]), made_by="test")

    assert artefact.digest == new["digest"]
    assert json.loads((layout / "index.json").read_text())["manifests"] == [new]
    left = {f"sha256:{p.name}" for p in (layout / "blobs" / "sha256").iterdir()}
    assert left == {artefact.digest, artefact.config.digest, *(b.digest for b in artefact.layers)}
    assert f"sha256:{hashlib.sha256(b'torchada 0.1.103').hexdigest()}" not in left
    assert read_layout(layout).digest == new["digest"]  # whole: publish reads it as it is


def test_settle_refuses_a_layout_that_lacks_the_image(tmp_path: Path) -> None:
    layout = tmp_path / "oci"
    layout.mkdir()
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    old = _image(layout, [b"base"], "old")
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [old]}))
    with pytest.raises(InputError, match="does not name the image built"):
        settle_layout(layout, "sha256:" + "0" * 64)
    assert (layout / "blobs" / "sha256" / str(old["digest"]).split(":")[1]).exists()  # nothing removed
