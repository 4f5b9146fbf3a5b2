"""Each stage package declares its API once: the `name as name` imports of its `if TYPE_CHECKING:` block, which
mypy reads as the package's exports and `base.lazy` reads for its `__all__` and its lazy imports. Every declared
name is there (the module's own object), none is shadowed by a module of the same name, and cli/ reaches a stage
only through those names (import-linter holds the last one too)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import types
from pathlib import Path

import pytest

import stackctl

# every package of stackctl but the command line: a stage added later is checked without being named here
STAGES = tuple(sorted(m.name for m in pkgutil.iter_modules(stackctl.__path__) if m.ispkg and m.name != "cli"))


def test_the_stages_are_every_package_but_the_command_line() -> None:
    assert {"ab", "base", "image", "usecases", "review"} <= set(STAGES) and "cli" not in STAGES


@pytest.mark.parametrize("stage", STAGES)
def test_every_declared_name_is_there_and_is_no_module(stage: str) -> None:
    package = importlib.import_module(f"stackctl.{stage}")
    declared = package.__all__
    assert declared, stage
    assert declared == sorted(declared) and len(set(declared)) == len(declared)
    submodules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    # `from stackctl.image import prepare` would give the module once it was imported: never reuse a name.
    assert not set(declared) & submodules
    for name in declared:
        assert not isinstance(getattr(package, name), types.ModuleType), name
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        package.nonesuch  # noqa: B018


@pytest.mark.parametrize("stage", STAGES)
def test_the_names_mypy_reads_are_the_names_the_package_gives(stage: str) -> None:
    """mypy exports a stage's name only as `name as name` (or through a literal `__all__`); the package gives
    exactly those, each the very object of the module the import names."""
    package = importlib.import_module(f"stackctl.{stage}")
    tree = ast.parse(Path(package.__file__ or "").read_text(encoding="utf-8"))
    blocks = [b for b in tree.body if isinstance(b, ast.If) and ast.unparse(b.test) == "TYPE_CHECKING"]
    imports = [node for b in blocks for node in b.body]
    assert imports and all(isinstance(node, ast.ImportFrom) for node in imports), stage
    exported = {a.name: n.module for n in imports if isinstance(n, ast.ImportFrom) for a in n.names
                if a.asname == a.name}
    literal = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
               and [ast.unparse(t) for t in n.targets] == ["__all__"]]
    assert sorted(package.__all__) == sorted(literal[0] if literal else exported)
    for name in package.__all__:
        assert name in exported, f"{stage}: {name} is not imported as `{name} as {name}`"
        assert getattr(package, name) is getattr(importlib.import_module(str(exported[name])), name)


def test_cli_imports_no_module_inside_a_stage() -> None:
    cli = Path(stackctl.__file__).parent / "cli"
    pattern = re.compile(rf"from stackctl\.({'|'.join(STAGES)})\.\w+ import|import stackctl\.({'|'.join(STAGES)})\.")
    offenders = [f"{p.name}:{n}" for p in sorted(cli.glob("*.py"))
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert offenders == []
