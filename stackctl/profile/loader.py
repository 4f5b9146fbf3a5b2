"""Read a profile and the profiles it extends, check every key, merge, and build a `Stack`.

Every problem in every file is collected before anything is raised, and each one names the file,
the line and the key path, so one run of `stackctl validate` shows the whole list.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

from stackctl.base.bounded import TomlError, read_toml
from stackctl.base.files import unsafe_component
from stackctl.errors import Problem, ProfileError
from stackctl.profile.model import (
    AbiPolicy,
    AbiRole,
    AppImage,
    Devices,
    GateCheck,
    GateMode,
    GatePhase,
    GateRole,
    Image,
    Index,
    OptionalMember,
    Pin,
    Probe,
    Stack,
    Target,
)
from stackctl.profile.sources import DirSource, Source
from stackctl.profile.tag import TagTemplateError, check_repository, render_tag
from stackctl.profile.tomlpos import key_lines, locate
from stackctl.profile.versions import MAX_DIGITS, parse_version, too_long_number

# The schema: a dict is a table with known keys, "*" stands for any key, [T] is an array of T, an Enum is a
# string naming one of its values (checked in _build, which suggests the nearest). `stackctl schema` turns this
# table into the JSON Schema editors read, so a key added here appears there too.
_GATE: dict[str, Any] = {"order": int, "module": str, "check": GateCheck, "mode": GateMode, "prefix": str,
                         "expect": str, "skip_import_if": str, "before": [str], "remove": bool,
                         "phase": GatePhase}
_PIN: dict[str, Any] = {"version": str, "index": str, "file": str, "train": str, "note": str, "abi": AbiRole,
                        "python": [str], "platforms": [str], "marker": str,
                        "gate": {k: v for k, v in _GATE.items() if k not in ("expect", "remove")},
                        "remove": bool}
_PROBE: dict[str, Any] = {"name": str, "kind": str, "package": str, "glob": str, "count": int,
                          "module": str, "attr": str, "value": str, "phase": str, "expr": str, "modules": [str],
                          "setup": str, "op": str, "device": str, "atol": float, "rtol": float}
_DEVICES: dict[str, Any] = {"gpus": str, "driver": str, "capabilities": [str], "cdi": [str], "nodes": [str],
                            "runtime": str, "env": {"*": str}, "name": str}
SCHEMA: dict[str, Any] = {
    "stack": {"name": str, "extends": str, "description": str},
    "targets": {"python": [str], "platforms": [str]},
    "indexes": {"*": {"url": str, "from_pip": bool, "username_env": str, "password_env": str, "netrc": bool}},
    "pins": {"*": _PIN},
    "gate": {"extra": {"*": _GATE}, "probe": [_PROBE]},
    "abi": {"allow": [str], "inventory": str, "providers": [str], "provides": {"*": [str]},
            "optional": [{"glob": str, "reason": str}], "baseline": str, "ld_library_path": [str]},
    "devices": _DEVICES,
    "image": {"base": str, "repository": str, "tag": str, "python": str, "vars": {"*": str},
              "labels": {"*": str}, "installer": str, "bytecode": (bool, str),
              "app": {"dockerfile": str, "context": str, "target": str, "args": {"*": str}, "stack_arg": str}},
}
INSTALLERS = ("pip", "uv")
_CREDENTIAL_WORDS = ("password", "token", "secret", "auth")
_PYTHON_RE = re.compile(r"3\.\d{1,2}")
_PLATFORM_RE = re.compile(r"(linux|manylinux_\d+_\d+|musllinux_\d+_\d+)_(x86_64|aarch64|ppc64le|s390x|i686)")


@dataclass
class _Doc:
    """One parsed file of the chain, with the line of every key it writes."""

    name: str  # file name within the source
    display: str
    data: dict[str, Any]
    lines: dict[tuple[str, ...], int]


@dataclass
class _Collector:
    chain: list[_Doc] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # (table, key) of every unknown key: problems that leave the rest of the profile readable, so they are
    # taken out and the profile is checked on, every other problem reported with them
    unknown: list[tuple[dict[str, Any], str]] = field(default_factory=list)

    def add(self, doc: _Doc | None, path: tuple[str, ...], message: str) -> None:
        doc = doc or self._owner(path)
        line = locate(doc.lines, path) if doc else None
        self.problems.append(Problem(doc.display if doc else "?", line, ".".join(path), message))

    def _owner(self, path: tuple[str, ...]) -> _Doc | None:
        """The file (child first) that writes the deepest part of `path`."""
        best, depth = (self.chain[0] if self.chain else None), 0
        for doc in self.chain:
            for d in range(len(path), depth, -1):
                if path[:d] in doc.lines:
                    best, depth = doc, d
                    break
        return best


def load_stack(path: str | Path, source: Source | None = None) -> Stack:
    """Load `path` (a file name within `source`, or a file path) with everything it extends."""
    if source is None:
        p = Path(path)
        source, name = DirSource(p.parent), p.name
    else:
        name = str(path)
    collector = _Collector()
    _read_chain(source, name, collector)
    if len(collector.problems) > len(collector.unknown):
        raise ProfileError(tuple(collector.problems))
    for table, key in collector.unknown:
        table.pop(key, None)
    merged = _merge_chain(collector)
    stack = _build(merged, collector)
    if stack is not None:
        _check_app_files(stack, source, name, collector)
    if collector.problems:
        raise ProfileError(tuple(collector.problems))
    assert stack is not None
    return stack


def _read_chain(source: Source, name: str, out: _Collector) -> None:
    seen: list[str] = []
    parent_ref: tuple[_Doc, tuple[str, ...]] | None = None
    while True:
        if name in seen:
            cycle = " -> ".join([*seen, name])
            assert parent_ref is not None
            out.add(parent_ref[0], parent_ref[1], f"extends cycle: {cycle}")
            return
        if parent_ref is not None and not source.exists(name):
            out.add(parent_ref[0], parent_ref[1], f"unknown stack: no profile {source.display(name)}")
            return
        seen.append(name)
        text = source.read(name)
        display = source.display(name)
        try:
            data = read_toml(text, display)
        except TomlError as exc:
            out.problems.append(Problem(display, exc.line, "", exc.reason))
            return
        if (deep := _too_deep(data)) is not None:
            out.problems.append(Problem(display, None, ".".join(deep),
                                        f"nested more than {_MAX_DEPTH} levels deep; no profile key is"))
            return
        doc = _Doc(name, display, data, key_lines(text))
        out.chain.append(doc)
        _check_schema(data, SCHEMA, (), doc, out)
        parent = data.get("stack", {}).get("extends") if isinstance(data.get("stack"), dict) else None
        if not isinstance(parent, str):
            return
        parent_ref = (doc, ("stack", "extends"))
        name = parent if parent.endswith(".toml") else f"{parent}.toml"
        if (why := unsafe_component(name)) is not None:
            # a parent is a profile of the same directory: never a path that leaves it
            out.add(doc, ("stack", "extends"), f"names a profile of this directory, not a path: {why}")
            return


_MAX_DEPTH = 8  # the schema's deepest key is pins.NAME.gate.order


def _too_deep(data: dict[str, Any]) -> tuple[str, ...] | None:
    """The path of a value nested deeper than any profile key, found without recursion."""
    todo: list[tuple[tuple[str, ...], Any]] = [((), data)]
    while todo:
        path, value = todo.pop()
        if len(path) > _MAX_DEPTH:
            return path[:_MAX_DEPTH]
        if isinstance(value, dict):
            todo.extend(((*path, str(k)), v) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend(((*path, str(i)), v) for i, v in enumerate(value))
    return None


def _scalar(t: Any) -> Any:
    """The Python type(s) a leaf of the table takes: an Enum's values are strings."""
    return str if isinstance(t, type) and issubclass(t, Enum) else t


