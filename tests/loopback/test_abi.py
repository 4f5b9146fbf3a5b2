"""The DT_NEEDED closure: stackctl.abi.check on scanned gcc-built wheels, and `stackctl abi` end to end."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from stackctl.abi.check import Severity, StackWheel, Where, check_abi, expand_origin
from stackctl.abi.inventory import Inventory, Library, write_inventory
from stackctl.base.files import sha256_file
from stackctl.resolve.lock import Lock, LockedFile, LockedPin, write_lock
from stackctl.wheels.archive import WheelReader
from stackctl.wheels.elf import ElfInfo, VersionNeed
from stackctl.wheels.scan import ElfMember, WheelScan, read_machines, scan_wheel
from tests.support.cli import Cli
from tests.support.elf_fixtures import EXT, TAG, Libs, Wheels, image_inventory
from tests.support.index_server import IndexServer
from tests.support.profiles import SYSTEM_LIBS, write_profile
from tests.support.wheels import build_wheel

# The gcc-built libraries and wheels, as fixtures (session-scoped, built once per run).
pytest_plugins = ("tests.support.elf_plugin",)

SYSTEM = ["libc.so.6", "libm.so.6", "libgcc_s.so.1", "libstdc++.so.6", "libdl.so.2", "librt.so.1"]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own cache: the ELF facts one run keeps (per sha256) would spare the next its reads."""
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache" / "http"))


def scan(path: Path) -> WheelScan:
    with WheelReader(path) as r:
        return scan_wheel(r, with_metadata=True)


def first_json(text: str) -> dict[str, object]:
    value, _ = json.JSONDecoder().raw_decode(text)
    assert isinstance(value, dict)
    return value


def test_expand_origin() -> None:
    assert expand_origin("$ORIGIN/../corelib/lib", "deep_ext/_cpp.so") == "corelib/lib"
    assert expand_origin("${ORIGIN}", "a/b/c.so") == "a/b"
    assert expand_origin("$ORIGIN/../..", "top.so") == "../.."
    assert expand_origin("/usr/local/musa/lib", "a/b.so") == "/usr/local/musa/lib"


def test_closure_through_runpath_other_wheels_image_and_allow(stack_wheels: Wheels) -> None:
    wheels = [StackWheel(scan(stack_wheels.core), False), StackWheel(scan(stack_wheels.kern), False),
              StackWheel(scan(stack_wheels.ext_v2), True)]
    report = check_abi(wheels, image_inventory(), allow=["librt.so.*"])
    where = {r.needed: r for r in report.resolutions}
    assert set(where) >= {"libcore.so.1", "libkern.so", "libdl.so.2", "librt.so.1", "libc.so.6"}
    # the extension is linked with --enable-new-dtags: its search path is a DT_RUNPATH
    assert where["libcore.so.1"].where is Where.RUNPATH and "corelib/lib/libcore.so.1" in where["libcore.so.1"].detail
    assert where["libkern.so"].where is Where.RUNPATH
    assert where["libc.so.6"].where is Where.IMAGE and where["libc.so.6"].detail == "/lib/x86_64-linux-gnu/libc.so.6"
    # The image has librt: the image comes before the allow list.
    assert where["librt.so.1"].where is Where.IMAGE
    assert report.ok and report.failure() is None
    assert report.checked_files == 1  # only the checked wheel's file
    glibc = next(c for c in report.ceilings if c.family == "GLIBC")
    assert glibc.required == "GLIBC_2.34" and glibc.provided == "GLIBC_2.36" and EXT in (glibc.required_by or "")


