"""The DT_NEEDED closure of a stack as the dynamic loader sees it: where every needed entry of every checked
file is found, or why not, and the symbol-version ceilings. Pure: scanned wheels, an inventory (or a
manylinux policy), the run time's providers and the gate's import order in; an `AbiReport` out.

The order follows glibc's `_dl_map_object` (elf/dl-load.c), per ELF object, first hit wins:
  0. an object already loaded under that name: by the same load (a sibling found it), or by an earlier
     import of the gate (deep_ep finds libtorch_python.so because `import torch` came first);
  1. unless the object has a DT_RUNPATH: its DT_RPATH, then the DT_RPATH of each object that loaded it, on up;
  2. LD_LIBRARY_PATH as the image sets it;
  3. the object's own DT_RUNPATH (never its loaders');
  4. the image's loader cache and default directories (the inventory), or without an inventory the
     libraries the manylinux/musllinux policy of the wheel's tag lets a wheel take from the system;
then what the loader cannot know of: a run-time provider (the device driver's libraries), the allow list,
and an optional member (a plugin loaded only when its feature is used) whose need the image lacks.
`$ORIGIN`, `$LIB` and `$PLATFORM` expand against the object's installed path. A directory is searched for
the file name the entry asks for, so a copy vendored under another name (`libz-7dbeb23c.so.1` whose SONAME
is `libz.so.1`) is never what another wheel finds.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from stackctl.abi.inventory import FAMILIES, Inventory, highest, split_version
from stackctl.profile.model import OptionalMember
from stackctl.profile.runtime import Policy, ProviderSet, policy_for, system_library, tag_policy
from stackctl.wheels.scan import ElfMember, WheelScan


class Where(str, Enum):
    LOADED = "loaded"  # already loaded: by this load, or by an earlier import
    RPATH = "rpath"
    LD_LIBRARY_PATH = "ld_library_path"
    RUNPATH = "runpath"
    IMAGE = "image"  # the image's loader cache or default directories
    BASELINE = "baseline"  # the manylinux policy's system libraries (no inventory)
    PROVIDER = "provider"  # the device driver, at run time
    ALLOW = "allow"
    OPTIONAL = "optional"  # an optional member's need the image lacks
    UNRESOLVED = "unresolved"


class Severity(str, Enum):
    ERROR = "error"  # fails the check
    WARNING = "warning"


@dataclass(frozen=True)
class StackWheel:
    scan: WheelScan
    check: bool  # its files are checked; every wheel provides
    requires_dist: tuple[str, ...] | None = None  # from the lock; None: the scan's metadata, if read


@dataclass(frozen=True)
class RunTime:
    """What the loader meets at run time beyond the files: the gate's import order (top-level modules), the
    device driver's libraries, optional members, the policy held without an inventory, LD_LIBRARY_PATH."""

    imports: tuple[str, ...] | None = ()  # None: each wheel's packages with extension modules, in wheel order
    providers: tuple[ProviderSet, ...] = ()
    optional: tuple[OptionalMember, ...] = ()
    baseline: str | None = None  # a policy name; None: each wheel's own tag
    ld_library_path: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resolution:
    wheel: str
    file: str  # install path of the file that needs the library
    needed: str
    where: Where
    detail: str  # what was found, and through which entry; for UNRESOLVED, why not
    image_path: str | None = None  # set when the library found is the image's (directly or by a path entry)
    provider_wheel: str | None = None  # set when the library found is a wheel's file ...
    provider_path: str | None = None  # ... installed at this path


@dataclass(frozen=True)
class Finding:
    severity: Severity
    kind: str  # unresolved | ceiling | foreign-machine | bad-elf | not-elf | coupling | build-path
    wheel: str
    file: str
    message: str


@dataclass(frozen=True)
class Ceiling:
    family: str  # GLIBC | GLIBCXX | CXXABI | GCC
    required: str | None  # highest version any checked file requires
    required_by: str | None
    provided: str | None  # highest version the image (or the baseline policy) defines


