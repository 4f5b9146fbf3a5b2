"""Helpers for image tests against the real engine: unique names, cleanup, fixture values of either shape."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest


def address(registry: Any) -> str:
    """host:port of the `registry` fixture (a string, or an object carrying it)."""
    if isinstance(registry, str):
        return registry.split("://", 1)[-1].rstrip("/")
    for attr in ("address", "host", "url"):
        value = getattr(registry, attr, None)
        if isinstance(value, str):
            return value.split("://", 1)[-1].rstrip("/")
    raise TypeError(f"cannot read an address from {registry!r}")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def remove_images(client: Any, repository: str) -> None:
    """Every local image named under `repository`, whatever its tag or digest."""
    for image in client.images.list(name=repository):
        for ref in [*image.tags, *image.attrs.get("RepoDigests", [])]:
            if ref.rsplit("@", 1)[0].rsplit(":", 1)[0] == repository or ref.startswith(repository + "@"):
                with contextlib.suppress(Exception):  # already gone with another of its names
                    client.images.remove(ref, force=True)


def delete_from_registry(registry: Any, repository: str, digest: str) -> None:
    """Drop a pushed manifest (the CI registry runs with deletes enabled); blobs wait for its GC."""
    import requests

    host = address(registry)
    name = repository.split("/", 1)[1] if repository.startswith(host + "/") else repository
    with contextlib.suppress(requests.RequestException):
        requests.delete(f"http://{host}/v2/{name}/manifests/{digest}", timeout=10)


_STAGE_MARKERS = ("/opt/stack", "/tmp/group", "/opt/venv", "stackctl")


def dangling_stage_images(client: Any) -> set[str]:
    """Untagged images left by stackctl's install stages (the classic builder keeps them as cache)."""
    found = set()
    for image in client.images.list(filters={"dangling": True}):
        cmd = " ".join((image.attrs.get("ContainerConfig") or {}).get("Cmd") or [])
        if any(m in cmd for m in _STAGE_MARKERS):
            found.add(image.id)
    return found


def remove_new_stage_images(client: Any, before: set[str]) -> None:
    """Remove the stage images a test module made, so no run leaves cache behind for the next."""
    for _ in range(3):  # a parent becomes dangling once its child is gone
        for image_id in dangling_stage_images(client) - before:
            with contextlib.suppress(Exception):
                client.images.remove(image_id)


@pytest.fixture(scope="module", autouse=True)
def no_stage_images_left(docker_client: Any) -> Iterator[None]:
    """Import into a test module: every stage image its builds leave is removed after it."""
    before = dangling_stage_images(docker_client)
    yield
    remove_new_stage_images(docker_client, before)
