"""The render for BuildKit: the wheels bind-mounted into each install stage from its group's named context (or
the main context where the frontend has none), nothing to pull, and the classic render left as it was."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from stackctl.image.prepare import prepare_build
from stackctl.image.render import SPLIT_GROUP_BYTES, InstallItem, load_templates, render
from tests.support.imagestack import make_stack_repo


def _plan(tmp_path: Path):  # type: ignore[no-untyped-def]
    repo = make_stack_repo(tmp_path, "r", "127.0.0.1:5000/t/r", commit=False)
    prep = prepare_build(repo.stack, repo.lock, None, "0" * 40, "main", None, None, {})
    assert prep.plan is not None
    return prep.plan


def test_buildkit_stages_mount_the_wheels_from_the_named_context(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    classic = render(plan, load_templates())
    named = render(dataclasses.replace(plan, mounts="named"), load_templates())
    assert "RUN --mount" not in classic.dockerfile and "COPY groups/deps/ /tmp/group/" in classic.dockerfile
    # a context a group: a rebuild sends the builder only the groups whose wheels changed
    for group in plan.groups[:-1]:  # offline by the builder too: the frontend that has named contexts knows the flag
        assert f"RUN --network=none --mount=type=bind,from=wheels-{group.name},target=/tmp/group" in named.dockerfile
    top = plan.groups[-1]  # installed by the gate's step (below), from its own context all the same
    assert f"--mount=type=bind,from=wheels-{top.name},target=/tmp/group" in named.dockerfile
    assert "COPY groups/" not in named.dockerfile
    assert "# syntax=" not in named.dockerfile
    files = {f.path: f for f in named.files}
    assert files[".dockerignore"].text == "groups/\n"  # the wheels travel only in the groups' contexts
    assert "rootfs/venv/etc/hosts" in files and "rootfs/venv/etc/hosts" not in {f.path for f in classic.files}
    # the install command itself is the classic one: only the way the wheels arrive differs
    assert classic.dockerfile.count("--require-hashes") == named.dockerfile.count("--require-hashes")


def test_a_frontend_without_named_contexts_mounts_from_the_main_context(tmp_path: Path) -> None:
    ctx = render(dataclasses.replace(_plan(tmp_path), mounts="context"), load_templates())
    assert "RUN --mount=type=bind,source=groups/deps,target=/tmp/group" in ctx.dockerfile
    # 20.10's frontend (v0.8) refuses `RUN --network` ("Unknown flag: network"): none is written for it
    assert "--network" not in ctx.dockerfile
    assert ".dockerignore" not in {f.path for f in ctx.files}



def test_under_buildkit_the_gate_step_puts_the_stack_tree_in_place(tmp_path: Path) -> None:
    """The stack's own files (gate spec, SBOM) change with every pin: under BuildKit the gate's step copies them
    from a mount of the context and dates them, with no stage of their own for a rebuild to start."""
    plan = _plan(tmp_path)
    named = render(dataclasses.replace(plan, mounts="named"), load_templates()).dockerfile
    classic = render(plan, load_templates()).dockerfile
    assert "rootfs-stack" not in named and "COPY rootfs/stack/ /" in classic
    gate = named[named.rindex("\nRUN ", 0, named.index("--mount=type=bind,source=rootfs/stack,target=/mnt")):]
    assert "cp /mnt/opt/stackctl/gate/gate.json /opt/stackctl/gate/gate.json" in gate
    assert "cp /mnt/opt/stackctl/sbom.cdx.json /opt/stackctl/sbom.cdx.json" in gate
    assert (f"touch -h -d @{plan.epoch} /opt /opt/stackctl /opt/stackctl/gate /opt/stackctl/gate/gate.json "
            "/opt/stackctl/sbom.cdx.json") in gate
    assert gate.index("touch -h") < gate.index("exec /opt/venv/bin/python -B /opt/stackctl/gate/gate.py")


def test_every_context_a_stage_mounts_is_one_the_build_names(tmp_path: Path) -> None:
    """buildx is given one `--build-context wheels-GROUP=CONTEXT/groups/GROUP` for each group the render mounts."""
    import re

    from stackctl.engine.buildx import BuildxEngine

    plan = _plan(tmp_path)
    dockerfile = render(dataclasses.replace(plan, mounts="named"), load_templates()).dockerfile
    ctx = tmp_path / "ctx"
    for group in plan.groups:
        (ctx / "groups" / group.name).mkdir(parents=True)
    engine = object.__new__(BuildxEngine)  # named_contexts reads the engine's `mounts` alone
    engine.mounts = "named"
    named = engine.named_contexts(ctx, {"other": tmp_path})
    mounted = set(re.findall(r"--mount=type=bind,from=(wheels-[a-z0-9-]+),", dockerfile))
    assert mounted == {f"wheels-{g.name}" for g in plan.groups} and len(mounted) == len(plan.groups) > 1
    assert {k: v for k, v in named.items() if k in mounted} == {m: ctx / "groups" / m[len("wheels-"):]
                                                                for m in mounted}
    assert named["other"] == tmp_path  # contexts the caller gives stay


def test_a_heavy_group_is_copied_as_two_layers_its_big_files_apart_and_only_under_buildkit(tmp_path: Path) -> None:
    """BuildKit's exporter gzips layers side by side: a group whose wheels weigh SPLIT_GROUP_BYTES moves its big
    files to /export-big, dated and owned as the rest, and the final stage copies both trees."""
    from stackctl.image.render import SPLIT_FILE_BYTES, SPLIT_GROUP_BYTES

    plan = _plan(tmp_path)
    heavy = plan.groups[0]
    items = tuple(dataclasses.replace(i, size=SPLIT_GROUP_BYTES) for i in heavy.items)
    plan = dataclasses.replace(plan, groups=(dataclasses.replace(heavy, items=items), *plan.groups[1:]))
    assert plan.groups[0].split and not any(g.split for g in plan.groups[1:])
    named = render(dataclasses.replace(plan, mounts="named"), load_templates()).dockerfile
    stage = f"layer01-{heavy.name}"
    assert f"COPY --from={stage} /export/ /\nCOPY --from={stage} /export-big/ /\n" in named
    assert named.count("/export-big/ /") == 1  # the light groups stay one layer each
    assert f"find . -type f -size +{SPLIT_FILE_BYTES >> 10}k" in named
    # moved before the group's files are dated and owned: both trees get the group's date
    assert "chown -hR 0:0 /export /export-big" in named
    assert f"find /export /export-big -exec touch -h -d @{heavy.epoch}" in named
    assert "/export-big" not in render(plan, load_templates()).dockerfile  # the classic builder: one layer


def test_under_buildkit_the_gate_step_installs_the_top_group(tmp_path: Path) -> None:
    """A moved top pin costs one BuildKit step: the top group has no stage and no COPY; the gate's step installs it
    with the tools stage's installer, from its wheels' context, under a tmpfs /tmp (nothing of the install or of
    the mount points under /tmp reaches the layer), normalised and dated as its stage would have it."""
    plan = _plan(tmp_path)
    top, below = plan.groups[-1], plan.groups[:-1]
    named = render(dataclasses.replace(plan, mounts="named"), load_templates()).dockerfile
    stage = f"layer{len(plan.groups):02d}-{top.name}"
    assert f"AS {stage}" not in named and f"COPY --from={stage}" not in named
    assert all(f"COPY --from=layer{n:02d}-{g.name} /export/ /" in named for n, g in enumerate(below, 1))
    gate = named[named.rindex("\nRUN ", 0, named.index("--mount=type=bind,source=rootfs/stack,target=/mnt")):]
    assert gate.startswith("\nRUN --network=none --mount=type=tmpfs,target=/tmp "
                           f"--mount=type=bind,from=wheels-{top.name},target=/tmp/group "
                           "--mount=type=bind,from=tools,source=/opt/venv,target=/tmp/tools ")
    install = gate.index("/tmp/tools/bin/python -m pip install --no-index --find-links /tmp/group")
    assert f"--target /opt/stack/{top.name}" in gate
    assert gate.index(f"find /opt/stack/{top.name} -exec touch -h -d @{top.epoch}") > install
    assert install < gate.index("mkdir -p /opt /opt/stackctl") < gate.index("exec /opt/venv/bin/python -B")
    # the other groups keep their stages; the classic builder keeps a stage and a layer for every group
    classic = render(plan, load_templates()).dockerfile
    assert f"AS {stage}" in classic and "/tmp/tools" not in classic and "tmpfs" not in classic
    # a top group heavy enough to be split keeps its stage: its big files go in a layer of their own
    heavy = dataclasses.replace(top, items=tuple(dataclasses.replace(i, size=SPLIT_GROUP_BYTES) for i in top.items))
    split = render(dataclasses.replace(plan, mounts="named", groups=(*below, heavy)), load_templates()).dockerfile
    assert f"AS {stage}" in split and "/tmp/tools" not in split


def test_with_uv_the_gate_step_takes_uv_from_the_tools_stage(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    uv = InstallItem("uv", "0.13.9", "uv-0.13.9-py3-none-manylinux_2_17_x86_64.whl", "0" * 64, "", "", None, 1)
    named = render(dataclasses.replace(plan, mounts="named", installer=uv), load_templates()).dockerfile
    gate = named[named.rindex("\nRUN ", 0, named.index("--mount=type=bind,source=rootfs/stack,target=/mnt")):]
    assert "/tmp/tools/bin/uv pip install --offline --no-index --find-links /tmp/group" in gate
    assert "--python /opt/venv/bin/python" in gate and "/opt/venv/bin/uv" not in gate
