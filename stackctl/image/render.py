"""The build context, as values: layer groups planned from a stack and its lock, and the Dockerfile text.

Pure: `plan_layers` and `render` take values and return values. `image.context` writes the result to
disk; `load_templates` is the one reader of Dockerfile.in, templates/ and gates/.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from string import Template
from typing import Literal

from packaging.utils import canonicalize_name

from stackctl.base.assets import asset_root
from stackctl.errors import CheckFailed, InputError
from stackctl.profile.model import Stack
from stackctl.resolve.lock import Lock, LockedFile

PREFIX = "/opt/stack"
SBOM_PATH = "/opt/stackctl/sbom.cdx.json"  # where every image keeps its SBOM
INSTALLED_PATH = "/opt/stackctl/installed.json"  # what its gate found installed (Dockerfile.in's --freeze)
GATE_SPEC_PATH = "/opt/stackctl/gate/gate.json"
STACK_FILES = (GATE_SPEC_PATH, SBOM_PATH)  # the stack's own tree (rootfs/stack/), the gate step's to put in place
ROOTFS = "rootfs"  # context directories copied onto / in the final stage: venv/ below the groups, stack/ above
# The host name the install stages fetch their wheels from when `stackctl build` serves them: no such host
# exists; the build's proxy (a predefined build argument, outside the builder's cache key) is the server.
WHEEL_HOST = "stackctl-wheelhouse"
# The prefix of the build contexts BuildKit's install stages mount their wheels from (`wheels_context`)
WHEELS_CONTEXT = "wheels"
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
CLASSIC_NOTE = "# syntax is the classic builder's: no BuildKit features, so Debian's engine 20.10 builds it as is."
BUILDKIT_NOTE = ("# For BuildKit (`docker buildx build`): the install stages bind-mount their wheels (RUN --mount),\n"
                 "# so no wheel enters a layer; the built-in frontend's syntax, nothing to pull. The top group has\n"
                 "# no stage: the gate's own step installs it, so a moved top pin costs one step.")
# The install stages and the gate need no network (they install --offline --no-index): where the Dockerfile
# frontend knows `RUN --network` (the one with named contexts, Docker 23 on; 20.10's v0.8 refuses the flag) the
# builder holds them to it, and each such step starts without a network namespace to set up (Docker 26: a step
# 0.1 s quicker).
OFFLINE = "--network=none "
# The date of a layer whose wheels carry no upload time: zip cannot store anything earlier.
EPOCH_FLOOR = 315532800  # 1980-01-01T00:00:00Z


@dataclass(frozen=True)
class InstallItem:
    name: str
    version: str
    filename: str
    sha256: str
    url: str = ""  # where the lock says the wheel came from
    index: str = ""  # the profile's index name ("" for the resolver's closure: the public index)
    upload_time: str | None = None  # ISO 8601 UTC, from the lock
    size: int = 0  # the wheel's bytes, from the lock (0: not known)


@dataclass(frozen=True)
class LayerGroup:
    """Distributions installed together into one prefix, in one stage, copied as one layer."""

    name: str  # a directory and stage name; never carries a version
    kind: str  # "vendor" | "closure" | "public"
    items: tuple[InstallItem, ...]

    @property
    def epoch(self) -> int:
        """The mtime of every file in the group's layer: the newest upload time of its wheels.

        A date the lock fixes, so a pin change moves only its own group's layer, and a rebuild at another
        commit, on another day or engine, writes the same bytes.
        """
        return max((_seconds(i.upload_time) for i in self.items), default=EPOCH_FLOOR)

    @property
    def split(self) -> bool:
        """Whether BuildKit copies the group as two layers, its big files apart (`SPLIT_FILE_BYTES`): the
        exporter gzips a stack's layers side by side, one core each, and one file of a few hundred MB (torch's
        libtorch_cpu.so, 434 of its wheel's 699 MB) held the whole cold export on one core."""
        return sum(i.size for i in self.items) >= SPLIT_GROUP_BYTES