def _typename(t: Any) -> str:
    if isinstance(t, dict):
        return "a table"
    if isinstance(t, list):
        if isinstance(t[0], tuple):  # a validation plan's sweep: strings or numbers
            return "an array of strings or numbers"
        return "an array of " + ("tables" if isinstance(t[0], dict) else {str: "strings", int: "integers"}[t[0]])
    if isinstance(t, tuple):  # [image] bytecode takes one of two types, a sweep's value one of three
        return 'true, false or "pins"' if bool in t else "a string or a number"
    return {str: "a string", int: "an integer", bool: "true or false", float: "a number"}[_scalar(t)]


def _check_schema(value: Any, schema: Any, path: tuple[str, ...], doc: _Doc, out: _Collector) -> None:
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            out.add(doc, path, f"must be {_typename(schema)}")
            return
        meant: dict[str, str] = {}
        for key, sub in value.items():
            kpath = (*path, key)
            if "*" in schema:
                _check_schema(sub, schema["*"], kpath, doc, out)
            elif key in schema:
                _check_schema(sub, schema[key], kpath, doc, out)
            else:
                out.add(doc, kpath, _unknown_key(key, schema))
                out.unknown.append((value, key))
                close = _typo_of(key, schema)
                # `extends` reads another file: a guess must not open one the profile never named
                if close not in (None, "extends") and close not in value and close not in meant.values():
                    meant[key] = close
                    _check_schema(sub, schema[close], kpath, doc, out)
        if meant:
            _read_as_meant(value, meant, path, doc)
    elif isinstance(schema, list):
        if not isinstance(value, list):
            out.add(doc, path, f"must be {_typename(schema)}")
            return
        for i, item in enumerate(value):
            _check_schema(item, schema[0], (*path, str(i)), doc, out)
    elif schema is float and isinstance(value, int) and not isinstance(value, bool):
        return  # TOML writes a whole tolerance (0) as an integer
    elif not isinstance(value, _scalar(schema)) or (schema in (int, float) and isinstance(value, bool)):
        out.add(doc, path, f"must be {_typename(schema)}, not {type(value).__name__} {value!r}")


