"""Stage 12, the use cases, just below the command line: one module per command family, each a command's whole
work as one call (a command parses its options, makes that call and renders what it returns). They resolve a
PROFILE argument once (`profile.StackRef`), decide where the records go, and wire the stages to the engine
adapters: `build` (a single build, `build --all`, `tag`, `render`: one `BuildOrder`), `publish`, `verify`,
`gate`, `ab`, `bisect`, `report` (and `scan`), `resolve` (`resolve`, `lock`, `outdated`, `fetch`, `check`,
`export`, `show`, `propose`).

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.base.progress import BuildProgress
    from stackctl.image.order import BuildOrder
    from stackctl.usecases.ab import AbAsk, AbDone, ab_compare
    from stackctl.usecases.bisect import BisectAsk, bisect_moves
    from stackctl.usecases.build import (
        BuildReport,
        build_over_pool,
        build_stack,
        chosen_builder,
        image_tag,
        open_engine,
        render_profile,
        with_builder,
    )
    from stackctl.usecases.gate import Gated, gate_image, gate_profile, gate_stack
    from stackctl.usecases.publish import (
        Published,
        PublishedCell,
        builder_facts,
        publish_built,
        publish_image,
        publish_over_pool,
    )
    from stackctl.usecases.report import report_profile, scan_profile
    from stackctl.usecases.resolve import (
        ClientOptions,
        Exported,
        LockChecked,
        Locked,
        Outdated,
        Shown,
        check_profile,
        export_profile,
        fetch_profile,
        lock_of_profile,
        outdated_pins,
        propose,
        resolve_profile,
        show_profile,
    )
    from stackctl.usecases.verify import verify_remote

__all__ = [
    "AbAsk",
    "AbDone",
    "BisectAsk",
    "BuildOrder",
    "BuildProgress",
    "BuildReport",
    "ClientOptions",
    "Exported",
    "Gated",
    "LockChecked",
    "Locked",
    "Outdated",
    "Published",
    "PublishedCell",
    "Shown",
    "ab_compare",
    "bisect_moves",
    "build_over_pool",
    "build_stack",
    "builder_facts",
    "check_profile",
    "chosen_builder",
    "export_profile",
    "fetch_profile",
    "gate_image",
    "gate_profile",
    "gate_stack",
    "image_tag",
    "lock_of_profile",
    "open_engine",
    "outdated_pins",
    "propose",
    "publish_built",
    "publish_image",
    "publish_over_pool",
    "render_profile",
    "report_profile",
    "resolve_profile",
    "scan_profile",
    "show_profile",
    "verify_remote",
    "with_builder",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "ab": ("AbAsk", "AbDone", "ab_compare"),
        "bisect": ("BisectAsk", "bisect_moves"),
        "build": ("BuildOrder", "BuildProgress", "BuildReport", "build_over_pool", "build_stack", "chosen_builder",
                  "image_tag", "open_engine", "render_profile", "with_builder"),
        "report": ("report_profile", "scan_profile"),
        "resolve": ("ClientOptions", "Exported", "LockChecked", "Locked", "Outdated", "Shown", "check_profile",
                    "export_profile", "fetch_profile", "lock_of_profile", "outdated_pins", "propose",
                    "resolve_profile", "show_profile"),
        "gate": ("Gated", "gate_image", "gate_profile", "gate_stack"),
        "publish": ("Published", "PublishedCell", "builder_facts", "publish_built", "publish_image",
                    "publish_over_pool"),
        "verify": ("verify_remote",),
    })
