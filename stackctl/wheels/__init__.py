"""Stage 3, wheels: a wheel read in place (locally or by range requests), its members scanned, ELF via pyelftools.

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.wheels.archive import Limits
    from stackctl.wheels.source import OpenedWheel, WheelOrigin

__all__ = [
    "Limits", "OpenedWheel", "WheelOrigin",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "archive": ("Limits",),
        "source": ("OpenedWheel", "WheelOrigin"),
    })
