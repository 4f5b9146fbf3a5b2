"""stackctl.wheels.archive and stackctl.index.remote: wheels read in place, locally and over the loopback index."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from stackctl.errors import ServiceError
from stackctl.index.client import ClientOptions, IndexClient
from stackctl.index.config import Credentials, IndexEndpoint, endpoint_of
from stackctl.index.remote import RemoteFile
from stackctl.wheels.archive import Limits, WheelError, WheelReader, install_path, unsafe_reason
from stackctl.wheels.scan import scan_wheel
from tests.support.elf_fixtures import EXT, TAG, Libs, Wheels
from tests.support.index_server import IndexServer
from tests.support.wheels import build_wheel

# The gcc-built libraries and wheels, as fixtures (session-scoped, built once per run).
pytest_plugins = ("tests.support.elf_plugin",)


def remote_file(url: str, ep: IndexEndpoint | None = None, **kwargs: Any) -> RemoteFile:
    """A remote file read through the index client, as every command reads one (no retries: faults show)."""
    return RemoteFile(IndexClient(ClientOptions(retries=0)), ep or endpoint_of(url), url, **kwargs)


def _zip(path: Path, members: dict[str, bytes], compress: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compress) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0)), data, compress_type=compress)
    return path


def test_scan_reads_every_library_member(stack_wheels: Wheels) -> None:
    with WheelReader(stack_wheels.ext_v2) as r:
        scan = scan_wheel(r, with_metadata=True)
    assert scan.name == "deep-ext" and scan.version == "1.0.post2" and scan.platforms == ("linux_x86_64",)
    assert scan.arch() == "x86_64"
    assert [e.path for e in scan.elves] == [EXT]
    assert scan.elves[0].info is not None and "libkern.so" in scan.elves[0].info.needed
    assert scan.metadata is not None and scan.metadata.requires_dist == ("corelib==1.0",)
    assert scan.metadata.requires_python == ">=3.10"


@pytest.mark.parametrize("compress", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_member_streams_seek_and_read_like_the_bytes(tmp_path: Path, compress: int) -> None:
    data = os.urandom(300_000) + b"\0" * 200_000
    wheel = _zip(tmp_path / "x-1-py3-none-any.whl", {"x/a.bin": data, "x/b.txt": b"hello"}, compress)
    with WheelReader(wheel) as r:
        fh = r.open("x/a.bin")
        assert fh.read(10) == data[:10]
        fh.seek(400_000)
        assert fh.read(5) == data[400_000:400_005]
        fh.seek(-3, os.SEEK_END)
        assert fh.read() == data[-3:]
        fh.seek(7)
        assert fh.read(100_000) == data[7:100_007]
        fh.seek(0)
        assert fh.read() == data  # one read longer than any window kept
        assert r.read("x/b.txt") == b"hello"


def test_deflated_member_is_inflated_only_as_far_as_read(tmp_path: Path, elf_libs: Libs) -> None:
    """Reading a library's dynamic section must not inflate the megabytes that follow it."""
    big = elf_libs.kern.read_bytes() + os.urandom(8 << 20)  # trailing bytes no loader reads
    wheel = build_wheel(tmp_path, "pad", "1.0", tag=TAG, files={"pad/libkern.so": big})
    with WheelReader(wheel) as r:
        fh = r.open("pad/libkern.so")
        from stackctl.wheels.elf import read_elf

        # The section headers are now not at the end, which is fine: the reader never needs them.
        info = read_elf(fh)
        assert info.soname == "libkern.so"
        assert fh._produced < 1 << 20  # type: ignore[attr-defined]


@pytest.mark.parametrize("name, why", [("../evil.so", "escapes"), ("a/../../evil", "escapes"),
                                       ("/etc/passwd", "absolute"), ("a\\..\\b", "backslash"),
                                       ("C:/x", "absolute")])
