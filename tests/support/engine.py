"""Session fixtures for tests that need the real Docker engine, the local registry and the base image.

`bash .ci/services.sh` starts all three. When one is missing the tests that use it are skipped, except in
CI (environment variable `CI` set and non-empty), where a missing service fails the run instead.

The classic builder keeps every multi-stage build's stage images as untagged cache. The session removes the
ones its builds left, at its end, and only when no other test session shares the engine: another run (in
CI there is one; on a developer's machine there may be several) may be building on those very images, the
cache being shared. Each session holds a shared lock on `LOCK` while it runs and tries for it alone at the end.

Environment:
    STACKCTL_TEST_BASE_IMAGE  image the tests build on (default `stackctl-base:bookworm`)
    STACKCTL_TEST_REGISTRY    host:port of a plain-HTTP registry without auth (default `127.0.0.1:5000`)
    DOCKER_HOST etc.          honoured by `docker.from_env()` as usual
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import docker
import docker.errors
import pytest
import requests

DEFAULT_BASE_IMAGE = "stackctl-base:bookworm"
DEFAULT_REGISTRY = "127.0.0.1:5000"
SERVICES_HINT = "run `bash .ci/services.sh` (as root) to start the Docker engine, registry and base image"
LOCK = Path(tempfile.gettempdir()) / "stackctl-tests-engine.lock"


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
        with _engine_shared() as alone:
            before = dangling_stage_images(client)
            yield client
            if alone():
                remove_new_stage_images(client, before)
    finally:
        client.close()


@contextlib.contextmanager
def _engine_shared() -> Iterator[Callable[[], bool]]:
    """A shared lock on the engine for the session; yields a test of whether this session is now alone."""
    fd = os.open(LOCK, os.O_RDONLY | os.O_CREAT, 0o644)  # flock needs no write access: any user may share it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)

        def alone() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # another session is running: it cleans up when it is the last
            return True

        yield alone
    finally:
        os.close(fd)


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
    for _ in range(3):  # a parent becomes dangling once its child is gone
        for image_id in dangling_stage_images(client) - before:
            with contextlib.suppress(docker.errors.APIError):  # in use, or already gone with its child
                client.images.remove(image_id)


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


class Cleanup:
    """What a test leaves on the shared engine and registry, named as it goes: every local image under each
    repository, and each manifest pushed, removed when the test ends however it ends."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.repositories: list[str] = []
        self.manifests: list[tuple[str, str, str]] = []

    def images(self, repository: str) -> str:
        """Remove every local image under `repository` at the end; gives `repository` back."""
        self.repositories.append(repository)
        return repository

    def manifest(self, registry: str, repository: str, digest: str | None) -> None:
        """Delete the manifest `repository@digest` from `registry` at the end (a None digest: nothing pushed)."""
        if digest:
            self.manifests.append((registry, repository, digest))

    def run(self) -> None:
        from tests.support.imagetest import delete_from_registry, remove_images

        for repository in self.repositories:
            remove_images(self.client, repository)
        for registry, repository, digest in self.manifests:
            delete_from_registry(registry, repository, digest)


@pytest.fixture
def cleanup(docker_client: Any) -> Iterator[Cleanup]:
    """The images and manifests a test makes, removed after it (instead of a try/finally in each test)."""
    done = Cleanup(docker_client)
    try:
        yield done
    finally:
        done.run()
