"""A stage package's declared names, each imported from its module on first use.

A stage's `__init__` lists what the stage offers (its `__all__`); importing the package must not import
those modules, or every command would pay for every stage at start-up. `lazy_api` gives the package a
module `__getattr__` (PEP 562) that imports a name's module when the name is first asked for, then keeps it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_api(package: str, api: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """The `__getattr__` of `package`, from {submodule: the names it provides}."""
    where = {name: f"{package}.{module}" for module, names in api.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__, not importlib.import_module: the interpreter's own import, which `-X importtime` (the
        # benchmarks' and tests' account of what a run imports) sees; import_module bypasses it.
        __import__(module)
        value = getattr(sys.modules[module], name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
