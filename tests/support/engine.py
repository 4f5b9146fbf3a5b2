"""Fixtures for the real Docker engine, local registry and base image that .ci/services.sh starts.

A stand-in until the services branch lands its own version of this module (same fixture names): with
`CI` set a missing service fails the test, otherwise it skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

REGISTRY = os.environ.get("STACKCTL_TEST_REGISTRY", "127.0.0.1:5000")
BASE_IMAGE = os.environ.get("STACKCTL_TEST_BASE_IMAGE", "stackctl-base:bookworm")


def _missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI is set: integration services are required; run bash .ci/services.sh)")
    pytest.skip(what)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    try:
        import docker

        client = docker.from_env(version="auto")
        client.ping()
    except Exception as exc:
        _missing(f"no Docker engine: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: Any) -> str:
    import docker.errors

    try:
        docker_client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        _missing(f"base image {BASE_IMAGE} not built")
    return BASE_IMAGE


@pytest.fixture(scope="session")
def registry() -> str:
    import requests

    try:
        requests.get(f"http://{REGISTRY}/v2/", timeout=5).raise_for_status()
    except requests.RequestException as exc:
        _missing(f"no registry on {REGISTRY}: {exc}")
    return REGISTRY
