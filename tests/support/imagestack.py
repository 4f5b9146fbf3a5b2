"""A tiny real stack for image tests: pure-python wheels built here, a profile, and a Lock written directly.

`patcher` must be imported before `corelib` (as torchada before torch): corelib's import fails otherwise,
so a gate that imports in the wrong order fails. The Lock is constructed with the dataclasses and the
wheelhouse laid down by the test (the resolve/fetch path is exercised elsewhere).
"""

from __future__ import annotations

import shutil
import textwrap
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from stackctl.base.files import sha256_file
from stackctl.profile.loader import load_stack
from stackctl.profile.model import Stack
from stackctl.resolve.lock import ClosureEntry, Lock, LockedFile, LockedPin, write_lock
from tests.support.gitrepo import git
from tests.support.wheels import build_wheel

TARGET = "cp311-linux_x86_64"

PATCHER = "import sys\nsys.stackctl_patched = True\n"
CORELIB = ("import sys\nif not getattr(sys, 'stackctl_patched', False):\n"
           "    raise ImportError('corelib needs patcher imported first')\n__version__ = '{v}'\n")

VERSIONS = {"patcher": "1.0.0", "corelib": "2.0.0+vendor1", "corelib-ext": "2.0.0+vendor1", "toplib": "0.3.0",
            "helperdep": "1.4"}


ORDERS = {"patcher": 1, "corelib": 2, "corelib-ext": 3, "toplib": 4}


def profile_text(name: str, repository: str, versions: dict[str, str], python: str = "3.11",
                 orders: dict[str, int] | None = None, extra_toml: str = "", image_toml: str = "") -> str:
    o = {**ORDERS, **(orders or {})}
    return textwrap.dedent(f"""\
        [stack]
        name = "{name}"
        description = "stackctl image test stack"

        [targets]
        python = ["{python}"]
        platforms = ["linux_x86_64"]

        [indexes.vendor]
        url = "http://127.0.0.1:9/simple/"
        username_env = "STACKCTL_TEST_VENDOR_USER"
        password_env = "STACKCTL_TEST_VENDOR_PASSWORD"

        [indexes.public]
        from_pip = true

        [pins.patcher]
        version = "{versions['patcher']}"
        index = "public"
        gate = {{ order = {o['patcher']} }}

        [pins.corelib]
        version = "{versions['corelib']}"
        index = "vendor"
        train = "core"
        gate = {{ order = {o['corelib']} }}

        [pins.corelib-ext]
        version = "{versions['corelib-ext']}"
        index = "vendor"
        train = "core"
        gate = {{ order = {o['corelib-ext']}, module = "corelib_ext", mode = "spec" }}

        [pins.toplib]
        version = "{versions['toplib']}"
        index = "public"
        gate = {{ order = {o['toplib']}, check = "exact" }}

        [[gate.probe]]
        name = "corelib data files"
        kind = "file-count"
        package = "corelib"
        glob = "data/*.json"
        count = 3

        [[gate.probe]]
        name = "toplib version attribute"
        kind = "attr"
        module = "toplib"
        attr = "__version__"
        value = "{versions['toplib']}"

        [image]
        base = "stackctl-base:bookworm"
        repository = "{repository}"
        python = "{python}"
        tag = "py{{python}}_core_{{pins[corelib]}}_top_{{pins[toplib]}}"
        vars = {{}}
        {image_toml}

        [image.labels]
        "org.opencontainers.image.source" = "https://example.invalid/stackctl-e2e"
        "com.example.note" = "a \\"quoted\\" $value"
        """) + extra_toml


UV_VERSION = "0.13.9"
UV_PIN = f"""
[pins.uv]
version = "{UV_VERSION}"
index = "public"
note = "installs the layer groups; never shipped"
"""


def uv_wheel(dest: Path) -> Path:
    """A wheel of this machine's own `uv` binary: the real installer, in the shape its published wheel has."""
    try:  # the binary itself: `uv` on PATH may be a shell shim (pyenv)
        from uv import find_uv_bin

        binary: str | None = find_uv_bin()
    except ImportError:
        binary = shutil.which("uv")
    if binary is None:
        raise RuntimeError("uv is not installed")
    data = Path(binary).resolve().read_bytes()
    return build_wheel(dest, "uv", UV_VERSION, tag="py3-none-manylinux_2_17_x86_64",
                       files={f"uv-{UV_VERSION}.data/scripts/uv": data, "uv/__init__.py": ""},
                       executable=[f"uv-{UV_VERSION}.data/scripts/uv"])  # as the published wheel has it


