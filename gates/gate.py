#!/usr/bin/env python3
"""The stack gate: import, version and probe checks, one PASS/FAIL line each, in the spec's order.

Standard library only, Python 3.8 or newer: it runs inside the image as a build step and against any
interpreter through: stackctl gate PROFILE --python PATH

    python gate.py SPEC.json [--freeze OUT.json [--epoch SECONDS]]

--epoch is for a build step: what the checks' imports wrote (and the --freeze file) gets that time.

Exit status: 0 every check passed, 1 any check failed, 2 the spec could not be read.
"""

from __future__ import annotations

import ast
import builtins
import faulthandler
import importlib
import importlib.metadata as metadata
import importlib.util
import json
import os
import re
import sys
import sysconfig
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

SPEC_FORMAT = 1
RESULT_MARK = "STACKCTL-GATE-RESULT "


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_versions() -> dict[str, str]:
    """Normalized distribution name -> version, first one on sys.path wins (as imports do)."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and _norm(name) not in found:
            found[_norm(name)] = dist.version
    return found


def has_prefix(version: str, prefix: str) -> bool:
    """`1.26.` (or `1.26`) holds 1.26, 1.26.4 and 1.26+local, never 1.260: prefixes end at a dot."""
    base = prefix.rstrip(".")
    return version == base or version.startswith((base + ".", base + "+"))


class Gate:
    def __init__(self) -> None:
        self.failed = 0
        self.passed = 0
        self.lines: list[str] = []
        self._versions: dict[str, str] | None = None

    def line(self, ok: bool, text: str) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        # One line per check: a message spanning lines would read as several (or as none) downstream.
        line = ("PASS " if ok else "FAIL ") + " ".join(text.split("\n")).replace("\r", " ")
        self.lines.append(line)
        # A package may have left a partial line on stderr (a warning, a colour escape): start afresh so
        # a reader of the merged streams finds this line at the start of one.
        sys.stderr.flush()
        print(line, flush=True)

    def result(self) -> str:
        """The machine-readable verdict: one line, after a marker, that stackctl reads instead of the log."""
        doc = {"format": 1, "passed": self.passed, "failed": self.failed, "lines": self.lines}
        return RESULT_MARK + json.dumps(doc, ensure_ascii=True, separators=(",", ":"))

    def version(self, dist: str) -> str | None:
        # Re-read after imports: an import may not change what is installed, but reading
        # lazily keeps "import before version read" true for every entry.
        self._versions = installed_versions()
        return self._versions.get(_norm(dist))

    def entry(self, e: dict[str, Any]) -> None:
        dist, module, mode = e["dist"], e["module"], e["mode"]
        what = {"import": "import", "spec": "spec", "version": "version"}[mode]
        label = "{} {}".format(what, module if mode != "version" else dist)
        if mode == "import":
            try:
                importlib.import_module(module)
            except BaseException as exc:
                self.line(False, f"{label}: {type(exc).__name__}: {_one_line(exc)}")
                return
        elif mode == "spec":
            try:
                found = importlib.util.find_spec(module)
            except (ImportError, ValueError) as exc:
                found = None
                self.line(False, f"{label}: {type(exc).__name__}: {_one_line(exc)}")
                return
            if found is None:
                self.line(False, f"{label}: module not found")
                return
        have = self.version(dist)
        note = "  ({})".format(e["note"]) if e.get("note") else ""
        if have is None:
            self.line(False, f"{label}: distribution {dist} not installed{note}")
            return
        check, want = e["check"], e.get("expected")
        if check == "exact":
            ok = have == want
        elif check == "prefix":
            ok = has_prefix(have, want or "")
        else:
            ok = True
        if ok:
            self.line(True, f"{label} version={have}{note}")
        else:
            rel = "expected" if check == "exact" else "expected prefix"
            self.line(False, f"{label} version={have} {rel}={want}{note}")

    def probe(self, p: dict[str, Any]) -> None:
        name = p["name"]
        try:
            if p["kind"] == "file-count":
                spec = importlib.util.find_spec(p["package"])
                roots = list(spec.submodule_search_locations or []) if spec else []
                if not roots:
                    self.line(False, "probe {}: package {} not found".format(name, p["package"]))
                    return
                count = sum(1 for root in roots for f in Path(root).glob(p["glob"]) if f.is_file())
                package, pattern, want = p["package"], p["glob"], p["count"]
                noun = "file" if count == 1 else "files"
                self.line(count == want, f"probe {name}: {count} {noun} {package}/{pattern} expected={want}")
            elif p["kind"] == "attr":
                mod = importlib.import_module(p["module"])
                value = str(getattr(mod, p["attr"]))
                module, attr, want = p["module"], p["attr"], p["value"]
                self.line(value == want, f"probe {name}: {module}.{attr}={value!r} expected={want!r}")
            elif p["kind"] == "expr":
                self.expr_probe(name, p)
            elif p["kind"] == "parity":
                self.parity_probe(name, p)
            else:
                self.line(False, "probe {}: unknown kind {!r}".format(name, p["kind"]))
        except BaseException as exc:
            self.line(False, f"probe {name}: {type(exc).__name__}: {_one_line(exc)}")

    def expr_probe(self, name: str, p: dict[str, Any]) -> None:
        """`torch.cuda.device_count() >= 1`: true passes; for a comparison, the left side's value is shown."""
        expr = p["expr"]
        scope = namespace(p.get("modules") or roots(expr))
        tree = ast.parse(expr, mode="eval")
        value = eval(compile(tree, "<probe>", "eval"), scope)  # the profile's own expression
        shown = ""
        if isinstance(tree.body, ast.Compare):
            left = eval(compile(ast.Expression(tree.body.left), "<probe>", "eval"), scope)
            shown = f" ({ast.get_source_segment(expr, tree.body.left)} = {left!r})"
        self.line(bool(value), "probe {}: {} is {}{}".format(name, expr, "true" if value else "false", shown))

    def parity_probe(self, name: str, p: dict[str, Any]) -> None:
        """`setup` makes the inputs on the CPU; `op` runs on them there and again with every input moved to
        `device`; the two results must agree within atol + rtol * |cpu value|, element by element."""
        setup, op, device = p["setup"], p["op"], p["device"]
        atol = float(p.get("atol", 1e-5))
        rtol = float(p.get("rtol", 1e-5))
        scope = namespace(p.get("modules") or roots(setup + "\n" + op))
        exec(compile(setup, "<probe setup>", "exec"), scope)  # the profile's own statements
        made = {k: v for k, v in scope.items() if k not in ("__builtins__",) and hasattr(v, "to")
                and not isinstance(v, type(sys))}
        on_cpu = eval(compile(op, "<probe>", "eval"), scope)
        moved = dict(scope, **{k: v.to(device) for k, v in made.items()})
        on_device = eval(compile(op, "<probe>", "eval"), moved)
        where = getattr(on_device, "device", None)
        if where is not None and str(where).split(":")[0] != device.split(":")[0]:
            self.line(False, f"probe {name}: the result is on {where}, not {device}: the op did not run there")
            return
        a, b = flatten(on_cpu), flatten(on_device)
        if len(a) != len(b):
            self.line(False, f"probe {name}: {len(a)} values on the CPU, {len(b)} on {device}")
            return
        worst, at = 0.0, -1
        bad = 0
        for i in range(len(a)):
            x, y = a[i], b[i]
            diff = abs(x - y)
            if diff > atol + rtol * abs(x) or diff != diff:
                bad += 1
            if diff > worst or diff != diff:
                worst, at = diff, i
        text = "probe {}: {} vs cpu, {} values, max |diff| {:.3g}{} (atol={:g}, rtol={:g})".format(
            name, device, len(a), worst, f" at {at}" if bad else "", atol, rtol)
        self.line(bad == 0, text if not bad else f"{text}: {bad} outside the tolerance")

    def preserve(self, pins: list[dict[str, str]]) -> None:
        versions = installed_versions()
        for pin in pins:
            have = versions.get(_norm(pin["dist"]))
            if have == pin["version"]:
                self.line(True, "preserve {}=={}".format(pin["dist"], have))
            else:
                self.line(False, "preserve {} expected={} found={}".format(pin["dist"], pin["version"],
                                                                           have or "(not installed)"))


