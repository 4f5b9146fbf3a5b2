# LOCAL STAND-IN, NOT COMMITTED: the real module comes from another branch.
from __future__ import annotations
import os
from collections.abc import Iterator
from typing import Any
import pytest

def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)

@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    import docker
    try:
        c = docker.from_env(); c.ping()
    except Exception as exc:
        _unavailable(f"no Docker engine: {exc}")
    yield c
    c.close()

@pytest.fixture(scope="session")
def base_image(docker_client: Any) -> str:
    import docker.errors
    try:
        docker_client.images.get("stackctl-base:bookworm")
    except docker.errors.ImageNotFound:
        _unavailable("no stackctl-base:bookworm")
    return "stackctl-base:bookworm"
