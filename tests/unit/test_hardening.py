"""Each class of input the fuzz harness found crashing stackctl, as its minimal input: the answer is now a
StackctlError naming what is wrong (exit 2 for a file, exit 3 for an index), in bounded time and memory."""

from __future__ import annotations

import dataclasses
import io
import json
import struct
import time
import zipfile
from pathlib import Path

import pytest

from stackctl.errors import InputError, ServiceError
from stackctl.index.pages import listing
from stackctl.index.remote import read_metadata
from stackctl.profile.tag import TagTemplateError, render_tag
from stackctl.profile.versions import classify
from stackctl.resolve.lock import dumps, loads
from stackctl.wheels.archive import WheelError, WheelReader
from stackctl.wheels.elf import NotElf, read_elf_bytes
from tests.support.wheels import build_wheel

PAGE = "https://index.invalid/simple/torch/"
WHEEL = "torch-1.0-py3-none-any.whl"
SHA = "ab" * 32


def html(link: str = f"../../files/{WHEEL}", head: str = "") -> bytes:
    return f'<html><head>{head}</head><body><a href="{link}#sha256={SHA}">{WHEEL}</a></body></html>'.encode()


def json_page(**fields: object) -> bytes:
    f = {"filename": WHEEL, "url": f"../../files/{WHEEL}", "hashes": {"sha256": SHA}, **fields}
    return json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": [f]}).encode()


@pytest.mark.parametrize(("data", "ctype", "cause"), [
    (html("http://[::1/files/" + WHEEL), "text/html", "Invalid IPv6 URL"),
    (html("http://h:99999/files/" + WHEEL), "text/html", "not a valid URL"),
    (html(head='<meta name="pypi:repository-version" content="x.y">'), "text/html", "Invalid version"),
    (b'<base href="https: <![CDdata-yankedATA[', "text/html", "rejected by the parser"),
    (json_page(**{"upload-time": "9999-12-31T23:59:59-23:59"}), "application/vnd.pypi.simple.v1+json",
     "out of range"),
    (json_page(url="http://[::1/x"), "application/vnd.pypi.simple.v1+json", "Invalid IPv6 URL"),
    (b"[" * 5000, "application/vnd.pypi.simple.v1+json", "nested too deeply"),
])
def test_a_page_the_parsers_reject_is_the_index_failing(data: bytes, ctype: str, cause: str) -> None:
    with pytest.raises(ServiceError, match=r"^index musa, project torch: ") as info:
        listing("musa", "torch", data, ctype, PAGE)
    assert cause in str(info.value) and "\n" not in str(info.value)


def test_a_file_name_with_a_huge_version_is_not_a_distribution_file() -> None:
    name = "torch-1." + "9" * 5000 + "-py3-none-any.whl"
    page = f'<a href="../../files/{name}">{name}</a>'.encode()
    assert listing("musa", "torch", page, "text/html", PAGE).files == ()


@pytest.mark.parametrize("template", ["{python:>999999999}", "{python!r}", "{python.__class__}", "{python[0]}",
                                      "{pins[torch][0]}", "{pins}", "x" * 600])
def test_tag_templates_take_names_only(template: str) -> None:
    start = time.monotonic()
    with pytest.raises(TagTemplateError):
        render_tag(template, stack="s", python="3.10", pins={"torch": "2.1"}, variables={})
    assert time.monotonic() - start < 1


def test_one_release_written_two_ways_is_a_respelling() -> None:
    assert classify("2.2", "2.2.0") == classify("2.2.0", "2.2") == "respelled"


def lock_text(**pin: object) -> str:
    f = {"target": "cp310-linux_x86_64", "filename": WHEEL, "url": "https://i.invalid/" + WHEEL, "sha256": SHA}
    p = {"name": "torch", "version": "1.0", "index": "musa", "files": [f], **pin}
    text = json.dumps({"format": 1, "stack": "s", "profile_digest": "sha256:x", "pins": [p]})
    try:  # as resolve writes it, with its own digest; one the schema refuses stays as it is
        return dumps(loads(text, "x.lock", sealed=False))
    except InputError:
        return text


@pytest.mark.parametrize(("text", "why"), [
    (lock_text(name=3), "lock.pins[0].name: '3' is not a distribution name"),
    (lock_text(name="a\nRUN curl evil"), "is not a distribution name"),
    (lock_text(version="1." + "9" * 5000), "is not a PEP 440 version"),
    (lock_text(newest_in_line="9" * 4301), "pins[0].newest_in_line: '999"),
    (lock_text(newest_in_line="not a version"), "newest_in_line: 'not a version' is not a PEP 440 version"),
    (lock_text(files=[{"target": "t", "filename": "../x.whl", "url": "u", "sha256": SHA}]),
     "filename: '../x.whl' is not a single file name"),
    (lock_text(files=[{"target": "t", "filename": "/abs.whl", "url": "u", "sha256": SHA}]), "not a single file"),
    (lock_text(files={"target": "t"}), "files: must be a list, not dict"),
    (lock_text(index=None), "pins[0].index: must be str, not NoneType"),
    ("[" * 5000, "nested too deeply"),
    ("[1]", "a JSON list, not an object"),
])
def test_a_lock_is_checked_against_its_schema_before_use(text: str, why: str) -> None:
    with pytest.raises(InputError, match=r"^x.lock: ") as info:
        loads(text, "x.lock")
    assert why in str(info.value)