def test_runpath_wins_over_a_library_of_the_same_name_elsewhere(stack_wheels: Wheels, elf_libs: Libs,
                                                                 tmp_path: Path) -> None:
    decoy = build_wheel(tmp_path, "decoy", "1.0", tag=TAG, files={"decoy/libcore.so.1": elf_libs.core.read_bytes()})
    wheels = [StackWheel(scan(decoy), False), StackWheel(scan(stack_wheels.core), False),
              StackWheel(scan(stack_wheels.kern), False), StackWheel(scan(stack_wheels.ext_v2), True)]
    report = check_abi(wheels, image_inventory())
    r = next(r for r in report.resolutions if r.needed == "libcore.so.1")
    assert r.where is Where.RUNPATH and "corelib-1.0" in r.detail
    # Without the RUNPATH's target the loader never opens the decoy's file: unresolved, and the report says
    # where a file of that name is and that no search path leads there.
    report = check_abi([wheels[0], wheels[2], wheels[3]], image_inventory())
    r = next(r for r in report.resolutions if r.needed == "libcore.so.1")
    assert r.where is Where.UNRESOLVED and "decoy/libcore.so.1, which no search path of this file leads to" in r.detail


def test_unresolved_names_library_and_every_file(stack_wheels: Wheels, elf_libs: Libs, tmp_path: Path) -> None:
    other = build_wheel(tmp_path, "other", "1.0", tag=TAG, files={
        "other/a/libneedsmissing.so": elf_libs.needs_missing.read_bytes(),
        "other/b/libneedsmissing2.so": elf_libs.needs_missing.read_bytes()})
    wheels = [StackWheel(scan(stack_wheels.core), True), StackWheel(scan(other), True)]
    report = check_abi(wheels, image_inventory())
    assert not report.ok
    assert report.unresolved() == (("libnothere.so.3", (f"{other.name}:other/a/libneedsmissing.so",
                                                        f"{other.name}:other/b/libneedsmissing2.so")),)
    assert "libnothere.so.3 (needed by" in (report.failure() or "")


def test_ceiling_exceeded_names_file_and_version(stack_wheels: Wheels) -> None:
    wheels = [StackWheel(scan(stack_wheels.core), True), StackWheel(scan(stack_wheels.kern), True),
              StackWheel(scan(stack_wheels.ext_v2), True)]
    old_image = image_inventory(glibc="2.31", glibcxx="3.4.20", image="focal-like:1")
    report = check_abi(wheels, old_image)
    msgs = [f.message for f in report.findings if f.kind == "ceiling"]
    assert any(EXT in m and "GLIBC_2.34" in m and "GLIBC_2.31" in m for m in msgs), msgs
    assert any("libcore.so.1" in m and "GLIBCXX_3.4.21" in m and "GLIBCXX_3.4.20" in m for m in msgs), msgs
    assert not report.ok


def test_foreign_machine_flagged_and_never_a_provider(elf_libs: Libs, stack_wheels: Wheels, tmp_path: Path) -> None:
    arm = build_wheel(tmp_path, "armkern", "1.0", tag=TAG,
                      files={"kernlib/lib/libkern.so": elf_libs.kern_aarch64.read_bytes()})
    report = check_abi([StackWheel(scan(arm), True), StackWheel(scan(stack_wheels.core), False),
                        StackWheel(scan(stack_wheels.ext_v2), True)], image_inventory())
    assert any(f.kind == "foreign-machine" and "aarch64 ELF in a x86_64 stack" in f.message for f in report.findings)
    assert next(r for r in report.resolutions if r.needed == "libkern.so").where is Where.UNRESOLVED


def test_provider_listed_by_name_is_checked_for_its_machine(elf_libs: Libs, stack_wheels: Wheels,
                                                             tmp_path: Path) -> None:
    """A provider listed by name only provides once its header says it is for the stack's machine."""
    arm = build_wheel(tmp_path, "kernlib", "1.0", tag=TAG,
                      files={"kernlib/lib/libkern.so": elf_libs.kern_aarch64.read_bytes()})
    with WheelReader(arm) as r:
        listed = scan_wheel(r, read_elves=False)
        assert listed.elves[0].unread and listed.elves[0].known_machine() is None
        headed = read_machines(r, listed, {"kernlib/lib/libkern.so"})
    assert headed.elves[0].machine == "aarch64" and headed.elves[0].info is None
    checked = StackWheel(scan(stack_wheels.ext_v2), True)
    core = StackWheel(scan(stack_wheels.core), False)
    by_name = check_abi([StackWheel(listed, False), core, checked], image_inventory())
    assert next(r for r in by_name.resolutions if r.needed == "libkern.so").provider_path == "kernlib/lib/libkern.so"
    report = check_abi([StackWheel(headed, False), core, checked], image_inventory())
    assert next(r for r in report.resolutions if r.needed == "libkern.so").where is Where.UNRESOLVED
    warning = next(f for f in report.findings if f.kind == "foreign-machine")
    assert warning.severity is Severity.WARNING and "aarch64 ELF in a x86_64 stack; it provides nothing" in \
        warning.message