def wheels_context(group: str) -> str:
    """The named build context of one group's wheels (`--build-context wheels-GROUP=CONTEXT/groups/GROUP`).

    A context a group: with one context for all groups, each stage mounting its own directory of it, BuildKit
    sent that context once for each stage, and a rebuild after torchada moved sent the torch wheel's
    directory again (1.1-1.3 s of the torch stack's rebuild on Docker 26, on its critical path: the cached
    torch stage's key waits for it). A group's own context is sent again only when its wheels change."""
    return f"{WHEELS_CONTEXT}-{group}"


def _seconds(iso: str | None) -> int:
    if not iso:
        return EPOCH_FLOOR
    try:
        when = datetime.fromisoformat(iso[:-1] + "+00:00" if iso.endswith("Z") else iso)
    except ValueError:
        return EPOCH_FLOOR
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(EPOCH_FLOOR, int(when.timestamp()))


SPLIT_GROUP_BYTES = 64 << 20  # a group whose wheels weigh this much is copied as two layers under BuildKit
SPLIT_FILE_BYTES = 32 << 20  # ... the files over this size in the second (`/export-big`)


def split_big_files() -> str:
    """The shell that moves a group's big files from /export to /export-big, each at its own path (`normalise`
    then dates and owns both trees as one group's): two layers that together are the group's."""
    return (f"mkdir -p /export-big && cd /export && find . -type f -size +{SPLIT_FILE_BYTES >> 10}k -exec sh -c "
            "'for f; do mkdir -p \"/export-big/${f%/*}\" && mv \"$f\" \"/export-big/$f\"; done' sh {} + \\\n"
            " && cd / \\\n && ")


def normalise(*paths: str, epoch: int, bytecode: bool = False) -> str:
    """The shell that makes an install reproducible: no byte-code caches (unless the profile asks for
    byte-code: the install then runs under SOURCE_DATE_EPOCH, so each .pyc holds its source's hash, not
    a time), owners root, RECORD files in one order (pip sorts them, other installers need not), one mtime.
    uv's note of where a wheel came from (`uv_cache.json`, written for a wheel read from a directory, not for
    one fetched over HTTP) goes, with its RECORD line: a group's layer is the same wherever its wheels were."""
    where = " ".join(paths)
    drop = "" if bytecode else f"find {where} -name __pycache__ -prune -exec rm -rf {{}} + \\\n && "
    return (f"{drop}find {where} -path '*.dist-info/uv_cache.json' -delete \\\n"
            f" && chown -hR 0:0 {where} \\\n"
            f" && find {where} -path '*.dist-info/RECORD' -exec sh -c "
            "'for f; do grep -v \"[.]dist-info/uv_cache[.]json,\" \"$f\" | LC_ALL=C sort -o \"$f\"; done' "
            "sh {} + \\\n"
            f" && find {where} -exec touch -h -d @{epoch} {{}} +")


@dataclass(frozen=True)
class Templates:
    dockerfile: str
    stage: str
    copy: str
    requirements: str
    gate_script: str
    tool: str = ""  # the install stages' installer (uv), added to the tools stage
    stage_buildkit: str = ""  # an install stage for BuildKit: the wheels bind-mounted, never copied into a layer