def roots(code: str) -> list[str]:
    """The top-level names a probe's code reads that name importable modules (`torch` of `torch.cuda...`)."""
    names = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in names:
            names.append(node.id)
    return [n for n in names if not hasattr(builtins, n) and _findable(n)]


def _findable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def namespace(modules: list[str]) -> dict[str, Any]:
    """A scope holding each module (dotted names import their package too, as `import a.b` does)."""
    scope: dict[str, Any] = {}
    for name in modules:
        importlib.import_module(name)
        top = name.split(".")[0]
        scope[top] = sys.modules[top]
    return scope


def flatten(value: Any) -> list[float]:
    """A tensor's (or any `.tolist()`-able value's, or a nested list's) numbers, in order."""
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "cpu"):
        value = value.cpu()
    if hasattr(value, "tolist"):
        value = value.tolist()
    out: list[float] = []
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, (list, tuple)):
            todo.extend(reversed(item))
        else:
            out.append(float(item))
    return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else "(no message)"


def settle_roots() -> list[str]:
    """Where an import may write in an image: every directory on sys.path but the standard library's (the
    stack's prefixes, site-packages), the home directory and the temporary one."""
    stdlib = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}
    roots = [p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) not in stdlib
             and not any(os.path.realpath(p).startswith(s + os.sep) for s in stdlib)]
    return [r for r in [*roots, os.path.expanduser("~"), tempfile.gettempdir()] if os.path.realpath(r) != "/"]


