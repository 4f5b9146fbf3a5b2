"""No function of stackctl runs over 80 lines: one that does is split where its steps are, so each step can be
read, named and tested on its own."""

from __future__ import annotations

import ast
from pathlib import Path

import stackctl

LIMIT = 80


def test_no_function_is_over_80_lines() -> None:
    root = Path(stackctl.__file__).parent
    long = [f"{path.relative_to(root)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in sorted(root.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > LIMIT]
    assert long == []