def _typo_of(key: str, schema: dict[str, Any]) -> str | None:
    if any(w in key.lower() for w in _CREDENTIAL_WORDS):  # never read a credential as some other key
        return None
    return next(iter(difflib.get_close_matches(key, list(schema), n=1)), None)


def _read_as_meant(table: dict[str, Any], meant: dict[str, str], path: tuple[str, ...], doc: _Doc) -> None:
    """A misspelt key is one problem, said once: the profile is read on as if it were spelt as meant (`verison`
    as `version`), so nothing that needs the key reports its absence, and what is found under it keeps its
    line in the file."""
    items = [(meant.get(k, k), v) for k, v in table.items()]
    table.clear()
    table.update(items)
    depth = len(path)
    for written, line in list(doc.lines.items()):
        if written[:depth] == path and len(written) > depth and written[depth] in meant:
            doc.lines.setdefault((*path, meant[written[depth]], *written[depth + 1:]), line)


def _unknown_key(key: str, schema: dict[str, Any]) -> str:
    if any(w in key.lower() for w in _CREDENTIAL_WORDS):
        return ("unknown key; credentials never go in a profile: name an environment variable with "
                "username_env / password_env, or use netrc")
    close = difflib.get_close_matches(key, list(schema), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(schema))}"
    return f"unknown key{hint}"


def _merge_chain(out: _Collector) -> dict[str, Any]:
    """Merge root first; a child's table merges into its parent's, arrays and scalars replace."""
    merged: dict[str, Any] = {}
    for doc in reversed(out.chain):
        data = {k: v for k, v in doc.data.items()}
        pins = data.pop("pins", {})
        extra = data.get("gate", {}).get("extra", {})
        _deep_merge(merged, data)
        merged_pins = merged.setdefault("pins", {})
        _merge_named(merged_pins, pins, ("pins",), doc, out)
        if extra:
            _merge_named(merged.setdefault("gate", {}).setdefault("extra", {}), extra,
                         ("gate", "extra"), doc, out, replace=True)
    return merged


def _merge_named(into: dict[str, Any], new: dict[str, Any], path: tuple[str, ...], doc: _Doc,
                 out: _Collector, *, replace: bool = False) -> None:
    """Merge tables keyed by distribution name, matching names after PEP 503 normalisation."""
    seen: dict[str, str] = {}
    for name, table in new.items():
        key = canonicalize_name(name)
        if key in seen:
            out.add(doc, (*path, name), f"duplicate of {seen[key]!r} (same name after normalisation)")
            continue
        seen[key] = name
        existing = next((n for n in into if canonicalize_name(n) == key), None)
        if isinstance(table, dict) and table.get("remove") is True:
            if existing is None:
                out.add(doc, (*path, name, "remove"), "nothing to remove: no parent defines it")
            else:
                del into[existing]
            continue
        if existing is None:
            into[name] = dict(table) if isinstance(table, dict) else table
        elif isinstance(table, dict) and isinstance(into[existing], dict) and not replace:
            _deep_merge(into[existing], table)
        else:
            into[existing] = table


def _deep_merge(into: dict[str, Any], new: dict[str, Any]) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, dict) else value


def _enum(cls: Callable[[str], Any], value: str, path: tuple[str, ...], out: _Collector,
          choices: list[str]) -> Any:
    try:
        return cls(value)
    except ValueError:
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        out.add(None, path, f"{value!r} is not one of {', '.join(choices)}{hint}")
        return None


