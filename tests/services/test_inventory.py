"""`stackctl inventory` against the real Docker engine and the CI base image, then `abi` against it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Cli
from tests.support.elf_fixtures import EXT, Libs, Wheels
from tests.support.engine import Cleanup, unique_tag

# The gcc-built libraries and wheels, as fixtures (session-scoped, built once per run).
pytest_plugins = ("tests.support.elf_plugin",)

pytestmark = pytest.mark.integration


def test_inventory_of_the_base_image_then_abi(cli: Cli, docker_client: Any, base_image: str,
                                              stack_wheels: Wheels, tmp_path: Path) -> None:
    image = base_image
    out = tmp_path / "base.inventory.json"
    r = cli("inventory", image, "--out", str(out), "--json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    assert summary["glibc"].startswith("GLIBC_2.") and summary["glibcxx"].startswith("GLIBCXX_3.4.")
    data = json.loads(out.read_text())
    assert data["image"] == image and data["arch"] == "x86_64"
    sonames = {lib["soname"]: lib["path"] for lib in data["libraries"]}
    assert sonames["libc.so.6"].endswith("/libc.so.6")
    assert "libstdc++.so.6" in sonames
    assert "GLIBC_2.34" in data["versions"]["libc.so.6"]
    assert any(v.startswith("GLIBCXX_3.4.") for v in data["versions"]["libstdc++.so.6"])
    assert any(d.endswith("x86_64-linux-gnu") for d in data["search_dirs"])
    # The inventory run leaves no container behind (others may share the engine: look at ours only).
    assert docker_client.containers.list(all=True, filters={"label": "stackctl=inventory"}) == []

    # abi without an engine from here on: the inventory file stands in for the image.
    args = [str(stack_wheels.core), str(stack_wheels.kern), str(stack_wheels.ext_v2), "--inventory", str(out)]
    r = cli("abi", *args, "--json")
    assert r.code == 0, r.err
    rep = json.JSONDecoder().raw_decode(r.out)[0]["reports"][0]
    where = {(x["file"], x["needed"]): x for x in rep["resolutions"]}
    assert where[(EXT, "libc.so.6")]["where"] == "image"
    assert where[(EXT, "libdl.so.2")]["where"] == "image"
    assert where[("corelib/lib/libcore.so.1", "libstdc++.so.6")]["where"] == "image"
    assert where[(EXT, "libcore.so.1")]["where"] == "runpath"  # linked with --enable-new-dtags
    ceilings = {c["family"]: c for c in rep["ceilings"]}
    assert ceilings["GLIBCXX"]["provided"] == summary["glibcxx"]

    # A library the image lacks fails, naming it and the file.
    r = cli("abi", str(stack_wheels.core), str(stack_wheels.ext_v1), "--inventory", str(out))
    assert r.code == 1 and "libfakepython.so.1.0 (needed by" in r.err and EXT in r.err


def test_inventory_of_a_missing_image(cli: Cli, docker_client: Any, tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    r = cli("inventory", "stackctl-no-such-image:never", "--out", str(out))
    assert r.code == 2 and "is not on the engine" in r.err
    assert not out.exists()


def test_inventory_sees_ld_library_path_and_ld_so_conf(cli: Cli, docker_client: Any, cleanup: Cleanup,
                                                       base_image: str, elf_libs: Libs, stack_wheels: Wheels,
                                                       tmp_path: Path) -> None:
    """A vendor runtime outside the default directories: one on LD_LIBRARY_PATH, one in ld.so.conf.d."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "libkern.so").write_bytes(elf_libs.kern.read_bytes())
    (ctx / "libfakepython.so.1.0").write_bytes(elf_libs.fakepython.read_bytes())
    (ctx / "Dockerfile").write_text(
        f"FROM {base_image}\n"
        "COPY libkern.so /opt/vendor/lib/libkern.so\n"
        "COPY libfakepython.so.1.0 /opt/py/lib/libfakepython.so.1.0\n"
        "RUN echo /opt/py/lib > /etc/ld.so.conf.d/py.conf && ldconfig\n"
        "ENV LD_LIBRARY_PATH=/opt/vendor/lib\n")
    repository = cleanup.images(f"stackctl-test/{unique_tag('abi-vendor')}")  # concurrent runs share the engine
    tag = f"{repository}:latest"
    docker_client.images.build(path=str(ctx), tag=tag, rm=True, forcerm=True)
    out = tmp_path / "vendor.json"
    r = cli("inventory", tag, "--out", str(out))
    assert r.code == 0, r.err
    data = json.loads(out.read_text())
    paths = {lib["path"] for lib in data["libraries"]}
    assert "/opt/vendor/lib/libkern.so" in paths and "/opt/py/lib/libfakepython.so.1.0" in paths
    assert data["search_dirs"][0] == "/opt/vendor/lib"
    # deep_ext post1 needs libfakepython.so.1.0: the image has it now.
    r = cli("abi", str(stack_wheels.core), str(stack_wheels.ext_v1), "--inventory", str(out), "--json")
    assert r.code == 0, r.err
    rows = json.JSONDecoder().raw_decode(r.out)[0]["reports"][0]["resolutions"]
    row = next(x for x in rows if x["needed"] == "libfakepython.so.1.0")
    assert row["where"] == "image" and row["detail"] == "/opt/py/lib/libfakepython.so.1.0"
