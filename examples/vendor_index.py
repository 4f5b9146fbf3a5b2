"""An example vendor index and public index on loopback, so the README's upgrade runs without vendor access.

    python examples/vendor_index.py serve --port 8650 --inventory example-base.json

builds small real wheels and serves them until Ctrl-C:

- the vendor ("musa") index on PORT: every version the profiles in `stacks/` pin on their `musa` index,
  built for the targets each pin is for (deep_ep for cp310 only, as the vendor ships it); HTML-only
  PEP 503 pages, no metadata files, upload times only as each file's `Last-Modified`; the members of a
  release train published within minutes of each other, one release a month; gcc-built libraries with
  real DT_NEEDED chains (deep_ep's extension needs `libtorch_python.so` from torch and
  `libmusa_python.so.2` from torch_musa, and declares no Requires-Dist on either); older releases; an
  aarch64 `+musa5.2.1mp22` build line beside the x86_64 one;
- the public index on PORT+1: every version the profiles pin on their pip-configured index, pure wheels,
  PEP 691 JSON with PEP 700 upload times and PEP 658 metadata files.

`--inventory FILE` also writes the loader view of the vendor stacks' base image (`stackctl inventory`
writes the same format from a real image) for `stackctl abi --inventory`; it is made up, so it goes to a
file of its own: a FILE that holds another image's inventory (a real one `stackctl inventory` wrote) is
left alone and `serve` stops. It prints the `--index` flags that point a command at the two indexes.
The wheels follow `stacks/*.toml` (`--stacks DIR`): change a pin there and the next `serve` has it; profiles
of other targets get wheels for those (a twin of the stacks for cp311, the Python of the project's own base
image, gets cp311 wheels), each package holding the module its gate entry imports. `build_indexes()`
returns the two servers unstarted, for tests and other tools.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere: the builders live beside the tests
    sys.path.insert(0, str(REPO))

from packaging.utils import canonicalize_name  # noqa: E402
from packaging.version import Version  # noqa: E402

from stackctl.abi.inventory import Inventory, Library  # noqa: E402
from stackctl.profile.loader import load_stack  # noqa: E402
from stackctl.profile.model import Stack, Target  # noqa: E402
from tests.support.elf_fixtures import _cc  # noqa: E402
from tests.support.index_server import IndexServer  # noqa: E402
from tests.support.wheels import build_wheel  # noqa: E402

T0 = datetime(2025, 9, 1, 8, 0, tzinfo=timezone.utc)
AARCH64_LABEL = "musa5.2.1mp22"

# Libraries each vendor project ships, (path in the wheel, SONAME, libraries it needs).
_LIBS: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "torch": (("torch/lib/libc10.so", "libc10.so", ()),
              ("torch/lib/libtorch_cpu.so", "libtorch_cpu.so", ("libc10.so",)),
              ("torch/lib/libtorch_python.so", "libtorch_python.so", ("libtorch_cpu.so", "libc10.so"))),
    "torch-musa": (("torch_musa/lib/libmusa_python.so.2", "libmusa_python.so.2", ("libtorch_python.so",
                                                                                   "libmusart.so.5")),
                   ("torch_musa/lib/libmusa_kernels.so", "libmusa_kernels.so", ("libmusart.so.5",))),
    "torchvision": (("torchvision/_C.so", "", ("libtorch_python.so", "libc10.so")),),
    "torchaudio": (("torchaudio/lib/libtorchaudio.so", "libtorchaudio.so", ("libtorch_cpu.so",)),),
}
# Extension modules the package's import loads: (module in the package, libraries it needs from its lib/).
_EXTENSIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch": ("_C", ("libtorch_python.so",)),
    "torch-musa": ("_MUSAC", ("libmusa_python.so.2", "libmusa_kernels.so")),
}
# Libraries of the MUSA runtime in the base image (never in a wheel): stubs to link against.
_RUNTIME = ("libmusart.so.5", "libmlx5.so.1")
_RUNTIME_DIR = "/usr/local/musa/lib"


@dataclass
class ExampleIndexes:
    """The two servers (not started), and what was built for them."""

    musa: IndexServer
    public: IndexServer
    root: Path
    projects: dict[str, list[str]] = field(default_factory=dict)  # "musa/torch" → file names

    def __enter__(self) -> ExampleIndexes:
        self.musa.start()
        try:
            self.public.start()
        except BaseException:
            self.musa.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.public.stop()
        self.musa.stop()


def _stacks(stacks_dir: Path) -> list[Stack]:
    out = [load_stack(p) for p in sorted(stacks_dir.glob("*.toml"))]

    def release(s: Stack) -> Version:  # stacks in the order they were released: by their torch
        torch = s.pin("torch")
        return Version(torch.version) if torch else Version("0")

    return sorted(out, key=release)


def _tag(t: Target, platform: str | None = None) -> str:
    return f"{t.interpreter}-{t.interpreter}-{platform or t.platform}"


class _Elf:
    """gcc-built libraries, compiled once per (soname, needs, machine) and reused for every version."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.stubs = work / "link"
        self.stubs.mkdir(parents=True, exist_ok=True)
        self._built: dict[tuple[str, str, tuple[str, ...], str], bytes] = {}
        for name in _RUNTIME:
            self.stub(name)

    def stub(self, soname: str) -> None:
        path = self.stubs / soname
        if not path.exists():
            symbol = "".join(c if c.isalnum() else "_" for c in soname)
            _cc(path, f"int {symbol}_entry(void) {{ return 1; }}\n", soname=soname)

    def library(self, key: str, soname: str, needs: tuple[str, ...], machine: str = "x86_64",
                rpath: str = "$ORIGIN") -> bytes:
        k = (key, soname, needs, machine + rpath)
        if k not in self._built:
            for n in needs:
                if not n.startswith(("libc.", "libm.", "libdl.", "librt.", "libstdc++", "libgcc_s")):
                    self.stub(n)
            out = self.work / f"{len(self._built):03d}-{(soname or key).replace('/', '_')}"
            symbol = "".join(c if c.isalnum() else "_" for c in (soname or key))
            _cc(out, f"int {symbol}_entry(void) {{ return 2; }}\n", soname=soname or None, libs=needs,
                libdirs=(self.stubs,), rpath=rpath)
            data = bytearray(out.read_bytes())
            if machine == "aarch64":
                data[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64; never executed
            self._built[k] = bytes(data)
            if soname:  # later libraries may link against it
                (self.stubs / soname).write_bytes(out.read_bytes())
        return self._built[k]


def _vendor_files(project: str, version: str, t: Target, elf: _Elf, machine: str,
                  module: str | None = None) -> dict[str, bytes | str]:
    key = canonicalize_name(project)
    # the package the gate imports (`module`, e.g. tvm_ffi for apache-tvm-ffi), so an image of the stack passes it
    pkg = module.split(".")[0] if module else {"torch-musa": "torch_musa", "tilelang-musa": "tilelang"}.get(
        key, key.replace("-", "_"))
    files: dict[str, bytes | str] = {f"{pkg}/__init__.py": f"__version__ = {version!r}\n"}
    for path, soname, needs in _LIBS.get(key, ()):
        files[path] = elf.library(path, soname, needs, machine)
    if key in _EXTENSIONS:
        # the module `import torch` (`import torch_musa`) loads: it brings the package's libraries in, which
        # is how deep_ep, imported later, finds libtorch_python.so and libmusa_python.so.2 already loaded
        stem, needs = _EXTENSIONS[key]
        ext = f"{pkg}/{stem}.cpython-{t.interpreter[2:]}-{machine}-linux-gnu.so"
        files[ext] = elf.library(f"{pkg}/{stem}", "", needs, machine, rpath="$ORIGIN/lib")
    if key == "deep-ep":
        # the extension module: what the real one needs, as in the post2 upgrade's hand check
        needs = ("libmusa_python.so.2", "libtorch_python.so", "libmusart.so.5", "libdl.so.2", "librt.so.1",
                 "libmlx5.so.1")
        if Version(version).local and "post2" in str(Version(version).local):
            needs = ("libmusa_kernels.so", *needs)  # the post2 rebuild gained one
        ext = f"deep_ep_cpp.cpython-{t.interpreter[2:]}-{machine}-linux-gnu.so"
        files[ext] = elf.library(ext, "", needs, machine)
        files["deep_ep/__init__.py"] = "import deep_ep_cpp  # noqa: F401\n"
    return files


def _requires(project: str, version: str, pins: dict[str, str]) -> tuple[str, ...]:
    """What each vendor wheel declares: torch's siblings name their torch; deep_ep names nothing."""
    key = canonicalize_name(project)
    if key in ("torch-musa", "torchvision", "torchaudio") and "torch" in pins:
        return (f"torch=={pins['torch']}",)
    if key == "torch":
        return ("filelock", "typing-extensions>=4.8")
    if key == "mate":
        return ("torch",)
    return ()


def build_indexes(root: Path, stacks_dir: Path = REPO / "stacks") -> ExampleIndexes:
    """Build the wheels of both indexes under `root` from the profiles in `stacks_dir`; servers not started."""
    stacks = _stacks(stacks_dir)
    musa = IndexServer(html_only=True)
    public = IndexServer()
    ex = ExampleIndexes(musa, public, root)
    elf = _Elf(root / "elf")
    done: set[tuple[str, str, str]] = set()

    def add(server: IndexServer, where: str, project: str, version: str, tag: str, when: datetime,
            files: dict[str, bytes | str], requires: Iterable[str], metadata: bool) -> None:
        if (where, canonicalize_name(project), f"{version}-{tag}") in done:
            return
        done.add((where, canonicalize_name(project), f"{version}-{tag}"))
        w = build_wheel(root / where / canonicalize_name(project), project, version, tag=tag, files=files,
                        requires_dist=tuple(requires))
        server.add(w, upload_time=when, metadata=metadata)
        ex.projects.setdefault(f"{where}/{canonicalize_name(project)}", []).append(w.name)

    modules = {str(p.key): p.gate.module for s in stacks for p in s.pins if p.gate is not None}

    def vendor_files(pin: str, version: str, t: Target, machine: str = "x86_64") -> dict[str, bytes | str]:
        return _vendor_files(pin, version, t, elf, machine, modules.get(str(canonicalize_name(pin))))

    for month, stack in enumerate(stacks):
        release = T0 + timedelta(days=30 * month)
        vendor = {i.name for i in stack.indexes if not i.from_pip}
        pins = {str(p.key): p.version for p in stack.pins}
        for n, pin in enumerate(stack.pins):
            when = release + timedelta(minutes=2 * n)  # a train: every member within minutes
            for t in pin.targets(stack.targets):
                if pin.index in vendor:
                    add(musa, "musa", pin.name, pin.version, _tag(t), when,
                        vendor_files(pin.name, pin.version, t),
                        _requires(pin.name, pin.version, pins), metadata=False)
                else:
                    pkg = str(pin.key).replace("-", "_")
                    add(public, "public", pin.name, pin.version, "py3-none-any", when,
                        {f"{pkg}/__init__.py": f"__version__ = {pin.version!r}\n"},
                        ("packaging",) if pin.key == "torchada" else (), metadata=True)
        # the other platform line: the same release built for aarch64 under another local label
        for pin in stack.pins:
            v = Version(pin.version)
            if pin.index in vendor and pin.key in ("torch", "torch-musa") and v.local:
                arm = f"{v.public}+{AARCH64_LABEL}"
                t310 = Target("3.10", "linux_aarch64")
                add(musa, "musa", pin.name, arm, _tag(t310), release + timedelta(days=3),
                    vendor_files(pin.name, arm, t310, "aarch64"), _requires(pin.name, arm, pins),
                    metadata=False)
    # older releases of the first vendor stack's pins: history an index has
    first = next((s for s in stacks if any(not i.from_pip for i in s.indexes)), None)
    if first is not None:
        for pin in first.pins:
            v = Version(pin.version)
            if pin.index in {i.name for i in first.indexes if not i.from_pip} and v.local and v.post:
                older = f"{v.major}.{v.minor}.{v.micro}+{v.local}"
                for t in pin.targets(first.targets):
                    add(musa, "musa", pin.name, older, _tag(t), T0 - timedelta(days=60),
                        vendor_files(pin.name, older, t), (), metadata=False)
    # what the closure needs from the public index
    for name, version in (("filelock", "3.16.1"), ("typing-extensions", "4.12.2"), ("packaging", "25.0"),
                          ("packaging", "24.2")):
        pkg = name.replace("-", "_")
        add(public, "public", name, version, "py3-none-any", T0 - timedelta(days=90),
            {f"{pkg}/__init__.py": ""}, (), metadata=True)
    return ex


def base_inventory(image: str = "musa-runtime:5.2.0-ubuntu22.04") -> Inventory:
    """The loader view of the stacks' base image: Ubuntu 22.04's system libraries and the MUSA runtime."""
    d = "/usr/lib/x86_64-linux-gnu"
    names = ["libc.so.6", "libm.so.6", "libgcc_s.so.1", "libstdc++.so.6", "libdl.so.2", "librt.so.1",
             "libpthread.so.0", "ld-linux-x86-64.so.2"]
    libs = (*(Library(n, f"{d}/{n}", "x86_64") for n in names),
            Library("libmusart.so.5", f"{_RUNTIME_DIR}/libmusart.so.5", "x86_64"))
    glibc = tuple(f"GLIBC_2.{i}" for i in range(2, 36))
    glibcxx = ("GLIBCXX_3.4", *(f"GLIBCXX_3.4.{i}" for i in range(1, 31)))
    cxxabi = ("CXXABI_1.3", *(f"CXXABI_1.3.{i}" for i in range(1, 14)))
    return Inventory(image, "sha256:" + "0" * 64, "x86_64", (d, _RUNTIME_DIR), libs, (
        ("libc.so.6", ("GLIBC_2.2.5", *glibc)),
        ("libgcc_s.so.1", ("GCC_3.0", "GCC_3.3", "GCC_4.0.0")),
        ("libm.so.6", ("GLIBC_2.2.5", "GLIBC_2.29")),
        ("libstdc++.so.6", (*glibcxx, *cxxabi)),
    ))


class NotOurs(Exception):
    """The inventory file exists and holds another image's inventory: never overwritten."""


def write_inventory(path: Path) -> None:
    from stackctl.abi.inventory import write_inventory as write

    inv = base_inventory()
    if path.exists():
        try:
            image = json.loads(path.read_text(encoding="utf-8")).get("image")
        except (OSError, ValueError, AttributeError):
            image = None
        if image != inv.image:
            raise NotOurs(f"{path} already holds {'the inventory of ' + str(image) if image else 'something else'}"
                          f", not the example's made-up {inv.image}; give --inventory a file of its own "
                          "(e.g. example-base.json)")
    write(path, inv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="build the wheels and serve both indexes until Ctrl-C")
    serve.add_argument("--port", type=int, default=8650, help="vendor index port; the public one is PORT+1")
    serve.add_argument("--dir", type=Path, help="build here (default: a temporary directory)")
    serve.add_argument("--inventory", type=Path, help="also write the vendor base image's (made-up) inventory "
                       "here; a file holding another image's inventory is never overwritten")
    serve.add_argument("--stacks", type=Path, default=REPO / "stacks", help="profiles to follow")
    args = parser.parse_args(argv)
    from tests.support.elf_fixtures import have_gcc

    if not have_gcc():
        print("error: gcc and g++ build the example's libraries; install them (Debian: apt-get install g++)",
              file=sys.stderr)
        return 2
    if args.inventory:  # before the wheels are built: a file it must not overwrite stops it at once
        try:
            write_inventory(args.inventory)
        except NotOurs as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="stackctl-example-") as tmp:
        serve_indexes(build_indexes(args.dir or Path(tmp), args.stacks), args.port)
    return 0


def serve_indexes(ex: ExampleIndexes, port: int) -> None:
    """Serve both indexes, the vendor's on `port` and the public one on the next, until Ctrl-C or SIGTERM."""
    ex.musa.port, ex.public.port = port, (port + 1 if port else 0)
    with ex:
        print(f"musa   {ex.musa.url}  ({sum(len(v) for k, v in ex.projects.items() if k.startswith('musa/'))}"
              " wheels, HTML only)")
        print(f"public {ex.public.url}")
        # options for each command, not variables to export: an exported override would also point
        # every other stack's resolve at this example
        print(f"--index musa={ex.musa.url} --index public={ex.public.url}", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    sys.exit(main())