def _gate_role(dist: str, raw: dict[str, Any], path: tuple[str, ...], out: _Collector, *,
               pinned: bool) -> GateRole | None:
    if "order" not in raw:
        out.add(None, (*path, "order"), "missing: every gate entry needs its position in the order")
        return None
    check = _enum(GateCheck, raw.get("check", "exact" if pinned else "present"), (*path, "check"), out,
                  [c.value for c in GateCheck])
    mode = _enum(GateMode, raw.get("mode", "import"), (*path, "mode"), out, [m.value for m in GateMode])
    if raw.get("phase") == GatePhase.DEVICE.value:
        out.add(None, (*path, "phase"), 'an entry whose import needs a device takes mode = "spec": the device '
                "phase imports it for real, the build's gate only finds it")
        phase = None
    else:
        phase = _phase(raw, path, out, (GatePhase.STACK, GatePhase.APP))
    if check is GateCheck.PREFIX and not pinned and not raw.get("prefix"):
        out.add(None, (*path, "check"), "check = \"prefix\" needs a prefix (for example \"1.26.\")")
    if check is GateCheck.EXACT and not pinned and not raw.get("expect"):
        out.add(None, (*path, "check"), "check = \"exact\" on an unpinned entry needs expect = VERSION")
    skip = raw.get("skip_import_if") or None  # "" clears a condition the parent profile set
    if skip is not None:
        # packaging's marker and requirement grammars build their regular expressions on import: only a
        # profile that uses them pays for it
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            if too_long_number(skip):
                raise InvalidRequirement(f"a number of more than {MAX_DIGITS} digits")
            Requirement(skip)
        except InvalidRequirement as exc:
            first = str(exc).splitlines()[0] if str(exc).strip() else "invalid"  # one line per problem
            out.add(None, (*path, "skip_import_if"), f"not a requirement like 'torch_musa<2.11': {first}")
            skip = None  # flagged: nothing downstream parses it again
    if check is None or mode is None or phase is None:
        return None
    module = raw.get("module") or dist.replace("-", "_")
    return GateRole(order=raw["order"], module=module, check=check, mode=mode, prefix=raw.get("prefix"),
                    expect=raw.get("expect"), skip_import_if=skip, before=tuple(raw.get("before", ())),
                    phase=phase)


def _phase(raw: dict[str, Any], path: tuple[str, ...], out: _Collector,
           allowed: tuple[GatePhase, ...] = tuple(GatePhase)) -> GatePhase | None:
    """Where a gate entry or probe runs: `stack` (the default) in the stack image, `app` after [image.app],
    `device` (probes only) where a device is."""
    def pick(value: str) -> GatePhase:
        found = next((p for p in allowed if p.value == value), None)
        if found is None:
            raise ValueError(value)
        return found

    phase: GatePhase | None = _enum(pick, raw.get("phase", "stack"), (*path, "phase"), out,
                                    [p.value for p in allowed])
    return phase


def _exact_version(value: str, path: tuple[str, ...], out: _Collector) -> None:
    try:
        parsed = parse_version(value)
    except InvalidVersion:
        out.add(None, path, f"{value[:80]!r} is not a PEP 440 version (pins are exact: 2.11.0.post2+musa5.2.0)")
        return
    if str(parsed) != value:
        out.add(None, path, f"{value!r} is not in canonical form; write {str(parsed)!r}")


def _targets(m: dict[str, Any], out: _Collector) -> tuple[tuple[str, ...], tuple[Target, ...]]:
    """[targets]: the Python versions and the product of them with the platforms."""
    targets_t = m.get("targets", {})
    pythons, platforms = targets_t.get("python", []), targets_t.get("platforms", [])
    if not pythons or not platforms:
        out.add(None, ("targets",), "missing: targets need python = [...] and platforms = [...]")
    for i, py in enumerate(pythons):
        if not _PYTHON_RE.fullmatch(py):
            out.add(None, ("targets", "python", str(i)), f"{py!r} is not a Python version like \"3.12\"")
    for i, plat in enumerate(platforms):
        if not _PLATFORM_RE.fullmatch(plat):
            out.add(None, ("targets", "platforms", str(i)),
                    f"{plat!r} is not a wheel platform tag like \"linux_x86_64\"")
    return tuple(pythons), tuple(Target(py, plat) for py in pythons for plat in platforms)


def _indexes(m: dict[str, Any], out: _Collector) -> list[Index]:
    """[indexes.NAME]: a URL (never with credentials in it) or pip's configuration."""
    indexes: list[Index] = []
    for iname, t in m.get("indexes", {}).items():
        path = ("indexes", iname)
        url, from_pip = t.get("url"), t.get("from_pip", False)
        if bool(url) == bool(from_pip):
            out.add(None, path, "give exactly one of url = \"...\" or from_pip = true")
        if url:
            try:
                parts = urlsplit(url)
                parts.port  # noqa: B018  a port out of range or not a number raises here, not later
            except ValueError as exc:
                out.add(None, (*path, "url"), f"{url[:200]!r} is not a valid URL ({exc})")
                parts = urlsplit("file:")
            if parts.scheme not in ("http", "https", "file"):
                out.add(None, (*path, "url"), f"{url[:200]!r} is not an http(s) or file URL")
            if parts.username or parts.password:
                out.add(None, (*path, "url"), "credentials never go in a profile: remove user:password@ and "
                        "name environment variables with username_env / password_env, or use netrc")
        indexes.append(Index(iname, url or None, bool(from_pip), t.get("username_env"), t.get("password_env"),
                             t.get("netrc", True)))
    return indexes


