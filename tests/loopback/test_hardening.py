"""Hostile input through the command line: one `error:` line per problem and exit 2 (a file) or 3 (an index),
a JSON error object under --json, nothing written outside the directory a command was given, a hanging
index that fails in --timeout, and Ctrl-C that ends every process stackctl started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Result
from tests.support.cli import Cli
from tests.support.index_server import IndexServer, hang, musa_profile
from tests.support.resolve_fixtures import isolated, musa_index, profile_path, public_index  # noqa: F401

HEAD = '[stack]\nname = "s"\n[targets]\npython = ["3.10"]\nplatforms = ["linux_x86_64"]\n' \
       '[indexes.pub]\nfrom_pip = true\n'


def profile(tmp_path: Path, body: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + body, encoding="utf-8")
    return path


def errors(r: Result) -> list[str]:
    assert "Traceback" not in r.err, r.err
    return [ln for ln in r.err.splitlines() if ln.startswith("error:")]


@pytest.mark.parametrize(("body", "problem"), [
    ('[gate]\nprobe = { name = "x" }\n', "gate.probe: must be an array of tables"),
    ('[pins.a]\nversion = "1.' + "9" * 5000 + '"\nindex = "pub"\n', "is not a PEP 440 version"),
    ("[pins.a]\nversion = 1" + "9" * 5000 + '\nindex = "pub"\n', "a number of 5001 digits; at most 4300"),
    ("[pins.a]\nversion" + ".a" * 19_999 + ' = "1.0"\n', "a key of 20000 parts; at most 64"),
    ('[pins.a]\nversion = "1.0"\nindex = "pub"\ngate = { order = 1, skip_import_if = "b<<2" }\n',
     "skip_import_if: not a requirement like"),
    ('[indexes.v]\nurl = "http://[::1/simple/"\n', "indexes.v.url: 'http://[::1/simple/' is not a valid URL"),
    ('[indexes.v]\nurl = "http://host:99999/simple/"\n', "is not a valid URL (Port out of range"),
    ("[stack.x]\ny = " + "[" * 2000 + "]" * 2000 + "\n", "nested more than 64 deep"),
    ('[pins.a]\nversion = "1.0"\nindex = "pub"\nfile = "a\\u0000b.txt"\n', "holds a control character or NUL"),
    ('[pins.a]\nversion = "1.0"\nindex = "pub"\nfile = "../x.txt"\n', "is not a single file name"),
    ('[pins.a]\nversion = "1.0"\nindex = "pub"\nfile = "/tmp/x.txt"\n', "is not a single file name"),
    ('[image]\nbase = "b"\nrepository = "r"\ntag = "{python:>999999999}"\n', "format specs and conversions"),
    ('[image]\nbase = "b"\nrepository = "r"\ntag = "{python.__class__}"\n', "no attribute or index access"),
], ids=lambda v: v[:40] + f"...{len(v)}" if len(v) > 60 else v)
def test_a_bad_profile_is_one_line_per_problem_and_exit_2(cli: Cli, tmp_path: Path, body: str,
                                                           problem: str) -> None:
    path = profile(tmp_path, body)
    start = time.monotonic()
    r = cli("validate", str(path), "--json")
    assert time.monotonic() - start < 10
    assert r.code == 2, r.err
    lines = errors(r)
    assert len(lines) == 1 and problem in lines[0], r.err
    doc = json.loads(r.out)
    assert doc["exit_code"] == 2 and problem in doc["problems"][0]


def test_extends_names_a_profile_of_the_same_directory(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "outside.toml").write_text(HEAD, encoding="utf-8")
    (tmp_path / "stacks").mkdir()
    path = tmp_path / "stacks" / "child.toml"
    path.write_text('[stack]\nname = "c"\nextends = "../outside"\n', encoding="utf-8")
    r = cli("validate", str(path))
    assert r.code == 2 and "stack.extends: names a profile of this directory, not a path" in errors(r)[0]


def test_diff_of_a_release_written_two_ways(cli: Cli, tmp_path: Path) -> None:
    pin = '[pins.numpy]\nversion = "{}"\nindex = "pub"\n'
    a, b = profile(tmp_path, pin.format("2.2"), "a.toml"), profile(tmp_path, pin.format("2.2.0"), "b.toml")
    r = cli("diff", str(a), str(b), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["pins"][0]["note"] == "respelled"


def test_export_check_reads_a_requirement_file_that_is_not_utf8_as_drift(cli: Cli, tmp_path: Path) -> None:
    path = profile(tmp_path, '[pins.numpy]\nversion = "2.2.0"\nindex = "pub"\nfile = "req.txt"\n')
    out = tmp_path / "out"
    out.mkdir()
    (out / "req.txt").write_bytes(b"\xff\xfe numpy\n")
    r = cli("export", str(path), "--out", str(out), "--check", "--json")
    assert r.code == 1 and json.loads(r.out)["drift"][0]["file"] == "req.txt", r.err
    r = cli("check", str(path), "--requirements", str(out), "--json")
    assert "Traceback" not in r.err and r.code in (1, 2), r.err


LOCKED = ('[pins.numpy]\nversion = "2.2.0"\nindex = "pub"\nfile = "req.txt"\n'
          '[image]\nbase = "b:1"\nrepository = "r"\ntag = "t"\n')


def write_lock(tmp_path: Path, stack_path: Path, filename: str, name: object = "numpy") -> Path:
    from stackctl.profile.loader import load_stack

    stack = load_stack(stack_path)
    f = {"target": "cp310-linux_x86_64", "filename": filename, "url": "http://127.0.0.1:9/" + "x.whl",
         "sha256": "ab" * 32}
    doc = {"format": 1, "stack": stack.name, "profile_digest": stack.digest(),
           "pins": [{"name": name, "version": "2.2.0", "index": "pub", "files": [f]}]}
    path = stack_path.with_suffix(".lock")
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize("filename", ["../escape.whl", "/tmp/escape.whl", "sub/../../escape.whl"])
def test_no_command_follows_a_lock_file_name_out_of_its_directory(cli: Cli, tmp_path: Path,
                                                                  filename: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    stack_path = profile(work, LOCKED)
    lock = write_lock(tmp_path, stack_path, filename)
    (work / "wh").mkdir()  # an existing wheelhouse: what render refuses is the lock's file name
    runs = {
        "fetch": cli("fetch", str(stack_path), "--target", "cp310-linux_x86_64", "--dest", str(work / "wh"),
                     "--lock", str(lock), "--json"),
        "render": cli("render", str(stack_path), "--out", str(work / "ctx"), "--wheelhouse", str(work / "wh"),
                      "--lock", str(lock), "--json"),
        "export": cli("export", str(stack_path), "--out", str(work / "req"), "--lock", str(lock), "--json"),
    }
    for command, r in runs.items():
        assert r.code == 2, (command, r.err)
        lines = errors(r)
        assert len(lines) == 1 and "is not a single file name" in lines[0], (command, r.err)
        assert json.loads(r.out)["exit_code"] == 2
    assert not (tmp_path / "escape.whl").exists() and not Path("/tmp/escape.whl").exists()


def test_a_number_where_a_lock_has_a_name_is_an_input_error(cli: Cli, tmp_path: Path) -> None:
    stack_path = profile(tmp_path, LOCKED)
    lock = write_lock(tmp_path, stack_path, "numpy-2.2.0-py3-none-any.whl", name=7)
    for args in (("diff", str(lock), str(lock)), ("export", str(stack_path), "--out", str(tmp_path / "o"),
                                                   "--lock", str(lock))):
        r = cli(*args, "--json")
        assert r.code == 2, r.err
        assert errors(r) == [f"error: {lock}: not a stackctl lock (lock.pins[0].name: '7' is not a "
                             "distribution name)"]


@pytest.mark.parametrize(("url", "why"), [
    ("http://[::1/x.whl", "is not a URL"), ("http://127.0.0.1:99999/x.whl", "is not a URL"),
    ("file:///etc/passwd", "is not an http(s) URL"), ("x.whl", "is not an http(s) URL"),
    ("http://user:s3cret@127.0.0.1:9/x.whl", "credentials"),
])
def test_a_lock_file_url_must_be_an_http_url(cli: Cli, tmp_path: Path, url: str, why: str) -> None:
    """A lock comes from a pull request under review: every command refuses a URL it must not or cannot fetch,
    naming the entry."""
    stack_path = profile(tmp_path, LOCKED)
    lock = write_lock(tmp_path, stack_path, "numpy-2.2.0-py3-none-any.whl")
    lock.write_text(lock.read_text().replace("http://127.0.0.1:9/x.whl", url))
    (tmp_path / "wh").mkdir()
    for args in (("render", str(stack_path), "--out", str(tmp_path / "ctx"), "--wheelhouse", str(tmp_path / "wh")),
                 ("fetch", str(stack_path), "--target", "cp310-linux_x86_64", "--dest", str(tmp_path / "wh")),
                 ("abi", str(stack_path))):
        r = cli(*args, "--lock", str(lock), "--json")
        assert r.code == 2, (args[0], r.err)
        [line] = errors(r)
        assert "lock.pins[0].files[0].url" in line and why in line, (args[0], line)
        assert "s3cret" not in r.err + r.out


def test_a_hanging_index_fails_within_the_timeout_retries_included(
        cli: Cli, tmp_path: Path, musa: IndexServer, public: IndexServer) -> None:
    path = musa_profile(tmp_path / "s")
    musa.fault("/simple/torch/", *[hang(30)] * 5)
    start = time.monotonic()
    r = cli("resolve", str(path), "--index", f"musa={musa.url}", "--index", f"public={public.url}",
            "--no-closure", "--timeout", "2", "--retries", "3", "--json")
    took = time.monotonic() - start
    assert r.code == 3, r.err
    assert "index musa, project torch: no answer within" in errors(r)[0]
    assert took < 4, f"took {took:.1f}s: the timeout bounds the request, not each of its 4 attempts"


def test_ctrl_c_ends_the_child_stackctl_started_and_says_interrupted(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 600\n")
    fake.chmod(0o755)
    path = profile(tmp_path, "")
    proc = subprocess.Popen([sys.executable, "-m", "stackctl", "gate", str(path), "--python", str(fake)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.02)
        child = int(pidfile.read_text())
        proc.send_signal(signal.SIGINT)  # to stackctl alone, not to its process group
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "error: interrupted during stackctl gate"
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child), "the gate's interpreter outlived stackctl"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
