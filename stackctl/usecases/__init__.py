"""The use cases, just below the command line: one module per command family, each a command's whole work as
one call (a command parses its options, makes that call and renders what it returns). They wire the stages
to the engine adapters: `build` (a single build and `build --all`, one `BuildOrder`), `publish`, `verify`,
`gate`, `ab`, `abi`, `bisect`.

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.image.order import BuildOrder
    from stackctl.usecases.ab import AbAsk, AbDone, ab_compare
    from stackctl.usecases.bisect import BisectAsk, bisect_moves
    from stackctl.usecases.build import (
        BuildProgress,
        BuildReport,
        build_over_pool,
        build_stack,
        chosen_builder,
        open_engine,
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
    from stackctl.usecases.verify import verify_remote

__all__ = [
    "AbAsk",
    "AbDone",
    "BisectAsk",
    "BuildOrder",
    "BuildProgress",
    "BuildReport",
    "Gated",
    "Published",
    "PublishedCell",
    "ab_compare",
    "bisect_moves",
    "build_over_pool",
    "build_stack",
    "builder_facts",
    "chosen_builder",
    "gate_image",
    "gate_profile",
    "gate_stack",
    "open_engine",
    "publish_built",
    "publish_image",
    "publish_over_pool",
    "verify_remote",
    "with_builder",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "ab": ("AbAsk", "AbDone", "ab_compare"),
        "bisect": ("BisectAsk", "bisect_moves"),
        "build": ("BuildOrder", "BuildProgress", "BuildReport", "build_over_pool", "build_stack", "chosen_builder",
                  "open_engine", "with_builder"),
        "gate": ("Gated", "gate_image", "gate_profile", "gate_stack"),
        "publish": ("Published", "PublishedCell", "builder_facts", "publish_built", "publish_image",
                    "publish_over_pool"),
        "verify": ("verify_remote",),
    })
