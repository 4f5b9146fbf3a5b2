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


def test_a_layout_left_to_be_made_is_copied_out_once_from_the_image_the_build_made(tmp_path: Path) -> None:
    """A build whose engine writes no layout records it as pending; the first command that needs it (publish,
    verify --rebuild) copies the image the build made out of the engine, and the record names it from then on."""
    import json

    import pytest

    from stackctl.errors import InputError
    from stackctl.image.artefact import Artefact, read_layout
    from stackctl.image.build import PENDING, layout_pending, made_artefact
    from stackctl.image.buildlog import ImageFacts
    from tests.fuzz.targets import _layout_seed

    class Engine:
        def __init__(self, holds: bool) -> None:
            self.holds = holds
            self.copied: list[str] = []

        def facts(self, ref: str) -> ImageFacts | None:
            return ImageFacts(ref, (), (), 1) if self.holds else None

        def layout(self, image: str, dest: Path) -> Artefact:
            self.copied.append(image)
            _layout_seed(dest)
            return read_layout(dest, made_by="a copy of the engine's image")

    record = tmp_path / "s.build.json"
    image_id = "sha256:" + "a" * 64
    pending = {"image_id": image_id, "layout": str(tmp_path / "s.oci"), "engine": "ssh://builder@host"}
    record.write_text(json.dumps({"image_id": image_id, "labels": {"io.stackctl.source-date-epoch": "315532800"},
                                  "artefact": None, PENDING: pending}))
    assert layout_pending(record) == (True, "ssh://builder@host")
    with pytest.raises(InputError, match="no longer holds"):
        made_artefact(record, Engine(holds=False))  # type: ignore[arg-type]
    engine = Engine(holds=True)
    made = made_artefact(record, engine)  # type: ignore[arg-type]
    saved = json.loads(record.read_text())
    assert engine.copied == [image_id] and saved["artefact"]["digest"] == made.digest and PENDING not in saved
    assert layout_pending(record) == (False, None)
    assert made_artefact(record, engine).digest == made.digest and engine.copied == [image_id]  # type: ignore[arg-type]
