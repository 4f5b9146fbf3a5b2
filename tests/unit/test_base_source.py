"""Which images a Dockerfile builds FROM, and the name under which the containerd store's copy of one is taken
without asking a registry (engine/buildx.py `BuildxEngine.base_contexts`)."""

from __future__ import annotations

from stackctl.engine.buildx import from_images, names_host, source_name

DIGEST = "sha256:" + "e4" * 32


def test_the_images_a_dockerfile_builds_from_not_its_stages_nor_scratch() -> None:
    text = ("ARG BASE=stackctl-base:bookworm\nFROM $BASE AS tools\nRUN a \\\n && b\n"
            "FROM tools AS group-a\nFROM --platform=linux/amd64 ${BASE}\nFROM scratch AS empty\n"
            "FROM ${STACK_IMAGE}\nFROM ${UNSET}\nARG LATE=x\nFROM other:1 as Tools2\nFROM tools2\n")
    assert from_images(text, {"STACK_IMAGE": "127.0.0.1:5000/t/app:1-stack"}) == [
        "stackctl-base:bookworm", "127.0.0.1:5000/t/app:1-stack", "other:1"]


def test_a_base_tagged_short_is_taken_under_its_registrys_name_by_digest() -> None:
    tags = ["stackctl-base:bookworm", "127.0.0.1:5000/stackctl-base:bookworm"]
    digests = [f"127.0.0.1:5000/stackctl-base@{DIGEST}", f"stackctl-base@{DIGEST}"]
    assert source_name("stackctl-base:bookworm", tags, digests) == f"127.0.0.1:5000/stackctl-base:bookworm@{DIGEST}"
    assert source_name(f"stackctl-base@{DIGEST}", tags, digests) == f"127.0.0.1:5000/stackctl-base:bookworm@{DIGEST}"
    # a name that names its registry is that registry's already; an image never pushed or pulled has no digest
    assert source_name("127.0.0.1:5000/stackctl-base:bookworm", tags, digests) is None
    assert source_name("mybase:1", ["mybase:1"], []) is None
    assert source_name("python:3.11", ["python:3.11"], [f"python@{DIGEST}"]) is None  # Docker Hub's own: as it is


def test_what_names_a_registry_host() -> None:
    assert names_host("127.0.0.1:5000/x") and names_host("registry.example/x/y:1") and names_host("localhost/x")
    assert not names_host("stackctl-base:bookworm") and not names_host("library/python") and not names_host("x")
