"""Every command parses its options, makes one call into its use case, and renders what comes back: a command
that makes two, or that decides something on the way, does work that belongs below cli/. Read from the source
(AST), per command, over all it runs: its own body, the functions and lambdas it defines (its renderers) and
the cli/ helpers it calls, however they are called (a name, an attribute, a constructor).

What counts:
- the calls into the stages (`stackctl.usecases` and the stage packages) on the command's run that makes the
  most: at most one, into `stackctl.usecases`, except for the commands of DIRECT (CONTRIBUTING says why);
- the decisions a command must leave to the code below it: an error or a CI annotation made (rather than
  raised or shown as the use case returned it), a line's kind told by matching its text, a result filtered by
  a literal, an output path joined onto a path option."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import stackctl.cli

CLI = Path(stackctl.cli.__file__).parent
# cli/ modules that are not walked: options spelled once and turned into values (`--index NAME=URL`, which one
# output format); annotations written where CI reads them
NOT_WALKED = ("options", "annotate")
# where a command's work is: the use cases and the stages (base/ is the shared utilities every layer uses:
# JSON for dataclasses, sizes, file checks; errors.py is looked at by itself)
STAGES = ("usecases", "review", "bisect", "ab", "publish", "verify", "engine", "image", "abi", "resolve", "wheels",
          "index", "profile")
# a stage's names that decide nothing: a result put in the words, rows or JSON of its output
PURE = frozenset({
    "lock_summary",
    # ab's tables
    "summary_rows", "sweep_rows", "metric_rows", "leg_rows", "place_rows", "inventory_lines", "gate_failures",
    "culprits_table", "steps_table", "units_table",  # bisect's tables
})
# Commands whose whole work is one function of one stage, called with the arguments as given: no PROFILE
# resolved for several stages, no adapter chosen, nothing to wire (CONTRIBUTING, "Architecture"). Every other
# command calls its use case.
DIRECT = {
    ("profiles", "validate"): "profile.load_profiles",
    ("profiles", "schema"): "profile.profile_schema",
    ("review", "diff"): "review.compare",
    ("image", "inspect"): "review.inspect_image",
    ("abi", "abi"): "abi.check_targets",
    ("abi", "wheel_diff"): "abi.diff_wheel_files",
    ("abi", "inventory"): "engine.image_inventory",
}
MADE_BELOW = ("Annotation",)  # CI's annotations come with the result (`outcome.annotations`), never made here
TEXT_MATCH = ("startswith", "endswith")


class _Module:
    def __init__(self, tree: ast.Module) -> None:
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.stage: dict[str, str] = {}  # name → the stage it came from (a function, a class, or the package)
        self.errors: set[str] = set()  # names of stackctl.errors
        self.cli: dict[str, tuple[str, str]] = {}  # name → (cli module, its name there)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "stackctl"):
                continue
            parts = node.module.split(".")
            for alias in node.names:
                local = alias.asname or alias.name
                if len(parts) == 1 and alias.name in STAGES:  # from stackctl import image
                    self.stage[local] = alias.name
                elif len(parts) > 1 and parts[1] in STAGES:
                    self.stage[local] = parts[1]
                elif parts[1:] == ["errors"] or (parts[1:2] == ["base"] and alias.name in MADE_BELOW):
                    self.errors.add(local)
                elif len(parts) > 2 and parts[1] == "cli":
                    self.cli[local] = (parts[2], alias.name)


def _is_command(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr == "command":
            return True
    return False


def _root(node: ast.expr) -> str | None:
    """`a` of `a.b.c`."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _calls_in(node: ast.AST) -> list[ast.Call]:
    """The calls in `node`, in order, lambdas' bodies included (a renderer runs when the command does)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    found = [c for child in ast.iter_child_nodes(node) for c in _calls_in(child)]
    return [node, *found] if isinstance(node, ast.Call) else found


def _ends(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


Resolve = Callable[[ast.Call], list[str]]


def _worst_path(stmts: list[ast.stmt], resolve: Resolve) -> list[str]:
    """The stage calls along the run through `stmts` that makes the most: an `if` takes one of its branches
    (a branch that returns leaves the rest of the body to the other), a loop's body counts once, a function
    defined here (a renderer) counts where it is defined."""
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
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            total += _worst_path(st.body, resolve)
        else:
            total += [n for c in _calls_in(st) for n in resolve(c)]
    return total


def _str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _path_options(fn: ast.FunctionDef) -> set[str]:
    return {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]
            if a.annotation is not None and "Path" in ast.unparse(a.annotation)}


class _Cli:
    def __init__(self, sources: dict[str, str] | None = None) -> None:
        if sources is None:
            sources = {p.stem: p.read_text(encoding="utf-8") for p in sorted(CLI.glob("*.py"))}
        self.modules = {name: _Module(ast.parse(text)) for name, text in sources.items()}

    def commands(self) -> list[tuple[str, str]]:
        return [(m, name) for m, mod in self.modules.items() for name, fn in mod.functions.items()
                if _is_command(fn)]

    def _helper(self, module: str, call: ast.Call | ast.Name) -> tuple[str, str] | None:
        """The cli/ function a call runs (or a name refers to), when it is one that is walked."""
        mod = self.modules[module]
        name = call.func if isinstance(call, ast.Call) else call
        if not isinstance(name, ast.Name):
            return None
        callee = name.id
        if callee in mod.functions:
            return module, callee
        there, its_name = mod.cli.get(callee, ("", ""))
        if there in self.modules and there not in NOT_WALKED and its_name in self.modules[there].functions:
            return there, its_name
        return None

    def stage_calls(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
        """The stage functions `module.name` calls on its run that calls the most, itself or through the cli/
        functions it calls."""
        mod = self.modules[module]

        def resolve(call: ast.Call) -> list[str]:
            root = _root(call.func)
            if root in mod.stage:
                callee = ast.unparse(call.func)
                if isinstance(call.func, ast.Name) and (callee in PURE or callee[:1].isupper()):
                    return []  # a table's rows; a value's constructor (an order, the options): the call's argument
                if isinstance(call.func, ast.Attribute) and root[:1].isupper():
                    return []  # Limits.capped(...): a value made from an option
                within = callee.partition(".")[2] if mod.stage[root] == root else callee  # resolve.describe_index
                return [f"{mod.stage[root]}.{within}"]
            helper = self._helper(module, call)
            if helper is not None and helper not in seen and helper != (module, name):
                return self.stage_calls(*helper, seen | {(module, name)})
            return []

        return _worst_path(mod.functions[name].body, resolve)

    def _reach(self, module: str, name: str) -> Iterator[tuple[str, ast.FunctionDef]]:
        """The command and every cli/ function it runs, each once."""
        todo, seen = [(module, name)], set()
        while todo:
            where = todo.pop()
            if where in seen:
                continue
            seen.add(where)
            fn = self.modules[where[0]].functions[where[1]]
            yield where[0], fn
            for node in ast.walk(fn):  # called, or handed on: `(_markdown if markdown else _human)(rep)`
                if isinstance(node, ast.Name) and (helper := self._helper(where[0], node)) is not None:
                    todo.append(helper)

    def decisions(self, module: str, name: str) -> list[str]:
        """What the command decides on its way, anywhere it runs: each as `cli/MODULE.py:LINE what`."""
        found = []
        paths = _path_options(self.modules[module].functions[name])
        for where, fn in self._reach(module, name):
            made = self.modules[where].errors
            for node in ast.walk(fn):
                at = node.target if isinstance(node, ast.comprehension) else node
                line = f"cli/{where}.py:{getattr(at, 'lineno', '?')}"
                if isinstance(node, ast.Call) and _root(node.func) in made:
                    found.append(f"{line} makes {ast.unparse(node.func)}(...)")
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr in TEXT_MATCH and node.args
                      and (_str(node.args[0]) or isinstance(node.args[0], ast.Tuple))):
                    found.append(f"{line} tells a line by its text: {ast.unparse(node)}")
                elif isinstance(node, ast.comprehension):
                    for test in node.ifs:
                        if any(isinstance(c, ast.Compare) and any(map(_str, [c.left, *c.comparators]))
                               for c in ast.walk(test)):
                            found.append(f"{line} filters by a literal: if {ast.unparse(test)}")
                elif (fn.name == name and where == module and isinstance(node, ast.BinOp)
                      and isinstance(node.op, ast.Div) and isinstance(node.left, ast.Name) and node.left.id in paths):
                    found.append(f"{line} makes an output path: {ast.unparse(node)}")
        return found


CODE = _Cli()


@pytest.mark.parametrize(("module", "command"), CODE.commands(), ids=lambda v: str(v))
def test_a_command_makes_one_call_into_its_use_case(module: str, command: str) -> None:
    calls = CODE.stage_calls(module, command)
    assert len(calls) <= 1, f"cli/{module}.py {command}() calls {len(calls)} stage functions: {', '.join(calls)}"
    allowed = DIRECT.get((module, command))
    assert all(c.startswith("usecases.") or c == allowed for c in calls), (
        f"cli/{module}.py {command}() calls {', '.join(calls)}: a command calls its use case (stackctl/usecases), "
        "unless DIRECT (and CONTRIBUTING) name it")


@pytest.mark.parametrize(("module", "command"), CODE.commands(), ids=lambda v: str(v))
def test_a_command_decides_nothing(module: str, command: str) -> None:
    found = CODE.decisions(module, command)
    assert not found, f"cli/{module}.py {command}() decides what belongs below cli/:\n" + "\n".join(found)


def test_the_commands_that_call_a_stage_are_those_contributing_names() -> None:
    """DIRECT is exactly the commands that call a stage: each of them calls its one function (one that starts to
    call a use case leaves the list), and CONTRIBUTING names each of them."""
    assert set(DIRECT) <= set(CODE.commands())
    assert {k: CODE.stage_calls(*k) for k in DIRECT} == {k: [v] for k, v in DIRECT.items()}
    contributing = (CLI.parents[1] / "CONTRIBUTING.md").read_text(encoding="utf-8")
    named = {cmd.replace("_", "-") for _, cmd in DIRECT}
    assert all(f"`{cmd}`" in contributing for cmd in named), named


SAMPLE = '''
from stackctl.profile import load_profile
from stackctl.cli.matrix import build_all as run_all
from stackctl.errors import InputError, Problems

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
    from stackctl.usecases import BuildOrder, build_stack

    if every:
        return run_all(BuildOrder(profile))
    emit(build_stack(BuildOrder(profile)), lambda: print(profile))

@app.command()
def show(profile):
    from stackctl import resolve
    from stackctl.usecases import show_profile

    shown = show_profile(profile)

    def human():
        for ep in shown.indexes:
            print(resolve.describe_index(ep))

    emit(shown, human)

@app.command()
def publish(profile, out: Path, every=False):
    from stackctl.usecases import publish_built

    if every and profile:
        raise InputError("--all takes no PROFILE")
    done = publish_built(profile)

    def human():
        for ln in done.lines:
            print(ln, style="green" if ln.startswith("PASS ") else None)
        print({k: v for k, v in done.labels.items() if k != "installed"})
        print(out / "publication.json")

    emit(done, human)
    if done.failed:
        raise Problems.of(done.problems)
'''


def test_the_count_sees_a_command_that_calls_and_decides() -> None:
    """The walk itself, on a `gate` that renders the spec, writes it, runs the gate and judges the run (six calls
    into four stages, one in its renderer); a `build` that dispatches to one of two calls (one on each run); a
    `show` whose renderer asks a stage by attribute; a `publish` that checks its options, styles lines by their
    text, filters labels, joins a path and makes its own error."""
    cli = _Cli({"m": SAMPLE})
    assert cli.commands() == [("m", "gate"), ("m", "build"), ("m", "show"), ("m", "publish")]
    assert sorted(cli.stage_calls("m", "gate")) == [
        "engine.gate_stack", "image.gate_phase", "image.gate_spec_text", "image.gate_spec_text", "image.verdict",
        "profile.load_profile", "resolve.read_lock"]
    assert cli.stage_calls("m", "build") == ["usecases.build_stack"]
    assert cli.stage_calls("m", "show") == ["usecases.show_profile", "resolve.describe_index"]
    assert cli.stage_calls("m", "publish") == ["usecases.publish_built"]
    assert cli.decisions("m", "build") == []
    assert sorted(d.split(" ", 1)[1] for d in cli.decisions("m", "publish")) == [
        "filters by a literal: if k != 'installed'", "makes InputError(...)", "makes Problems.of(...)",
        "makes an output path: out / 'publication.json'", "tells a line by its text: ln.startswith('PASS ')"]
