"""wheel-diff on two builds of one gcc-built wheel, differing as deep_ep post1 and post2 did."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from stackctl.abi.wheeldiff import diff_wheels
from stackctl.cli.app import markdown_text
from stackctl.wheels.archive import WheelReader
from stackctl.wheels.scan import scan_wheel
from tests.support.cli import Cli
from tests.support.elf_fixtures import EXT, TAG, Libs, Wheels
from tests.support.index_server import Fault, IndexServer, partial, status
from tests.support.wheels import build_wheel

# The gcc-built libraries and wheels, as fixtures (session-scoped, built once per run).
pytest_plugins = ("tests.support.elf_plugin",)

# not "only _cpp...so differs": the dist-info's METADATA and RECORD differ too, and are listed above it
SUMMARY = ("Python sources byte-identical; _cpp.cpython-310-x86_64-linux-gnu.so differs: +libkern.so "
           "+libdl.so.2 +librt.so.1 \u2212libfakepython.so.1.0 RUNPATH $ORIGIN/../corelib/lib\u2192$ORIGIN/..:"
           "$ORIGIN/../corelib/lib:$ORIGIN/../kernlib/lib GLIBC_2.2.5\u2192GLIBC_2.34; dist-info METADATA, RECORD "
           "differ; Requires-Dist +corelib==1.0")


def test_diff_of_post1_and_post2(stack_wheels: Wheels) -> None:
    with WheelReader(stack_wheels.ext_v1) as a, WheelReader(stack_wheels.ext_v2) as b:
        d = diff_wheels(scan_wheel(a, with_metadata=True), scan_wheel(b, with_metadata=True))
    assert d.added == () and d.removed == ()
    assert [c.path for c in d.changed] == ["<dist-info>/METADATA", "<dist-info>/RECORD", EXT]
    assert d.unchanged == 3  # two Python sources and WHEEL
    (e,) = d.elf
    assert e.needed_added == ("libkern.so", "libdl.so.2", "librt.so.1")
    assert e.needed_removed == ("libfakepython.so.1.0",)
    assert e.ceiling_before[0] == "GLIBC_2.2.5" and e.ceiling_after[0] == "GLIBC_2.34"
    assert d.requires_dist_added == ("corelib==1.0",) and d.requires_python_before == ">=3.10"
    assert d.summary == SUMMARY


def test_python_change_added_member_and_soname(tmp_path: Path, elf_libs: Libs) -> None:
    a = build_wheel(tmp_path / "a", "p", "1", tag=TAG, files={"p/x.py": "1", "p/libk.so": elf_libs.kern.read_bytes()},
                    requires_python=">=3.9")
    b = build_wheel(tmp_path / "b", "p", "2", tag=TAG, files={"p/x.py": "2", "p/libk.so": elf_libs.core.read_bytes(),
                                                              "p/new.txt": "n"}, requires_python=">=3.10")
    with WheelReader(a) as ra, WheelReader(b) as rb:
        d = diff_wheels(scan_wheel(ra, with_metadata=True), scan_wheel(rb, with_metadata=True))
    assert d.added == ("p/new.txt",)
    assert d.summary.startswith("1 Python source differs (x.py); 2 other members differ: libk.so differs: ")
    assert "SONAME libkern.so\u2192libcore.so.1" in d.summary and "new.txt added" in d.summary
    assert d.summary.endswith("Requires-Python >=3.9\u2192>=3.10")


def test_cli_wheel_diff_local_and_remote(cli: Cli, stack_wheels: Wheels, tmp_path: Path) -> None:
    r = cli("wheel-diff", str(stack_wheels.ext_v1), str(stack_wheels.ext_v2), "--record", str(tmp_path / "d.json"))
    assert r.code == 0, r.err
    assert f"recorded in {tmp_path / 'd.json'} (what `stackctl report` reads)" in r.out.splitlines()
    assert SUMMARY in r.out.replace("\n", "")
    m = cli("wheel-diff", str(stack_wheels.ext_v1), str(stack_wheels.ext_v2), "--markdown", "--no-record")
    assert "| member | size before | size after | crc before | crc after |" in m.out
    assert markdown_text(SUMMARY) in m.out  # as a pull request shows it, with its underscores escaped
    with IndexServer() as server:
        server.add(stack_wheels.ext_v1)
        server.add(stack_wheels.ext_v2)
        urls = (f"{server.base}files/{stack_wheels.ext_v1.name}", f"{server.base}files/{stack_wheels.ext_v2.name}")
        j = cli("wheel-diff", *urls, "--json", "--no-record")
        h = cli("wheel-diff", *urls, "--no-record")
    assert j.code == 0, j.err
    data = json.loads(j.out)
    assert data["summary"] == SUMMARY and data["elf"][0]["needed_removed"] == ["libfakepython.so.1.0"]
    # What reading each remote wheel cost, and that range reads were not hash-checked.
    sizes = [stack_wheels.ext_v1.stat().st_size, stack_wheels.ext_v2.stat().st_size]
    assert [(s["size"], s["ranged"], s["verified"]) for s in data["sources"]] == [
        (sizes[0], True, "none"), (sizes[1], True, "none")]
    assert all(0 < s["fetched"] <= s["size"] for s in data["sources"])
    assert h.code == 0 and h.out.count("not verified (no sha256 to compare with)") == 2


def test_wheel_diff_checks_a_urls_sha256_when_it_read_the_whole_file(cli: Cli,
                                                                     stack_wheels: Wheels) -> None:
    """URLs as index pages give them, with `#sha256=`: small wheels are read whole by the first range read,
    so their hash is checked, and a wrong one is the server's fault."""
    from stackctl.base.files import sha256_file

    with IndexServer() as server:
        server.add(stack_wheels.ext_v1)
        server.add(stack_wheels.ext_v2)
        urls = [f"{server.base}files/{w.name}#sha256={sha256_file(w)}" for w in (stack_wheels.ext_v1,
                                                                                  stack_wheels.ext_v2)]
        j = cli("wheel-diff", *urls, "--json", "--no-record")
        h = cli("wheel-diff", *urls, "--no-record")
        bad = cli("wheel-diff", urls[0], urls[1].split("#")[0] + "#sha256=" + "0" * 64, "--no-record")
    assert j.code == 0, j.err
    assert [(s["ranged"], s["verified"], s["hash_known"]) for s in json.loads(j.out)["sources"]] == [
        (True, "sha256", True), (True, "sha256", True)]
    assert h.out.count("sha256 checked: the whole file was read") == 2, h.out
    assert "not verified" not in h.out and "NOT hash-checked" not in h.out
    assert bad.code == 3 and f"{stack_wheels.ext_v2.name}: the whole file read has sha256 " in bad.err


