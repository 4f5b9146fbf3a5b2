"""The pool's scheduler, cache keys and engine list: values in, values out."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackctl.engine.pool import engine_specs, parse_engine, read_engines_file
from stackctl.errors import InputError
from stackctl.image.cachekeys import stage_caches, stage_images
from stackctl.image.render import BuildPlan, InstallItem, LayerGroup
from stackctl.image.schedule import Assignment, Cell, Slot, schedule

X86 = "x86_64"


def cell(stack: str, *keys: str, machine: str = X86) -> Cell:
    return Cell(stack, "cp311-linux_x86_64" if machine == X86 else "cp311-manylinux_2_28_aarch64", machine, keys)


def engines_of(assignment: Assignment, cells: list[Cell]) -> dict[str, str]:
    assert len(assignment.placements) + len(assignment.unplaced) == len(cells)
    return {p.cell.stack: p.engine for p in assignment.placements}


def test_cold_cells_spread_over_the_least_loaded_engines() -> None:
    cells = [cell("a", "ka"), cell("b", "kb"), cell("c", "kc"), cell("d", "kd")]
    got = engines_of(schedule(cells, [Slot("one", X86), Slot("two", X86)]), cells)
    assert got == {"a": "one", "b": "two", "c": "one", "d": "two"}


def test_a_cell_goes_where_its_stages_are_warm() -> None:
    cells = [cell("post1", "torch", "deps", "vllm1"), cell("control", "torch29", "deps29")]
    got = engines_of(schedule(cells, [Slot("one", X86), Slot("two", X86, frozenset({"torch29"}))]), cells)
    assert got == {"control": "two", "post1": "one"}


def test_a_sibling_follows_the_cell_it_shares_stages_with() -> None:
    """post2 shares torch and deps with post1: it queues behind post1 on the same engine (whose cache is then
    warm) rather than installing them again on the idle one; the unrelated control takes the other engine."""
    cells = [cell("post1", "torch", "deps", "v1"), cell("post2", "torch", "deps", "v2"), cell("control", "t29")]
    a = schedule(cells, [Slot("one", X86), Slot("two", X86)])
    assert engines_of(a, cells) == {"post1": "one", "post2": "one", "control": "two"}
    assert [p.cell.stack for p in a.queue("one")] == ["post1", "post2"]
    assert a.queue("one")[1].warm == 2


def test_warmth_never_piles_the_matrix_onto_one_engine() -> None:
    cells = [cell(f"s{i}", "shared") for i in range(4)]
    a = schedule(cells, [Slot("one", X86, frozenset({"shared"})), Slot("two", X86)])
    assert [p.cell.stack for p in a.queue("one")] == ["s0", "s1"]  # warm, until one cell ahead of the idle one
    assert [p.cell.stack for p in a.queue("two")] == ["s2", "s3"]


def test_a_target_no_engine_can_run_is_left_unplaced_with_the_reason() -> None:
    cells = [cell("arm", "k", machine="aarch64"), cell("x", "k2")]
    a = schedule(cells, [Slot("one", X86)])
    assert [p.cell.stack for p in a.placements] == ["x"]
    (unplaced, why), = a.unplaced
    assert unplaced.stack == "arm" and "aarch64" in why and "x86_64" in why
    a = schedule(cells, [Slot("one", X86), Slot("graviton", "aarch64")])
    assert engines_of(a, cells) == {"arm": "graviton", "x": "one"}


def _plan(stack: str, groups: tuple[LayerGroup, ...]) -> BuildPlan:
    return BuildPlan(stack, "cp311-linux_x86_64", "base:1", "sha256:l", groups, "{}", (), python="3.11")


def _group(name: str, *items: tuple[str, str]) -> LayerGroup:
    return LayerGroup(name, "vendor", tuple(InstallItem(n, v, f"{n}-{v}.whl", f"{n}{v}".ljust(64, "0"))
                                            for n, v in items))


def test_sibling_stacks_share_the_keys_of_the_groups_they_share() -> None:
    torch, deps = _group("train-torch", ("torch", "2.11")), _group("deps", ("numpy", "2"))
    one = stage_caches(_plan("post1", (torch, deps, _group("pin-vllm", ("vllm", "1")))))
    two = stage_caches(_plan("post2", (torch, deps, _group("pin-vllm", ("vllm", "2")))))
    assert [c.key for c in one[:2]] == [c.key for c in two[:2]] and one[2].key != two[2].key
    assert [c.stage for c in one] == ["layer01-train-torch", "layer02-deps", "layer03-pin-vllm"]
    assert one[0].tag().startswith("stackctl-cache.train-torch.") and len(one[0].tag()) <= 128
    other_base = stage_caches(BuildPlan("post1", "t", "base:2", "l", (torch,), "{}", (), python="3.11"))
    assert other_base[0].key != one[0].key


def test_stage_images_come_from_the_classic_builders_log() -> None:
    log = ["Step 1/6 : FROM base:1 AS tools", " ---> 0664d2844e7f", "Step 2/6 : RUN python3 -m venv /v",
           " ---> Using cache", " ---> 19ab7a26b980", "Step 3/6 : FROM tools AS layer01-core", " ---> 19ab7a26b980",
           "Step 4/6 : COPY groups/core/ /tmp/group/", " ---> a654ab8d2150",
           "Step 5/6 : RUN pip install", " ---> Running in e67cbec79bd5", "Removing intermediate container e6",
           " ---> 7065da8c9bb0", "Step 6/6 : FROM base:1", " ---> 0664d2844e7f"]
    assert stage_images(log) == {"tools": "19ab7a26b980", "layer01-core": "7065da8c9bb0"}


def test_engine_specs_from_options_and_a_file(tmp_path: Path) -> None:
    assert parse_engine("b=ssh://builder@host2").url == "ssh://builder@host2"
    for bad in ("nourl", "=unix:///x", "b=/var/run/docker.sock", "b=ftp://x", "b=tcp://"):
        with pytest.raises(InputError, match="--engine"):
            parse_engine(bad)
    f = tmp_path / "engines.toml"
    f.write_text('[engines]\nlocal = "unix:///var/run/docker.sock"\nremote = "tcp://10.0.0.2:2376"\n')
    assert [(s.name, s.url) for s in read_engines_file(f)] == [("local", "unix:///var/run/docker.sock"),
                                                               ("remote", "tcp://10.0.0.2:2376")]
    assert [s.name for s in engine_specs(["extra=unix:///run/e.sock"], f)] == ["local", "remote", "extra"]
    with pytest.raises(InputError, match="twice"):
        engine_specs(["local=unix:///run/e.sock"], f)
    assert [(s.name, s.url) for s in engine_specs([], None)] == [("default", None)]
    f.write_text('[engines]\nremote = 3\n')
    with pytest.raises(InputError, match=r"engines.toml: engines.remote: give the engine's URL"):
        read_engines_file(f)
    f.write_text("[engines\n")
    with pytest.raises(InputError, match="not TOML"):
        read_engines_file(f)


def test_a_url_with_a_password_is_named_without_it() -> None:
    spec = parse_engine("r=tcp://user:s3cret@10.0.0.2:2376")
    assert "s3cret" not in spec.address and "10.0.0.2:2376" in spec.address
    with pytest.raises(InputError) as err:
        parse_engine("r=ftp://user:s3cret@h")
    assert "s3cret" not in str(err.value)