def test_wheel_tagged_for_another_machine_is_an_error(stack_wheels: Wheels, elf_libs: Libs, tmp_path: Path) -> None:
    arm = build_wheel(tmp_path, "armonly", "1.0", tag="cp310-cp310-manylinux_2_28_aarch64",
                      files={"armonly/__init__.py": ""})
    report = check_abi([StackWheel(scan(stack_wheels.core), True), StackWheel(scan(arm), False)], image_inventory())
    assert not report.ok
    assert "armonly-1.0-cp310-cp310-manylinux_2_28_aarch64.whl is tagged for aarch64, not for this x86_64 stack" \
        in (report.failure() or "")


def _synthetic(needed: str, versions: tuple[str, ...]) -> WheelScan:
    """A scanned wheel whose one library needs `versions` from `needed` (values, as elf.py returns them)."""
    info = ElfInfo("x86_64", 64, "ET_DYN", "libv.so", (needed,), (), (), (VersionNeed(needed, versions),), ())
    return WheelScan("v-1.0-cp310-cp310-linux_x86_64.whl", "v", "1.0", ("linux_x86_64",), (),
                     (ElfMember("v/libv.so", "v/libv.so", info),))


def test_ceiling_of_an_image_library_without_recorded_versions() -> None:
    """libpthread.so.0 is glibc's too: a GLIBC version it is asked for is held to the image's glibc."""
    def image(glibc: str) -> Inventory:
        inv = image_inventory(glibc=glibc, image=f"glibc-{glibc}:1")
        return replace(inv, libraries=(*inv.libraries, Library("libpthread.so.0", "/lib/x86_64-linux-gnu/"
                                                               "libpthread.so.0", "x86_64")))

    wheel = [StackWheel(_synthetic("libpthread.so.0", ("GLIBC_2.2.5", "GLIBC_2.30", "GLIBC_PRIVATE")), True)]
    old = check_abi(wheel, image("2.28"))
    assert [f.message for f in old.findings] == [
        "v-1.0-cp310-cp310-linux_x86_64.whl:v/libv.so requires GLIBC_2.30 from libpthread.so.0; glibc-2.28:1 "
        "provides up to GLIBC_2.28"]
    assert check_abi(wheel, image("2.36")).ok
    # A library the allow list covers comes from the host: nothing in the image to compare with.
    assert check_abi(wheel, image_inventory(glibc="2.28"), allow=["libpthread.so.*"]).ok


# --- the command ---------------------------------------------------------------------------------

def test_cli_wheels_table_json_markdown(cli: Cli, stack_wheels: Wheels, tmp_path: Path) -> None:
    inv = tmp_path / "inv.json"
    write_inventory(inv, image_inventory())
    args = [str(stack_wheels.core), str(stack_wheels.kern), str(stack_wheels.ext_v2), "--inventory", str(inv)]
    r = cli("abi", *args)
    assert r.code == 0, r.err
    assert "libkern.so" in r.out and "runpath" in r.out and "/lib/x86_64-linux-gnu/libc.so.6" in r.out
    assert "GLIBC_2.34" in r.out  # the ceilings table
    j = cli("abi", *args, "--json")
    data = first_json(j.out)
    rep = data["reports"][0]  # type: ignore[index]
    assert rep["ok"] is True and rep["unresolved"] == []
    assert {x["where"] for x in rep["resolutions"]} == {"runpath", "image"}
    m = cli("abi", *args, "--markdown")
    assert "| file | needed | resolved | where |" in m.out


