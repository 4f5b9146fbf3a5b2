"""Shared libraries compiled by gcc at test time, and wheels made of them.

The layout copies the deep_ep upgrade in miniature:

- `corelib` wheel: `corelib/lib/libcore.so.1` (C++, so it needs GLIBCXX_/CXXABI_ versions from
  libstdc++.so.6), SONAME `libcore.so.1`;
- `kernlib` wheel: `kernlib/lib/libkern.so`, SONAME `libkern.so`;
- `deep_ext` 1.0.post1: `deep_ext/_cpp.cpython-310-x86_64-linux-gnu.so` needs libcore.so.1 and
  libfakepython.so.1.0 (a stand-in for libpython, shipped by nobody), RUNPATH `$ORIGIN/../corelib/lib`;
- `deep_ext` 1.0.post2: the same module rebuilt: gains libkern.so, libdl.so.2, librt.so.1, drops
  libfakepython.so.1.0, RUNPATH `$ORIGIN/..:$ORIGIN/../corelib/lib:$ORIGIN/../kernlib/lib`.

The aarch64 library is the x86_64 `libkern.so` with its ELF header's e_machine patched to EM_AARCH64
(183): no cross compiler is needed, and the reader sees exactly what it would in a real aarch64 file's
header. It is never executed.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from stackctl.abi.inventory import Inventory, Library
from tests.support.wheels import build_wheel

CORE_CPP = r"""
#include <stdexcept>
#include <string>
#include <sstream>
extern "C" int core_len(const char *s) {
    std::string v(s);
    if (v.empty()) throw std::runtime_error("empty");
    std::ostringstream out;
    out << v << v.size();
    return static_cast<int>(out.str().size());
}
"""

KERN_C = r"""
int kern_add(int a, int b) { return a + b; }
"""

PY_C = r"""
int fakepython_version(void) { return 310; }
"""

NOTHERE_C = r"""
int nothere(void) { return 3; }
"""

EXT_V1_C = r"""
extern int core_len(const char *);
extern int fakepython_version(void);
int ext_entry(void) { return core_len("x") + fakepython_version(); }
"""

EXT_V2_C = r"""
#include <dlfcn.h>
#include <time.h>
extern int core_len(const char *);
extern int kern_add(int, int);
int ext_entry(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    void *h = dlopen("libm.so.6", RTLD_LAZY);
    return core_len("x") + kern_add(1, 2) + (h != 0);
}
"""

NEEDS_MISSING_C = r"""
extern int nothere(void);
int uses_missing(void) { return nothere(); }
"""

EXT = "deep_ext/_cpp.cpython-310-x86_64-linux-gnu.so"
TAG = "cp310-cp310-linux_x86_64"


@dataclass(frozen=True)
class Libs:
    dir: Path
    core: Path  # libcore.so.1
    kern: Path  # libkern.so
    fakepython: Path  # libfakepython.so.1.0
    nothere: Path  # libnothere.so.3
    ext_v1: Path
    ext_v2: Path
    needs_missing: Path  # libneedsmissing.so: needs libnothere.so.3
    kern_aarch64: Path


def have_gcc() -> bool:
    return shutil.which("gcc") is not None and shutil.which("g++") is not None


def _cc(out: Path, source: str, *, cxx: bool = False, soname: str | None = None, libs: tuple[str, ...] = (),
        libdirs: tuple[Path, ...] = (), rpath: str | None = None, extra: tuple[str, ...] = ()) -> Path:
    src = out.with_suffix(".cpp" if cxx else ".c")
    src.write_text(source)
    cmd = ["g++" if cxx else "gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(src)]
    if soname:
        cmd.append(f"-Wl,-soname,{soname}")
    if rpath:
        cmd.append(f"-Wl,-rpath,{rpath}")
    cmd += [f"-L{d}" for d in libdirs]
    cmd += ["-Wl,--no-as-needed", *(f"-l:{lib}" for lib in libs), *extra]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def build_libs(d: Path) -> Libs:
    d.mkdir(parents=True, exist_ok=True)
    core = _cc(d / "libcore.so.1", CORE_CPP, cxx=True, soname="libcore.so.1")
    kern = _cc(d / "libkern.so", KERN_C, soname="libkern.so")
    fakepy = _cc(d / "libfakepython.so.1.0", PY_C, soname="libfakepython.so.1.0")
    nothere = _cc(d / "libnothere.so.3", NOTHERE_C, soname="libnothere.so.3")
    v1dir, v2dir = d / "v1", d / "v2"
    v1dir.mkdir(exist_ok=True)
    v2dir.mkdir(exist_ok=True)
    ext_v1 = _cc(v1dir / "ext.so", EXT_V1_C, libs=("libcore.so.1", "libfakepython.so.1.0"), libdirs=(d,),
                 rpath="$ORIGIN/../corelib/lib", extra=("-Wl,--enable-new-dtags",))
    ext_v2 = _cc(v2dir / "ext.so", EXT_V2_C, libs=("libcore.so.1", "libkern.so", "libdl.so.2", "librt.so.1"),
                 libdirs=(d,),
                 rpath="$ORIGIN/..:$ORIGIN/../corelib/lib:$ORIGIN/../kernlib/lib",
                 extra=("-Wl,--enable-new-dtags",))
    missing = _cc(d / "libneedsmissing.so", NEEDS_MISSING_C, soname="libneedsmissing.so",
                  libs=("libnothere.so.3",), libdirs=(d,))
    arm = d / "arm" / "libkern.so"
    arm.parent.mkdir(exist_ok=True)
    data = bytearray(kern.read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
    arm.write_bytes(bytes(data))
    return Libs(d, core, kern, fakepy, nothere, ext_v1, ext_v2, missing, arm)


@dataclass(frozen=True)
class Wheels:
    core: Path
    kern: Path
    ext_v1: Path
    ext_v2: Path


def build_stack_wheels(libs: Libs, out: Path) -> Wheels:
    core = build_wheel(out, "corelib", "1.0", tag=TAG, files={
        "corelib/__init__.py": "", "corelib/lib/libcore.so.1": libs.core.read_bytes()})
    kern = build_wheel(out, "kernlib", "1.0", tag=TAG, files={
        "kernlib/__init__.py": "", "kernlib/lib/libkern.so": libs.kern.read_bytes()})
    sources = {"deep_ext/__init__.py": "from deep_ext._cpp import *\n", "deep_ext/utils.py": "X = 1\n"}
    v1 = build_wheel(out / "v1", "deep_ext", "1.0.post1", tag=TAG, requires_python=">=3.10",
                     files={**sources, EXT: libs.ext_v1.read_bytes()})
    v2 = build_wheel(out / "v2", "deep_ext", "1.0.post2", tag=TAG, requires_python=">=3.10",
                     requires_dist=["corelib==1.0"], files={**sources, EXT: libs.ext_v2.read_bytes()})
    return Wheels(core, kern, v1, v2)


def image_inventory(*, glibc: str = "2.36", glibcxx: str = "3.4.30", cxxabi: str = "1.3.13",
                    image: str = "test-image:1") -> Inventory:
    """An inventory as `stackctl inventory` writes it, for an image whose versions the test chooses."""
    def series(prefix: str, first: tuple[int, ...], last: str) -> tuple[str, ...]:
        parts = [int(x) for x in last.split(".")]
        out = []
        for minor in range(first[-1], parts[-1] + 1):
            # The first of a series has no ".0": GLIBCXX_3.4, then GLIBCXX_3.4.1.
            numbers = parts[:-1] if minor == 0 else [*parts[:-1], minor]
            out.append(f"{prefix}_{'.'.join(str(x) for x in numbers)}")
        return tuple(out)

    d = "/lib/x86_64-linux-gnu"
    names = ["libc.so.6", "libm.so.6", "libgcc_s.so.1", "libstdc++.so.6", "libdl.so.2", "librt.so.1",
             "ld-linux-x86-64.so.2"]
    libs = tuple(Library(n, f"{d}/{n}", "x86_64") for n in names)
    return Inventory(image, "sha256:" + "0" * 64, "x86_64", (d,), libs, (
        ("libc.so.6", ("GLIBC_2.2.5", *series("GLIBC", (3,), glibc), "GLIBC_PRIVATE")),
        ("libgcc_s.so.1", ("GCC_3.0", "GCC_3.3", "GCC_4.0.0")),
        # libm's newest version (exp/log/pow@GLIBC_2.29) exists only from glibc 2.29 on, as in real images.
        ("libm.so.6", ("GLIBC_2.2.5", *(("GLIBC_2.29",) if Version(glibc) >= Version("2.29") else ()))),
        ("libstdc++.so.6", (*series("GLIBCXX", (0,), glibcxx), *series("CXXABI", (0,), cxxabi))),
    ))