def _zip(tmp_path: Path) -> bytearray:
    return bytearray(build_wheel(tmp_path, "pure", "1.0", files={"pure/__init__.py": "X = 1\n"}).read_bytes())


def test_a_central_directory_that_points_before_the_file_is_refused(tmp_path: Path) -> None:
    data = _zip(tmp_path)
    eocd = data.rfind(b"PK\x05\x06")
    (offset,) = struct.unpack_from("<I", data, eocd + 16)
    struct.pack_into("<I", data, eocd + 16, offset + 64)  # the directory claims to start later than it does
    with pytest.raises(WheelError, match="starts outside the file"):
        WheelReader(io.BytesIO(bytes(data)), label="pure.whl")


def test_an_unsupported_version_needed_to_extract_is_refused(tmp_path: Path) -> None:
    data = _zip(tmp_path)
    cd = data.find(b"PK\x01\x02")
    struct.pack_into("<H", data, cd + 6, 127)  # "needs zip 12.7"
    with pytest.raises(WheelError, match="unsupported zip"):
        WheelReader(io.BytesIO(bytes(data)), label="pure.whl")


def test_metadata_declaring_hundreds_of_megabytes_is_refused_before_it_is_read(tmp_path: Path) -> None:
    import os

    path = build_wheel(tmp_path, "big", "1.0", extra_metadata="X-Pad: " + os.urandom(600_000).hex() + "\n")
    data = bytearray(path.read_bytes())
    cd = data.find(b"big-1.0.dist-info/METADATA", data.find(b"PK\x01\x02")) - 46
    assert data[cd:cd + 4] == b"PK\x01\x02"
    struct.pack_into("<I", data, cd + 24, 512 << 20)  # declared uncompressed size: 512 MiB
    with WheelReader(io.BytesIO(bytes(data)), label=path.name) as reader, \
            pytest.raises(WheelError, match=r"METADATA declares 512\.0 MiB, over the 16\.0 MiB"):
        reader.metadata()
    # the same wheel read remotely, where resolve takes Requires-Dist from it
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf, pytest.raises(ValueError, match="over the 16 MiB"):
        read_metadata(zf)


def chain_elf(records: int = 8192) -> bytes:
    """An ELF64 whose version-need entries all overlap: DT_VERNEEDNUM 4096 needs, each with 4096
    auxiliaries, all one 16-byte record repeated (a Verneed and a Vernaux have the same size)."""
    phoff, dynoff = 64, 120
    stroff = dynoff + 16 * 5
    strtab = b"\0libc.so.6\0"
    veroff = stroff + len(strtab)
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, 64, 56, 1, 64, 0, 0)
    ph = struct.pack("<IIQQQQQQ", 2, 6, dynoff, dynoff, dynoff, 80, 80, 8)  # PT_DYNAMIC, no PT_LOAD
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in (
        (5, stroff), (10, len(strtab)), (0x6FFFFFFE, veroff), (0x6FFFFFFF, 4096), (0, 0)))
    return header + ph + dyn + strtab + struct.pack("<HHIII", 1, 4096, 0, 0, 16) * records


def test_overlapping_version_need_chains_cost_linear_work() -> None:
    start = time.monotonic()
    with pytest.raises(NotElf, match="more than 4096 symbol version entries"):
        read_elf_bytes(chain_elf())
    assert time.monotonic() - start < 2  # was minutes: every need walked every auxiliary


def test_a_newer_version_no_parser_takes_is_held_by_nothing() -> None:
    """`outdated --from-lock` asks which pin holds the newest back; a number Python will not parse is no answer,
    not a traceback (the lock reader refuses such a field; a Lock built in memory can still carry one)."""
    from stackctl.resolve.run import held_by

    lock = loads(lock_text(), "x.lock")
    assert held_by(lock, "torch", "9" * 4301) is None


def test_an_lzma_member_declaring_a_4_gib_dictionary_is_refused_before_it_is_allocated(tmp_path: Path) -> None:
    """A 310-byte wheel whose LZMA member asks for a 4 GiB dictionary: under an address-space limit (CI
    runners, containers) allocating it is a MemoryError; the reader refuses the declaration instead."""
    path = tmp_path / "lz-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("lz/data.bin", b"x" * 64, compress_type=zipfile.ZIP_LZMA)
    data = bytearray(path.read_bytes())
    # the member's data follows its local header: 2 version bytes, the properties' size (5), then
    # lc/lp/pb in one byte and the dictionary size, little-endian
    name_len, extra_len = struct.unpack("<HH", data[26:30])
    props = 30 + name_len + extra_len + 4
    data[props + 1:props + 5] = struct.pack("<I", 0xFFFFFFFF)
    path.write_bytes(bytes(data))
    with WheelReader(path) as r, pytest.raises(WheelError, match=r"'lz/data.bin'.*LZMA dictionary of 4096 MiB"):
        r.read("lz/data.bin")