def test_unsafe_member_names_refuse_the_wheel(tmp_path: Path, name: str, why: str) -> None:
    assert why in (unsafe_reason(name) or "")
    wheel = _zip(tmp_path / "bad-1-py3-none-any.whl", {"ok.py": b"", name: b"x"})
    with pytest.raises(WheelError, match=why):
        WheelReader(wheel)


def test_truncated_and_corrupt_archives(tmp_path: Path, stack_wheels: Wheels) -> None:
    data = stack_wheels.ext_v1.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 30):
        p = tmp_path / f"cut{cut}.whl"
        p.write_bytes(data[:cut])
        with pytest.raises(WheelError, match="truncated or corrupt"):
            WheelReader(p)
    garbage = tmp_path / "garbage.whl"
    garbage.write_bytes(os.urandom(4096))
    with pytest.raises(WheelError, match="not a readable wheel"):
        WheelReader(garbage)


def test_corrupt_member_data_is_reported(tmp_path: Path, elf_libs: Libs) -> None:
    wheel = build_wheel(tmp_path, "c", "1.0", tag=TAG, files={"c/libkern.so": elf_libs.kern.read_bytes()})
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("c/libkern.so")
    start = info.header_offset + 30 + len(info.filename)
    data[start:start + 64] = b"\xff" * 64  # not a valid deflate stream any more
    wheel.write_bytes(bytes(data))
    with WheelReader(wheel) as r, pytest.raises(WheelError, match=r"does not inflate|corrupt"):
        scan_wheel(r)


def test_size_cap_and_ratio_cap(tmp_path: Path) -> None:
    bomb = _zip(tmp_path / "bomb-1-py3-none-any.whl", {"bomb/zeros.bin": b"\0" * (16 << 20)})
    with pytest.raises(WheelError, match="zip bomb"):
        WheelReader(bomb, limits=Limits(max_member=1 << 20))
    with pytest.raises(WheelError, match=r"inflates \d+:1"):
        WheelReader(bomb, limits=Limits(max_ratio=100))
    with WheelReader(bomb) as r:  # under the default caps it is an ordinary member
        assert r.member("bomb/zeros.bin").size == 16 << 20


def test_member_inflating_past_its_declared_size(tmp_path: Path) -> None:
    """A central directory that lies about the size: inflation stops at the declared size."""
    wheel = _zip(tmp_path / "liar-1-py3-none-any.whl", {"liar/x.so": b"A" * 100_000})
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("liar/x.so")
    # Patch the uncompressed size in the central directory entry (offset 24 in the entry).
    cd = data.rfind(b"PK\x01\x02")
    assert int.from_bytes(data[cd + 24:cd + 28], "little") == info.file_size
    data[cd + 24:cd + 28] = (1000).to_bytes(4, "little")
    wheel.write_bytes(bytes(data))
    with WheelReader(wheel) as r, pytest.raises(WheelError, match="past its declared"):
        r.open("liar/x.so").read()


def test_non_elf_so_member_is_reported_not_raised(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "ld", "1.0", tag=TAG, files={"ld/libfoo.so": "INPUT(libfoo.so.1)\n"})
    with WheelReader(wheel) as r:
        scan = scan_wheel(r)
    assert scan.elves[0].info is None and "not an ELF" in (scan.elves[0].problem or "")


def test_install_paths() -> None:
    assert install_path("torch/lib/libc10.so") == "torch/lib/libc10.so"
    assert install_path("x-1.data/platlib/x/lib.so") == "x/lib.so"
    assert install_path("x-1.data/scripts/tool") == "<scripts>/tool"


# --- remote -----------------------------------------------------------------------------------------