@dataclass(frozen=True)
class BuildPlan:
    stack: str
    target: str
    base: str
    lock_digest: str
    groups: tuple[LayerGroup, ...]
    gate_spec: str  # JSON text
    labels: tuple[tuple[str, str], ...]
    python: str = ""  # "3.10": the base image's python must be this one ("" checks nothing)
    installer: InstallItem | None = None  # uv's wheel; None: pip, from the base image's venv
    bytecode: bool | Literal["pins"] = False  # compile .pyc files into each layer ("pins": not the closure's)
    sbom: str = ""  # the CycloneDX JSON stored at SBOM_PATH in the image
    # True: the install stages fetch their wheels from http://WHEEL_HOST/groups/GROUP/ and the context sends
    # none (`.dockerignore`); False: each stage copies its wheels from the context.
    serve_wheels: bool = False
    # How BuildKit's install stages reach their wheels: "" the classic builder's COPY (or the wheel server);
    # "named": bind-mounted from the group's build context (`--build-context wheels-GROUP=CONTEXT/groups/GROUP`),
    # which the main context then leaves out; "context": bind-mounted from the main context, for a BuildKit whose
    # Dockerfile frontend has no named contexts (20.10's v0.8).
    mounts: Literal["", "named", "context"] = ""

    def compiles(self, group: LayerGroup) -> bool:
        """Whether the group's layer carries byte-code: "pins" leaves the resolver's closure to compile on
        first import (a torch stack's closure is mostly sympy, which importing torch does not load)."""
        return self.bytecode is True or (self.bytecode == "pins" and group.kind != "closure")

    @property
    def epoch(self) -> int:
        """The final stage's own files: the newest group's date."""
        return max((g.epoch for g in self.groups), default=EPOCH_FLOOR)


@dataclass(frozen=True)
class ContextFile:
    path: str  # relative to the context root
    text: str | None = None
    wheel: str | None = None  # a wheelhouse file name, copied and hash-checked (or served) by image.context
    sha256: str | None = None
    epoch: int = EPOCH_FLOOR  # its mtime in the context (COPY keeps it in the layer)


@dataclass(frozen=True)
class Rendered:
    dockerfile: str
    files: tuple[ContextFile, ...]


def load_templates(root: Path | None = None) -> Templates:
    root = root or asset_root()
    try:
        return Templates(
            dockerfile=(root / "Dockerfile.in").read_text(encoding="utf-8"),
            stage=(root / "templates" / "stage.in").read_text(encoding="utf-8"),
            copy=(root / "templates" / "copy.in").read_text(encoding="utf-8"),
            requirements=(root / "templates" / "requirements.in").read_text(encoding="utf-8"),
            tool=(root / "templates" / "tool.in").read_text(encoding="utf-8"),
            stage_buildkit=(root / "templates" / "stage-buildkit.in").read_text(encoding="utf-8"),
            gate_script=(root / "gates" / "gate.py").read_text(encoding="utf-8"),
        )
    except FileNotFoundError as exc:
        raise InputError(f"{exc.filename}: template missing from this installation") from None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _one_wheel(name: str, files: tuple[LockedFile, ...], target: str) -> LockedFile:
    mine = [f for f in files if f.target == target and f.filename.endswith(".whl")]
    if not mine:
        raise CheckFailed(f"{name}: the lock has no wheel for target {target}",
                          hint="run `stackctl resolve` for this target, or pick another with --target")
    return mine[0]


def plan_installer(stack: Stack, lock: Lock, target: str) -> InstallItem | None:
    """The installer's wheel from the lock (uv), or None when the image installs with pip."""
    pin = stack.installer_pin
    if pin is None:
        return None
    locked = lock.pin(pin.name)
    if locked is None or locked.version != pin.version:
        raise CheckFailed(f"{pin.name}: the image's installer is pinned at {pin.version} but the lock has "
                          f"{locked.version if locked else 'no entry'}", hint="run `stackctl resolve` again")
    f = _one_wheel(pin.name, locked.files, target)
    return InstallItem(pin.name, pin.version, f.filename, f.sha256)


# compileall's own command exits 1 when one file does not compile (torch's cp311 wheel ships a module in
# Python 3.12's syntax on purpose); pip and uv leave such a file without byte-code and go on, and so does
# the stage, naming each file in the build's log. The same call as `compileall -q -j 0 --invalidation-mode
# checked-hash`, so the layer's bytes are those the command wrote.
COMPILE = ("import compileall, importlib.util, pathlib, py_compile, sys; t = pathlib.Path(sys.argv[1]); "
           "compileall.compile_dir(t, quiet=2, workers=0, "
           "invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH); "
           "sys.stdout.writelines(f\"no byte-code (does not compile): {f}\\n\" for f in sorted(t.rglob(\"*.py\")) "
           "if not pathlib.Path(importlib.util.cache_from_source(f)).exists())")


