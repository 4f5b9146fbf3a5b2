"""Stage 5, ABI: the DT_NEEDED check across a stack, the image inventory model, the wheel diff.

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.abi.check import AbiReport
    from stackctl.abi.inventory import Inventory, read_inventory, write_inventory
    from stackctl.abi.plan import AbiOutcome, check_targets, is_wheel_target
    from stackctl.abi.wheeldiff import WheelDiffRun, diff_wheel_files

__all__ = [
    "AbiOutcome", "AbiReport", "Inventory", "WheelDiffRun", "check_targets", "diff_wheel_files", "is_wheel_target",
    "read_inventory", "write_inventory",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "check": ("AbiReport",),
        "inventory": ("Inventory", "read_inventory", "write_inventory"),
        "plan": ("AbiOutcome", "check_targets", "is_wheel_target"),
        "wheeldiff": ("WheelDiffRun", "diff_wheel_files"),
    })
