"""An engine's image copied into an OCI image layout by skopeo, through the engine's API: on Debian 12's 20.10
and on Docker 26.1 with either image store, the same image gives the same manifest digest twice."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stackctl.engine.ocicopy import copy_to_layout
from stackctl.errors import ServiceError
from stackctl.image.artefact import check_blobs, read_layout
from tests.support.engine import DEFAULT_BASE_IMAGE

if TYPE_CHECKING:
    from tests.support.engines import EngineCase

pytestmark = pytest.mark.integration


def test_two_copies_of_one_image_are_one_layout(any_engine: EngineCase, tmp_path: Path) -> None:
    first = copy_to_layout(DEFAULT_BASE_IMAGE, tmp_path / "a", host=any_engine.host)
    second = copy_to_layout(DEFAULT_BASE_IMAGE, tmp_path / "b", host=any_engine.host)
    assert first.digest == second.digest and first.layers and check_blobs(first) == []
    # copied again over the first: replaced whole, still one image, nothing left beside it
    again = copy_to_layout(DEFAULT_BASE_IMAGE, tmp_path / "a", host=any_engine.host)
    assert again.digest == first.digest and read_layout(tmp_path / "a").digest == first.digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_an_image_the_engine_lacks_is_one_error_and_no_layout(any_engine: EngineCase, tmp_path: Path) -> None:
    with pytest.raises(ServiceError, match=r"stackctl-test/none:x"):
        copy_to_layout("stackctl-test/none:x", tmp_path / "a", host=any_engine.host)
    assert list(tmp_path.iterdir()) == []


def test_a_rebuilds_copy_keeps_the_layers_the_previous_layout_has(any_engine: EngineCase, tmp_path: Path) -> None:
    """The copy after one layer moved gzips that layer alone, and gives the digest a copy from scratch gives."""
    import io

    import docker

    from tests.support.engine import unique_tag

    client = docker.DockerClient(base_url=any_engine.host)
    tag = f"stackctl-test/ocicopy:{unique_tag('k')}"
    dockerfile = f"FROM {DEFAULT_BASE_IMAGE}\nRUN echo {tag} > /moved\n".encode()
    client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True)
    try:
        base = copy_to_layout(DEFAULT_BASE_IMAGE, tmp_path / "build", host=any_engine.host)
        kept = copy_to_layout(tag, tmp_path / "build", host=any_engine.host)  # over the base's layout
        fresh = copy_to_layout(tag, tmp_path / "fresh", host=any_engine.host)
    finally:
        client.images.remove(tag, force=True)
        client.close()
    assert kept.digest == fresh.digest and check_blobs(kept) == []
    assert kept.layers[: len(base.layers)] == base.layers and len(kept.layers) == len(base.layers) + 1
    if not any_engine.containerd_store:  # its export keeps gzip layers: skopeo reads it whole
        assert f"{len(base.layers)} layers kept from the previous layout" in kept.made_by
        assert "kept" not in fresh.made_by
