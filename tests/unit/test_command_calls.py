"""Every command parses its options, makes one call into a use case or a stage, and renders what comes back: a
command that makes two decides something, and that belongs below cli/. Counted from the source (AST), per
command: the calls to functions imported from `stackctl.usecases` or a stage package, in the command's own body
and in the cli/ helpers it calls (its nested renderers, which only format the result, are not counted)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

import stackctl.cli

CLI = Path(stackctl.cli.__file__).parent
PARSING = ("options",)  # cli/options.py: options spelled once and turned into values (`--index NAME=URL`)
# where a command's work is: the use cases and the stages (base/ and errors.py are the shared utilities
# every layer uses: JSON for dataclasses, sizes, file checks)
STAGES = ("usecases", "review", "bisect", "ab", "publish", "verify", "engine", "image", "abi", "resolve", "wheels",
          "index", "profile")
# a stage's names that decide nothing: a result put in the words or JSON of its output
PURE = frozenset({"lock_summary"})


def _imports(tree: ast.Module) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """(name → stage it came from, name → (cli module, its name there)), for every `from stackctl.X import`."""
    stage: dict[str, str] = {}
    cli: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("stackctl."):
            parts = node.module.split(".")
            for alias in node.names:
                local = alias.asname or alias.name
                if parts[1] in STAGES:
                    stage[local] = parts[1]
                elif parts[1] == "cli" and len(parts) > 2:
                    cli[local] = (parts[2], alias.name)
    return stage, cli


def _is_command(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr == "command":
            return True
    return False


def _calls_in(node: ast.AST) -> list[ast.Call]:
    """The calls in `node`, in order, not in the functions and lambdas it defines (a command's renderers)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        return []
    found = [c for child in ast.iter_child_nodes(node) for c in _calls_in(child)]
    return [node, *found] if isinstance(node, ast.Call) else found


def _ends(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


Resolve = Callable[[ast.Call], list[str]]


def _worst_path(stmts: list[ast.stmt], resolve: Resolve) -> list[str]:
    """The stage calls along the run through `stmts` that makes the most: an `if` takes one of its branches
    (a branch that returns leaves the rest of the body to the other), a loop's body counts once."""
    total: list[str] = []
    for i, st in enumerate(stmts):
        if isinstance(st, ast.If):
            test = [n for c in _calls_in(st.test) for n in resolve(c)]
            body = _worst_path(st.body, resolve)
            if _ends(st.body):
                rest = _worst_path([*st.orelse, *stmts[i + 1:]], resolve)
                return total + test + max(body, rest, key=len)
            total += test + max(body, _worst_path(st.orelse, resolve), key=len)
        elif isinstance(st, (ast.With, ast.For, ast.While, ast.Try)):
            heads = [getattr(st, "iter", None), getattr(st, "test", None),
                     *(item.context_expr for item in getattr(st, "items", ()))]
            total += [n for h in heads if h is not None for c in _calls_in(h) for n in resolve(c)]
            total += _worst_path(st.body, resolve)
            for handler in getattr(st, "handlers", ()):
                total += _worst_path(handler.body, resolve)
            total += _worst_path(getattr(st, "finalbody", []), resolve)
        else:
            total += [n for c in _calls_in(st) for n in resolve(c)]
    return total


class _Cli:
    def __init__(self) -> None:
        self.modules: dict[str, tuple[dict[str, ast.FunctionDef], dict[str, str], dict[str, tuple[str, str]]]] = {}
        for path in sorted(CLI.glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
            self.modules[path.stem] = (functions, *_imports(tree))

    def commands(self) -> list[tuple[str, str]]:
        return [(m, name) for m, (fns, _, _) in self.modules.items() for name, fn in fns.items() if _is_command(fn)]

    def stage_calls(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
        """The stage functions `module.name` calls on its run that calls the most, itself or through the cli/
        functions it calls."""
        functions, stage, cli = self.modules[module]

        def resolve(call: ast.Call) -> list[str]:
            if not isinstance(call.func, ast.Name):
                return []
            callee = call.func.id
            if callee in stage and callee not in PURE and not callee[:1].isupper():
                return [f"{stage[callee]}.{callee}"]
            if callee in functions and (module, callee) not in seen:
                return self.stage_calls(module, callee, seen | {(module, name)})
            if callee in cli and cli[callee][0] in self.modules and cli[callee][0] not in PARSING \
                    and cli[callee] not in seen:
                return self.stage_calls(*cli[callee], seen | {(module, name)})
            return []

        return _worst_path(functions[name].body, resolve)


CODE = _Cli()


@pytest.mark.parametrize(("module", "command"), CODE.commands(), ids=lambda v: str(v))
def test_a_command_makes_one_call_into_the_stages(module: str, command: str) -> None:
    calls = CODE.stage_calls(module, command)
    assert len(calls) <= 1, f"cli/{module}.py {command}() calls {len(calls)} stage functions: {', '.join(calls)}"


def test_the_count_sees_a_command_that_decides() -> None:
    """The count itself, on a `gate` that renders the spec, writes it, runs the gate and judges the run (five
    calls into three stages), and on a `build` that dispatches to one of two calls (one on each run)."""
    source = '''
from stackctl.profile import load_profile
from stackctl.cli.matrix import build_all as run_all

@app.command()
def gate(profile, lock, phase, spec_out):
    from stackctl.image import gate_phase, gate_spec_text, verdict
    from stackctl.resolve import read_lock

    stack = load_profile(profile)
    spec = gate_spec_text(stack, read_lock(lock) if lock is not None else None, gate_phase(phase))
    if spec_out:
        _write(spec_out, spec)
    from stackctl.engine import gate_stack

    run = gate_stack(stack, spec)
    problem = verdict(stack.name, run)

    def human():
        print(gate_spec_text(stack))

    emit(run, human)

@app.command()
def build(profile, every):
    from stackctl.usecases import build_stack

    if every:
        return run_all(profile)
    emit(build_stack(profile), lambda: print(load_profile(profile)))
'''
    tree = ast.parse(source)
    cli = _Cli.__new__(_Cli)
    cli.modules = {"m": ({n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}, *_imports(tree))}
    assert cli.commands() == [("m", "gate"), ("m", "build")]
    assert sorted(cli.stage_calls("m", "gate")) == ["engine.gate_stack", "image.gate_phase", "image.gate_spec_text",
                                                    "image.verdict", "profile.load_profile", "resolve.read_lock"]
    assert cli.stage_calls("m", "build") == ["usecases.build_stack"]