def settle(epoch: int, since: float, roots: list[str]) -> None:
    """Give everything the gate's imports made or changed (torchada, say, links configs inside its own
    package on first import) the epoch's time: the build step's layer then holds no build-time clock and
    is the same on every build."""
    for root in roots:
        for top, dirs, files in os.walk(root):  # links to directories are not followed
            for path in (top, *(os.path.join(top, n) for n in (*dirs, *files))):
                try:
                    if os.lstat(path).st_mtime >= since:
                        os.utime(path, (epoch, epoch), follow_symlinks=False)
                except OSError:
                    continue


def main(argv: list[str]) -> int:
    args = list(argv)
    freeze: str | None = None
    if "--freeze" in args:
        i = args.index("--freeze")
        if i + 1 >= len(args):
            print("gate: --freeze needs a path", file=sys.stderr)
            return 2
        freeze = args[i + 1]
        del args[i:i + 2]
    epoch: int | None = None
    if "--epoch" in args:
        i = args.index("--epoch")
        if i + 1 >= len(args) or not args[i + 1].isdigit():
            print("gate: --epoch needs seconds since 1970", file=sys.stderr)
            return 2
        epoch = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        print("usage: gate.py SPEC.json [--freeze OUT.json [--epoch SECONDS]]", file=sys.stderr)
        return 2
    try:
        spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
        if spec.get("format") != SPEC_FORMAT:
            raise ValueError(f"spec format {spec.get('format')!r} is not {SPEC_FORMAT}")
    except (OSError, ValueError) as exc:
        print(f"gate: cannot read spec {args[0]}: {exc}", file=sys.stderr)
        return 2
    # An import that crashes the interpreter (a GPU library without its device) leaves no FAIL line:
    # the Python stack on stderr names the module it died in.
    faulthandler.enable()
    # the kernel's file times run up to a clock tick behind time.time(): a margin, not an exact start
    since = time.time() - 2
    gate = Gate()
    head = "gate {}: python {}".format(spec.get("stack", "?"), sys.version.split()[0])
    print(head, flush=True)
    for e in spec.get("entries", []):
        try:
            gate.entry(e)
        except Exception:  # a bug in the gate must fail the gate, not pass silently
            gate.line(False, "{}: gate error: {}".format(e.get("dist"), traceback.format_exc(limit=1)))
    for p in spec.get("probes", []):
        gate.probe(p)
    gate.preserve(spec.get("preserve", []))
    if epoch is not None:
        settle(epoch, since, settle_roots())
    verdict = "FAILED" if gate.failed else "ok"
    summary = f"gate {verdict}: {gate.passed} passed, {gate.failed} failed"
    if freeze:
        Path(freeze).parent.mkdir(parents=True, exist_ok=True)
        Path(freeze).write_text(json.dumps(installed_versions(), indent=1, sort_keys=True) + "\n",
                                encoding="utf-8")
        # The verdict stays in the image beside the freeze: a build whose gate step comes from the cache
        # prints no lines, and reads them here, from the run that passed these very layers.
        kept = Path(freeze).with_suffix(".gate.txt")  # installed.json: installed.gate.txt
        kept.write_text("\n".join((head, gate.result(), summary)) + "\n", encoding="utf-8")
        if epoch is not None:  # the files and their directory land in an image layer: no build-time clock
            for path in (Path(freeze), kept, Path(freeze).parent):
                os.utime(path, (epoch, epoch))
    sys.stderr.flush()
    print(gate.result(), flush=True)
    print(summary, flush=True)
    return 1 if gate.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
