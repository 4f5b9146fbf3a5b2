"""The loader's view on real ELF files built by gcc: RPATH against RUNPATH, the RPATH of a loader, a copy
vendored under another name, a library only an earlier import loads, run-time providers, optional members,
the manylinux baseline without an inventory, build-machine paths, and a second run that reads nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from stackctl.abi.check import AbiReport, Resolution, RunTime, Severity, StackWheel, Where, check_abi, expand_origin
from stackctl.abi.inventory import Library, write_inventory
from stackctl.base.files import sha256_file
from stackctl.profile.model import OptionalMember
from stackctl.profile.runtime import provider_sets
from stackctl.resolve.lock import Lock, LockedFile, LockedPin, write_lock
from stackctl.wheels.archive import WheelReader
from stackctl.wheels.scan import WheelScan, scan_wheel
from tests.support.cli import Cli
from tests.support.elf_fixtures import TAG, Libs, Wheels, _cc, image_inventory
from tests.support.index_server import IndexServer
from tests.support.profiles import write_profile
from tests.support.wheels import build_wheel

pytest_plugins = ("tests.support.elf_plugin",)

EXT310 = "cpython-310-x86_64-linux-gnu.so"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache" / "http"))


def scan(path: Path) -> WheelScan:
    with WheelReader(path) as r:
        return scan_wheel(r, with_metadata=True)


def lib(d: Path, name: str, *, soname: str | None = None, needs: tuple[str, ...] = (), rpath: str | None = None,
        runpath: bool = False) -> bytes:
    """A gcc-built shared library; `needs` are stubs made beside it (each its own SONAME) to link against."""
    d.mkdir(parents=True, exist_ok=True)
    for n in needs:
        if not (d / n).exists():
            _cc(d / n, f"int {n.replace('.', '_').replace('-', '_')}_f(void) {{ return 1; }}\n", soname=n)
    out = d / f"out-{name}"
    extra = () if rpath is None else ("-Wl,--enable-new-dtags" if runpath else "-Wl,--disable-new-dtags",)
    _cc(out, f"int {name.replace('.', '_').replace('-', '_')}_g(void) {{ return 2; }}\n", soname=soname,
        libs=needs, libdirs=(d,), rpath=rpath, extra=extra)
    return out.read_bytes()


def where(rep: AbiReport, file: str, needed: str) -> Resolution:
    return next(r for r in rep.resolutions if r.file == file and r.needed == needed)


@pytest.mark.parametrize("runpath", [False, True])
def test_rpath_of_the_loader_is_searched_and_runpath_is_not(tmp_path: Path, runpath: bool) -> None:
    """liba (RPATH or RUNPATH `$ORIGIN:$ORIGIN/deps`) loads libb, which needs libc3.so from deps/ and has no
    path of its own: the loader searches liba's DT_RPATH for libb's needs, never liba's DT_RUNPATH."""
    d = tmp_path / "gcc"
    files = {"chain/liba.so": lib(d, "liba", soname="liba.so", needs=("libb.so",), rpath="$ORIGIN:$ORIGIN/deps",
                                  runpath=runpath),
             "chain/libb.so": lib(d, "libb", soname="libb.so", needs=("libc3.so",)),
             "chain/deps/libc3.so": lib(d, "libc3", soname="libc3.so")}
    wheel = build_wheel(tmp_path, "chain", "1.0", tag=TAG, files=files)
    rep = check_abi([StackWheel(scan(wheel), True)], image_inventory())
    a = where(rep, "chain/liba.so", "libb.so")
    assert a.where is (Where.RUNPATH if runpath else Where.RPATH) and a.provider_path == "chain/libb.so"
    b = where(rep, "chain/libb.so", "libc3.so")
    if runpath:
        assert b.where is Where.UNRESOLVED and "chain/deps/libc3.so, which no search path" in b.detail
        assert not rep.ok
    else:
        assert b.where is Where.RPATH and b.detail.startswith("RPATH of chain/liba.so $ORIGIN/deps → chain-1.0")
        assert rep.ok, rep.failure()


def test_origin_lib_and_platform_expand_against_the_installed_path() -> None:
    assert expand_origin("$ORIGIN/../$LIB", "pkg/sub/x.so", lib="lib/x86_64-linux-gnu") == "pkg/lib/x86_64-linux-gnu"
    assert expand_origin("${ORIGIN}/${PLATFORM}", "p/x.so", platform="x86_64") == "p/x86_64"