@dataclass(frozen=True)
class AbiReport:
    arch: str | None
    wheels: tuple[str, ...]
    checked_files: int
    resolutions: tuple[Resolution, ...]
    findings: tuple[Finding, ...]
    ceilings: tuple[Ceiling, ...]
    inventory: str | None  # the image the inventory describes
    baselines: tuple[str, ...] = ()  # the policies held without an inventory: "manylinux_2_28"
    providers: tuple[str, ...] = ()  # the run-time provider sets in force: "NVIDIA driver"

    @property
    def ok(self) -> bool:
        return not any(f.severity is Severity.ERROR for f in self.findings)

    def unresolved(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(library, every file that needs it) for each unresolved library."""
        by_lib: dict[str, list[str]] = {}
        for r in self.resolutions:
            if r.where is Where.UNRESOLVED:
                by_lib.setdefault(r.needed, []).append(f"{r.wheel}:{r.file}")
        return tuple((lib, tuple(files)) for lib, files in sorted(by_lib.items()))

    def others(self) -> tuple[Finding, ...]:
        """The findings said one by one: all but the unresolved libraries (`unresolved` says those by library)."""
        return tuple(f for f in self.findings if f.kind != "unresolved")

    def failures(self) -> list[str]:
        """One line per unresolved library (its first files, how many in all) and per other error."""
        out = []
        for lib, files in self.unresolved():
            more = f" and {len(files) - 3} more" if len(files) > 3 else ""
            out.append(f"unresolved: {lib} (needed by {', '.join(files[:3])}{more})")
        out += [f.message for f in self.findings if f.severity is Severity.ERROR and f.kind != "unresolved"]
        return out

    def failure(self) -> str | None:
        """Everything that failed, one line each, or None when the check passed."""
        return "\n".join(self.failures()) or None


def expand_origin(entry: str, installed: str, *, lib: str = "lib64", platform: str = "x86_64") -> str:
    """A RUNPATH/RPATH entry with `$ORIGIN` (the directory the file installs into), `$LIB` and `$PLATFORM`
    replaced, as the loader does; a relative result is normalised against site-packages."""
    origin = posixpath.dirname(installed) or "."
    out = entry
    for token, value in (("ORIGIN", origin), ("LIB", lib), ("PLATFORM", platform)):
        out = out.replace("${" + token + "}", value).replace("$" + token, value)
    return out if out.startswith("/") else posixpath.normpath(out)


@dataclass(frozen=True)
class _Obj:
    wheel: str
    member: ElfMember
    check: bool
    position: int  # in the gate's import order of the wheel that installs it; -1: none imports it
    policy: Policy | None  # the baseline held for its wheel without an inventory
    optional: OptionalMember | None

    @property
    def path(self) -> str:
        return self.member.installed


@dataclass(frozen=True)
class _Loaded:
    obj: _Obj
    how: str  # "loaded by `import torch`" or "loaded already through torch/lib/libtorch.so"


_SYSTEM_PREFIXES = ("/lib", "/lib32", "/lib64", "/usr/", "/opt/", "/usr/local/")


@dataclass
class _Loader:
    inventory: Inventory | None
    allow: Sequence[str]
    runtime: RunTime
    arch: str | None
    by_path: dict[str, _Obj] = field(default_factory=dict)
    by_base: dict[str, list[_Obj]] = field(default_factory=dict)
    by_soname: dict[str, list[_Obj]] = field(default_factory=dict)

    def add(self, o: _Obj) -> None:
        self.by_path.setdefault(o.path, o)
        self.by_base.setdefault(posixpath.basename(o.path), []).append(o)
        if o.member.info is not None and o.member.info.soname:
            self.by_soname.setdefault(o.member.info.soname, []).append(o)

    def expand(self, entry: str, installed: str) -> str:
        lib = "lib64"
        if self.inventory is not None and any(d.startswith("/lib/") and d.endswith("-linux-gnu")
                                              for d in self.inventory.search_dirs):
            lib = next(d for d in self.inventory.search_dirs if d.startswith("/lib/") and d.endswith("-linux-gnu"))[1:]
        return expand_origin(entry, installed, lib=lib, platform=self.arch or "x86_64")

    def in_dir(self, d: str, needed: str, asking: _Obj) -> tuple[str, _Obj | None, str | None] | None:
        """(what, wheel object, image path) when directory `d` holds `needed`."""
        candidate = posixpath.normpath(posixpath.join(d, needed))
        if d.startswith("/"):
            if self.inventory is not None and self.inventory.find_path(candidate) is not None:
                return f"image {candidate}", None, candidate
            return None
        o = self.by_path.get(candidate)
        if o is not None and o.path != asking.path:
            return f"{o.wheel} {o.path}", o, None
        return None

    def resolve(self, o: _Obj, needed: str, chain: tuple[_Obj, ...],
                loaded: dict[str, _Loaded]) -> tuple[Resolution, _Obj | None]:
        info = o.member.info
        assert info is not None

        def res(where: Where, detail: str, image: str | None = None, p: _Obj | None = None) -> Resolution:
            return Resolution(o.wheel, o.path, needed, where, detail, image, p.wheel if p else None,
                              p.path if p else None)

        hit = loaded.get(needed)
        if hit is not None and hit.obj.path != o.path:
            return res(Where.LOADED, f"{hit.how}: {hit.obj.wheel} {hit.obj.path}", p=hit.obj), hit.obj
        if not info.runpath:
            for who in (o, *chain):
                if who.member.info is None or who.member.info.runpath:
                    continue  # an object with DT_RUNPATH has its DT_RPATH ignored, as a loader of others too
                for entry in who.member.info.rpath:
                    found = self.in_dir(self.expand(entry, who.path), needed, o)
                    if found:
                        whose = "" if who is o else f" of {who.path}"
                        return res(Where.RPATH, f"RPATH{whose} {entry} → {found[0]}", found[2], found[1]), found[1]
        for d in self.runtime.ld_library_path:
            found = self.in_dir(d, needed, o)
            if found:
                return res(Where.LD_LIBRARY_PATH, f"LD_LIBRARY_PATH {d} → {found[0]}", found[2], found[1]), found[1]
        for entry in info.runpath:
            found = self.in_dir(self.expand(entry, o.path), needed, o)
            if found:
                return res(Where.RUNPATH, f"{entry} → {found[0]}", found[2], found[1]), found[1]
        if self.inventory is not None:
            lib = self.inventory.find(needed)
            if lib is not None:
                return res(Where.IMAGE, lib.path, lib.path), None
        elif o.policy is not None and system_library(o.policy, needed):
            return res(Where.BASELINE, f"{o.policy.name} policy (a system library)"), None
        for ps in self.runtime.providers:
            if (glob := ps.match(needed)) is not None:
                return res(Where.PROVIDER, f"{ps.title}, at run time ({glob})"), None
        for rule in self.allow:
            if fnmatch.fnmatchcase(needed, rule):
                return res(Where.ALLOW, rule), None
        if o.optional is not None:
            return res(Where.OPTIONAL, f"optional member ({o.optional.glob}): {o.optional.reason}"), None
        return res(Where.UNRESOLVED, self.why_not(o, needed, chain)), None

    def why_not(self, o: _Obj, needed: str, chain: tuple[_Obj, ...]) -> str:
        info = o.member.info
        assert info is not None
        paths = [f"RUNPATH {e}" for e in info.runpath] or [f"RPATH {e}" for e in info.rpath]
        if not info.runpath:
            paths += [f"RPATH of {w.path} {e}" for w in chain if w.member.info and not w.member.info.runpath
                      for e in w.member.info.rpath]
        searched = "; ".join(paths) if paths else "no RPATH/RUNPATH"
        where = "not in the image" if self.inventory is not None else (
            f"not a system library of {o.policy.name}" if o.policy else "no inventory or policy to look in")
        hint = ""
        same = [x for x in self.by_base.get(needed, ()) if x.path != o.path]
        renamed = [x for x in self.by_soname.get(needed, ()) if posixpath.basename(x.path) != needed]
        if same:
            hint = f"; {same[0].wheel} has {same[0].path}, which no search path of this file leads to"
        elif renamed:
            hint = (f"; only {renamed[0].wheel}'s renamed copy {renamed[0].path} has that SONAME, and the "
                    "loader looks for the file name")
        return f"UNRESOLVED ({searched}; {where}{hint})"


def _is_extension(base: str) -> bool:
    return (base.endswith(".so") and not base.startswith("lib")) or ".cpython-" in base or ".abi3." in base


def _imported_by(path: str, module: str) -> bool:
    """`import torch` loads torch's own extension modules (torch/_C.cpython-312-x86_64-linux-gnu.so), or the
    module itself when it is one (`deep_ep_cpp.cpython-310-...so`)."""
    base = posixpath.basename(path)
    if posixpath.dirname(path) == module:
        return _is_extension(base)
    return "/" not in path and path.startswith(module + ".") and _is_extension(path)


def check_abi(wheels: Sequence[StackWheel], inventory: Inventory | None = None, allow: Sequence[str] = (),
              arch: str | None = None, runtime: RunTime | None = None) -> AbiReport:
    """The stack's closure as the loader sees it: every object placed, the gate's imports loaded in their
    order, each checked file's needs and symbol versions held to the image (or the policy), then the
    couplings between wheels and the ceilings."""
    runtime = runtime or RunTime()
    arch = arch or (inventory.arch if inventory else None) or next(
        (a for w in wheels if (a := w.scan.arch())), None)
    if inventory is not None and inventory.ld_library_path and not runtime.ld_library_path:
        runtime = RunTime(runtime.imports, runtime.providers, runtime.optional, runtime.baseline,
                          inventory.ld_library_path)
    loader = _Loader(inventory, allow, runtime, arch)
    imports = _import_order(wheels, runtime)
    objects, baselines, findings = _place_objects(wheels, loader, imports)
    reported = _load_imports(loader, objects, imports)
    checked, resolutions, top, found = _check_files(wheels, loader, reported)
    findings += found
    findings += coupling(wheels, resolutions)
    policies = sorted({o.policy.name: o.policy for o in objects if o.policy and o.check}.values(),
                      key=lambda p: -p.priority)
    ceilings = tuple(
        Ceiling(fam, top[fam][0] if fam in top else None, top[fam][1] if fam in top else None,
                inventory.ceiling(fam) if inventory else _policy_ceiling(policies[0], fam) if policies else None)
        for fam in FAMILIES
    )
    return AbiReport(arch, tuple(w.scan.filename for w in wheels), checked, tuple(resolutions),
                     tuple(findings), ceilings, inventory.image if inventory else None, tuple(sorted(baselines)),
                     tuple(p.title for p in runtime.providers))


def _import_order(wheels: Sequence[StackWheel], runtime: RunTime) -> list[str]:
    """The top-level modules the gate imports, in its order; without a gate, the wheels' extension modules in
    the order the wheels were named on the command line (torch before torchvision)."""
    if runtime.imports is not None:
        return [m.split(".", 1)[0] for m in runtime.imports]
    modules = ((e.installed, e.installed.split("/", 1)[0] if "/" in e.installed else e.installed.split(".", 1)[0])
               for w in wheels for e in w.scan.elves)
    return list(dict.fromkeys(m for path, m in modules if _imported_by(path, m)))


def _place_objects(wheels: Sequence[StackWheel], loader: _Loader,
                   imports: Sequence[str]) -> tuple[list[_Obj], set[str], list[Finding]]:
    """Every ELF object the loader could use, added to `loader`: with its wheel's place in the import order and
    the policy held for it without an inventory; the policies held, and the wheels and files of another machine."""
    arch, runtime = loader.arch, loader.runtime
    objects: list[_Obj] = []
    baselines: set[str] = set()
    findings: list[Finding] = []
    for w in wheels:
        wheel = w.scan.filename
        tagged = w.scan.arch()
        if arch and tagged and tagged != arch:
            findings.append(Finding(Severity.ERROR, "foreign-machine", wheel, "",
                                    f"{wheel} is tagged for {tagged}, not for this {arch} stack"))
        tops = {m.installed.split("/", 1)[0].split(".", 1)[0] for m in w.scan.elves} | {
            n.split("/", 1)[0] for n in (x.name for x in w.scan.members)}
        position = next((i for i, m in enumerate(imports) if m in tops), -1)
        policy = None
        if loader.inventory is None:
            policy = (policy_for(runtime.baseline, arch) if runtime.baseline and arch else
                      tag_policy(w.scan.platforms, arch))
            if policy is not None and w.check:
                baselines.add(policy.name)
        for e in w.scan.elves:
            machine = e.known_machine()
            if e.problem is not None or (e.info is None and not e.unread):
                continue  # a library the loader could not use provides nothing
            if arch and machine and machine != arch:
                if not w.check:  # a checked file of another machine is an error (`_check_files`)
                    findings.append(Finding(Severity.WARNING, "foreign-machine", wheel, e.installed,
                                            f"{wheel}:{e.path} is a {machine} ELF in a {arch} stack; "
                                            "it provides nothing"))
                continue
            opt = next((x for x in runtime.optional if fnmatch.fnmatchcase(e.installed, x.glob)), None)
            o = _Obj(wheel, e, w.check, position, policy, opt)
            loader.add(o)
            objects.append(o)
    return objects, baselines, findings


def _load_imports(loader: _Loader, objects: Sequence[_Obj], imports: Sequence[str]) -> dict[str, list[Resolution]]:
    """Each checked object's resolutions (by path), as the gate's imports load it: an import loads its wheel's
    extension modules and what they need, breadth first, seeing what the imports before it left loaded; an
    object no import loaded is opened afterwards (dlopen)."""
    reported: dict[str, list[Resolution]] = {}

    def load(root: _Obj, visible: dict[str, _Loaded], how: str | None) -> dict[str, _Loaded]:
        """Load `root` and what it needs, breadth first as the loader maps dependencies; what it loaded."""
        local: dict[str, _Loaded] = {}
        seen: set[str] = set()
        queue: deque[tuple[_Obj, tuple[_Obj, ...]]] = deque([(root, ())])
        while queue:
            o, chain = queue.popleft()
            if o.path in seen or o.member.info is None:
                continue
            seen.add(o.path)
            local.setdefault(posixpath.basename(o.path), _Loaded(o, how or f"loaded already through {root.path}"))
            record = o.check and o.path not in reported
            rs = []
            for needed in o.member.info.needed:
                r, found = loader.resolve(o, needed, chain, {**visible, **local})
                rs.append(r)
                if found is not None:
                    local.setdefault(posixpath.basename(found.path), _Loaded(
                        found, how or f"loaded already through {o.path}"))
                    queue.append((found, (o, *chain)))
            if record:
                reported[o.path] = rs
        return local

    # An object another object of the stack loads is checked as that one loads it (its loaders' RPATH apply):
    # the objects nothing loads are the roots, checked first.
    loaded_by_other: set[str] = set()
    for o in objects:
        if o.member.info is None:
            continue
        for needed in o.member.info.needed:
            _, found = loader.resolve(o, needed, (), {})
            if found is not None and found.path != o.path:
                loaded_by_other.add(found.path)

    cumulative: list[dict[str, _Loaded]] = []  # what each import left loaded, in import order
    for module in imports:
        visible: dict[str, _Loaded] = {}
        for earlier in cumulative:
            visible.update(earlier)
        now: dict[str, _Loaded] = {}
        roots = [o for o in objects if _imported_by(o.path, module)]
        for root in roots:
            now.update(load(root, {**visible, **now}, f"loaded by `import {module}`"))
        cumulative.append({k: v for k, v in now.items() if k not in visible})
    for o in sorted(objects, key=lambda x: x.path in loaded_by_other):
        if o.check and o.path not in reported and o.member.info is not None:
            # an object of an imported wheel that its import did not load is opened later (dlopen) with the
            # imports up to its own done; one of a wheel no import names, after the whole gate
            visible = {}
            for earlier in cumulative[:o.position + 1] if o.position >= 0 else cumulative:
                visible.update(earlier)
            load(o, visible, None)
    return reported


def _check_files(wheels: Sequence[StackWheel], loader: _Loader, reported: Mapping[str, list[Resolution]]
                 ) -> tuple[int, list[Resolution], dict[str, tuple[str, str]], list[Finding]]:
    """Each checked wheel's files held to what the loader found: (how many ELF files were checked, their
    resolutions, the highest symbol version each family asks for with the file asking it, the findings)."""
    inventory, arch = loader.inventory, loader.arch
    findings: list[Finding] = []
    resolutions: list[Resolution] = []
    top: dict[str, tuple[str, str]] = {}  # family -> (version, file)
    checked = 0
    build_paths: dict[tuple[str, str], list[str]] = {}
    for w in wheels:
        if not w.check:
            continue
        wheel = w.scan.filename
        for e in w.scan.elves:
            if e.unread:
                continue
            if e.info is None:
                not_elf = (e.problem or "").startswith("not an ELF")
                findings.append(Finding(Severity.WARNING if not_elf else Severity.ERROR,
                                        "not-elf" if not_elf else "bad-elf", wheel, e.installed,
                                        f"{wheel}:{e.path}: {e.problem}"))
                continue
            checked += 1
            if arch and e.info.machine != arch:
                findings.append(Finding(Severity.ERROR, "foreign-machine", wheel, e.installed,
                                        f"{wheel}:{e.path} is a {e.info.machine} ELF in a {arch} stack"))
                continue
            obj = loader.by_path.get(e.installed)
            mine = reported.get(e.installed, []) if obj is not None and obj.wheel == wheel else []
            where_of = {r.needed: r for r in mine}
            resolutions += mine
            for r in mine:
                if r.where is Where.UNRESOLVED:
                    findings.append(Finding(Severity.ERROR, "unresolved", wheel, e.installed,
                                            f"{r.needed} needed by {wheel}:{e.path} is not found"))
            for entry in (*e.info.rpath, *e.info.runpath):
                d = loader.expand(entry, e.installed)
                if d.startswith("/") and _build_machine(d, inventory):
                    build_paths.setdefault((wheel, d), []).append(e.installed)
            policy = obj.policy if obj is not None else None
            for lib, version in e.info.required_versions():
                sv = split_version(version)
                if sv is None:
                    continue
                if sv[0] in FAMILIES and (sv[0] not in top or split_version(top[sv[0]][0]) < sv):  # type: ignore[operator]
                    top[sv[0]] = (version, f"{wheel}:{e.path}")
                f = _ceiling(wheel, e, lib, version, where_of.get(lib), inventory, policy)
                if f is not None:
                    findings.append(f)
    for (wheel, d), files in build_paths.items():
        more = f" and {len(files) - 1} more" if len(files) > 1 else ""
        findings.append(Finding(Severity.WARNING, "build-path", wheel, files[0],
                                f"{wheel}:{files[0]}{more}: RPATH/RUNPATH {d} is a build machine's directory "
                                f"(outside the wheel, in no image{'' if inventory else ' known'}); remove it"))
    return checked, resolutions, top, findings


def _policy_ceiling(policy: Policy, family: str) -> str | None:
    got = dict(policy.versions).get(family)
    return highest([f"{family}_{v}" for v in got]) if got else None


def _build_machine(d: str, inventory: Inventory | None) -> bool:
    """An absolute directory no image has: with an inventory, none of its libraries or search directories is
    there; without one, a directory outside the system's own prefixes (/__w/_temp/conda_environment_...)."""
    if inventory is not None:
        return d not in inventory.search_dirs and not any(
            posixpath.dirname(lib.path) == d for lib in inventory.libraries) and d not in inventory.ld_library_path
    return not d.startswith(_SYSTEM_PREFIXES)


