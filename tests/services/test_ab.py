"""`stackctl ab` on the real engine, on CPU: images the test builds on the base image (pytest and one variant of a
small library with its suite and benchmark in each), a plan with a pytest suite and a benchmark.

Identical legs give neutral and the same inventory; a broken test is named and exits 1; a test added is "not the
same inventory"; a benchmarked function made 30% slower is "regressed"; a test that fails and then passes on
its rerun is "flaky". The legs are given the profile's device node, runtime and variable, which the gate's
device phase checks inside each container.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.abproject import copy_pytest, write_project, write_site
from tests.support.cli import Cli
from tests.support.engine import Cleanup, unique_tag

pytestmark = pytest.mark.integration

SITE = "/usr/local/lib/python3.11/dist-packages"


@pytest.fixture(scope="module")
def images(docker_client: Any, base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One image per variant, each FROM one with pytest: repository:variant."""
    from tests.support.imagetest import remove_images

    repository = unique_tag("stackctl-ab")
    root = tmp_path_factory.mktemp("ab-images")
    base = root / "pytest"
    copy_pytest(base / "site")
    (base / "Dockerfile").write_text(f"FROM {base_image}\nCOPY site/ {SITE}/\n")
    built: dict[str, str] = {}
    try:
        docker_client.images.build(path=str(base), tag=f"{repository}:pytest", rm=True, forcerm=True)
        for variant in ("base", "broken", "added", "slow", "flaky"):
            ctx = root / variant
            write_site(ctx / "site", variant)
            labels = f'LABEL org.opencontainers.image.revision="rev-{variant}"\n'
            (ctx / "Dockerfile").write_text(f"FROM {repository}:pytest\nCOPY site/ {SITE}/\n{labels}")
            docker_client.images.build(path=str(ctx), tag=f"{repository}:{variant}", rm=True, forcerm=True)
            built[variant] = f"{repository}:{variant}"
        yield built
    finally:
        remove_images(docker_client, repository)


def _ab(cli: Cli, root: Path, control: str, candidate: str, *args: str) -> tuple[int, dict[str, Any], str]:
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--image", control, "--image", candidate,
              "--json", *args, cwd=root)
    return res.code, json.loads(res.out), res.err


def _trial(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in result["trials"] if t["trial"] == name)


def test_identical_legs_are_neutral_with_one_inventory_and_the_devices_reach_the_legs(
        cli: Cli, tmp_path: Path, images: dict[str, str], cleanup: Cleanup) -> None:
    write_project(tmp_path, devices=True)
    # identical legs on a shared host: equivalence shown, or not yet, but never a difference
    code, result, err = _ab(cli, tmp_path, images["base"], images["base"], "--allow-undecided")
    assert code == 0, err
    unit, speed = _trial(result, "unit"), _trial(result, "speed")
    assert unit["verdict"] == "pass" and unit["tests"]["same_inventory"]
    assert unit["tests"]["control"]["passed"] == unit["tests"]["candidate"]["passed"] == 4
    assert speed["verdict"] in ("neutral", "undecided"), speed["metrics"]
    assert speed["outputs"][0]["equal"]
    # the gate ran in both legs, its device phase too, and the device node and variable were there
    assert {(g["leg"], g["phase"], g["ok"]) for g in result["gates"]} == {
        ("control", "all", True), ("control", "device", True), ("candidate", "all", True),
        ("candidate", "device", True)}
    device_lines = [ln for g in result["gates"] if g["phase"] == "device" for ln in g["lines"] if "device node" in ln]
    assert device_lines and all(ln.startswith("PASS ") for ln in device_lines)
    assert result["candidate"]["devices"] == "--device /dev/zero:/dev/abdev0 --runtime runc -e ABDEV_VISIBLE_DEVICES=0"
    assert result["candidate"]["image_id"].startswith("sha256:") and result["candidate"]["revision"] == "rev-base"
    # `gate --image --phase device` gives the container the profile's devices too; without them the probe fails
    gated = cli("gate", "stacks/candidate.toml", "--image", images["base"], "--phase", "device", cwd=tmp_path)
    assert gated.code == 0 and "PASS probe the device node and its variable are in the leg" in gated.out
    # (a profile whose [devices] is gone: the device probe runs in a container given nothing)
    bare = (tmp_path / "stacks" / "candidate.toml").read_text()
    bare = bare[:bare.index("[devices]")] + bare[bare.index("[[gate.probe]]\nname = \"the device"):]
    (tmp_path / "stacks" / "bare.toml").write_text(bare.replace('name = "candidate"', 'name = "bare"'))
    ungiven = cli("gate", "stacks/bare.toml", "--image", images["base"], "--phase", "device", cwd=tmp_path)
    assert ungiven.code == 1 and "FAIL probe the device node and its variable are in the leg" in ungiven.out
    # the benchmark's control bracketed the candidate: C T C T C T C, and a bracket more while undecided
    brackets = len(speed["metrics"][0]["brackets"])
    assert 3 <= brackets <= 12
    assert [r["leg"] for r in result["runs"] if r["trial"] == "speed"] == ["control", "candidate"] * brackets + [
        "control"]
    # recorded where report reads it, raw runs included
    record = json.loads((tmp_path / "build" / "candidate.ab.json").read_text())
    assert record["kind"] == "ab" and len(record["result"]["runs"]) == len(result["runs"])
    assert "junit.xml" in record["result"]["runs"][0]["files"]