@pytest.fixture
def big_wheel(tmp_path: Path, elf_libs: Libs) -> Path:
    """A 24 MB wheel: three libraries and incompressible data, stored the way wheels of data are."""
    return build_wheel(tmp_path, "bigpkg", "1.0", tag=TAG, files={
        "bigpkg/lib/libcore.so.1": elf_libs.core.read_bytes(),
        "bigpkg/lib/libkern.so": elf_libs.kern.read_bytes(),
        "bigpkg/_ext.cpython-310-x86_64-linux-gnu.so": elf_libs.ext_v2.read_bytes(),
        "bigpkg/data/blob.bin": os.urandom(24 << 20),
    })


def test_remote_listing_costs_kilobytes(big_wheel: Path) -> None:
    with IndexServer() as server:
        server.add(big_wheel)
        url = f"{server.base}files/{big_wheel.name}"
        remote = remote_file(url)
        with WheelReader(remote, label=big_wheel.name) as r:
            scan = scan_wheel(r)
        assert remote.ranged
        assert {e.info.soname for e in scan.elves if e.info} == {"libcore.so.1", "libkern.so", None}
        assert remote.size == big_wheel.stat().st_size
        assert remote.fetched < remote.size / 100, (remote.fetched, remote.size)
        ranges = [h.get("Range") for m, p, h in server.requests_to(big_wheel.name)]
        assert all(r and r.startswith("bytes=") for r in ranges)


def test_remote_falls_back_to_a_verified_download(big_wheel: Path) -> None:
    digest = hashlib.sha256(big_wheel.read_bytes()).hexdigest()
    with IndexServer(ranges=False) as server:
        server.add(big_wheel)
        url = f"{server.base}files/{big_wheel.name}"
        remote = remote_file(url, sha256=digest)
        with WheelReader(remote, label=big_wheel.name) as r:
            assert len(scan_wheel(r).elves) == 3
        assert not remote.ranged and remote.fetched == big_wheel.stat().st_size
        remote.close()
        with pytest.raises(ServiceError, match=r"does not match the index's"):
            remote_file(url, sha256="0" * 64)


def test_remote_errors_are_service_errors(big_wheel: Path) -> None:
    from tests.support.index_server import status

    with IndexServer() as server:
        server.add(big_wheel)
        path = f"/files/{big_wheel.name}"
        server.fault(path, status(503))
        with pytest.raises(ServiceError, match="HTTP 503"):
            remote_file(f"{server.base}files/{big_wheel.name}")
        with pytest.raises(ServiceError, match="HTTP 404"):
            remote_file(f"{server.base}files/nothere-1.0-py3-none-any.whl")


def test_remote_read_carries_the_index_credentials(big_wheel: Path) -> None:
    with IndexServer(auth=("u", "s3cret")) as server:
        server.add(big_wheel)
        url = f"{server.base}files/{big_wheel.name}"
        with pytest.raises(ServiceError, match="HTTP 401") as exc:
            remote_file(url)
        assert "s3cret" not in str(exc.value)
        ep = IndexEndpoint("private", server.base, Credentials("u", "s3cret"))
        remote = remote_file(url, ep)
        with WheelReader(remote, label=big_wheel.name) as r:
            assert len(scan_wheel(r).elves) == 3


def test_crc_checked_on_full_reads(tmp_path: Path) -> None:
    wheel = _zip(tmp_path / "crc-1-py3-none-any.whl", {"a.txt": b"hello world"}, zipfile.ZIP_STORED)
    data = bytearray(wheel.read_bytes())
    i = data.find(b"hello world")
    data[i] = ord("j")
    wheel.write_bytes(bytes(data))
    assert zlib.crc32(b"jello world") != zlib.crc32(b"hello world")
    with WheelReader(wheel) as r, pytest.raises(WheelError, match="CRC"):
        r.read("a.txt")