def test_cli_wheel_urls_copied_from_an_index_page_are_wheels(cli: Cli, stack_wheels: Wheels, tmp_path: Path) -> None:
    """An index page's link carries `#sha256=` (PEP 503) and a mirror's may carry a query: still a wheel, not a
    profile name."""
    inv = tmp_path / "inv.json"
    write_inventory(inv, image_inventory())
    with IndexServer() as server:
        for w in (stack_wheels.core, stack_wheels.kern, stack_wheels.ext_v2):
            server.add(w)
        core, kern, ext = (f"{server.base}files/{w.name}" for w in (stack_wheels.core, stack_wheels.kern,
                                                                       stack_wheels.ext_v2))
        r = cli("abi", f"{core}#sha256={sha256_file(stack_wheels.core)}", f"{kern}?token=x", ext,
                "--inventory", str(inv), "--json")
    assert r.code == 0, r.err
    assert first_json(r.out)["reports"][0]["ok"] is True  # type: ignore[index]


def test_cli_unresolved_exit_1(cli: Cli, stack_wheels: Wheels) -> None:
    r = cli("abi", str(stack_wheels.core), str(stack_wheels.ext_v1), "--allow", "lib*.so.6", "--allow",
            "libgcc_s.so.1")
    assert r.code == 1
    assert "UNRESOLVED" in r.out
    assert "libfakepython.so.1.0 (needed by deep_ext-1.0.post1" in r.err and EXT in r.err
    assert r.err.count("error:") == 1


def test_cli_allow_list(cli: Cli, stack_wheels: Wheels) -> None:
    r = cli("abi", str(stack_wheels.core), str(stack_wheels.ext_v1), "--allow", "lib*.so.6", "--allow",
            "libgcc_s.so.1", "--allow", "libfakepython.so.*", "--json")
    assert r.code == 0, r.err
    rows = first_json(r.out)["reports"][0]["resolutions"]  # type: ignore[index]
    assert {"needed": "libfakepython.so.1.0", "where": "allow", "detail": "libfakepython.so.*"}.items() <= \
        next(x for x in rows if x["needed"] == "libfakepython.so.1.0").items()


def test_cli_ceiling_exit_1(cli: Cli, stack_wheels: Wheels, tmp_path: Path) -> None:
    inv = tmp_path / "old.json"
    write_inventory(inv, image_inventory(glibc="2.28", image="old:1"))
    r = cli("abi", str(stack_wheels.core), str(stack_wheels.kern), str(stack_wheels.ext_v2), "--inventory", str(inv))
    assert r.code == 1
    assert "requires GLIBC_2.34 from libc.so.6; old:1 provides up to GLIBC_2.28" in r.err and EXT in r.err


