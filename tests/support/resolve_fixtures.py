"""Fixtures the resolve tests share: a vendor index and a public one on loopback, a profile over both,
and an environment with no cache, credentials or pip index of the machine's. Import them by name into
a test module: `from tests.support.resolve_fixtures import isolated, musa_index, profile_path, public_index`
gives the fixtures `musa`, `public` and `profile`, and makes `isolated` autouse there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.index_server import IndexServer, musa_profile, populate_musa, populate_public


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache" / "http"))
    for var in ("PIP_INDEX_URL", "MUSA_TEST_USER", "MUSA_TEST_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


@pytest.fixture(name="musa")
def musa_index(tmp_path: Path) -> Iterator[IndexServer]:
    server = IndexServer()
    populate_musa(server, tmp_path / "wheels")
    with server:
        yield server


@pytest.fixture(name="public")
def public_index(tmp_path: Path) -> Iterator[IndexServer]:
    server = IndexServer()
    populate_public(server, tmp_path / "wheels")
    with server:
        yield server


@pytest.fixture(name="profile")
def profile_path(tmp_path: Path) -> Path:
    return musa_profile(tmp_path / "stacks")