def _pins(m: dict[str, Any], targets: tuple[Target, ...], index_names: list[str], out: _Collector) -> list[Pin]:
    """[pins.NAME]: an exact version on a declared index, its gate role and the targets it is for."""
    pins: list[Pin] = []
    for pname, t in m.get("pins", {}).items():
        path = ("pins", pname)
        if "version" not in t:
            out.add(None, (*path, "version"), "missing: a pin needs an exact version")
            continue
        _exact_version(t["version"], (*path, "version"), out)
        index = t.get("index")
        if index is None:
            out.add(None, (*path, "index"), "missing: a pin names the index that serves it")
        elif index not in index_names:
            out.add(None, (*path, "index"), _not_declared("index", index, index_names))
        if "file" in t and (why := unsafe_component(t["file"])) is not None:
            out.add(None, (*path, "file"), f"the requirement file is one file name inside --out: {why}")
        abi = _enum(AbiRole, t.get("abi", "provide"), (*path, "abi"), out, [a.value for a in AbiRole])
        gate = _gate_role(pname, t["gate"], (*path, "gate"), out, pinned=True) if "gate" in t else None
        pin = Pin(pname, t["version"], index or "", t.get("file"), t.get("train"), t.get("note", ""),
                  abi or AbiRole.PROVIDE, gate, tuple(t.get("python", ())), tuple(t.get("platforms", ())),
                  t.get("marker"))
        _pin_targets(pin, targets, path, out)
        pins.append(pin)
    return pins


def _gate(m: dict[str, Any], pins: list[Pin], out: _Collector) -> list[tuple[str, GateRole]]:
    """[gate.extra.NAME]: gate roles for what is not pinned; then the order, `before` and `skip_import_if`
    of every role, pinned or not, checked together."""
    extra: list[tuple[str, GateRole]] = []
    for ename, t in m.get("gate", {}).get("extra", {}).items():
        role = _gate_role(ename, t, ("gate", "extra", ename), out, pinned=False)
        if any(p.key == canonicalize_name(ename) for p in pins):
            out.add(None, ("gate", "extra", ename), "is also a pin: put its gate role under the pin")
        if role:
            extra.append((ename, role))
    _check_order(pins, extra, out)
    _check_before(pins, extra, out)
    for p in pins:
        skip = p.gate.skip_import_if if p.gate else None
        if skip and not any(q.key == _requirement_key(skip) for q in pins):
            out.add(None, ("pins", p.name, "gate", "skip_import_if"), "must name another pin of this stack")
    return extra


def _build(m: dict[str, Any], out: _Collector) -> Stack | None:
    stack_t = m.get("stack", {})
    name = stack_t.get("name")
    if not name:
        out.add(None, ("stack", "name"), "missing: every profile names its stack")
    pythons, targets = _targets(m, out)
    indexes = _indexes(m, out)
    pins = _pins(m, targets, [i.name for i in indexes], out)
    extra = _gate(m, pins, out)
    probes = tuple(_probe(t, i, out) for i, t in enumerate(m.get("gate", {}).get("probe", [])))
    devices = _devices(m.get("devices"), out)
    image = _image(m.get("image"), name or "", list(pythons), pins, out)
    abi = _abi(m.get("abi", {}), out)
    if out.problems:
        return None
    return Stack(
        name=name,
        description=stack_t.get("description", ""),
        targets=targets,
        indexes=tuple(indexes),
        pins=tuple(pins),
        gate_extra=tuple(extra),
        probes=probes,
        image=image,
        abi=abi,
        extends=stack_t.get("extends"),
        devices=devices,
        sources=tuple(d.display for d in out.chain),
    )


def _abi(t: dict[str, Any], out: _Collector) -> AbiPolicy:
    """`[abi]`: the providers named must be known sets (or extended here), each optional member has a glob
    and a reason, the baseline names a policy auditwheel knows."""
    from stackctl.profile.runtime import BUILTIN

    provides = tuple((str(k), tuple(v)) for k, v in sorted(t.get("provides", {}).items()))
    known = sorted({*BUILTIN, *(k for k, _ in provides)})
    for i, name in enumerate(t.get("providers", [])):
        if name not in known:
            out.add(None, ("abi", "providers", str(i)),
                    _not_declared("run-time provider", name, known) + " (or add [abi.provides." + name + "])")
    optional = []
    for i, o in enumerate(t.get("optional", [])):
        for key in ("glob", "reason"):
            if not str(o.get(key, "")).strip():
                out.add(None, ("abi", "optional", str(i), key),
                        "missing: an optional member is named by an install-path glob and says why it is optional")
        optional.append(OptionalMember(str(o.get("glob", "")), str(o.get("reason", ""))))
    baseline = t.get("baseline")
    if baseline is not None:
        from stackctl.profile.runtime import policy_names

        names = policy_names()
        if baseline not in names:
            out.add(None, ("abi", "baseline"), _not_declared("manylinux or musllinux policy", baseline, names))
    for i, d in enumerate(t.get("ld_library_path", [])):
        if not d.startswith("/"):
            out.add(None, ("abi", "ld_library_path", str(i)), f"{d!r} is not an absolute directory")
    return AbiPolicy(tuple(t.get("allow", [])), t.get("inventory"), tuple(t.get("providers", [])), provides,
                     tuple(optional), baseline, tuple(t.get("ld_library_path", [])))


