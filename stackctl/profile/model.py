"""The stack profile: what a stack pins, where each pin comes from, how it is gated and shipped.

Values only. `loader.load_stack` reads TOML files into these; everything downstream takes a `Stack`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from packaging.utils import NormalizedName, canonicalize_name

from stackctl.base.words import count


class GateCheck(str, Enum):
    EXACT = "exact"  # the full version string, local label included
    PREFIX = "prefix"  # the version starts with a given prefix ("1.26.")
    PRESENT = "present"  # installed, any version


class GateMode(str, Enum):
    IMPORT = "import"  # import the module, then read the version
    SPEC = "spec"  # find the module without importing it (imports that need a GPU)
    VERSION = "version"  # read the distribution's version only; never import


class GatePhase(str, Enum):
    STACK = "stack"  # in the stack image: what the lock installs
    APP = "app"  # after the project's own Dockerfile ([image.app]): what the app build installs
    # only where a device is (`gate --phase device`, `ab`): the `spec` entries imported for real, and the
    # probes that need the device; never part of a build's gate
    DEVICE = "device"


class AbiRole(str, Enum):
    CHECK = "check"  # its ELF files are checked, and provide libraries to others
    PROVIDE = "provide"  # its ELF files only provide libraries to others
    IGNORE = "ignore"


@dataclass(frozen=True)
class Target:
    python: str  # "3.10"
    platform: str  # "linux_x86_64"

    @property
    def interpreter(self) -> str:
        return "cp" + self.python.replace(".", "")

    @property
    def label(self) -> str:
        return f"{self.interpreter}-{self.platform}"

    @property
    def machine(self) -> str:
        """`linux_x86_64`, `manylinux_2_28_aarch64` → the machine name `platform.machine()` reports there."""
        for arch in ("x86_64", "aarch64", "ppc64le", "s390x", "i686"):
            if self.platform.endswith("_" + arch):
                return arch
        return self.platform.rsplit("_", 1)[-1]

    def marker_environment(self) -> dict[str, str]:
        """The PEP 508 environment an interpreter of this target reports: what pin markers are evaluated in."""
        return {
            "python_version": self.python,
            "python_full_version": self.python + ".0",
            "platform_machine": self.machine,
            "sys_platform": "linux",
            "platform_system": "Linux",
            "os_name": "posix",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "implementation_version": self.python + ".0",
            "platform_release": "",
            "platform_version": "",
        }


@dataclass(frozen=True)
class Index:
    name: str
    url: str | None  # None: taken from the user's pip configuration at run time
    from_pip: bool = False
    username_env: str | None = None
    password_env: str | None = None
    netrc: bool = True


@dataclass(frozen=True)
class GateRole:
    order: int
    module: str
    check: GateCheck = GateCheck.EXACT
    mode: GateMode = GateMode.IMPORT
    prefix: str | None = None
    expect: str | None = None  # only for gate entries that are not pins
    skip_import_if: str | None = None  # a requirement on another pin: when it holds, check version only
    before: tuple[str, ...] = ()  # entries this one must precede (torchada patches torch at import)
    phase: GatePhase = GatePhase.STACK


@dataclass(frozen=True)
class Pin:
    name: str  # as written, for display
    version: str  # exact PEP 440, local label included
    index: str
    file: str | None = None  # requirement file it is exported to
    train: str | None = None
    note: str = ""
    abi: AbiRole = AbiRole.PROVIDE
    gate: GateRole | None = None
    # Which of the stack's targets the pin is for (a vendor may build deep_ep for cp310 only). Empty
    # tuples and no marker: every target.
    python: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()
    marker: str | None = None  # a PEP 508 marker evaluated in each target's environment

    @property
    def key(self) -> NormalizedName:
        return canonicalize_name(self.name)

    def requirement_marker(self) -> str | None:
        """The PEP 508 marker a requirement line carries so pip installs the pin only where it applies."""
        parts = []
        if self.python:
            parts.append(" or ".join(f'python_version == "{v}"' for v in self.python))
        if self.platforms:
            machines = dict.fromkeys(Target("", p).machine for p in self.platforms)
            parts.append(" or ".join(f'platform_machine == "{m}"' for m in machines))
        if self.marker:
            parts.append(self.marker)
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return " and ".join(f"({p})" if " or " in p else p for p in parts)

    def applies_to(self, target: Target) -> bool:
        if self.python and target.python not in self.python:
            return False
        if self.platforms and target.platform not in self.platforms:
            return False
        if self.marker:
            from packaging.markers import Marker  # only a stack with markers pays for the marker grammar

            return Marker(self.marker).evaluate(target.marker_environment())
        return True

    def targets(self, targets: tuple[Target, ...]) -> tuple[Target, ...]:
        return tuple(t for t in targets if self.applies_to(t))


@dataclass(frozen=True)
class GateEntry:
    """One line of the in-image gate, in order; built from pins and gate-only entries."""

    dist: str
    module: str
    order: int
    check: GateCheck
    mode: GateMode
    expected: str | None  # full version for EXACT, prefix for PREFIX, None for PRESENT
    skip_import_if: str | None
    pinned: bool
    phase: GatePhase = GatePhase.STACK


@dataclass(frozen=True)
class Probe:
    name: str
    kind: str  # "file-count" | "attr"
    package: str | None = None
    glob: str | None = None
    count: int | None = None
    module: str | None = None
    attr: str | None = None
    value: str | None = None
    phase: GatePhase = GatePhase.STACK
    # `expr`: a boolean expression over `modules` (imported first); `parity`: `op` evaluated after `setup` on
    # the CPU and again with setup's values moved to `device`, compared within atol + rtol * |cpu|
    expr: str | None = None
    modules: tuple[str, ...] = ()
    setup: str | None = None
    op: str | None = None
    device: str | None = None
    atol: float | None = None
    rtol: float | None = None

    def describe(self) -> str:
        if self.kind == "file-count":
            return f"{count(self.count or 0, 'file')} {self.package}/{self.glob}"
        if self.kind == "expr":
            return str(self.expr)
        if self.kind == "parity":
            return f"{self.op} on {self.device} vs cpu"
        return f"{self.module}.{self.attr} == {self.value!r}"


@dataclass(frozen=True)
class Devices:
    """`[devices]`: what a container of this stack's image is given to reach its accelerators, as the
    vendor's container stack expects: the engine's device requests (what `docker run --gpus` sends), CDI
    device names (Docker 25+), or device nodes with a runtime and environment (the MUSA toolkit's)."""

    gpus: str | None = None  # "all", a count, or "device=0,1": `docker run --gpus`'s value
    driver: str | None = None  # the device request's driver (the engine picks one when unset)
    capabilities: tuple[str, ...] = ("gpu",)
    cdi: tuple[str, ...] = ()  # "nvidia.com/gpu=all"
    nodes: tuple[str, ...] = ()  # "/dev/mtgpu0", or HOST:CONTAINER[:PERMISSIONS]
    runtime: str | None = None  # "mthreads"
    env: tuple[tuple[str, str], ...] = ()  # MTHREADS_VISIBLE_DEVICES = "all"
    name: str | None = None  # what records call the device ("NVIDIA H200", "MTT S5000")

    def describe(self) -> str:
        parts = [f"--gpus {self.gpus}"] if self.gpus else []
        parts += [f"--device {c}" for c in self.cdi] + [f"--device {n}" for n in self.nodes]
        parts += [f"--runtime {self.runtime}"] if self.runtime else []
        parts += [f"-e {k}={v}" for k, v in self.env]
        return " ".join(parts) or "none"


@dataclass(frozen=True)
class AppImage:
    """`[image.app]`: the project's own Dockerfile, built FROM the stack image passed by id in `stack_arg`."""

    dockerfile: str  # relative to the profile's repository root
    context: str = "."  # likewise
    target: str | None = None  # a stage of the Dockerfile
    args: tuple[tuple[str, str], ...] = ()
    stack_arg: str = "STACK_IMAGE"


@dataclass(frozen=True)
class Image:
    base: str
    repository: str
    tag: str  # the template
    python: str
    vars: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    # "pip" (in the base image's venv) or "uv": a pin of the stack, hash-checked from the lock like every
    # other wheel, used only in the install stages and never shipped in the image.
    installer: str = "pip"
    # compile .pyc files at build time: True, False, or "pins" (the default, see docs/design/bytecode.md):
    # the profile's pins (trains and single pins, what the gate imports) but not the resolver's closure
    bytecode: bool | Literal["pins"] = "pins"
    app: AppImage | None = None


@dataclass(frozen=True)
class OptionalMember:
    """Library members that are loaded only when a feature is used (a transport plugin): what they need and
    the image lacks is shown as theirs, never as a failure."""

    glob: str  # an install path glob: "nvidia/nvshmem/lib/nvshmem_transport_*.so*"
    reason: str


@dataclass(frozen=True)
class AbiPolicy:
    allow: tuple[str, ...] = ()
    inventory: str | None = None
    # vendor names of the run-time providers (the device driver's libraries): "nvidia", "musa"
    providers: tuple[str, ...] = ()
    provides: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (vendor, library globs) added to a set
    optional: tuple[OptionalMember, ...] = ()
    baseline: str | None = None  # a manylinux/musllinux policy name held without an inventory
    ld_library_path: tuple[str, ...] = ()  # what the image's ENV LD_LIBRARY_PATH sets


@dataclass(frozen=True)
class Stack:
    name: str
    description: str
    targets: tuple[Target, ...]
    indexes: tuple[Index, ...]
    pins: tuple[Pin, ...]
    gate_extra: tuple[tuple[str, GateRole], ...] = ()
    probes: tuple[Probe, ...] = ()
    image: Image | None = None
    abi: AbiPolicy = AbiPolicy()
    extends: str | None = None
    devices: Devices | None = None
    sources: tuple[str, ...] = field(default=(), compare=False)  # files read, child first

    def target(self, label: str) -> Target | None:
        return next((t for t in self.targets if t.label == label), None)

    def pins_for(self, target: Target) -> tuple[Pin, ...]:
        """The pins an install for `target` takes (an image has one target)."""
        return tuple(p for p in self.pins if p.applies_to(target))

    def pin(self, name: str) -> Pin | None:
        key = canonicalize_name(name)
        return next((p for p in self.pins if p.key == key), None)

    def index(self, name: str) -> Index | None:
        return next((i for i in self.indexes if i.name == name), None)

    @property
    def installer_pin(self) -> Pin | None:
        """The pin that installs the others in the image (uv), when the image names one."""
        if self.image is None or self.image.installer == "pip":
            return None
        return self.pin(self.image.installer)

    @property
    def image_pins(self) -> tuple[Pin, ...]:
        """The pins the image ships: all but its installer."""
        tool = self.installer_pin
        return tuple(p for p in self.pins if tool is None or p.key != tool.key)

    def gate_entries(self, target: Target | None = None, phase: GatePhase | None = None) -> tuple[GateEntry, ...]:
        """The gate in order; for one `target` (an image's), only the pins installed there; for one `phase`,
        only its entries (None: the whole gate)."""
        entries = [
            GateEntry(
                dist=p.name,
                module=p.gate.module,
                order=p.gate.order,
                check=p.gate.check,
                mode=p.gate.mode,
                expected=_expected(p.gate, p.version),
                skip_import_if=p.gate.skip_import_if,
                pinned=True,
                phase=p.gate.phase,
            )
            for p in self.pins
            if p.gate is not None and (target is None or p.applies_to(target))
        ]
        entries += [
            GateEntry(
                dist=name,
                module=role.module,
                order=role.order,
                check=role.check,
                mode=role.mode,
                expected=_expected(role, role.expect),
                skip_import_if=role.skip_import_if,
                pinned=False,
                phase=role.phase,
            )
            for name, role in self.gate_extra
        ]
        return tuple(sorted((e for e in entries if phase is None or e.phase is phase), key=lambda e: e.order))

    @property
    def app(self) -> AppImage | None:
        return self.image.app if self.image is not None else None

    def requirement_files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.file for p in self.pins if p.file))

    def digest(self) -> str:
        """sha256 of the effective profile: what a lock records to notice a changed profile."""
        return "sha256:" + hashlib.sha256(canonical_json(self).encode()).hexdigest()


