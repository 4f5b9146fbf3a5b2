"""The engines the image flow is tried on, as a parametrised fixture: Debian 12's 20.10 (the environment's
engine), and Docker 26.1 with buildx on the overlay2 store and on the containerd image store (.ci/engine26.sh).

Each parameter yields the engine's address; a test runs stackctl with `DOCKER_HOST` set to it. An engine that is
not up is skipped, except in CI (see tests/support/engine.py).

Environment:
    STACKCTL_TEST_ENGINE_D26   the overlay2 engine (default unix:///run/stackctl-d26.sock)
    STACKCTL_TEST_ENGINE_D26C  the containerd-store engine (default unix:///run/stackctl-d26c.sock)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import docker
import docker.errors
import pytest
import requests

from tests.support.engine import DEFAULT_BASE_IMAGE, unavailable


@dataclass(frozen=True)
class EngineCase:
    name: str  # "20.10", "26-overlay2", "26-containerd"
    host: str  # DOCKER_HOST
    containerd_store: bool


def _engines() -> dict[str, EngineCase]:
    return {
        "20.10": EngineCase("20.10", os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock", False),
        "26-overlay2": EngineCase("26-overlay2", os.environ.get("STACKCTL_TEST_ENGINE_D26")
                                  or "unix:///run/stackctl-d26.sock", False),
        "26-containerd": EngineCase("26-containerd", os.environ.get("STACKCTL_TEST_ENGINE_D26C")
                                    or "unix:///run/stackctl-d26c.sock", True),
    }


def engine_up(engine: EngineCase) -> EngineCase:
    """The engine, checked to answer and to hold the base image; skipped (failed in CI) otherwise."""
    base = os.environ.get("STACKCTL_TEST_BASE_IMAGE") or DEFAULT_BASE_IMAGE
    try:
        client = docker.DockerClient(base_url=engine.host, timeout=30)
        try:
            client.images.get(base)
        finally:
            client.close()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        unavailable(f"engine {engine.name} at {engine.host} is not usable: {exc}")
    return engine


@pytest.fixture(params=["20.10", "26-overlay2", "26-containerd"])
def any_engine(request: pytest.FixtureRequest) -> EngineCase:
    """Each engine in turn."""
    return engine_up(_engines()[request.param])


@pytest.fixture(params=["26-overlay2", "26-containerd"])
def engine26(request: pytest.FixtureRequest) -> EngineCase:
    """Each Docker 26 engine in turn (both image stores)."""
    return engine_up(_engines()[request.param])