def install_command(group: str, installer: InstallItem | None, bytecode: bool, served: bool = False,
                    tools: str = "/opt/venv") -> str:
    """The RUN line that installs one group from its wheels: hermetic, hash-checked, no dependency lookup.

    With uv the stages need no pip (no ensurepip, no pip start per group). Byte-code, when the group
    carries it, is compiled under SOURCE_DATE_EPOCH (set by the stage): each .pyc holds its source's hash,
    not a time, and the path it will be imported from, so the same wheels give the same layer.
    `served`: the wheels come from the build's wheel server (no other index, and every file hash-checked
    against requirements.txt, as from the context). `tools`: where the installer's venv (the tools stage's
    /opt/venv) is.
    """
    target = f"{PREFIX}/{group}"
    links = f"http://{WHEEL_HOST}/groups/{group}/" if served else "/tmp/group"
    if installer is not None:
        return (f"{tools}/bin/uv pip install {'' if served else '--offline '}--no-index --find-links {links} "
                f"--require-hashes --no-deps \\\n        --no-config --no-cache --python /opt/venv/bin/python "
                f"--target {target} {'--compile-bytecode' if bytecode else '--no-compile-bytecode'} \\\n"
                "        -r /tmp/group/requirements.txt")
    # pip --target installs into a temporary directory and compiles there, so each .pyc would carry that
    # random path as its file name: pip compiles nothing, and compileall compiles where the files stay.
    compile_ = f" \\\n && /opt/venv/bin/python -c '{COMPILE}' {target}" if bytecode else ""
    return (f"{tools}/bin/python -m pip install --no-index --find-links {links} "
            f"{f'--trusted-host {WHEEL_HOST} ' if served else ''}--require-hashes --no-deps \\\n"
            f"        --target {target} --disable-pip-version-check --no-cache-dir --no-warn-script-location \\\n"
            "        --root-user-action=ignore --no-compile -r /tmp/group/requirements.txt" + compile_)


def plan_layers(stack: Stack, lock: Lock, target: str) -> tuple[LayerGroup, ...]:
    """Groups ordered most stable first: vendor trains, other vendor pins, the closure, public pins.

    That is also the reference's install order (vendor wheels first, then the public closure). A pin is
    vendor when its index is named by URL, public when its index comes from the pip configuration.
    """
    groups: dict[str, tuple[str, list[InstallItem]]] = {}
    order: dict[str, int] = {}

    def add(group: str, kind: str, rank: int, item: InstallItem) -> None:
        groups.setdefault(group, (kind, []))[1].append(item)
        order.setdefault(group, rank)

    tgt = stack.target(target)
    for pin in stack.image_pins:
        if tgt is not None and not pin.applies_to(tgt):
            continue  # limited to other targets: not in this image
        locked = lock.pin(pin.name)
        if locked is None:
            raise CheckFailed(f"{pin.name}: pinned by {stack.name} but missing from the lock",
                              hint="run `stackctl resolve` again")
        if locked.version != pin.version:
            raise CheckFailed(f"{pin.name}: the profile pins {pin.version} but the lock has {locked.version}",
                              hint="run `stackctl resolve` again")
        f = _one_wheel(pin.name, locked.files, target)
        index = stack.index(pin.index)
        vendor = not (index is not None and index.from_pip)
        item = InstallItem(pin.name, pin.version, f.filename, f.sha256, f.url, pin.index, f.upload_time, f.size or 0)
        if pin.train:
            add(f"train-{_slug(pin.train)}", "vendor" if vendor else "public", 0 if vendor else 3, item)
        else:
            add(f"pin-{_slug(pin.name)}", "vendor" if vendor else "public", 1 if vendor else 3, item)
    pinned = {p.key for p in stack.pins}
    for c in lock.closure:
        if c.target != target or canonicalize_name(c.name) in pinned:
            continue
        if c.file is None:
            raise CheckFailed(f"{c.name} {c.version}: the lock's closure has no file for {target}")
        add("deps", "closure", 2, InstallItem(c.name, c.version, c.file.filename, c.file.sha256, c.file.url, "",
                                              c.file.upload_time, c.file.size or 0))
    ranked = sorted(groups, key=lambda g: order[g])  # stable: profile order within a rank
    return tuple(LayerGroup(g, groups[g][0], tuple(groups[g][1])) for g in ranked)


