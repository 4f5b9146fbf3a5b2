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