@pytest.mark.parametrize("compress", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_inflating_windows_with_small_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compress: int) -> None:
    """Random reads through a compressed member with tiny kept windows: every byte still comes out right."""
    import random

    from stackctl.wheels import archive as wheel_mod

    monkeypatch.setattr(wheel_mod._Inflating, "KEEP_HEAD", 1000)
    monkeypatch.setattr(wheel_mod._Inflating, "KEEP_RECENT", 70_000)
    monkeypatch.setattr(wheel_mod._Inflating, "CHECKPOINT", 150_000)
    deflate = compress == zipfile.ZIP_DEFLATED  # the others restart slower: fewer, shorter rounds
    data = bytes(random.Random(1).choices(b"abcdefghij\0", k=3_000_000 if deflate else 600_000))  # like code
    wheel = _zip(tmp_path / "w-1-py3-none-any.whl", {"w/x.so": data}, compress)
    rnd = random.Random(2)
    with WheelReader(wheel) as r:
        fh = r.open("w/x.so")
        for _ in range(200 if deflate else 40):
            start = rnd.choice([rnd.randrange(0, 2000), rnd.randrange(0, len(data))])
            n = rnd.choice([1, 16, 4096, 100_000, 400_000])
            fh.seek(start)
            assert fh.read(n) == data[start:start + n], (start, n)


def test_a_jump_back_resumes_from_a_checkpoint(tmp_path: Path) -> None:
    """After the first jump back (the fast pass keeps no checkpoints), reading far into a deflated library and
    then near its middle re-inflates from the checkpoint before it, not from the member's first byte: the
    archive bytes read again are those after that checkpoint only."""
    import random

    from stackctl.wheels import archive as wheel_mod

    rnd = random.Random(3)
    data = bytes(rnd.choices(b"abcdefghijklmnop\0\1\2", k=40 << 20))
    wheel = _zip(tmp_path / "w-1-py3-none-any.whl", {"w/x.so": data}, zipfile.ZIP_DEFLATED)

    class Counting(io.FileIO):
        got = 0

        def read(self, n: int = -1) -> bytes:  # type: ignore[override]
            out = super().read(n)
            Counting.got += len(out)
            return out

    fh = Counting(wheel, "rb")
    with WheelReader(fh) as r:
        m = r.open("w/x.so")
        assert isinstance(m, wheel_mod._Inflating)
        m.seek(38 << 20)
        assert m.read(100) == data[38 << 20:(38 << 20) + 100]
        first = Counting.got
        m.seek(6 << 20)  # behind what is kept: inflated again, with zlib, which keeps checkpoints
        assert m.read(100) == data[6 << 20:(6 << 20) + 100]
        m.seek(38 << 20)
        assert m.read(100) == data[38 << 20:(38 << 20) + 100]
        first = Counting.got
        m.seek((21 << 20) + 5)  # behind everything kept: resumes from the checkpoint at or before 21 MiB
        assert m.read(4096) == data[(21 << 20) + 5:(21 << 20) + 5 + 4096]
        again = Counting.got - first
    ratio = first / (3 * (38 << 20))  # compressed bytes per byte of output, roughly
    assert m.restarts == 2
    assert again < ratio * (wheel_mod._Inflating.CHECKPOINT + wheel_mod._Inflating.OUT_STEP) + (1 << 20), (again, first)
    fh.close()


def test_remote_file_random_and_sequential_reads(tmp_path: Path) -> None:
    import random

    data = os.urandom(5_000_000)
    blob = tmp_path / "blob.bin"
    blob.write_bytes(data)
    rnd = random.Random(3)
    with IndexServer() as server:
        server.add(blob, project="blob")
        remote = remote_file(f"{server.base}files/{blob.name}")
        assert remote.size == len(data)
        for _ in range(100):
            start, n = rnd.randrange(0, len(data)), rnd.choice([1, 100, 70_000, 300_000])
            remote.seek(start)
            assert remote.read(n) == data[start:start + n]
        before = remote.requests
        remote.seek(0)
        got = b"".join(iter(lambda: remote.read(64 << 10), b""))
        assert got == data
        assert remote.requests - before < 20  # read-ahead: a sequential pass is a few large requests