def test_ld_library_path_comes_after_rpath_and_before_runpath(tmp_path: Path) -> None:
    d = tmp_path / "gcc"
    files = {"p/librp.so": lib(d, "rp", soname="librp.so", needs=("libfoo.so.1",), rpath="$ORIGIN/own"),
             "p/librun.so": lib(d, "run", soname="librun.so", needs=("libfoo.so.1",), rpath="$ORIGIN/own",
                                runpath=True),
             "p/own/libfoo.so.1": lib(d, "foo", soname="libfoo.so.1")}
    wheel = build_wheel(tmp_path, "p", "1.0", tag=TAG, files=files)
    inv = image_inventory()
    inv = replace(inv, ld_library_path=("/opt/vendor/lib",), libraries=(
        *inv.libraries, Library("libfoo.so.1", "/opt/vendor/lib/libfoo.so.1", "x86_64")))
    rep = check_abi([StackWheel(scan(wheel), True)], inv)
    assert where(rep, "p/librp.so", "libfoo.so.1").where is Where.RPATH
    run = where(rep, "p/librun.so", "libfoo.so.1")
    assert run.where is Where.LD_LIBRARY_PATH and run.detail == "LD_LIBRARY_PATH /opt/vendor/lib → image " \
        "/opt/vendor/lib/libfoo.so.1"


def test_a_copy_vendored_under_another_name_is_never_another_wheels_match(tmp_path: Path) -> None:
    """vend ships libz-7dbeb23c.so.1 (SONAME libz.so.1) for its own extension; other's library needs
    libz.so.1 and finds the image's, or nothing: the loader opens the file name, not a SONAME inside."""
    d = tmp_path / "gcc"
    lib(d / "renamed", "stub", soname="libz-7dbeb23c.so.1")  # what vend's extension was linked against
    (d / "libz-7dbeb23c.so.1").write_bytes((d / "renamed" / "out-stub").read_bytes())
    vend = build_wheel(tmp_path, "vend", "1.0", tag=TAG, files={
        "vend.libs/libz-7dbeb23c.so.1": lib(d / "z", "z", soname="libz.so.1"),
        f"vend/_ext.{EXT310}": lib(d, "vext", needs=("libz-7dbeb23c.so.1",), rpath="$ORIGIN/../vend.libs")})
    other = build_wheel(tmp_path, "other", "1.0", tag=TAG, files={
        "other/libo.so": lib(d / "o", "libo", soname="libo.so", needs=("libz.so.1",))})
    wheels = [StackWheel(scan(vend), True), StackWheel(scan(other), True)]
    inv = image_inventory()
    with_z = replace(inv, libraries=(*inv.libraries, Library("libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1", "x86_64")))
    rep = check_abi(wheels, with_z)
    assert where(rep, "other/libo.so", "libz.so.1").detail == "/lib/x86_64-linux-gnu/libz.so.1"
    assert where(rep, f"vend/_ext.{EXT310}", "libz-7dbeb23c.so.1").where is Where.RPATH
    rep = check_abi(wheels, inv)  # an image without zlib: the wheel's private copy hides nothing
    z = where(rep, "other/libo.so", "libz.so.1")
    assert z.where is Where.UNRESOLVED and z.provider_wheel is None
    assert "vend-1.0-cp310-cp310-linux_x86_64.whl's renamed copy vend.libs/libz-7dbeb23c.so.1 has that SONAME" \
        in z.detail
    assert rep.failures() == [f"unresolved: libz.so.1 (needed by {other.name}:other/libo.so)"]


