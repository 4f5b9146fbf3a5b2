"""A stage package's declared names, each imported from its module on first use.

A stage's `__init__` lists what the stage offers once, as the imports of its `if TYPE_CHECKING:` block, each in
the form `from stackctl.stage.module import name as name`: mypy reads that form as the package exporting the
name, and `lazy_api` reads the same block for the package's `__all__` and for where each name lives. Importing
the package must not import those modules, or every command would pay for every stage at start-up: `lazy_api`
gives the package a module `__getattr__` (PEP 562) that imports a name's module when the name is first asked
for, then keeps it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def declared_names(package: str) -> dict[str, str]:
    """{name: its module} of the `name as name` imports in the package's `if TYPE_CHECKING:` block, read from
    its source: an import of another form is the `__init__`'s own, which mypy does not export either."""
    import ast

    path = sys.modules[package].__file__
    assert path is not None  # a stage is a regular package: its __init__ is a file
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    return {alias.name: node.module
            for block in tree.body
            if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
            for node in block.body if isinstance(node, ast.ImportFrom) and node.module and not node.level
            for alias in node.names if alias.asname == alias.name}


def lazy_api(package: str) -> Callable[[str], Any]:
    """The `__getattr__` of `package`: its `__all__` and each declared name (`declared_names`), imported from
    its module when first asked for. The block is read on the first name asked for, not at import."""
    where: dict[str, str] = {}

    def __getattr__(name: str) -> Any:
        if not where:
            where.update(declared_names(package))
        if name == "__all__":
            value: Any = sorted(where)
        elif name in where:
            # __import__, not importlib.import_module: the interpreter's own import, which `-X importtime` (the
            # benchmarks' and tests' account of what a run imports) sees; import_module bypasses it.
            __import__(where[name])
            value = getattr(sys.modules[where[name]], name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
