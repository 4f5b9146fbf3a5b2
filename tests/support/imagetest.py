"""Cleanup for image tests against the real engine and registry: every name a test pushed or tagged."""

from __future__ import annotations

import contextlib
from typing import Any

import docker.errors
import requests


def remove_images(client: Any, repository: str) -> None:
    """Every local image named under `repository`, whatever its tag or digest."""
    for image in client.images.list(name=repository):
        for ref in [*image.tags, *image.attrs.get("RepoDigests", [])]:
            if ref.rsplit("@", 1)[0].rsplit(":", 1)[0] == repository or ref.startswith(repository + "@"):
                with contextlib.suppress(docker.errors.NotFound):  # already gone with another of its names
                    client.images.remove(ref, force=True)


def delete_from_registry(registry: str, repository: str, digest: str) -> None:
    """Drop a pushed manifest (the CI registry runs with deletes enabled); blobs wait for its GC."""
    name = repository.removeprefix(registry + "/")
    with contextlib.suppress(requests.RequestException):
        requests.delete(f"http://{registry}/v2/{name}/manifests/{digest}", timeout=10)