def test_a_library_only_an_earlier_import_loads(tmp_path: Path) -> None:
    """deepy's extension needs libtorchy_python.so and has no search path: it is found only because the gate
    imports torchy first, whose extension module loads it through its RUNPATH."""
    d = tmp_path / "gcc"
    py = lib(d, "libtorchy_python", soname="libtorchy_python.so")
    (d / "libtorchy_python.so").write_bytes(py)
    torchy = build_wheel(tmp_path, "torchy", "1.0", tag=TAG, files={
        "torchy/__init__.py": "from torchy import _C\n", "torchy/lib/libtorchy_python.so": py,
        f"torchy/_C.{EXT310}": lib(d, "tc", needs=("libtorchy_python.so",), rpath="$ORIGIN/lib", runpath=True)})
    deepy = build_wheel(tmp_path, "deepy", "1.0", tag=TAG, files={
        "deepy/__init__.py": "import deepy_cpp\n", f"deepy_cpp.{EXT310}": lib(d, "dc", needs=("libtorchy_python.so",))})
    wheels = [StackWheel(scan(torchy), False), StackWheel(scan(deepy), True, ())]
    rep = check_abi(wheels, image_inventory(), runtime=RunTime(imports=("torchy", "deepy")))
    r = where(rep, f"deepy_cpp.{EXT310}", "libtorchy_python.so")
    assert r.where is Where.LOADED and r.provider_path == "torchy/lib/libtorchy_python.so"
    assert r.detail == f"loaded by `import torchy`: {torchy.name} torchy/lib/libtorchy_python.so"
    assert rep.ok
    # deepy declares no Requires-Dist on torchy: nothing keeps the two in step
    assert any(f.kind == "coupling" and "from torchy" in f.message for f in rep.findings)
    later = check_abi(wheels, image_inventory(), runtime=RunTime(imports=("deepy", "torchy")))
    r = where(later, f"deepy_cpp.{EXT310}", "libtorchy_python.so")
    assert r.where is Where.UNRESOLVED and "torchy/lib/libtorchy_python.so, which no search path" in r.detail
    # wheels named on the command line are imported in the order given
    given = check_abi(wheels, image_inventory(), runtime=RunTime(imports=None))
    assert where(given, f"deepy_cpp.{EXT310}", "libtorchy_python.so").where is Where.LOADED
    backwards = check_abi(wheels[::-1], image_inventory(), runtime=RunTime(imports=None))
    assert where(backwards, f"deepy_cpp.{EXT310}", "libtorchy_python.so").where is Where.UNRESOLVED


def test_providers_and_optional_members_are_their_own_kinds_and_hide_nothing(tmp_path: Path) -> None:
    d = tmp_path / "gcc"
    gpu = build_wheel(tmp_path, "gpu", "1.0", tag=TAG, files={
        "gpu/lib/libgpu.so": lib(d, "libgpu", soname="libgpu.so", needs=("libcuda.so.1",)),
        "gpu/lib/plugins/libxport_ib.so": lib(d, "xib", soname="libxport_ib.so", needs=("libibverbs.so.1",)),
        "gpu/lib/libcore2.so": lib(d, "core2", soname="libcore2.so", needs=("libibverbs.so.1",))})
    runtime = RunTime(providers=provider_sets(("nvidia",)), optional=(
        OptionalMember("gpu/lib/plugins/libxport_*.so", "an InfiniBand transport, loaded only when asked for"),))
    rep = check_abi([StackWheel(scan(gpu), True)], image_inventory(), runtime=runtime)
    cuda = where(rep, "gpu/lib/libgpu.so", "libcuda.so.1")
    assert cuda.where is Where.PROVIDER and cuda.detail == "NVIDIA driver, at run time (libcuda.so*)"
    plugin = where(rep, "gpu/lib/plugins/libxport_ib.so", "libibverbs.so.1")
    assert plugin.where is Where.OPTIONAL and "loaded only when asked for" in plugin.detail
    # the same library needed by a member that is not optional is still a failure
    assert rep.failures() == [f"unresolved: libibverbs.so.1 (needed by {gpu.name}:gpu/lib/libcore2.so)"]
    assert rep.providers == ("NVIDIA driver",)
    bare = check_abi([StackWheel(scan(gpu), True)], image_inventory())
    assert where(bare, "gpu/lib/libgpu.so", "libcuda.so.1").where is Where.UNRESOLVED