def _declared_closure(wheels: Sequence[StackWheel]) -> dict[str, set[str] | None]:
    """Each wheel's distribution -> every distribution its Requires-Dist reaches, extras followed (torch's
    `cuda-toolkit[cublas]` reaches nvidia-cublas through cuda-toolkit's `extra == "cublas"`); None when the
    wheel's own Requires-Dist is unknown."""
    from packaging.markers import UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    reqs: dict[str, list[Requirement] | None] = {}
    for w in wheels:
        declared = w.requires_dist
        if declared is None and w.scan.metadata is not None:
            declared = w.scan.metadata.requires_dist
        key = canonicalize_name(w.scan.name)
        if declared is None:
            reqs.setdefault(key, None)
            continue
        parsed = []
        for text in declared:
            try:
                parsed.append(Requirement(text))
            except InvalidRequirement:
                continue
        reqs[key] = parsed

    def applies(r: Requirement, extras: frozenset[str]) -> bool:
        if r.marker is None:
            return True
        for extra in (*extras, ""):
            try:
                if r.marker.evaluate({"extra": extra}):
                    return True
            except UndefinedEnvironmentName:
                return True
        return False

    out: dict[str, set[str] | None] = {}
    for start in reqs:
        if reqs[start] is None:
            out[start] = None
            continue
        seen: set[tuple[str, frozenset[str]]] = set()
        todo = [(start, frozenset[str]())]
        reached: set[str] = set()
        while todo:
            name, extras = todo.pop()
            if (name, extras) in seen:
                continue
            seen.add((name, extras))
            for r in reqs.get(name) or ():
                if applies(r, extras):
                    dep = canonicalize_name(r.name)
                    reached.add(dep)
                    todo.append((dep, frozenset(canonicalize_name(x) for x in r.extras)))
        out[start] = reached
    return out