def requirement_lines(group: LayerGroup) -> str:
    return "\n".join(f"{i.name}=={i.version} --hash=sha256:{i.sha256}" for i in group.items)


def label_value(value: str) -> str:
    """A Dockerfile double-quoted word: the classic builder expands `$` and unescapes `\\` and `"`."""
    if "\n" in value or "\r" in value:
        raise InputError(f"label value {value[:40]!r}... spans lines; labels are one line")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def rootfs_stage(tree: str, epoch: int) -> str:
    """Under BuildKit, the stage that holds the context's `rootfs/TREE` for the final stage to copy. BuildKit's
    context transfer dates the directories it writes by the clock (files keep their times) and a COPY from the
    context keeps those dates in the layer, so a cached layer and a fresh one of the same files differ
    (measured on Docker 26: /etc and /opt/stackctl). A COPY --from keeps the dates it is given, as the groups'
    do: the tree is copied here from a mount of the context and every entry dated `epoch`."""
    return (f"FROM tools AS rootfs-{tree}\n"
            f"RUN --mount=type=bind,source={ROOTFS}/{tree},target=/mnt mkdir /export && cp -a /mnt/. /export/ \\\n"
            f" && find /export -exec touch -h -d @{epoch} {{}} +\n\n")


def rootfs_copy(tree: str, mounts: str) -> str:
    """The final stage's step that puts `rootfs/TREE` onto / (from its stage under BuildKit)."""
    return f"COPY --from=rootfs-{tree} /export/ /" if mounts else f"COPY {ROOTFS}/{tree}/ /"


GATE_ARGV = ("/opt/venv/bin/python", "-B", "/opt/stackctl/gate/gate.py", GATE_SPEC_PATH,
             "--freeze", INSTALLED_PATH, "--epoch")


TOOLS = "/tmp/tools"  # the tools stage's venv (its installer), mounted into the gate's step under BuildKit


def top_install(plan: BuildPlan, group: LayerGroup, wheels: str) -> tuple[str, str]:
    """Under BuildKit, the top group installed by the gate's own step rather than by a stage of its own and a
    COPY: the mounts that step takes and the shell it runs first.

    A moved top pin (the usual upgrade) then costs one step, not three (its stage, its COPY, the gate), and the
    final stage's cached steps below it are loaded while it installs rather than after: measured on Docker 26.1
    (the torch stack, torchada moved, BuildKit's own clock, five builds each) 2.08-2.20 s against 2.41-2.50 s.
    Its files are installed, normalised and dated as its stage would (the same bytes: byte-code names
    /opt/stack/GROUP there too), and share the gate's layer. /tmp is a tmpfs for the step, so neither the
    installer's temporary files nor the mount points of the wheels and the installer (under /tmp) touch a
    directory of the layer."""
    target = f"{PREFIX}/{group.name}"
    mounts = (f"--mount=type=tmpfs,target=/tmp --mount=type=bind,{wheels},target=/tmp/group "
              f"--mount=type=bind,from=tools,source=/opt/venv,target={TOOLS} ")
    install = install_command(group.name, plan.installer, plan.compiles(group), tools=TOOLS)
    # the venv's python, which the installer runs, loads the groups' .pth files: no byte-code of theirs may be
    # cached into this layer (setuptools' _distutils_hack, measured); the install's own byte-code is compiled
    return mounts, (f"\\\n    export PYTHONDONTWRITEBYTECODE=1 \\\n && SOURCE_DATE_EPOCH={group.epoch} {install} \\\n"
                    f" && {normalise(target, epoch=group.epoch, bytecode=plan.compiles(group))} \\\n"
                    f" && touch -h -d @{group.epoch} {PREFIX} \\\n && ")


