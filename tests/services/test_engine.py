"""The services from `.ci/services.sh` work end to end: the base image runs Python with venv, and an image
built on it with the classic builder survives a push to the registry and a pull back by digest."""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from tests.support.engine import unique_tag
from tests.support.imagetest import delete_from_registry

pytestmark = pytest.mark.integration


def _stream_errors(lines: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """Drain a decoded progress stream; return (error messages, aux records)."""
    errors: list[str] = []
    aux: list[dict[str, Any]] = []
    for line in lines:
        if "error" in line or "errorDetail" in line:
            errors.append(str(line.get("error") or line.get("errorDetail")))
        if isinstance(line.get("aux"), dict):
            aux.append(line["aux"])
    return errors, aux


def test_base_image_runs_python_with_venv(docker_client: Any, base_image: str) -> None:
    container = docker_client.containers.create(
        base_image,
        ["python3", "-c", "import sys, venv; print(sys.version_info[:2])"],
        network_disabled=True,
    )
    try:
        container.start()
        result = container.wait(timeout=120)
        output = container.logs(stdout=True, stderr=True).decode().strip()
        assert result["StatusCode"] == 0, output
        major, minor = ast.literal_eval(output)
        assert major == 3, output
        assert minor >= 11, output
    finally:
        container.remove(force=True)


def test_build_push_pull_by_digest(docker_client: Any, base_image: str, registry: str, tmp_path: Path) -> None:
    name = f"stackctl-test/{unique_tag('engine')}"
    repository = f"{registry}/{name}"
    tag = "v1"
    marker = unique_tag("marker")
    (tmp_path / "marker.txt").write_text(f"{marker}\n")
    (tmp_path / "Dockerfile").write_text(
        f"FROM {base_image}\n"
        "COPY marker.txt /stackctl-test/marker.txt\n"
        "RUN python3 -c \"import pathlib; print(pathlib.Path('/stackctl-test/marker.txt').read_text())\""
        " > /stackctl-test/seen.txt\n"
        f'LABEL org.stackctl.test="{marker}"\n'
    )
    built_id: str | None = None
    digest: str | None = None
    try:
        image, _build_log = docker_client.images.build(
            path=str(tmp_path),
            tag=f"{repository}:{tag}",
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none",
        )
        built_id = image.id
        assert image.labels.get("org.stackctl.test") == marker

        errors, aux = _stream_errors(docker_client.api.push(repository, tag=tag, stream=True, decode=True))
        assert not errors, errors
        digests = [a["Digest"] for a in aux if a.get("Tag") == tag and "Digest" in a]
        assert len(digests) == 1, aux
        digest = digests[0]
        assert digest.startswith("sha256:")

        docker_client.images.remove(f"{repository}:{tag}")
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(built_id)

        errors, _ = _stream_errors(docker_client.api.pull(repository, tag=digest, stream=True, decode=True))
        assert not errors, errors
        pulled = docker_client.images.get(f"{repository}@{digest}")
        assert pulled.id == built_id
        assert f"{repository}@{digest}" in pulled.attrs["RepoDigests"]

        seen = docker_client.containers.run(
            pulled.id, ["cat", "/stackctl-test/seen.txt"], remove=True, network_disabled=True
        )
        assert seen.decode().strip() == marker
    finally:
        for ref in (f"{repository}@{digest}" if digest else None, f"{repository}:{tag}", built_id):
            if ref:
                with contextlib.suppress(docker.errors.NotFound):
                    docker_client.images.remove(ref, force=True)
        if digest:  # the registry has delete enabled; drop the manifest so test runs do not pile up
            delete_from_registry(registry, repository, digest)
