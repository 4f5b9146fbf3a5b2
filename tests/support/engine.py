"""Session fixtures for tests that need the real Docker engine, the local registry and the base image.

`bash .ci/services.sh` starts all three. When one is missing the tests that use it are skipped, except in
CI (environment variable `CI` set and non-empty), where a missing service fails the run instead.

Environment:
    STACKCTL_TEST_BASE_IMAGE  image the tests build on (default `stackctl-base:bookworm`)
    STACKCTL_TEST_REGISTRY    host:port of a plain-HTTP registry without auth (default `127.0.0.1:5000`)
    DOCKER_HOST etc.          honoured by `docker.from_env()` as usual
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any, NoReturn

import docker
import docker.errors
import pytest
import requests

DEFAULT_BASE_IMAGE = "stackctl-base:bookworm"
DEFAULT_REGISTRY = "127.0.0.1:5000"
SERVICES_HINT = "run `bash .ci/services.sh` (as root) to start the Docker engine, registry and base image"


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def unavailable(reason: str) -> NoReturn:
    """Fail in CI, skip elsewhere."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this is an error; {SERVICES_HINT})", pytrace=False)
    pytest.skip(f"{reason}; {SERVICES_HINT}")


def unique_tag(prefix: str) -> str:
    """A fresh name usable both as an image tag and as a repository path component, e.g. `engine-3f2a...`."""
    clean = re.sub(r"[^a-z0-9]+", "-", prefix.lower()).strip("-") or "t"
    return f"{clean[:100]}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A `docker.DockerClient` for the engine in the environment, already pinged."""
    try:
        client = docker.from_env(timeout=120)
    except docker.errors.DockerException as exc:
        unavailable(f"Docker engine unreachable: {exc}")
    try:
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        client.close()
        unavailable(f"Docker engine at {client.api.base_url} does not answer ping: {exc}")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: Any) -> str:
    """Name of the base image (`STACKCTL_TEST_BASE_IMAGE`), checked to exist in the engine."""
    name = os.environ.get("STACKCTL_TEST_BASE_IMAGE") or DEFAULT_BASE_IMAGE
    try:
        docker_client.images.get(name)
    except docker.errors.ImageNotFound:
        unavailable(f"base image {name!r} not found in the Docker engine")
    except docker.errors.APIError as exc:
        unavailable(f"cannot inspect base image {name!r}: {exc}")
    return name


@pytest.fixture(scope="session")
def registry() -> str:
    """`host:port` of the test registry (`STACKCTL_TEST_REGISTRY`), checked to answer `GET /v2/`."""
    address = os.environ.get("STACKCTL_TEST_REGISTRY") or DEFAULT_REGISTRY
    url = f"http://{address}/v2/"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        unavailable(f"registry at {url} answered HTTP {exc.code}; expected 200 (no auth)")
    except (urllib.error.URLError, OSError) as exc:
        unavailable(f"registry at {url} unreachable: {exc}")
    if status != 200:
        unavailable(f"registry at {url} answered HTTP {status}; expected 200")
    return address