def test_executables_in_bin_and_scripts_are_read(tmp_path: Path, elf_libs: Libs) -> None:
    import subprocess

    exe = tmp_path / "tool"
    (tmp_path / "tool.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-o", str(exe), str(tmp_path / "tool.c")], check=True)
    wheel = build_wheel(tmp_path / "w", "t", "1", tag=TAG, files={
        "t/bin/tool": exe.read_bytes(), "t-1.data/scripts/run": "#!/bin/sh\necho hi\n",
        "t/bin/README": "text", "t/lib/libk.so": elf_libs.kern.read_bytes()})
    with WheelReader(wheel) as r:
        scan = scan_wheel(r)
    assert sorted(e.path for e in scan.elves) == ["t/bin/tool", "t/lib/libk.so"]
    tool = next(e for e in scan.elves if e.path == "t/bin/tool")
    assert tool.info is not None and "libc.so.6" in tool.info.needed


def test_a_stored_member_the_directory_calls_lzma_is_a_wheel_error(tmp_path: Path) -> None:
    """A fuzzed wheel: the central directory says LZMA (method 14) for bytes that are not."""
    # an LZMA header (version, 5 bytes of properties) whose properties no encoder writes, then junk
    wheel = _zip(tmp_path / "l-1-py3-none-any.whl", {"l/a.so": b"\x09\x14\x05\x00" + b"\xff" * 5 + b"x" * 200},
                 zipfile.ZIP_STORED)
    data = bytearray(wheel.read_bytes())
    for sig, at in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # method: local header, central directory
        i = data.find(sig)
        data[i + at:i + at + 2] = (14).to_bytes(2, "little")
    wheel.write_bytes(bytes(data))
    with WheelReader(wheel) as r, pytest.raises(WheelError, match=r"l/a\.so"):
        r.read("l/a.so")


@pytest.mark.parametrize("compress", [zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2])
def test_a_member_that_unpacks_large_is_streamed_not_held(tmp_path: Path, compress: int) -> None:
    """LZMA and bzip2 reach ratios deflate cannot: reading the end of such a member holds a window of it."""
    import tracemalloc

    size = 96 << 20
    wheel = tmp_path / "z-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=compress) as zf:
        info = zipfile.ZipInfo("z/big.so", (2026, 1, 1, 0, 0, 0))
        info.compress_type = compress
        with zf.open(info, "w") as out:
            chunk = b"\0" * (1 << 20)
            for _ in range(size >> 20):
                out.write(chunk)
    assert wheel.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with WheelReader(wheel) as r:
            fh = r.open("z/big.so")
            fh.seek(size - 8)
            assert fh.read() == b"\0" * 8
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < size // 2, peak


def test_a_range_reply_cut_short_is_asked_again(big_wheel: Path) -> None:
    from tests.support.index_server import cut

    with IndexServer() as server:
        server.add(big_wheel)
        path = f"/files/{big_wheel.name}"
        url = f"{server.base}files/{big_wheel.name}"
        # the tail, then the first block a scan asks for: each cut once, each answered on the second try
        server.fault(path, cut())
        remote = remote_file(url)
        server.fault(path, cut())
        with WheelReader(remote, label=big_wheel.name) as r:
            assert {e.info.soname for e in scan_wheel(r).elves if e.info} == {"libcore.so.1", "libkern.so", None}
        assert remote.ranged


def test_a_reply_cut_short_every_time_is_one_service_error_naming_the_url(big_wheel: Path) -> None:
    from tests.support.index_server import cut

    digest = hashlib.sha256(big_wheel.read_bytes()).hexdigest()
    for ranges in (True, False):
        with IndexServer(ranges=ranges) as server:
            server.add(big_wheel)
            path = f"/files/{big_wheel.name}"
            url = f"{server.base}files/{big_wheel.name}"
            server.fault(path, *(cut() for _ in range(4)))
            with pytest.raises(ServiceError, match="broke off") as exc:
                remote_file(url, sha256=digest)
            assert url in str(exc.value)
