"""Stage 6, the image: gate spec and runner, render, build context, labels, build result, fingerprint; the
Protocols of the engine, wheel server and registry it works through (`protocols`).

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.image.app import gate_in_container as gate_in_container
    from stackctl.image.app import gate_phase as gate_phase
    from stackctl.image.build import BuildRequest as BuildRequest
    from stackctl.image.build import Built as Built
    from stackctl.image.build import build_image as build_image
    from stackctl.image.buildlog import BuildFailed as BuildFailed
    from stackctl.image.buildlog import BuildResult as BuildResult
    from stackctl.image.buildlog import ImageFacts as ImageFacts
    from stackctl.image.context import WrittenContext as WrittenContext
    from stackctl.image.context import check_wheelhouse_arg as check_wheelhouse_arg
    from stackctl.image.context import render_context as render_context
    from stackctl.image.gaterun import GateRun as GateRun
    from stackctl.image.gaterun import LineKind as LineKind
    from stackctl.image.gaterun import gate_lines as gate_lines
    from stackctl.image.gaterun import gate_spec_text as gate_spec_text
    from stackctl.image.gaterun import run_gate as run_gate
    from stackctl.image.gaterun import verdict as verdict
    from stackctl.image.labels import ImageRef as ImageRef
    from stackctl.image.labels import image_ref as image_ref
    from stackctl.image.matrix import CellProgress as CellProgress
    from stackctl.image.matrix import CellResult as CellResult
    from stackctl.image.matrix import Event as Event
    from stackctl.image.matrix import Matrix as Matrix
    from stackctl.image.prepare import Prepared as Prepared
    from stackctl.image.prepare import prepare_build as prepare_build
    from stackctl.image.protocols import Engine as Engine
    from stackctl.image.protocols import RegistryApi as RegistryApi
    from stackctl.image.protocols import WheelServing as WheelServing

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
