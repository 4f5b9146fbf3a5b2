"""stackctl.wheels.elf on libraries gcc builds for the test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stackctl.wheels.elf import NotElf, read_elf, read_elf_bytes
from tests.support.elf_fixtures import Libs, _cc

# The gcc-built libraries and wheels, as fixtures (session-scoped, built once per run).
pytest_plugins = ("tests.support.elf_plugin",)


def test_soname_needed_and_glibcxx_versions(elf_libs: Libs) -> None:
    info = read_elf_bytes(elf_libs.core.read_bytes())
    assert info.machine == "x86_64" and info.bits == 64 and info.elf_type == "ET_DYN"
    assert info.soname == "libcore.so.1"
    assert "libstdc++.so.6" in info.needed and "libc.so.6" in info.needed
    by_lib = {n.library: n.versions for n in info.version_needs}
    assert any(v.startswith("GLIBCXX_3.4.") for v in by_lib["libstdc++.so.6"])
    assert any(v.startswith("CXXABI_1.3") for v in by_lib["libstdc++.so.6"])
    assert all(v.startswith("GLIBC_") for v in by_lib["libc.so.6"])


def test_needed_between_fixture_libraries_and_runpath(elf_libs: Libs) -> None:
    v1 = read_elf_bytes(elf_libs.ext_v1.read_bytes())
    v2 = read_elf_bytes(elf_libs.ext_v2.read_bytes())
    assert v1.soname is None
    assert v1.needed[:2] == ("libcore.so.1", "libfakepython.so.1.0")
    assert v1.runpath == ("$ORIGIN/../corelib/lib",) and v1.rpath == ()
    assert {"libcore.so.1", "libkern.so", "libdl.so.2", "librt.so.1"} <= set(v2.needed)
    assert v2.runpath == ("$ORIGIN/..", "$ORIGIN/../corelib/lib", "$ORIGIN/../kernlib/lib")
    assert "GLIBC_2.34" in dict((n.library, n.versions) for n in v2.version_needs)["libc.so.6"]


def test_old_style_rpath(elf_libs: Libs, tmp_path: Path) -> None:
    out = _cc(tmp_path / "librp.so", "int f(void){return 1;}", soname="librp.so", rpath="$ORIGIN/lib",
              extra=("-Wl,--disable-new-dtags",))
    info = read_elf_bytes(out.read_bytes())
    assert info.rpath == ("$ORIGIN/lib",) and info.runpath == ()


def test_version_definitions_of_the_real_libc() -> None:
    path = subprocess.run(["gcc", "-print-file-name=libc.so.6"], capture_output=True, text=True,
                          check=True).stdout.strip()
    info = read_elf(open(path, "rb"))  # noqa: SIM115
    assert info.soname == "libc.so.6"
    assert "GLIBC_2.2.5" in info.version_defs and "GLIBC_2.34" in info.version_defs


def test_patched_machine_is_reported(elf_libs: Libs) -> None:
    info = read_elf_bytes(elf_libs.kern_aarch64.read_bytes())
    assert info.machine == "aarch64"
    assert info.soname == "libkern.so"


@pytest.mark.parametrize("data", [b"", b"hello", b"INPUT(libfoo.so.1)\n", b"\x7fEL"])
def test_not_elf(data: bytes) -> None:
    with pytest.raises(NotElf, match=r"not an ELF|truncated"):
        read_elf_bytes(data)


@pytest.mark.parametrize("keep", [20, 64, 200, 2000, 0.5, 0.95])
def test_truncated_elf_is_a_clear_error(elf_libs: Libs, keep: float) -> None:
    data = elf_libs.core.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else int(keep)
    with pytest.raises(NotElf, match=r"truncated|corrupt"):
        read_elf_bytes(data[:n])


def test_corrupt_program_headers(elf_libs: Libs) -> None:
    data = bytearray(elf_libs.kern.read_bytes())
    data[32:40] = (len(data) * 4).to_bytes(8, "little")  # e_phoff far past the end
    with pytest.raises(NotElf, match=r"truncated|corrupt"):
        read_elf_bytes(bytes(data))
