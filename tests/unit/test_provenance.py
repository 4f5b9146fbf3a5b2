"""Reproducibility and provenance as values: layer dates, the rewritten config, the SBOM, the statement."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from stackctl.base.files import sha256_file
from stackctl.errors import InputError
from stackctl.image.context import write_context
from stackctl.image.layout import canonical, reproducible_config
from stackctl.image.render import (
    EPOCH_FLOOR,
    BuildPlan,
    InstallItem,
    LayerGroup,
    load_templates,
    render,
)
from stackctl.image.sbom import SbomEntry, entries, licences, make_sbom
from stackctl.publish import attest
from stackctl.verify.remote import artifact_tag
from stackctl.verify.sign import statement_materials
from tests.support.wheels import build_wheel

T1 = "2026-03-01T10:00:00Z"  # 1772359200
T2 = "2026-04-01T10:00:00+00:00"  # 1775037600


def item(name: str, version: str, upload: str | None = None, index: str = "public") -> InstallItem:
    return InstallItem(name, version, f"{name}-{version}-py3-none-any.whl", "ab" * 32,
                       f"http://127.0.0.1:9/files/{name}-{version}-py3-none-any.whl", index, upload)


def plan(groups: tuple[LayerGroup, ...], sbom: str = "") -> BuildPlan:
    return BuildPlan("s", "cp311-linux_x86_64", "stackctl-base:bookworm", "sha256:" + "1" * 64, groups, "{}",
                     (("io.stackctl.stack", "s"),), "3.11", sbom=sbom)


def test_a_layer_is_dated_by_its_newest_wheel_so_a_pin_change_moves_only_its_own_group() -> None:
    core = LayerGroup("train-core", "vendor", (item("a", "1", T1), item("b", "1", T2)))
    top = LayerGroup("pin-top", "public", (item("top", "1"),))
    assert core.epoch == 1775037600 and top.epoch == EPOCH_FLOOR
    moved = LayerGroup("pin-top", "public", (item("top", "2", "2026-05-01T00:00:00Z"),))
    before = render(plan((core, top)), load_templates()).dockerfile
    after = render(plan((core, moved)), load_templates()).dockerfile
    stage = before.split("FROM tools AS layer01-train-core\n", 1)[1].split("\nFROM ", 1)[0]
    assert stage in after  # the vendor stage's text, its date included, does not move
    assert f"-exec touch -h -d @{core.epoch} {{}} +" in stage and "--no-compile" in stage
    assert "-name __pycache__ -prune -exec rm -rf {} +" in stage and "chown -hR 0:0 /export" in stage
    assert ("-path '*.dist-info/RECORD' -exec sh -c 'for f; do grep -v \"[.]dist-info/uv_cache[.]json,\" \"$f\" "
            "| LC_ALL=C sort -o \"$f\"; done'") in stage
    assert "find /export -path '*.dist-info/uv_cache.json' -delete" in stage
    # Copies are of whole trees onto /: the builder keeps the times of directories it is given.
    assert "COPY --from=layer01-train-core /export/ /" in before and "COPY rootfs/stack/ /" in before
    assert f'"--epoch", "{plan((core, moved)).epoch}"' in after
    # The venv below the groups is the same for every pin: its layer's step text never moves.
    venv = before.split("COPY rootfs/venv/ /\n", 1)[1].split("\nCOPY --from=", 1)[0]
    assert venv in after and f"touch -h -d @{EPOCH_FLOOR} /opt" in venv
    assert before.index("COPY rootfs/venv/ /") < before.index("COPY --from=layer01") < before.index("rootfs/stack")


def test_the_context_has_fixed_modes_and_times_whatever_the_wheelhouse(tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wh"
    wheel = build_wheel(wheelhouse, "a", "1")
    wheel.chmod(0o600)  # as a wheel fetched through an atomic write arrives
    group = LayerGroup("deps", "closure", (InstallItem("a", "1", wheel.name, sha256_file(wheel), "", "", T1),))
    write_context(render(plan((group,)), load_templates()), wheelhouse, tmp_path / "ctx")
    for p in (tmp_path / "ctx").rglob("*"):
        if p.name == ".stackctl-context":
            continue
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o755 if p.is_dir() else 0o644), p
        # the venv's files (and their directories) keep one date whatever the pins; the rest the lock's
        venv = p.relative_to(tmp_path / "ctx").parts[:2] == ("rootfs", "venv")
        assert int(p.stat().st_mtime) == (EPOCH_FLOOR if venv else 1772359200), p


def test_the_published_config_carries_no_clock_and_no_build_host() -> None:
    config = {"architecture": "amd64", "os": "linux", "created": "2026-12-01T06:11:29.78Z",
              "docker_version": "20.10.24", "container": "c764c426d5bb",
              "container_config": {"Hostname": "c764c426d5bb"},
              "config": {"Hostname": "", "Image": "sha256:parent", "Labels": {"a": "b"}, "Env": ["X=1"]},
              "history": [{"created": "2026-12-01T05:59:43Z", "comment": "Imported"},
                          {"created": "2026-12-01T06:11:27Z", "created_by": "COPY", "empty_layer": True}],
              "rootfs": {"type": "layers", "diff_ids": ["sha256:1"]}}
    out = reproducible_config(config, 1772359200)
    assert out["created"] == "2026-03-01T10:00:00Z" and {h["created"] for h in out["history"]} == {out["created"]}
    assert not {"container", "container_config", "docker_version"} & set(out)
    assert out["config"] == {"Hostname": "", "Image": "", "Labels": {"a": "b"}, "Env": ["X=1"]}
    assert out["rootfs"] == config["rootfs"] and out["history"][1]["empty_layer"] is True
    # Two engines' configs of the same layers give one byte string, whatever their clocks and hosts.
    other = {**config, "created": "2027-01-01T00:00:00Z", "container": "ffff", "docker_version": "24.0"}
    assert canonical(reproducible_config(other, 1772359200)) == canonical(out)
    assert artifact_tag("sha256:abc", "sbom") == "sha256-abc.sbom"


def test_the_sbom_is_the_same_bytes_for_the_same_lock_and_names_every_wheel(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "a", "1", extra_metadata="License-Expression: MIT\n")
    classic = build_wheel(tmp_path, "b", "2+local", extra_metadata=(
        "Classifier: License :: OSI Approved :: BSD License\n"))
    assert licences(wheel) == ("MIT",) and licences(classic) == ("BSD License",)
    groups = (LayerGroup("train-core", "vendor", (item("b", "2+local", T1, index="vendor"),)),
              LayerGroup("deps", "closure", (item("a", "1", T2, index=""),)))
    kw = dict(stack="s", target="cp311-linux_x86_64", lock_digest="sha256:" + "1" * 64, groups=groups,
              index_urls={"vendor": "https://user:tok@vendor.example/simple/"},
              licences_of={"a-1-py3-none-any.whl": ("MIT",)}, epoch=1775037600)
    text = make_sbom(**kw)  # type: ignore[arg-type]
    assert make_sbom(**kw) == text  # type: ignore[arg-type]
    doc = json.loads(text)
    assert doc["bomFormat"] == "CycloneDX" and doc["metadata"]["timestamp"].startswith("2026-04-01T10:00:00")
    by = {c["name"]: c for c in doc["components"]}
    assert by["b"]["purl"].startswith("pkg:pypi/b@2%2Blocal?") and "repository_url=https://vendor.example" in \
        by["b"]["purl"] and "tok" not in text
    assert by["a"]["licenses"] == [{"license": {"id": "MIT"}}] and by["a"]["hashes"][0]["content"] == "ab" * 32
    # what verify compares: every wheel of every layer, by name, with its hash and file
    assert entries(doc) == (SbomEntry("a", "1", "ab" * 32, "a-1-py3-none-any.whl"),
                            SbomEntry("b", "2+local", "ab" * 32, "b-2+local-py3-none-any.whl"))


def test_the_statement_names_the_image_and_its_materials() -> None:
    mats = [attest.Material("lock", "file:stacks/s.lock", (("sha256", "1" * 64),)),
            attest.Material("a.whl", "http://x/a.whl", (("sha256", "2" * 64),), (("index", "public"),))]
    doc = attest.statement(subject="reg/x", digest="sha256:" + "f" * 64, parameters={"stack": "s"}, internal={},
                           materials=mats, builder={"stackctl": "0.1.0"}, invocation="i", started=None,
                           finished="2026-01-01T00:00:00Z")
    assert doc["_type"] == "https://in-toto.io/Statement/v1"
    assert doc["subject"] == [{"name": "reg/x", "digest": {"sha256": "f" * 64}}]
    assert doc["predicateType"] == "https://slsa.dev/provenance/v1"
    deps = statement_materials(doc)
    assert [d["name"] for d in deps] == ["lock", "a.whl"] and deps[1]["annotations"] == {"index": "public"}


def test_source_date_epoch_must_be_whole_seconds() -> None:
    from stackctl.image.prepare import source_date_epoch
    from stackctl.profile.model import Stack

    stack = Stack(name="s", description="", targets=(), indexes=(), pins=())
    assert source_date_epoch({"SOURCE_DATE_EPOCH": "1700000000"}, stack, None, 5) == 1700000000
    assert source_date_epoch({}, stack, None, 5) == 5
    with pytest.raises(InputError, match="SOURCE_DATE_EPOCH='yesterday'"):
        source_date_epoch({"SOURCE_DATE_EPOCH": "yesterday"}, stack, None, 5)