def _expected(role: GateRole, version: str | None) -> str | None:
    if role.check is GateCheck.EXACT:
        return version
    if role.check is GateCheck.PREFIX:
        # A pin's prefix defaults to its own version (`triton==3.2.0` gates 3.2.0.*): one place holds it.
        return role.prefix or version
    return None


def canonical_json(stack: Stack) -> str:
    from stackctl.base.jsonout import to_jsonable

    data = to_jsonable(stack)
    assert isinstance(data, dict)
    data.pop("sources", None)
    for pin in data.get("pins", []):
        # a pin for every target writes none of these: profiles (and their locks) from before
        # per-pin targets keep their digest
        for key in ("python", "platforms", "marker"):
            if pin.get(key) in ((), [], None):
                pin.pop(key, None)
    image = data.get("image")
    if isinstance(image, dict):  # the defaults leave the digest of every profile written before them alone
        if image.get("installer") == "pip":
            image.pop("installer")
        if image.get("bytecode") == "pins":
            image.pop("bytecode")
        if image.get("app") is None:
            image.pop("app", None)
    _drop_stack_phase(data)
    _drop_device_defaults(data)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _drop_stack_phase(data: dict[str, Any]) -> None:
    """Gate roles and probes in the default phase write no phase: the digests of profiles from before phases
    stay as they were."""
    roles = [pin.get("gate") for pin in data.get("pins", [])]
    roles += [pair[1] for pair in data.get("gate_extra", [])]
    roles += list(data.get("probes", []))
    for role in roles:
        if isinstance(role, dict) and role.get("phase") == GatePhase.STACK.value:
            role.pop("phase")


_PROBE_DEVICE_KEYS = ("expr", "modules", "setup", "op", "device", "atol", "rtol")


def _drop_device_defaults(data: dict[str, Any]) -> None:
    """A profile that declares no devices and no expression or parity probe writes none of their keys: the
    digests of profiles from before them stay as they were."""
    if data.get("devices") is None:
        data.pop("devices", None)
    for probe in data.get("probes", []):
        if isinstance(probe, dict):
            for key in _PROBE_DEVICE_KEYS:
                if probe.get(key) in (None, (), []):
                    probe.pop(key, None)
