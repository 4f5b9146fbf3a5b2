"""No two modules of stackctl import each other, by any road: a function-local import or one under
TYPE_CHECKING counts too (lint-imports' contracts see only the layers, not a circle inside one)."""

from __future__ import annotations

import ast
from pathlib import Path

import stackctl

ROOT = Path(stackctl.__file__).parent


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        if path.name != "__init__.py":  # a package's own file wires its modules; they import through it
            found[".".join(("stackctl", *path.relative_to(ROOT).with_suffix("").parts))] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known}
            out |= {node.module} & set(known)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & set(known)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_circles_are_found() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back() -> None:
    known = modules()
    assert "stackctl.verify.verification" in known
    graph = {name: imports(path, known) - {name} for name, path in known.items()}
    assert circles(graph) == []