def coupling(wheels: Sequence[StackWheel], resolutions: Sequence[Resolution]) -> list[Finding]:
    """A checked wheel whose libraries need another distribution's, with no Requires-Dist leading to it.

    deep_ep's extension needs libtorch_python.so from torch, yet deep_ep declares nothing: no resolver
    keeps the two in step, only the profile does. The whole Requires-Dist graph of the stack counts, extras
    included. A wheel whose Requires-Dist is unknown is not judged.
    """
    from packaging.utils import canonicalize_name

    by_file = {w.scan.filename: w for w in wheels}
    closure = _declared_closure(wheels)
    needs: dict[tuple[str, str], list[str]] = {}  # (wheel, provider wheel) → libraries
    for r in resolutions:
        if r.provider_wheel is None or r.provider_wheel == r.wheel or r.provider_wheel not in by_file:
            continue
        needs.setdefault((r.wheel, r.provider_wheel), []).append(r.needed)
    out = []
    for (wheel, provider_file), libs in needs.items():
        w = by_file[wheel]
        provider = by_file[provider_file].scan.name
        key = canonicalize_name(w.scan.name)
        reached = closure.get(key)
        if reached is None or canonicalize_name(provider) in reached or canonicalize_name(provider) == key:
            continue
        declared = w.requires_dist if w.requires_dist is not None else (
            w.scan.metadata.requires_dist if w.scan.metadata else ())
        # the file name spells the distribution as it was built (torch_musa), which reads like the profile
        shown = provider_file.split("-", 1)[0]
        what = "declares no Requires-Dist" if not declared else "declares no Requires-Dist leading to it"
        out.append(Finding(Severity.WARNING, "coupling", wheel, "",
                           f"{wheel.split('-', 1)[0]}: {wheel} needs {', '.join(sorted(set(libs)))} from {shown}, "
                           f"and {what}: no resolver guards that pin"))
    return out