def _snapshot(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def test_cli_bad_inputs(cli: Cli, stack_wheels: Wheels, elf_libs: Libs, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data = stack_wheels.ext_v1.read_bytes()
    (work / "cut-1.0-py3-none-any.whl").write_bytes(data[: len(data) // 2])
    import zipfile

    with zipfile.ZipFile(work / "evil-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("../../evil.so", elf_libs.kern.read_bytes())
    notelf = build_wheel(work, "notelf", "1.0", tag=TAG, files={"notelf/libx.so": "not an elf"})
    truncated = build_wheel(work, "trunc", "1.0", tag=TAG, files={"trunc/libcut.so": elf_libs.kern.read_bytes()[:3000]})
    arm = build_wheel(work, "arm", "1.0", tag=TAG, files={"arm/libkern.so": elf_libs.kern_aarch64.read_bytes()})
    bomb = work / "bomb-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb/zeros.so", b"\0" * (8 << 20))
    (work / "inv.json").write_text("{not json")
    before = _snapshot(work)

    cases = [
        (["cut-1.0-py3-none-any.whl"], 2, "truncated or corrupt zip"),
        (["evil-1.0-py3-none-any.whl"], 2, "'..' component escapes the wheel"),
        (["missing-1.0-py3-none-any.whl"], 2, "no such file"),
        ([str(truncated), "--allow", "*"], 1, "truncated ELF"),
        ([str(arm), "--allow", "*"], 1, "aarch64 ELF in a x86_64 stack"),
        (["bomb-1.0-py3-none-any.whl", "--max-size", "1048576"], 2, "zip bomb"),
        ([str(stack_wheels.core), "--inventory", "inv.json"], 2, "not a stackctl inventory"),
        ([str(stack_wheels.core), "--inventory", "nothere.json"], 2, "no such inventory"),
        (["a.whl", "b.toml"], 2, "give one profile, or only wheel files"),
    ]
    for args, code, text in cases:
        r = cli("abi", *args, cwd=work)
        assert r.code == code, (args, r.out, r.err)
        assert text in r.err, (args, r.err)
        assert len([line for line in r.err.splitlines() if line.startswith("error:")]) == 1
    # A non-ELF .so is a warning, not a crash and not a failure.
    r = cli("abi", str(notelf), cwd=work)
    assert r.code == 0 and "not an ELF file" in r.out
    assert _snapshot(work) == before


def test_cli_lock_with_remote_wheels(cli: Cli, stack_wheels: Wheels, tmp_path: Path) -> None:
    """`stackctl abi PROFILE`: the lock's wheels read over the loopback index with range requests."""
    big = build_wheel(tmp_path / "big", "bigdata", "1.0", tag=TAG, files={"bigdata/blob.bin": os.urandom(12 << 20)})
    profile = write_profile(tmp_path, "mini", {"corelib": "1.0", "kernlib": {"version": "1.0", "abi": "ignore"},
                                               "deep_ext": {"version": "1.0.post2", "abi": "check"},
                                               "bigdata": "1.0"}, index="local", allow=SYSTEM_LIBS)
    from stackctl.profile.loader import load_stack

    stack = load_stack(profile)
    with IndexServer() as server:
        files = {}
        for name, path in (("corelib", stack_wheels.core), ("kernlib", stack_wheels.kern),
                           ("deep_ext", stack_wheels.ext_v2), ("bigdata", big)):
            server.add(path)
            files[name] = LockedFile("cp310-linux_x86_64", path.name, f"{server.base}files/{path.name}",
                                     sha256_file(path), size=path.stat().st_size)
        lock = Lock("mini", stack.digest(), tuple(
            LockedPin(name, v, "local", (files[name],)) for name, v in
            (("corelib", "1.0"), ("kernlib", "1.0"), ("deep_ext", "1.0.post2"), ("bigdata", "1.0"))))
        write_lock(tmp_path / "stacks" / "mini.lock", lock)

        # kernlib is ignored: libkern.so has no provider and the check fails naming it.
        r = cli("abi", "mini", "--reread", cwd=tmp_path)
        assert r.code == 1, r.err
        assert "libkern.so (needed by deep_ext-1.0.post2" in r.err
        assert not server.requests_to("kernlib")
        # For CI: the failure at the pin whose wheel needs the library; the wheels' reading folded in a group.
        annotated = cli("abi", "mini", "--annotations", "github", cwd=tmp_path)
        assert annotated.code == 1 and annotated.err.splitlines()[-1] == r.err.splitlines()[-1]
        lines = annotated.out.splitlines()
        assert lines[0] == "::group::abi: read the wheels' ELF files" and lines.count("::endgroup::") == 1
        pin_line = next(n for n, ln in enumerate(profile.read_text().splitlines(), 1) if "deep_ext" in ln)
        errors = [ln for ln in lines if ln.startswith("::error")]
        assert errors and all(ln.startswith(f"::error file=stacks/mini.toml,line={pin_line},title=stackctl abi::")
                              for ln in errors)
        assert any("libkern.so" in ln for ln in errors)
        big_reqs = server.requests_to("bigdata")
        assert big_reqs and all(h.get("Range") for _, _, h in big_reqs)

        profile.write_text(profile.read_text().replace('abi = "ignore"\n', ""))
        stack = load_stack(profile)
        write_lock(tmp_path / "stacks" / "mini.lock", Lock("mini", stack.digest(), lock.pins))
        r = cli("abi", str(profile), "--json", "--reread", cwd=tmp_path)
        assert r.code == 0, r.err
        data = first_json(r.out)
        report = data["reports"][0]  # type: ignore[index]
        assert report["target"] == "cp310-linux_x86_64" and report["checked_files"] == 1
        sources = {s["wheel"]: s for s in data["sources"]}  # type: ignore[attr-defined]
        bigsrc = sources[big.name]
        assert bigsrc["ranged"] is True and bigsrc["fetched"] < bigsrc["size"] / 100
        # Wheels that only provide were listed by name; the checked wheel's library was read.
        assert bigsrc["libraries_read"] is False and sources[stack_wheels.core.name]["libraries_read"] is False
        assert sources[stack_wheels.ext_v2.name]["libraries_read"] is True
        # The provider the checked file resolved to had its ELF header read (its machine), nothing more.
        assert sources[stack_wheels.core.name]["headers_read"] == 1
        assert bigsrc["headers_read"] == 0
        # Range reads did not see the whole big wheel: its size is checked against the lock, and said so;
        # the small ones came whole with the first read, and their sha256 was checked
        assert bigsrc["verified"] == "size"
        assert {s["verified"] for n, s in sources.items() if n != big.name} == {"sha256"}
        human = cli("abi", "mini", "--reread", cwd=tmp_path)
        assert human.code == 0, human.err
        assert "recorded in build/mini.abi.json (what `stackctl report` reads)" in human.out.splitlines()
        quiet = cli("abi", "mini", "--no-record", cwd=tmp_path)
        assert quiet.code == 0 and "recorded in" not in quiet.out
        assert "NOT hash-checked (range reads did not see the whole file); its size matches the lock" in \
            human.out.replace("\n", " ").replace("  ", " ")

        # An index that ignores ranges: a full, verified download, and a hash mismatch is a service error.
        server.ranges = False
        r = cli("abi", "mini", "--json", "--reread", cwd=tmp_path)
        assert r.code == 0, r.err
        assert all(s["ranged"] is False and s["verified"] == "sha256"
                   for s in first_json(r.out)["sources"])  # type: ignore[attr-defined]
        server.ranges = True
        # The index serves another file than the one locked (its size differs): exit 3, before any read.
        other = Lock("mini", stack.digest(), tuple(
            LockedPin(p.name, p.version, p.index, tuple(
                LockedFile(f.target, f.filename, f.url, f.sha256, size=(f.size or 0) + 1) for f in p.files))
            for p in lock.pins))
        write_lock(tmp_path / "stacks" / "mini.lock", other)
        r = cli("abi", "mini", "--reread", cwd=tmp_path)
        assert r.code == 3 and "not the locked file" in r.err and r.err.count("error:") == 1
        server.ranges = False
        bad = Lock("mini", stack.digest(), tuple(
            LockedPin(p.name, p.version, p.index, tuple(
                LockedFile(f.target, f.filename, f.url, "0" * 64) for f in p.files)) for p in lock.pins))
        write_lock(tmp_path / "stacks" / "mini.lock", bad)
        r = cli("abi", "mini", "--reread", cwd=tmp_path)
        assert r.code == 3 and "does not match the index's" in r.err


def test_cli_lock_missing(cli: Cli, tmp_path: Path) -> None:
    write_profile(tmp_path, "s", {"a": "1"})
    r = cli("abi", "s", cwd=tmp_path)
    assert r.code == 2 and "no such lock" in r.err


def test_cli_lock_reads_provider_libraries_when_names_do_not_resolve(cli: Cli, stack_wheels: Wheels, elf_libs: Libs,
                                                                      tmp_path: Path) -> None:
    """A provider whose file name is not its SONAME (a vendored, renamed copy) is read on the second pass, and
    is still not what the loader finds: it opens the file name a search path leads to."""
    alias = build_wheel(tmp_path / "w", "aliascore", "1.0", tag=TAG,
                        files={"aliascore/libalias.so": elf_libs.core.read_bytes()})
    write_profile(tmp_path, "al", {"aliascore": "1.0", "deep_ext": {"version": "1.0.post1", "abi": "check"}},
                  extra='[abi]\nallow = ["libfakepython.so.*"]\ninventory = "base.inventory.json"\n')
    write_inventory(tmp_path / "base.inventory.json", image_inventory(image="base:1"))
    from stackctl.profile.loader import load_stack

    stack = load_stack(tmp_path / "stacks" / "al.toml")
    with IndexServer() as server:
        pins = []
        for name, version, path in (("aliascore", "1.0", alias), ("deep_ext", "1.0.post1", stack_wheels.ext_v1)):
            server.add(path)
            pins.append(LockedPin(name, version, "i", (LockedFile("cp310-linux_x86_64", path.name,
                                                                  f"{server.base}files/{path.name}",
                                                                  sha256_file(path)),)))
        write_lock(tmp_path / "stacks" / "al.lock", Lock("al", stack.digest(), tuple(pins)))
        r = cli("abi", "al", "--json", cwd=tmp_path)
        alias_log = server.requests_to(alias.name)
    assert r.code == 1, r.err
    assert "error: unresolved: libcore.so.1 (needed by deep_ext-1.0.post1" in r.err
    data = first_json(r.out)
    rep = data["reports"][0]  # type: ignore[index]
    res = next(x for x in rep["resolutions"] if x["needed"] == "libcore.so.1")
    assert res["where"] == "unresolved" and res["provider_path"] is None
    assert "only aliascore-1.0-cp310-cp310-linux_x86_64.whl's renamed copy aliascore/libalias.so has that SONAME" \
        in res["detail"]
    # The profile's inventory stands in for the image; its allow list for the rest.
    assert rep["inventory"] == "base:1"
    assert {x["where"] for x in rep["resolutions"] if x["needed"] == "libc.so.6"} == {"image"}
    assert {x["where"] for x in rep["resolutions"] if x["needed"] == "libfakepython.so.1.0"} == {"allow"}
    sources = data["sources"]
    assert [(s["wheel"], s["libraries_read"]) for s in sources] == [  # type: ignore[attr-defined]
        (alias.name, True), (stack_wheels.ext_v1.name, True)]
    # Listed by name, then read: one open wheel, so its central directory was fetched once.
    assert [h.get("Range") for _, _, h in alias_log].count("bytes=-65536") == 1
    # Small wheels: the first range read held every byte, so the lock's sha256 was checked.
    assert {s["verified"] for s in sources} == {"sha256"}  # type: ignore[attr-defined]


def test_cli_lock_provider_for_another_machine(cli: Cli, stack_wheels: Wheels, elf_libs: Libs, tmp_path: Path) -> None:
    """A lock whose provider wheel carries an aarch64 libkern.so: found by name, refused by its header."""
    armkern = build_wheel(tmp_path / "w", "kernlib", "1.0", tag=TAG,
                          files={"kernlib/lib/libkern.so": elf_libs.kern_aarch64.read_bytes()})
    write_profile(tmp_path, "k", {"corelib": "1.0", "kernlib": "1.0",
                                  "deep_ext": {"version": "1.0.post2", "abi": "check"}},
                  allow=["lib*.so.6", "lib*.so.2", "librt.so.1", "libgcc_s.so.1"])
    from stackctl.profile.loader import load_stack

    stack = load_stack(tmp_path / "stacks" / "k.toml")
    with IndexServer() as server:  # a lock names http(s) URLs only
        wheels = (("corelib", "1.0", stack_wheels.core), ("kernlib", "1.0", armkern),
                  ("deep_ext", "1.0.post2", stack_wheels.ext_v2))
        for _, _, path in wheels:
            server.add(path)
        pins = tuple(LockedPin(name, version, "i", (LockedFile("cp310-linux_x86_64", path.name,
                                                               f"{server.base}files/{path.name}", sha256_file(path),
                                                               size=path.stat().st_size),))
                     for name, version, path in wheels)
        write_lock(tmp_path / "stacks" / "k.lock", Lock("k", stack.digest(), pins))
        r = cli("abi", "k", "--json", cwd=tmp_path)
    assert r.code == 1
    data = first_json(r.out)
    rep = data["reports"][0]  # type: ignore[index]
    assert rep["unresolved"] == [{"library": "libkern.so", "needed_by": [f"{stack_wheels.ext_v2.name}:{EXT}"]}]
    assert any(f["kind"] == "foreign-machine" and "aarch64 ELF" in f["message"] for f in rep["findings"])
    assert {s["verified"] for s in data["sources"]} == {"sha256"}  # type: ignore[attr-defined]
    assert "libkern.so (needed by" in r.err and r.err.count("error:") == 1


def test_cli_profile_usage_errors(cli: Cli, tmp_path: Path) -> None:
    write_profile(tmp_path, "s", {"a": "1"})
    write_lock(tmp_path / "stacks" / "s.lock", Lock("s", "sha256:x", ()))
    r = cli("abi", "s", "--target", "cp399-linux_x86_64", cwd=tmp_path)
    assert r.code == 2 and "s has targets cp310-linux_x86_64" in r.err
    r = cli("abi", "s", cwd=tmp_path)
    assert r.code == 2 and "no wheels for target cp310-linux_x86_64" in r.err
    write_lock(tmp_path / "other.lock", Lock("other", "sha256:x", ()))
    r = cli("abi", "s", "--lock", str(tmp_path / "other.lock"), cwd=tmp_path)
    assert r.code == 2 and "is the lock of stack 'other', not 's'" in r.err


def test_cli_lock_on_an_index_with_credentials(cli: Cli, stack_wheels: Wheels, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Remote wheels of a private index: its credentials reach it, and never a host it redirects to."""
    from tests.support.index_server import redirect

    profile = write_profile(tmp_path, "priv", {"corelib": "1.0", "kernlib": {"version": "1.0", "abi": "check"}},
                            index="vendor", allow=SYSTEM_LIBS,
                            index_extra='username_env = "ABI_TEST_USER"\npassword_env = "ABI_TEST_PASSWORD"\n')
    from stackctl.profile.loader import load_stack

    stack = load_stack(profile)
    with IndexServer(auth=("robot", "pa55word")) as vendor, IndexServer() as cdn:
        pins = []
        for name, path in (("corelib", stack_wheels.core), ("kernlib", stack_wheels.kern)):
            vendor.add(path)
            cdn.add(path)
            pins.append(LockedPin(name, "1.0", "vendor", (LockedFile(
                "cp310-linux_x86_64", path.name, f"{vendor.base}files/{path.name}", sha256_file(path)),)))
        # The vendor sends the kernel library's wheel to another host, as indexes do with file CDNs.
        kern = f"/files/{stack_wheels.kern.name}"
        for _ in range(20):
            vendor.fault(kern, redirect(f"{cdn.base}files/{stack_wheels.kern.name}"))
        write_lock(tmp_path / "stacks" / "priv.lock", Lock("priv", stack.digest(), tuple(pins)))

        at = ("--index", f"vendor={vendor.url}")
        r = cli("abi", "priv", *at, cwd=tmp_path)
        assert r.code == 3 and "401" in r.err  # no credentials configured: the index says no

        monkeypatch.setenv("ABI_TEST_USER", "robot")
        monkeypatch.setenv("ABI_TEST_PASSWORD", "pa55word")
        r = cli("abi", "priv", *at, cwd=tmp_path)
        assert r.code == 0, r.out + r.err
        assert "pa55word" not in r.out + r.err
        assert any(h.get("Authorization") for _, p, h in vendor.log if "corelib" in p)
        assert cdn.requests_to("kernlib") and not any(h.get("Authorization") for _, _, h in cdn.log)
