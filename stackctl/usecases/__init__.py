"""Stage 12, the use cases, just below the command line: one module per command family, each a command's whole
work as one call (a command parses its options, makes that call and renders what it returns). They resolve a
PROFILE argument once (`profile.StackRef`), decide where the records go, and wire the stages to the engine
adapters: `build` (a single build, `build --all`, `tag`, `render`: one `BuildOrder`), `publish`, `verify`,
`gate`, `ab`, `bisect`, `report` (and `scan`), `resolve` (`resolve`, `lock`, `outdated`, `fetch`, `check`,
`export`, `show`, `propose`).

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.base.progress import BuildProgress as BuildProgress
    from stackctl.image.order import BuildOrder as BuildOrder
    from stackctl.usecases.ab import AbAsk as AbAsk
    from stackctl.usecases.ab import AbDone as AbDone
    from stackctl.usecases.ab import ab_compare as ab_compare
    from stackctl.usecases.bisect import BisectAsk as BisectAsk
    from stackctl.usecases.bisect import bisect_moves as bisect_moves
    from stackctl.usecases.build import BuildReport as BuildReport
    from stackctl.usecases.build import build_stack as build_stack
    from stackctl.usecases.build import chosen_builder as chosen_builder
    from stackctl.usecases.build import image_tag as image_tag
    from stackctl.usecases.build import open_engine as open_engine
    from stackctl.usecases.build import render_profile as render_profile
    from stackctl.usecases.build import with_builder as with_builder
    from stackctl.usecases.gate import Gated as Gated
    from stackctl.usecases.gate import gate_image as gate_image
    from stackctl.usecases.gate import gate_profile as gate_profile
    from stackctl.usecases.gate import gate_stack as gate_stack
    from stackctl.usecases.matrix import AllBuild as AllBuild
    from stackctl.usecases.matrix import build_all as build_all
    from stackctl.usecases.publish import Published as Published
    from stackctl.usecases.publish import PublishedCell as PublishedCell
    from stackctl.usecases.publish import builder_facts as builder_facts
    from stackctl.usecases.publish import publish_built as publish_built
    from stackctl.usecases.publish import publish_cells as publish_cells
    from stackctl.usecases.publish import publish_image as publish_image
    from stackctl.usecases.report import report_profile as report_profile
    from stackctl.usecases.report import scan_profile as scan_profile
    from stackctl.usecases.resolve import ClientOptions as ClientOptions
    from stackctl.usecases.resolve import Exported as Exported
    from stackctl.usecases.resolve import LockChecked as LockChecked
    from stackctl.usecases.resolve import Locked as Locked
    from stackctl.usecases.resolve import Outdated as Outdated
    from stackctl.usecases.resolve import Shown as Shown
    from stackctl.usecases.resolve import check_profile as check_profile
    from stackctl.usecases.resolve import export_profile as export_profile
    from stackctl.usecases.resolve import fetch_profile as fetch_profile
    from stackctl.usecases.resolve import lock_of_profile as lock_of_profile
    from stackctl.usecases.resolve import outdated_pins as outdated_pins
    from stackctl.usecases.resolve import propose as propose
    from stackctl.usecases.resolve import resolve_profile as resolve_profile
    from stackctl.usecases.resolve import show_profile as show_profile
    from stackctl.usecases.verify import verify_remote as verify_remote

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