def _pin_targets(pin: Pin, targets: tuple[Target, ...], path: tuple[str, ...], out: _Collector) -> None:
    """A pin limited to some targets names only the stack's own, and is for at least one of them."""
    pythons = list(dict.fromkeys(t.python for t in targets))
    platforms = list(dict.fromkeys(t.platform for t in targets))
    for key, values, known in (("python", pin.python, pythons), ("platforms", pin.platforms, platforms)):
        for i, v in enumerate(values):
            if v not in known:
                out.add(None, (*path, key, str(i)), f"{v!r} is not one of the stack's targets "
                        f"({', '.join(known) or 'none'})")
    if pin.marker is not None:
        from packaging.markers import InvalidMarker, Marker

        try:
            Marker(pin.marker)
        except InvalidMarker as exc:
            out.add(None, (*path, "marker"), f"not a PEP 508 marker like 'python_version == \"3.10\"': {exc}")
            return
    if targets and not any(pin.applies_to(t) for t in targets):
        out.add(None, (*path, "marker" if pin.marker else "python" if pin.python else "platforms"),
                "matches none of the stack's targets (" + ", ".join(t.label for t in targets) + ")")


def _requirement_key(requirement: str) -> str:
    """The canonical name a requirement (already checked to parse) names."""
    from packaging.requirements import Requirement

    return canonicalize_name(Requirement(requirement).name)


