"""Stage 9, the engine edge: the Docker adapter, the wheel server and the registry client (the only code
importing docker or speaking the registry API), and the commands wired to them.

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.engine.building import BuildOptions, BuildProgress, build_stack, open_engine
    from stackctl.engine.docker import DockerEngine
    from stackctl.engine.gating import gate_image, gate_stack
    from stackctl.engine.inventory import image_inventory
    from stackctl.engine.pool import (
        EngineSpec,
        Pool,
        PoolBuild,
        Published,
        Unreachable,
        build_over_pool,
        engine_specs,
        publish_over_pool,
    )
    from stackctl.engine.publishing import publish_built, publish_image, verify_remote

__all__ = [
    "BuildOptions",
    "BuildProgress",
    "DockerEngine",
    "EngineSpec",
    "Pool",
    "PoolBuild",
    "Published",
    "Unreachable",
    "build_over_pool",
    "build_stack",
    "engine_specs",
    "gate_image",
    "gate_stack",
    "image_inventory",
    "open_engine",
    "publish_built",
    "publish_image",
    "publish_over_pool",
    "verify_remote",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "building": ("BuildOptions", "BuildProgress", "build_stack", "open_engine"),
        "docker": ("DockerEngine",),
        "gating": ("gate_image", "gate_stack"),
        "inventory": ("image_inventory",),
        "pool": ("EngineSpec", "Pool", "PoolBuild", "Published", "Unreachable", "build_over_pool", "engine_specs",
                 "publish_over_pool"),
        "publishing": ("publish_built", "publish_image", "verify_remote"),
    })