def gate_step(stack_files: tuple[str, ...], epoch: int, mounts: str, top: tuple[str, str] = ("", "")) -> str:
    """The final stage's last step: the stack's own files (the gate's spec, the SBOM: absolute paths) onto /,
    then the gate, whose imports and record are dated `epoch`.

    The classic builder copies the tree from the context. Under BuildKit one RUN both copies and gates: the
    stack's tree changes with every pin, and a stage of its own (as the venv's tree has) would cost a rebuild a
    container's start beside the one the gate needs anyway. The tree is bind-mounted at /mnt, a directory
    distributions' images have, so no mount stub is made and removed under a directory of the layer (a base
    without /mnt would get `/` in the layer, dated by the clock: its digest then differs build to build,
    which `verify --rebuild` reports); the files are copied
    rather than their directories (which BuildKit's transfer dates by the clock), and the files and the
    directories they land in get `epoch`. `top`: the mounts and the shell that install the top group first
    (`top_install`)."""
    argv = [*GATE_ARGV, str(epoch)]
    network = OFFLINE if mounts == "named" else ""
    if not mounts:
        return f"COPY {ROOTFS}/stack/ /\nRUN {json.dumps(argv)}"
    dirs = sorted({str(parent) for f in stack_files for parent in Path(f).parents if str(parent) != "/"})
    copy = " \\\n && ".join(f"cp /mnt{f} {f}" for f in stack_files)
    dated = " ".join((*dirs, *stack_files))
    top_mounts, top_shell = top
    return (f"RUN {network}{top_mounts}--mount=type=bind,source={ROOTFS}/stack,target=/mnt {top_shell}"
            f"mkdir -p {' '.join(dirs)} \\\n"
            f" && {copy} \\\n && touch -h -d @{epoch} {dated} \\\n && exec {' '.join(argv)}")