def _not_declared(what: str, value: str, known: list[str]) -> str:
    close = difflib.get_close_matches(value, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"declared: {', '.join(known) or 'none'}"
    return f"{value!r} is not a declared {what}; {hint}"


def _check_order(pins: list[Pin], extra: list[tuple[str, GateRole]], out: _Collector) -> None:
    """Gate positions must be exactly 1..N: one sequence, no ties, no gaps."""
    placed: dict[int, list[tuple[str, ...]]] = {}
    for p in pins:
        if p.gate:
            placed.setdefault(p.gate.order, []).append(("pins", p.name, "gate", "order"))
    for n, role in extra:
        placed.setdefault(role.order, []).append(("gate", "extra", n, "order"))
    for order, paths in sorted(placed.items()):
        if len(paths) > 1:
            names = ", ".join(p[-3] for p in paths)
            out.add(None, paths[-1], f"order {order} is taken by more than one entry ({names})")
        if order < 1:
            out.add(None, paths[0], f"order {order} must be 1 or more")
    count = sum(len(paths) for paths in placed.values())
    missing = sorted(set(range(1, count + 1)) - set(placed))
    if missing:
        last = max(placed)
        out.add(None, placed[last][0], f"gate order has a gap: no entry at {', '.join(map(str, missing))} "
                f"(positions must run 1..{count})")


def _check_before(pins: list[Pin], extra: list[tuple[str, GateRole]], out: _Collector) -> None:
    """`before = ["torch"]`: an import order the stack depends on, so no reordering can drop it silently."""
    roles = [(p.name, ("pins", p.name, "gate"), p.gate) for p in pins if p.gate]
    roles += [(n, ("gate", "extra", n), role) for n, role in extra]
    order = {canonicalize_name(n): (n, role.order) for n, _, role in roles}
    for name, path, role in roles:
        for later in role.before:
            found = order.get(canonicalize_name(later))
            if found is None:
                out.add(None, (*path, "before"), f"{later!r} is not an entry of this stack's gate")
            elif found[1] <= role.order:
                out.add(None, (*path, "order"), f"gate order: {name} (order {role.order}) must come before "
                        f"{found[0]} (order {found[1]})")


def _probe(t: dict[str, Any], i: int, out: _Collector) -> Probe:
    path = ("gate", "probe", str(i))
    kind = t.get("kind")
    needs = {"file-count": ("package", "glob", "count"), "attr": ("module", "attr", "value"), "expr": ("expr",),
             "parity": ("setup", "op", "device")}
    if kind not in needs:
        out.add(None, (*path, "kind"), f"{kind!r} is not a probe kind; use " + ", ".join(f'"{k}"' for k in needs))
    else:
        for k in needs[kind]:
            if k not in t:
                out.add(None, (*path, k), f"missing: a {kind} probe needs {', '.join(needs[kind])}")
    for key in ("expr", "setup", "op"):
        if isinstance(t.get(key), str):
            _python_code(t[key], "eval" if key != "setup" else "exec", (*path, key), out)
    for key in ("atol", "rtol"):
        if isinstance(t.get(key), (int, float)) and not isinstance(t[key], bool) and t[key] < 0:
            out.add(None, (*path, key), f"a tolerance is 0 or more, not {t[key]}")
    phase = _phase(t, path, out) or GatePhase.STACK
    if kind == "parity" and phase is not GatePhase.DEVICE:
        out.add(None, (*path, "phase"), 'a parity probe runs on a device: give it phase = "device"')
    atol, rtol = t.get("atol"), t.get("rtol")
    return Probe(t.get("name", f"probe {i + 1}"), kind or "", t.get("package"), t.get("glob"), t.get("count"),
                 t.get("module"), t.get("attr"), t.get("value"), phase, t.get("expr"), tuple(t.get("modules", ())),
                 t.get("setup"), t.get("op"), t.get("device"), None if atol is None else float(atol),
                 None if rtol is None else float(rtol))


def _python_code(code: str, mode: str, path: tuple[str, ...], out: _Collector) -> None:
    """A probe's expression or statements parse as Python 3.8 (the gate's oldest interpreter), here, before
    any image is built."""
    import ast

    what = "expression" if mode == "eval" else "statement"
    try:
        ast.parse(code, mode=mode, feature_version=(3, 8))
    except SyntaxError as exc:
        out.add(None, path, f"not a Python {what}: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:  # a NUL byte; nesting the parser cannot hold
        out.add(None, path, f"not a Python {what}: {str(exc) or type(exc).__name__}")


def _devices(t: dict[str, Any] | None, out: _Collector) -> Devices | None:
    """`[devices]`: `gpus` as `docker run --gpus` reads it, CDI names as NAME=DEVICE, device nodes under /dev."""
    if t is None:
        return None
    path = ("devices",)
    gpus = t.get("gpus")
    if gpus is not None and not re.fullmatch(r"all|[1-9][0-9]{0,3}|device=[0-9A-Za-z-]+(,[0-9A-Za-z-]+)*", gpus):
        out.add(None, (*path, "gpus"), f"{gpus!r} is not a --gpus value: \"all\", a count or \"device=0,1\"")
    for i, name in enumerate(t.get("cdi", [])):
        if not re.fullmatch(r"[a-z0-9.-]+/[a-zA-Z0-9._-]+=[a-zA-Z0-9._:*-]+", name):
            out.add(None, (*path, "cdi", str(i)), f"{name!r} is not a CDI device name like \"nvidia.com/gpu=all\"")
    for i, node in enumerate(t.get("nodes", [])):
        if not node.startswith("/dev/"):
            out.add(None, (*path, "nodes", str(i)), f"{node!r} is not a device node (a path under /dev)")
    for key in t.get("env", {}):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            out.add(None, (*path, "env", key), "not an environment variable name")
    if not (gpus or t.get("cdi") or t.get("nodes") or t.get("runtime")):
        out.add(None, path, "names no device: give gpus, cdi, nodes or runtime")
    return Devices(gpus, t.get("driver"), tuple(t.get("capabilities", ("gpu",))), tuple(t.get("cdi", ())),
                   tuple(t.get("nodes", ())), t.get("runtime"), tuple(sorted(t.get("env", {}).items())),
                   t.get("name"))


def _image(t: dict[str, Any] | None, stack: str, pythons: list[str], pins: list[Pin],
           out: _Collector) -> Image | None:
    if t is None:
        return None
    for k in ("base", "repository", "tag"):
        if k not in t:
            out.add(None, ("image", k), "missing")
    python = t.get("python", pythons[0] if pythons else "")
    if pythons and python not in pythons:
        out.add(None, ("image", "python"), f"{python!r} is not one of the targets' pythons ({', '.join(pythons)})")
    if "repository" in t and (why := check_repository(t["repository"])):
        out.add(None, ("image", "repository"), why)
    if "tag" in t:
        try:
            render_tag(t["tag"], stack=stack, python=python, pins={p.name: p.version for p in pins},
                       variables=t.get("vars", {}))
        except TagTemplateError as exc:
            out.add(None, ("image", "tag"), str(exc))
    installer = t.get("installer", "pip")
    if installer not in INSTALLERS:
        out.add(None, ("image", "installer"), f"{installer!r} is not an installer; use \"pip\" or \"uv\"")
    elif installer != "pip":
        tool = next((p for p in pins if p.key == canonicalize_name(installer)), None)
        if tool is None:
            out.add(None, ("image", "installer"), f"{installer} must be pinned ([pins.{installer}]) so its wheel "
                    "is locked and hash-checked like every other")
        elif tool.gate is not None:
            out.add(None, ("pins", tool.name, "gate"), f"{installer} installs the image but is not in it: "
                    "it has nothing for the gate to check")
    bytecode = t.get("bytecode", "pins")
    if isinstance(bytecode, str) and bytecode != "pins":
        out.add(None, ("image", "bytecode"), f'{bytecode!r} is no byte-code choice; use true, false or "pins"')
    if not all(k in t for k in ("base", "repository", "tag")):
        return None
    return Image(t["base"], t["repository"], t["tag"], python, tuple(t.get("vars", {}).items()),
                 tuple(t.get("labels", {}).items()), installer, bytecode, _app_image(t.get("app"), out))


def _app_image(t: dict[str, Any] | None, out: _Collector) -> AppImage | None:
    """`[image.app]`: the project's own Dockerfile on top of the stack image. Its files are checked once the
    profile has loaded (`_check_app_files`): here only the table's own values."""
    from stackctl.profile.app import CREDENTIAL_ARG, check_arg_name, credential_in

    if t is None:
        return None
    path = ("image", "app")
    if "dockerfile" not in t:
        out.add(None, (*path, "dockerfile"), "missing: the project's Dockerfile, relative to the repository root")
    for key in ("dockerfile", "context"):
        if key in t and (why := _repo_relative(t[key])) is not None:
            out.add(None, (*path, key), why)
    stack_arg = t.get("stack_arg", "STACK_IMAGE")
    if (why := check_arg_name(stack_arg)) is not None:
        out.add(None, (*path, "stack_arg"), why)
    args = t.get("args", {})
    for name, value in args.items():
        if (why := check_arg_name(name)) is not None:
            out.add(None, (*path, "args", name), why)
        elif name == stack_arg:
            out.add(None, (*path, "args", name), "is the stack argument: stackctl passes the stack image in it")
        elif CREDENTIAL_ARG.search(name) or credential_in(value):
            out.add(None, (*path, "args", name), "looks like a credential: a build argument is kept in the "
                    "image's history for anyone who pulls it; give the build a secret another way")
    if "dockerfile" not in t:
        return None
    return AppImage(t["dockerfile"], t.get("context", "."), t.get("target") or None, tuple(args.items()), stack_arg)


def _repo_relative(value: str) -> str | None:
    """Why `value` is not a path inside the repository (None when it is)."""
    from pathlib import PurePosixPath

    p = PurePosixPath(value)
    if not value or p.is_absolute() or ".." in p.parts or "\\" in value:
        return f"{value[:200]!r} must be a path inside the repository, relative to its root"
    return None


def _check_app_files(stack: Stack, source: Source, name: str, out: _Collector) -> None:
    """The Dockerfile of [image.app] exists and takes the stack image through its argument in a FROM."""
    from stackctl.profile.app import dockerfile_problems
    from stackctl.profile.sources import read_repo_file

    app = stack.app
    if app is None:
        return
    found = read_repo_file(source, name, app.dockerfile)
    if found is None:
        out.add(None, ("image", "app", "dockerfile"), f"{app.dockerfile}: no such file in the repository")
        return
    display, text = found
    for line, message in dockerfile_problems(text, app.stack_arg, app.target):
        out.problems.append(Problem(display, line, "", message))


@dataclass(frozen=True)
class CheckedToml:
    """One TOML file read and checked against a schema table like `SCHEMA` (for files that are not profiles: the
    validation plan); `add` records a further problem at a key path's line."""

    display: str
    data: dict[str, Any]
    problems: list[Problem]
    lines: dict[tuple[str, ...], int]
    unknown: int = 0  # how many of the problems are unknown keys (dropped: the rest can still be checked)

    @property
    def well_typed(self) -> bool:
        """Every value has its schema type: the checks of values can run (unknown keys aside)."""
        return len(self.problems) == self.unknown

    def add(self, path: tuple[str, ...], message: str) -> None:
        self.problems.append(Problem(self.display, locate(self.lines, path), ".".join(path), message))


def read_checked(display: str, text: str, schema: dict[str, Any]) -> CheckedToml:
    """Parse `text` and check it against `schema` as profiles are checked: every problem collected with its line
    and key path, unknown keys named with the nearest known one and dropped so the rest can be checked on."""
    collector = _Collector()
    try:
        data = read_toml(text, display)
    except TomlError as exc:
        return CheckedToml(display, {}, [Problem(display, exc.line, "", exc.reason)], {})
    if (deep := _too_deep(data)) is not None:
        return CheckedToml(display, {}, [Problem(display, None, ".".join(deep), "nested too deeply")], {})
    doc = _Doc(display, display, data, key_lines(text))
    collector.chain.append(doc)
    _check_schema(data, schema, (), doc, collector)
    for table, key in collector.unknown:
        table.pop(key, None)
    return CheckedToml(display, data, collector.problems, doc.lines, len(collector.unknown))
