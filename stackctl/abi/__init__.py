"""Stage 5, ABI: the DT_NEEDED check across a stack, the image inventory model, the wheel diff.

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.abi.check import AbiReport as AbiReport
    from stackctl.abi.inventory import Inventory as Inventory
    from stackctl.abi.inventory import read_inventory as read_inventory
    from stackctl.abi.inventory import write_inventory as write_inventory
    from stackctl.abi.plan import AbiOutcome as AbiOutcome
    from stackctl.abi.plan import check_targets as check_targets
    from stackctl.abi.plan import is_wheel_target as is_wheel_target
    from stackctl.abi.wheeldiff import WheelDiffRun as WheelDiffRun
    from stackctl.abi.wheeldiff import diff_wheel_files as diff_wheel_files

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