def test_a_broken_test_is_named_and_exits_1(cli: Cli, tmp_path: Path, images: dict[str, str]) -> None:
    write_project(tmp_path)
    code, result, _ = _ab(cli, tmp_path, images["base"], images["broken"], "--trial", "unit")
    unit = _trial(result, "unit")
    assert code == 1
    assert unit["verdict"] == "regressed"
    assert [r["node"] for r in unit["tests"]["regressions"]] == ["test_lib::test_work_zero"]
    assert "assert 1 == 0" in unit["tests"]["regressions"][0]["message"]
    # the failing run was run again, and failed again: a regression, not a flaky test
    assert [(r["leg"], r["rerun"]) for r in result["runs"]] == [("control", 0), ("candidate", 0), ("candidate", 1)]


def test_a_test_added_is_not_the_same_inventory(cli: Cli, tmp_path: Path, images: dict[str, str]) -> None:
    write_project(tmp_path)
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--image", images["base"], "--image",
              images["added"], "--trial", "unit", "--markdown", cwd=tmp_path)
    assert res.code == 1
    assert "not the same inventory: 0 only on the control, 1 only on the candidate" in res.out
    assert "only on the candidate: test_extra::test_new_feature" in res.out
    assert "| unit | pytest --pyargs mylib_tests |" in res.out
    assert "Inventory changed" in res.out


def test_a_function_made_30_percent_slower_is_regressed(cli: Cli, tmp_path: Path, images: dict[str, str]) -> None:
    write_project(tmp_path)
    code, result, err = _ab(cli, tmp_path, images["base"], images["slow"], "--trial", "speed")
    speed = _trial(result, "speed")
    metric = speed["metrics"][0]
    # fails closed: regressed, or on a host too noisy to tell within 12 brackets undecided, never neutral
    assert code == 1 and speed["verdict"] in ("regressed", "undecided"), metric["why"]
    if speed["verdict"] == "regressed":
        assert metric["low_pct"] > metric["band"]  # the interval wholly beyond the band
        assert "speed: regressed (work_ms +" in err and "wholly beyond ±10%" in err  # the error line names it
    else:
        # every bracket was spent, and the runs could not rule the regression out: its interval reaches past the band
        assert metric["high_pct"] > metric["band"], metric["why"]
        assert len(metric["brackets"]) == 12 and "speed: undecided (work_ms +" in err
    assert speed["outputs"][0]["equal"]  # slower, and the same answer


def test_a_test_that_passes_on_its_rerun_is_flaky(cli: Cli, tmp_path: Path, images: dict[str, str]) -> None:
    write_project(tmp_path)
    code, result, _ = _ab(cli, tmp_path, images["base"], images["flaky"], "--trial", "unit")
    unit = _trial(result, "unit")
    assert code == 0
    assert unit["verdict"] == "flaky"
    assert [(f["node"], f["candidate"]) for f in unit["tests"]["flaky"]] == [
        ("test_lib::test_sometimes", "flaky")]
    assert unit["tests"]["same_inventory"] and not unit["tests"]["regressions"]


def test_report_shows_the_validation_summary_and_stale_rows(cli: Cli, tmp_path: Path, images: dict[str, str],
                                                            docker_client: Any) -> None:
    write_project(tmp_path)
    build = tmp_path / "build"
    build.mkdir()
    base_id = docker_client.images.get(images["base"]).id
    for stack in ("control", "candidate"):  # each stack's latest build is the base image
        (build / f"{stack}.build.json").write_text(json.dumps({"stack": stack, "image": images["base"],
                                                               "image_id": base_id}))
    res = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--trial", "unit", cwd=tmp_path)
    assert res.code == 0, res.err  # the images came from the build records
    report = cli("report", "stacks/candidate.toml", "--markdown", cwd=tmp_path)
    section = report.out[report.out.index("### Validation summary"):]
    assert section.startswith("### Validation summary ✅")
    row = next(ln for ln in section.splitlines() if ln.startswith("| unit |"))
    assert "build/candidate.ab.json" in row and f"{images['base']}@{base_id[:19]}" in row
    assert "rev-base → rev-base" in row and "| none |" in row
    assert "| unit | control control | 4 passed, 0 skipped, 0 failed of 4 collected in " in section
    sweep = next(ln for ln in section.splitlines() if ln.startswith("| unit | candidate candidate |"))
    assert f"| build/candidate.ab.json | {images['base']}@{base_id[:19]} | rev-base |" in sweep
    # the candidate is rebuilt: the recorded validation is of an image that is no longer its latest build
    slow = docker_client.images.get(images["slow"]).id
    (build / "candidate.build.json").write_text(json.dumps({"stack": "candidate", "image": images["slow"],
                                                           "image_id": slow}))
    section = cli("report", "stacks/candidate.toml", "--markdown", cwd=tmp_path).out.split("### Validation summary")[1]
    assert section.startswith(" ⚠️ stale")
    assert f"the candidate's image {images['base']}" in section
    assert "is no longer the latest build of candidate" in section
    assert "Rerun: `stackctl ab stacks/control.toml stacks/candidate.toml --trial unit`" in section
