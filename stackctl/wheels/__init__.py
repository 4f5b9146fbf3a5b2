"""Stage 3, wheels: a wheel read in place (locally or by range requests), its members scanned, ELF via pyelftools.

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.wheels.archive import Limits as Limits
    from stackctl.wheels.source import OpenedWheel as OpenedWheel
    from stackctl.wheels.source import WheelOrigin as WheelOrigin

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
