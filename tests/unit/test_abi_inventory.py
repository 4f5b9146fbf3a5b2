"""The inventory file and the ldconfig output it is built from (the engine part is an integration test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackctl.abi.inventory import (
    Library,
    merge,
    parse_ldconfig_cache,
    parse_ldconfig_dirs,
    read_inventory,
    write_inventory,
)
from stackctl.errors import InputError
from tests.support.cli import Cli

CACHE = """90 libs found in cache `/etc/ld.so.cache'
\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1
\tlibstdc++.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libstdc++.so.6
\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6
\tlibc.so.6 (libc6) => /lib/i386-linux-gnu/libc.so.6
\tlibfoo.so.2 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libfoo.so.2
"""

DIRS = """/usr/local/lib: (from /etc/ld.so.conf.d/libc.conf:2)
/usr/local/musa/lib: (from /etc/ld.so.conf.d/musa.conf:1)
\tlibmusart.so.5 -> libmusart.so.5.2.0
/lib/x86_64-linux-gnu: (from /etc/ld.so.conf.d/x86_64-linux-gnu.conf:3)
\tlibz.so.1 -> libz.so.1.2.13
"""


def test_parse_and_round_trip(tmp_path: Path) -> None:
    cache = parse_ldconfig_cache(CACHE)
    assert [(lib.soname, lib.arch) for lib in cache] == [
        ("libz.so.1", "x86_64"), ("libstdc++.so.6", "x86_64"), ("libc.so.6", "x86_64"), ("libc.so.6", "i686"),
        ("libfoo.so.2", "aarch64")]
    dirs, scanned = parse_ldconfig_dirs(DIRS)
    assert dirs == ("/usr/local/lib", "/usr/local/musa/lib", "/lib/x86_64-linux-gnu")
    inv = merge("img:1", "sha256:x", "x86_64", cache, dirs, scanned,
                {"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.36", "GLIBC_PRIVATE")})
    lib = inv.find("libmusart.so.5")
    assert lib is not None and lib.path == "/usr/local/musa/lib/libmusart.so.5"
    assert inv.find("libc.so.6").path == "/lib/x86_64-linux-gnu/libc.so.6"  # type: ignore[union-attr]
    assert inv.find("libfoo.so.2") is None  # another machine's library is not found
    assert inv.ceiling("GLIBC") == "GLIBC_2.36" and inv.ceiling("GLIBCXX") is None
    # LD_LIBRARY_PATH directories come before the cache, as the loader searches them.
    vendor = merge("img:1", "x", "x86_64", cache, ("/opt/v",), (Library("libz.so.1", "/opt/v/libz.so.1"),), {},
                   first=("/opt/v",))
    assert vendor.find("libz.so.1").path == "/opt/v/libz.so.1"  # type: ignore[union-attr]
    # and they are kept, for abi's loader order (RPATH, then LD_LIBRARY_PATH, then RUNPATH)
    assert vendor.ld_library_path == ("/opt/v",)
    write_inventory(tmp_path / "vendor.json", vendor)
    assert read_inventory(tmp_path / "vendor.json") == vendor
    write_inventory(tmp_path / "inv.json", inv)
    assert read_inventory(tmp_path / "inv.json") == inv
    assert '"glibc": "2.36"' in (tmp_path / "inv.json").read_text()


@pytest.mark.parametrize("text, msg", [("{", "not a stackctl inventory"), ('{"format": 9}', "format 9"),
                                       ('{"format": 1}', "KeyError"), ("[]", "not a stackctl inventory")])
def test_bad_inventory_files(tmp_path: Path, text: str, msg: str) -> None:
    p = tmp_path / "inv.json"
    p.write_text(text)
    with pytest.raises(InputError, match=msg):
        read_inventory(p)


def test_inventory_without_an_engine_is_exit_3(cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    r = cli("inventory", "stackctl-base:bookworm", "--out", str(tmp_path / "inv.json"))
    assert r.code == 3 and "cannot reach the Docker engine" in r.err
    assert not (tmp_path / "inv.json").exists()