def render(plan: BuildPlan, templates: Templates) -> Rendered:
    if plan.python and not re.fullmatch(r"\d+\.\d+", plan.python):
        raise InputError(f"{plan.stack}: image python {plan.python!r} is not MAJOR.MINOR")
    if not plan.groups:
        raise InputError(f"{plan.stack}: nothing to install for {plan.target}")
    stages, copies, files = [], [], []
    top: tuple[str, str] = ("", "")
    for n, group in enumerate(plan.groups, 1):
        stage = f"layer{n:02d}-{group.name}"
        members = ", ".join(i.name for i in group.items)
        if plan.mounts:
            wheels = f"from={wheels_context(group.name)}" if plan.mounts == "named" \
                else f"source=groups/{group.name}"
        else:
            wheels = f"groups/{group.name}/requirements.txt" if plan.serve_wheels else f"groups/{group.name}/"
        requirements = Template(templates.requirements).substitute(
            group=group.name, stack=plan.stack, lines=requirement_lines(group))
        files.append(ContextFile(f"groups/{group.name}/requirements.txt", text=requirements, epoch=group.epoch))
        files += [ContextFile(f"groups/{group.name}/{i.filename}", wheel=i.filename, sha256=i.sha256,
                              epoch=group.epoch) for i in group.items]
        if plan.mounts and n == len(plan.groups) and not group.split:
            top = top_install(plan, group, wheels)  # the gate's step installs it
            continue
        stages.append(Template(templates.stage_buildkit if plan.mounts else templates.stage).substitute(
            group=group.name, stage=stage, members=members, epoch=group.epoch, wheels=wheels,
            network=OFFLINE if plan.mounts == "named" else "",
            install=install_command(group.name, plan.installer, plan.compiles(group), plan.serve_wheels),
            normalise=(split_big_files() + normalise("/export", "/export-big", epoch=group.epoch,
                                                      bytecode=plan.compiles(group))
                       if plan.mounts and group.split else
                       normalise("/export", epoch=group.epoch, bytecode=plan.compiles(group)))))
        copies.append(Template(templates.copy).substitute(group=group.name, stage=stage).rstrip("\n"))
        if plan.mounts and group.split:  # its big files: a layer of their own, gzipped beside the rest
            copies.append(f"COPY --from={stage} /export-big/ /")
    dirs = [f"{PREFIX}/{g.name}" for g in plan.groups]
    # exec runs each .pth line in a function scope: no comprehension may refer to `site`.
    pth = "import site; list(map(site.addsitedir, " + json.dumps(dirs) + "))\n"
    tools = ""
    if plan.installer is not None:
        tool = plan.installer
        tools = Template(templates.tool).substitute(name=tool.name, wheel=tool.filename)
        files += [ContextFile("tools/SHA256SUMS", text=f"{tool.sha256}  {tool.filename}\n"),
                  ContextFile(f"tools/{tool.filename}", wheel=tool.filename, sha256=tool.sha256)]
    e = plan.epoch
    labels = ""
    if plan.labels:
        labels = "LABEL " + " \\\n      ".join(f"{label_value(k)}={label_value(v)}" for k, v in plan.labels)
    dockerfile = Template(templates.dockerfile).substitute(
        stack=plan.stack, target=plan.target, base=plan.base, python=plan.python,
        stages="".join(stages) + (rootfs_stage("venv", EPOCH_FLOOR) if plan.mounts else ""),
        path=":".join(["/opt/venv/bin", *(f"{d}/bin" for d in dirs),
                       "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]),
        copies="\n".join(copies), labels=labels, tools=tools, epoch=e,
        copy_venv=rootfs_copy("venv", plan.mounts), gate=gate_step(STACK_FILES, e, plan.mounts, top),
        builder_note=BUILDKIT_NOTE if plan.mounts else CLASSIC_NOTE,
        # pip is what installs without another installer; with one, ensurepip's seconds buy nothing
        venv="python3 -m venv /opt/venv \\\n && /opt/venv/bin/python -m pip --version" if plan.installer is None
        else "python3 -m venv --without-pip /opt/venv",
        # the venv's layer is the same for every pin of the stack: its date is fixed, not the groups' newest
        normalise=normalise("/opt/venv", "/opt/stackctl", epoch=EPOCH_FLOOR)
        + f" \\\n && touch -h -d @{EPOCH_FLOOR} /opt")
    files += [ContextFile(f"{ROOTFS}/venv/opt/stackctl/layers.pth", text=pth, epoch=EPOCH_FLOOR),
              ContextFile(f"{ROOTFS}/venv/opt/stackctl/gate/gate.py", text=templates.gate_script,
                          epoch=EPOCH_FLOOR),
              ContextFile(f"{ROOTFS}/stack{GATE_SPEC_PATH}", text=plan.gate_spec, epoch=e),
              ContextFile(f"{ROOTFS}/stack{SBOM_PATH}", text=plan.sbom or "{}\n", epoch=e),
              ContextFile("Dockerfile", text=dockerfile, epoch=e)]
    if plan.mounts:
        # BuildKit mounts /etc/hosts over a stub it creates where the image has none, and removes the stub after
        # each RUN: the directory's date, the clock's, would then land in that step's layer. With the file there
        # no stub is made. (The engine mounts its own over it in every container.)
        files.append(ContextFile(f"{ROOTFS}/venv/etc/hosts", text=HOSTS, epoch=EPOCH_FLOOR))
    if plan.serve_wheels:  # the stages fetch them from the wheel server: the engine need not receive them
        files.append(ContextFile(".dockerignore", text="groups/*/*.whl\n", epoch=e))
    elif plan.mounts == "named":  # the wheels go in a context of their own: the main one need not carry them
        files.append(ContextFile(".dockerignore", text="groups/\n", epoch=e))
    return Rendered(dockerfile, tuple(files))