def test_the_lock_schema_names_every_field_of_the_lock() -> None:
    """A field added to the lock without its schema entry would make every new lock unreadable."""
    from dataclasses import fields

    from stackctl.resolve import lock as m

    for cls, schema in ((m.LockedFile, m._FILE_FIELDS), (m.LockedPin, m._PIN_FIELDS),
                        (m.ClosureEntry, m._CLOSURE_FIELDS), (m.TrainReport, m._TRAIN_FIELDS),
                        (m.Lock, m._LOCK_FIELDS)):
        assert {f.name for f in fields(cls)} == set(schema), cls.__name__


def test_checking_the_hashes_leaves_the_lock_digest_and_its_evidence_alone() -> None:
    """`resolve --verify` marks files sha256_verified and rewrites the lock; the ABI, build and publication
    records of that lock must stay current: no pin, file or hash changed."""
    import dataclasses

    lock = loads(lock_text(), "x.lock")
    verified = dataclasses.replace(lock, pins=tuple(
        dataclasses.replace(p, files=tuple(dataclasses.replace(f, sha256_verified=True) for f in p.files))
        for p in lock.pins))
    assert verified != lock and verified.digest() == lock.digest()
    other = dataclasses.replace(lock, pins=tuple(
        dataclasses.replace(p, files=tuple(dataclasses.replace(f, sha256="cd" * 32) for f in p.files))
        for p in lock.pins))
    assert other.digest() != lock.digest()


def test_a_pylock_file_nested_a_thousand_deep_is_refused_not_a_traceback() -> None:
    """tomllib parses nested arrays by recursion: `check --format pylock` on such a file says so (exit 2)."""
    from stackctl.resolve.check import pylock_packages

    with pytest.raises(InputError, match=r"^locks/pylock.x.toml:1: arrays or inline tables nested more than 64 "
                                         r"deep$"):
        pylock_packages("a = " + "[" * 5000, "locks/pylock.x.toml")
    with pytest.raises(InputError, match=r"^locks/pylock.x.toml: "):
        pylock_packages('lock-version = "1.0"\n', "locks/pylock.x.toml")  # no created-by, no packages


def test_a_lock_upload_time_that_is_no_time_is_refused_by_the_pylock_export() -> None:
    """The lock's reader takes any string as an upload time; PEP 751 takes a time: said, not a ValueError."""
    from stackctl.profile.loader import load_stack
    from stackctl.resolve.lock import Lock, LockedFile, LockedPin
    from stackctl.resolve.pylock import render_pylocks
    from tests.conftest import STACKS

    stack = load_stack(STACKS / "public-example.toml")
    pins = tuple(LockedPin(p.name, p.version, "public", (LockedFile(
        "cp311-linux_x86_64", f"{p.name}-{p.version}-py3-none-any.whl", f"https://i.invalid/{p.name}.whl", SHA,
        upload_time="yesterday"),)) for p in stack.pins)
    with pytest.raises(InputError, match=r"upload_time of pycparser-2.22-py3-none-any.whl, 'yesterday', is not an"):
        render_pylocks(stack, Lock(stack.name, stack.digest(), pins), {"public": "https://i.invalid/simple/"})


def test_a_locked_requirement_whose_bound_no_version_reader_takes_holds_nothing_back() -> None:
    """`outdated --from-lock` asks each locked Requires-Dist whether it allows a newer version: a bound of over
    4,300 digits (found by fuzzing the lock) is no bound it can read, never a ValueError."""
    from stackctl.resolve.lock import LockedFile, LockedPin
    from stackctl.resolve.run import held_by

    lock = loads(lock_text(), "x.lock")
    f = LockedFile("cp310-linux_x86_64", WHEEL, "https://i.invalid/" + WHEEL, SHA,
                   requires_dist=("numpy>=" + "9" * 5001, "click<2"))
    lock = dataclasses.replace(lock, pins=(LockedPin("torch", "1.0", "musa", (f,)),))
    assert held_by(lock, "numpy", "2.0") is None
    assert held_by(lock, "click", "2.1") == "torch==1.0"


@pytest.mark.parametrize(("name", "why"), [
    ("x" * 5000, "File name too long"),
    ("a\\u0000b", "embedded null byte"),
])
def test_a_plan_naming_a_file_no_system_can_look_up_is_a_problem_of_the_plan(tmp_path: Path, name: str,
                                                                              why: str) -> None:
    """`exists()` raised OSError on a name over 255 bytes (found by the fuzz campaign) and called a name with a
    NUL missing: each is a problem of the plan, saying why."""
    from stackctl.ab import load_plan
    from stackctl.errors import ProfileError

    plan = tmp_path / "plan.toml"
    plan.write_text(f'[plan]\nfiles = ["{name}"]\n\n[[trial]]\nname = "t"\nkind = "tests"\ncommand = ["true"]\n',
                    encoding="utf-8")
    with pytest.raises(ProfileError) as caught:
        load_plan(plan)
    [problem] = caught.value.problems
    assert (problem.line, problem.key) == (2, "plan.files.0") and why in problem.message, problem
