"""Each stage package declares its API: every name in its `__all__` is there, none is shadowed by a module of
the same name, and cli/ reaches a stage only through those names (import-linter holds the last one too)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import types
from pathlib import Path

import pytest

import stackctl

STAGES = ("base", "profile", "index", "wheels", "resolve", "abi", "image", "verify", "publish", "engine", "bisect",
          "review")


@pytest.mark.parametrize("stage", STAGES)
def test_every_declared_name_is_there_and_is_no_module(stage: str) -> None:
    package = importlib.import_module(f"stackctl.{stage}")
    declared = package.__all__
    assert declared == sorted(declared) and len(set(declared)) == len(declared)
    submodules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    # `from stackctl.image import prepare` would give the module once it was imported: never reuse a name.
    assert not set(declared) & submodules
    for name in declared:
        assert not isinstance(getattr(package, name), types.ModuleType), name
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        package.nonesuch  # noqa: B018


def test_cli_imports_no_module_inside_a_stage() -> None:
    cli = Path(stackctl.__file__).parent / "cli"
    pattern = re.compile(rf"from stackctl\.({'|'.join(STAGES)})\.\w+ import|import stackctl\.({'|'.join(STAGES)})\.")
    offenders = [f"{p.name}:{n}" for p in sorted(cli.glob("*.py"))
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert offenders == []