def build_wheels(dest: Path, versions: dict[str, str], *, toplib_attr: str | None = None,
                 nonce: str = "", patcher_import: str = "",
                 toplib_files: dict[str, str] | None = None) -> dict[str, Path]:
    """`nonce` goes into patcher: a fresh value makes the engine re-run every step above it, the gate too.
    `patcher_import` is code patcher runs when imported (a package that writes to stderr); `toplib_files`
    are more members of toplib's wheel."""
    v = versions
    data = {f"corelib/data/c{i}.json": "{}" for i in range(3)}
    return {
        "patcher": build_wheel(dest, "patcher", v["patcher"], files={"patcher/__init__.py": PATCHER + patcher_import,
                                                                      "patcher/_nonce.py": f"NONCE = {nonce!r}\n"}),
        "corelib": build_wheel(dest, "corelib", v["corelib"], files={
            "corelib/__init__.py": CORELIB.format(v=v["corelib"]), **data}),
        "corelib-ext": build_wheel(dest, "corelib-ext", v["corelib-ext"], files={
            "corelib_ext/__init__.py": "raise RuntimeError('needs a GPU at import')\n"}),
        "toplib": build_wheel(dest, "toplib", v["toplib"], files={
            "toplib/__init__.py": f"import helperdep\n__version__ = '{toplib_attr or v['toplib']}'\n",
            **(toplib_files or {})},
            requires_dist=["helperdep>=1"]),
        "helperdep": build_wheel(dest, "helperdep", v["helperdep"], files={"helperdep.py": "X = 1\n"}),
    }


def unpack(wheels: dict[str, Path], site: Path) -> Path:
    """Install pure-python wheels into `site` by unpacking them (their .dist-info included)."""
    site.mkdir(parents=True, exist_ok=True)
    for w in wheels.values():
        with zipfile.ZipFile(w) as zf:
            zf.extractall(site)
    return site


DEAD_FILES = "http://127.0.0.1:9/files/"  # where a lock says its wheels are when the test lays them down itself


def make_lock(stack: Stack, wheels: dict[str, Path], target: str = TARGET, files: str = DEAD_FILES) -> Lock:
    def lf(name: str) -> LockedFile:
        w = wheels[name]
        return LockedFile(target=target, filename=w.name, url=f"{files}{w.name}",
                          sha256=sha256_file(w), size=w.stat().st_size,
                          requires_dist=("helperdep>=1",) if name == "toplib" else ())

    pins = tuple(LockedPin(p.name, p.version, p.index, (lf(p.name),)) for p in stack.pins)
    closure = (ClosureEntry(target, "helperdep", VERSIONS["helperdep"], lf("helperdep"),
                            (f"sha256:{sha256_file(wheels['helperdep'])}",)),)
    return Lock(stack=stack.name, profile_digest=stack.digest(), pins=pins, closure=closure)


@dataclass
class StackRepo:
    root: Path  # a git work tree
    profile: Path
    lock: Path
    wheelhouse: Path
    stack: Stack
    versions: dict[str, str] = field(default_factory=dict)


def make_stack_repo(tmp: Path, name: str, repository: str, versions: dict[str, str] | None = None,
                    *, commit: bool = True, toplib_attr: str | None = None, nonce: str = "",
                    orders: dict[str, int] | None = None, extra_toml: str = "", python: str = "3.11",
                    patcher_import: str = "", installer: str = "pip",
                    toplib_files: dict[str, str] | None = None, files: str = DEAD_FILES) -> StackRepo:
    """installer "uv": the profile pins uv and installs with it (its wheel built from this machine's uv).
    `files`: the URL the lock names the wheels under (a test that serves its wheelhouse there)."""
    v = {**VERSIONS, **(versions or {})}
    image_toml = ""
    if installer == "uv":
        extra_toml, image_toml = UV_PIN + extra_toml, 'installer = "uv"'

    root = tmp / "repo"
    (root / "stacks").mkdir(parents=True, exist_ok=True)
    if not (root / ".git").exists():
        git(root, "init", "-q", "-b", "main")
    profile = root / "stacks" / f"{name}.toml"
    profile.write_text(profile_text(name, repository, v, python, orders=orders, extra_toml=extra_toml,
                                    image_toml=image_toml), encoding="utf-8")
    stack = load_stack(profile)
    wheelhouse = tmp / "wheelhouse"
    wheels = build_wheels(wheelhouse, v, toplib_attr=toplib_attr, nonce=nonce, patcher_import=patcher_import,
                          toplib_files=toplib_files)
    if installer == "uv":
        wheels["uv"] = uv_wheel(wheelhouse)
    lock = profile.with_suffix(".lock")
    write_lock(lock, make_lock(stack, wheels, stack.targets[0].label, files))
    if commit:
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"stack {name}")
    return StackRepo(root, profile, lock, wheelhouse, stack, v)


def refresh_lock(repo: StackRepo) -> None:
    """Re-write the lock after the test edited the profile (the lock records the profile's digest)."""
    repo.stack = load_stack(repo.profile)
    wheels = {name: next(repo.wheelhouse.glob(f"{name.replace('-', '_')}-{repo.versions[name]}-*.whl"))
              for name in VERSIONS}
    write_lock(repo.lock, make_lock(repo.stack, wheels))
