"""One reading of an image reference for the registry client, the engine's check and `stackctl diff`."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackctl.base.imageref import ImageName, is_loopback_host, looks_like_image, names_registry, parse_image_ref
from stackctl.engine.registry import RemoteRef, parse_ref


@pytest.mark.parametrize(("ref", "parsed"), [
    ("ubuntu", ImageName(None, "ubuntu", None, None)),
    ("library/ubuntu:24.04", ImageName(None, "library/ubuntu", "24.04", None)),
    ("127.0.0.1:5000/stackctl/e2e:py3.11", ImageName("127.0.0.1:5000", "stackctl/e2e", "py3.11", None)),
    ("127.0.0.1:5000/stackctl/e2e", ImageName("127.0.0.1:5000", "stackctl/e2e", None, None)),
    ("localhost/x@sha256:" + "a" * 64, ImageName("localhost", "x", None, "sha256:" + "a" * 64)),
    ("reg.example/a/b:t@sha256:" + "b" * 64, ImageName("reg.example", "a/b", "t", "sha256:" + "b" * 64)),
    ("name:", ImageName(None, "name", "", None)),  # a bare colon: a tag no one accepts, not no tag
])
def test_an_image_reference_is_taken_apart_once(ref: str, parsed: ImageName) -> None:
    assert parse_image_ref(ref) == parsed


def test_the_registry_reads_host_name_and_reference_from_it() -> None:
    assert parse_ref("ubuntu:24.04") is None  # no registry host: the engine's or the default registry's
    assert parse_ref("127.0.0.1:5000/s/e2e") == RemoteRef("127.0.0.1:5000", "s/e2e", "latest")
    assert parse_ref("127.0.0.1:5000/s/e2e:t") == RemoteRef("127.0.0.1:5000", "s/e2e", "t")
    digest = "sha256:" + "c" * 64
    assert str(parse_ref(f"localhost:5000/s/e2e@{digest}")) == f"localhost:5000/s/e2e@{digest}"


@pytest.mark.parametrize("host", ["localhost", "localhost:5000", "LocalHost:5000", "127.0.0.1", "127.0.0.1:5000",
                                  "127.8.9.10:443", "[::1]:5000", "[::1]", "::1"])
def test_a_loopback_registry_is_known_as_one_in_every_spelling(host: str) -> None:
    # plain http for these, as the engine does; the registry client and skopeo read the host the same way
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["reg.example:5000", "reg.example", "10.0.0.1:5000", "[fe80::1]:5000", "fe80::1",
                                  "[2001:db8::1]", "localhost.example:5000", "[::1", "[::1]5000", "128.0.0.1:5000", ""])
def test_a_registry_elsewhere_is_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)


def test_a_repository_is_in_a_registry_only_when_its_first_part_is_a_host() -> None:
    # the build's cache and verify's base-image read go to a registry only then, never to a name on the engine
    assert names_registry("127.0.0.1:5000/s/e2e") and names_registry("localhost/x") and names_registry("reg.example/a")
    assert not names_registry("library/ubuntu") and not names_registry("ubuntu") and not names_registry("reg.example")


def test_diff_tells_an_image_from_a_profile_or_a_lock(tmp_path: Path) -> None:
    assert looks_like_image("127.0.0.1:5000/s/e2e:t") and looks_like_image("e2e@sha256:" + "d" * 64)
    assert not looks_like_image("stacks/e2e.toml") and not looks_like_image("e2e.lock@HEAD~1")
    assert not looks_like_image("e2e")  # a stack name
    named = tmp_path / "a:b"
    named.write_text("")
    assert not looks_like_image(str(named))  # a file that exists is the file