def test_cli_wheel_diff_bad_input(cli: Cli, stack_wheels: Wheels, tmp_path: Path) -> None:
    bad = tmp_path / "bad-1-py3-none-any.whl"
    bad.write_bytes(b"PK\x03\x04 not really")
    r = cli("wheel-diff", str(bad), str(stack_wheels.ext_v2))
    assert r.code == 2 and "not a readable wheel" in r.err


@pytest.mark.parametrize("fault", [partial(None), partial("bytes abc"), partial("bytes 0-15/4000"),
                                   partial("bytes 0-99/4000"), status(416)],
                         ids=["no-content-range", "malformed", "not-the-tail", "short-body", "416-suffix"])
def test_a_range_reply_that_cannot_be_trusted_falls_back_to_a_whole_download(
        cli: Cli, stack_wheels: Wheels, fault: Fault) -> None:
    """Not exit 3: the wheel is read whole instead (what a lock's sha256 then checks)."""
    with IndexServer() as server:
        server.add(stack_wheels.ext_v1)
        server.add(stack_wheels.ext_v2)
        name = stack_wheels.ext_v1.name
        server.fault(f"/files/{name}", fault)
        urls = (f"{server.base}files/{name}", f"{server.base}files/{stack_wheels.ext_v2.name}")
        r = cli("wheel-diff", *urls, "--json", "--no-record")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["summary"] == SUMMARY
    assert [s["ranged"] for s in data["sources"]] == [False, True]


def test_whole_download_after_a_bad_range_is_checked_against_the_sha256(stack_wheels: Wheels) -> None:
    from stackctl.errors import ServiceError
    from stackctl.index.client import ClientOptions, IndexClient
    from stackctl.index.config import endpoint_of
    from stackctl.index.remote import RemoteFile

    def RemoteFile_(url: str, **kwargs: Any) -> RemoteFile:
        return RemoteFile(IndexClient(ClientOptions(retries=0)), endpoint_of(url), url, **kwargs)

    data = stack_wheels.ext_v1.read_bytes()
    good = hashlib.sha256(data).hexdigest()
    with IndexServer() as server:
        server.add(stack_wheels.ext_v1)
        url = f"{server.base}files/{stack_wheels.ext_v1.name}"
        server.fault(f"/files/{stack_wheels.ext_v1.name}", partial("bytes nonsense"))
        f = RemoteFile_(url, sha256=good, expected_size=len(data))
        assert f.ranged is False and f.read() == data
        f.close()
        server.fault(f"/files/{stack_wheels.ext_v1.name}", partial(None))
        with pytest.raises(ServiceError, match=r"sha256 .* 0000"):
            RemoteFile_(url, sha256="0" * 64)
        # mid-read: the tail came by range, the next block does not: the rest is read from one whole copy
        f = RemoteFile_(url, sha256=good, block=256)
        f._tail = (len(data) - 10, data[-10:])  # as if the central directory were all the tail held
        server.fault(f"/files/{stack_wheels.ext_v1.name}", partial("bytes 0-9/1"))
        assert f.read(300) == data[:300] and f.ranged is False
        f.close()


def test_a_wheel_url_whose_server_is_down_hints_nothing_wheel_diff_lacks(cli: Cli, tmp_path: Path) -> None:
    """wheel-diff has no --index: a wheel named by its URL is not an index's to point elsewhere."""
    from tests.support.index_server import free_port

    base = f"http://127.0.0.1:{free_port()}"
    r = cli("wheel-diff", f"{base}/a-1.0-py3-none-any.whl", f"{base}/a-1.1-py3-none-any.whl", "--no-record")
    assert r.code == 3, r.err
    lines = r.err.strip().splitlines()
    assert lines[0].startswith("error: ") and "connection refused" in lines[0]
    assert lines[-1] == "hint: is its server running on this machine?"
    assert "--index" not in r.err
