"""Bad output paths on commands that talk to the engine first: one error line, exit 2, nothing written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result

pytestmark = pytest.mark.integration


def test_inventory_into_a_directory_is_one_line(cli: Callable[..., Result], docker_client: Any, base_image: Any,
                                                tmp_path: Path) -> None:
    image = base_image if isinstance(base_image, str) else str(base_image.tags[0] if base_image.tags else base_image.id)
    (tmp_path / "inv").mkdir()
    r = cli("inventory", image, "--out", str(tmp_path / "inv"))
    assert r.code == 2
    assert r.err.strip().splitlines() == [f"error: {tmp_path / 'inv'}: cannot write the inventory: Is a directory"]
    assert list((tmp_path / "inv").iterdir()) == []