def test_without_an_inventory_the_wheels_own_manylinux_policy_is_the_baseline(tmp_path: Path, elf_libs: Libs) -> None:
    """auditwheel's policy of the wheel's tag: libc and librt are system libraries; GLIBC_2.34 is over
    manylinux_2_17's ceiling, and within a manylinux_2_35 baseline the profile names."""
    old = build_wheel(tmp_path, "old", "1.0", tag="cp310-cp310-manylinux_2_17_x86_64", files={
        "old/libext.so": elf_libs.ext_v2.read_bytes(), "corelib/lib/libcore.so.1": elf_libs.core.read_bytes(),
        "kernlib/lib/libkern.so": elf_libs.kern.read_bytes()})
    rep = check_abi([StackWheel(scan(old), True)])
    assert where(rep, "old/libext.so", "libc.so.6").where is Where.BASELINE
    assert where(rep, "old/libext.so", "librt.so.1").detail == "manylinux_2_17 policy (a system library)"
    assert rep.baselines == ("manylinux_2_17",)
    ceilings = [f.message for f in rep.findings if f.kind == "ceiling"]
    assert f"{old.name}:old/libext.so requires GLIBC_2.34 from libc.so.6; manylinux_2_17 allows up to GLIBC_2.17" \
        in ceilings
    glibc = next(c for c in rep.ceilings if c.family == "GLIBC")
    assert glibc.required == "GLIBC_2.34" and glibc.provided == "GLIBC_2.17"
    newer = check_abi([StackWheel(scan(old), True)], runtime=RunTime(baseline="manylinux_2_35"))
    assert newer.ok and newer.baselines == ("manylinux_2_35",), newer.failure()


def test_an_absolute_rpath_no_image_has_is_a_build_machines(tmp_path: Path) -> None:
    d = tmp_path / "gcc"
    w = build_wheel(tmp_path, "vis", "1.0", tag=TAG, files={
        f"vis/_C.{EXT310}": lib(d, "vis", rpath="$ORIGIN:/__w/_temp/conda_environment_1/lib"),
        f"vis/image.{EXT310}": lib(d, "img", rpath="/__w/_temp/conda_environment_1/lib:/lib/x86_64-linux-gnu")})
    for inv in (image_inventory(), None):
        rep = check_abi([StackWheel(scan(w), True)], inv)
        [f] = [f for f in rep.findings if f.kind == "build-path"]
        assert f.severity is Severity.WARNING and "/__w/_temp/conda_environment_1/lib is a build machine's" in f.message
        assert "and 1 more" in f.message


def test_a_second_abi_of_the_same_lock_reads_no_wheel_bytes(cli: Cli, stack_wheels: Wheels, tmp_path: Path) -> None:
    write_profile(tmp_path, "w", {"corelib": "1.0", "kernlib": "1.0",
                                  "deep_ext": {"version": "1.0.post2", "abi": "check"}},
                  extra='[abi]\ninventory = "base.inventory.json"\n')
    write_inventory(tmp_path / "base.inventory.json", image_inventory(image="base:1"))
    from stackctl.profile.loader import load_stack

    stack = load_stack(tmp_path / "stacks" / "w.toml")
    with IndexServer() as server:
        pins = []
        for name, version, path in (("corelib", "1.0", stack_wheels.core), ("kernlib", "1.0", stack_wheels.kern),
                                    ("deep_ext", "1.0.post2", stack_wheels.ext_v2)):
            server.add(path)
            pins.append(LockedPin(name, version, "i", (LockedFile("cp310-linux_x86_64", path.name,
                                                                  f"{server.base}files/{path.name}",
                                                                  sha256_file(path), path.stat().st_size),)))
        write_lock(tmp_path / "stacks" / "w.lock", Lock("w", stack.digest(), tuple(pins)))
        first = cli("abi", "w", "--json", "--no-record", cwd=tmp_path)
        assert first.code == 0, first.err
        seen = len(server.log)
        again = cli("abi", "w", "--json", "--no-record", cwd=tmp_path)
        human = cli("abi", "w", "--no-record", cwd=tmp_path)
        reread = cli("abi", "w", "--json", "--no-record", "--reread", cwd=tmp_path)
        after = server.log[seen:]
    assert again.code == 0 and human.code == 0 and reread.code == 0
    docs = [json.JSONDecoder().raw_decode(r.out)[0] for r in (first, again, reread)]
    assert docs[0]["reports"] == docs[1]["reports"] == docs[2]["reports"]
    assert all(s["cached"] and s["fetched"] == 0 for s in docs[1]["sources"])
    assert "3 wheels: no bytes read, ELF facts kept by sha256 from an earlier run (3 sha256-checked when read" \
        in human.out.replace("\n", " ")
    # the two runs that used the facts asked the index for nothing; --reread read every wheel again
    assert {u.rsplit("/", 1)[-1] for u in (e[1] for e in after)} == {p.name for p in
                                                                        (stack_wheels.core, stack_wheels.kern,
                                                                         stack_wheels.ext_v2)}
    assert not any(s["cached"] for s in docs[2]["sources"])
