"""`stackctl gate`: the gate spec rendered from the profile (and its lock), written where asked, and run where
asked: under an interpreter here, or (`gate --image`) in a container of any image on the real engine."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stackctl.errors import InputError, StackctlError
from stackctl.image.gaterun import GateRun, run_gate

if TYPE_CHECKING:
    from stackctl.engine.docker import DockerEngine
    from stackctl.profile.model import Devices, Stack


def gate_stack(stack: Stack, spec: str, *, python: str | None = None, image: str | None = None,
               device: bool = False) -> GateRun:
    """The gate `spec` of `stack` run under `python` (default: this interpreter), or with `image` in a container
    of it on the engine; `device` (the device phase) gives that container the profile's devices."""
    if image is None:
        return run_gate(stack, python or sys.executable, spec)
    # the device phase's container is given the profile's devices; the other phases run where none is
    return gate_image(image, spec, python, devices=stack.devices if device else None)


def gate_image(image: str, spec: str, python: str | None = None, *, devices: Devices | None = None,
               engine: DockerEngine | None = None) -> GateRun:
    """Run the gate `spec` in a container of `image` (no network) on the engine of DOCKER_HOST (or `engine`);
    with `devices` (the device phase), the container is given the profile's devices."""
    from stackctl.engine.docker import DockerEngine, check_local_ref
    from stackctl.image.app import gate_in_container

    check_local_ref(image)
    engine = engine or DockerEngine()
    if devices is None:
        return gate_in_container(engine, image, spec, python)
    from stackctl.base.assets import asset_root
    from stackctl.image.app import GATE_DIR, gate_argv

    files = {f"{GATE_DIR}/gate.py": (asset_root() / "gates" / "gate.py").read_bytes(),
             f"{GATE_DIR}/gate.json": spec.encode("utf-8")}
    status, out, err, _ = engine.run_with_files(image, files, gate_argv(f"{GATE_DIR}/gate.json", python=python or
                                                                        "python3"), devices=devices)
    return GateRun.from_output(f"{python or 'python3'} in {image}", status, out, err)


@dataclass(frozen=True)
class Gated:
    """`stackctl gate`: the spec rendered; the run (None with --spec-only) and its verdict (None: it passed)."""

    stack: str
    spec: str
    run: GateRun | None = None
    problem: StackctlError | None = None


# Entered around the gate's run: given the stack's name and where it runs (an interpreter, `image REF`).
Around = Callable[[str, str], AbstractContextManager[object]]


def gate_profile(profile: str, *, python: str | None = None, image: str | None = None, phase: str = "all",
         lock: Path | None = None, target: str | None = None, spec_out: Path | None = None,
         spec_only: bool = False, around: Around | None = None) -> Gated:
    """The profile's gate spec for `phase` (with `lock`, its closure preserved), written to `spec_out` when
    given, then (unless `spec_only`) run under `python` or in a container of `image`, inside `around`."""
    from stackctl.base.files import write_atomic
    from stackctl.image.app import gate_phase
    from stackctl.image.gaterun import gate_spec_text, verdict
    from stackctl.profile.locate import load_profile
    from stackctl.resolve.lock import read_lock

    stack = load_profile(profile)
    spec = gate_spec_text(stack, read_lock(lock) if lock is not None else None, target, gate_phase(phase))
    if spec_out is not None:
        try:
            write_atomic(spec_out, spec)
        except OSError as exc:
            raise InputError(f"{spec_out}: cannot write the gate spec: {exc.strerror or exc}") from None
    if spec_only:
        return Gated(stack.name, spec)
    where = f"image {image}" if image is not None else python or sys.executable
    with around(stack.name, where) if around is not None else nullcontext():
        run = gate_stack(stack, spec, python=python, image=image, device=phase == "device")
    return Gated(stack.name, spec, run, verdict(stack.name, run))