def _ceiling(wheel: str, e: ElfMember, lib: str, version: str, r: Resolution | None,
             inventory: Inventory | None, policy: Policy | None = None) -> Finding | None:
    """A required symbol version the image's copy of `lib` does not define, or the baseline policy forbids.

    Only a library found in the image (or, without an inventory, one the policy lets a wheel take from the
    system) is compared: a copy a wheel ships brings its own versions, and a provider or an allow rule names
    a library that comes from the host. The inventory holds the version definitions of libc, libm,
    libstdc++ and libgcc_s; for another image library (libpthread.so.0, libdl.so.2: glibc's too) a version
    of a known family is compared with the highest the image defines for that family.
    """
    if r is not None and r.where is Where.BASELINE and policy is not None:
        if policy.allows(version) is False:
            family = version.partition("_")[0]
            return Finding(Severity.ERROR, "ceiling", wheel, e.installed,
                           f"{wheel}:{e.path} requires {version} from {lib}; {policy.name} allows up to "
                           f"{_policy_ceiling(policy, family) or 'none of that family'}")
        return None
    if inventory is None or r is None or r.image_path is None:
        return None
    sv = split_version(version)
    family = sv[0] if sv else ""
    image_lib = inventory.find_path(r.image_path)
    defs = inventory.defs(image_lib.soname) if image_lib else None
    if defs is not None:
        if version in defs:
            return None
        top = highest([d for d in defs if (s := split_version(d)) is not None and s[0] == family])
    else:
        top = inventory.ceiling(family) if sv and family in FAMILIES else None
        top_v = split_version(top) if top else None
        if sv is None or top_v is None or sv[1] <= top_v[1]:
            return None  # not a family the image's versions speak for: nothing to compare with
    return Finding(Severity.ERROR, "ceiling", wheel, e.installed,
                   f"{wheel}:{e.path} requires {version} from {lib}; {inventory.image} provides up to "
                   f"{top or 'none of that family'}")
