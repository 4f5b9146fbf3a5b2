"""Stage 6, the image: gate spec and runner, render, build context, labels, build result, fingerprint; the
Protocols of the engine, wheel server and registry it works through (`protocols`).

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.image.app import gate_in_container, gate_phase
    from stackctl.image.build import BuildRequest, Built, build_image
    from stackctl.image.buildlog import BuildFailed, BuildResult, ImageFacts
    from stackctl.image.context import WrittenContext, check_wheelhouse_arg, render_context
    from stackctl.image.gaterun import GateRun, LineKind, gate_spec_text, run_gate, verdict
    from stackctl.image.labels import ImageRef, image_ref
    from stackctl.image.matrix import CellProgress, CellResult, Event, Matrix
    from stackctl.image.prepare import Prepared, prepare_build
    from stackctl.image.protocols import Engine, RegistryApi, WheelServing

__all__ = [
    "BuildFailed", "BuildRequest", "BuildResult", "Built", "CellProgress", "CellResult", "Engine", "Event", "GateRun",
    "ImageFacts", "ImageRef", "LineKind", "Matrix", "Prepared",
    "RegistryApi", "WheelServing", "WrittenContext", "build_image",
    "check_wheelhouse_arg", "gate_in_container", "gate_phase",
    "gate_spec_text", "image_ref", "prepare_build",
    "render_context", "run_gate", "verdict",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "app": ("gate_in_container", "gate_phase"),
        "build": ("BuildRequest", "Built", "build_image"),
        "buildlog": ("BuildFailed", "BuildResult", "ImageFacts"),
        "context": ("WrittenContext", "check_wheelhouse_arg", "render_context"),
        "gaterun": ("GateRun", "LineKind", "gate_spec_text", "run_gate", "verdict"),
        "labels": ("ImageRef", "image_ref"),
        "matrix": ("CellProgress", "CellResult", "Event", "Matrix"),
        "prepare": ("Prepared", "prepare_build"),
        "protocols": ("Engine", "RegistryApi", "WheelServing"),
    })
