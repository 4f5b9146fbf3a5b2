"""Every index fault the resolver must survive: one line naming index, subject and cause; the exit code."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.conftest import Result
from tests.support.cli import Cli
from tests.support.index_server import (
    TORCH,
    IndexServer,
    body,
    free_port,
    hang,
    musa_profile,
    populate_musa,
    redirect,
    self_signed,
    status,
)
from tests.support.resolve_fixtures import isolated, musa_index, profile_path, public_index  # noqa: F401

TORCH_PAGE = "/simple/torch/"


def run(cli: Cli, profile: Path, musa_url: str, public: IndexServer, *extra: str) -> Result:
    return cli("resolve", str(profile), "--index", f"musa={musa_url}", "--index", f"public={public.url}",
               "--no-closure", "--retries", "2", *extra)


def error_line(r: Result) -> str:
    """The first problem (an index that fails fails every project on it: one line each)."""
    lines = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert lines, r.err
    return lines[0]


def test_project_404_is_a_failed_check(cli: Cli, tmp_path: Path, musa: IndexServer, public: IndexServer) -> None:
    profile = musa_profile(tmp_path / "s", extra='\n[pins.nosuch]\nversion = "1.0"\nindex = "musa"\n')
    r = run(cli, profile, musa.url, public)
    assert r.code == 1
    assert error_line(r).startswith("error: index musa, project nosuch: not found (HTTP 404 from ")


def test_pin_missing_for_a_target(cli: Cli, tmp_path: Path, musa: IndexServer, public: IndexServer) -> None:
    profile = musa_profile(tmp_path / "s")
    profile.write_text(profile.read_text().replace('platforms = ["linux_x86_64"]',
                                                   'platforms = ["linux_x86_64", "linux_aarch64"]'))
    lock = profile.with_suffix(".lock")
    lock.write_text("previous lock\n")
    r = run(cli, profile, musa.url, public, "--json")
    assert r.code == 1
    errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    # every pin and target that failed, not the first one and a count
    assert len(errors) == 10, r.err
    for pin in ("torch", "torch_musa", "torchvision", "torchaudio", "deep_ep"):
        for py in ("cp310", "cp312"):
            assert sum(f"pin {pin} " in e and f"no wheel for {py}-linux_aarch64 on index musa" in e
                       for e in errors) == 1
    doc = json.loads(r.out)
    assert doc["exit_code"] == 1 and len(doc["problems"]) == 10
    assert {p["exit_code"] for p in doc["problems"]} == {1}
    assert lock.read_text() == "previous lock\n"


def test_every_problem_exits_with_the_most_severe_code(cli: Cli, tmp_path: Path, musa: IndexServer,
                                                        public: IndexServer) -> None:
    """A missing project (1) and a failing page (3) in one run: both reported, exit 3."""
    profile = musa_profile(tmp_path / "s", extra='\n[pins.nosuch]\nversion = "1.0"\nindex = "musa"\n')
    musa.fault(TORCH_PAGE, *[status(503)] * 10)
    r = cli("outdated", str(profile), "--index", f"musa={musa.url}", "--index", f"public={public.url}",
            "--retries", "0", "--markdown")
    assert r.code == 3
    errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 2 and "HTTP 503" in errors[0] and "project nosuch: not found" in errors[1]
    assert r.out.startswith("**2 problems** (exit 3)")


def test_5xx_then_success(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    musa.fault(TORCH_PAGE, status(503), status(502))
    r = run(cli, profile, musa.url, public, "--json")
    assert r.code == 0, r.err
    assert len(musa.requests_to(f"^{TORCH_PAGE}$")) == 3


def test_5xx_forever(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    musa.fault(TORCH_PAGE, *[status(503)] * 10)
    r = run(cli, profile, musa.url, public, "--json")
    assert r.code == 3
    assert error_line(r) == f"error: index musa, project torch: HTTP 503 from {musa.url}torch/ after 3 attempts"
    assert json.loads(r.out) == {"error": error_line(r).removeprefix("error: "), "exit_code": 3}


def test_connection_refused(cli: Cli, profile: Path, public: IndexServer) -> None:
    r = run(cli, profile, f"http://127.0.0.1:{free_port()}/simple/", public)
    assert r.code == 3
    line = error_line(r)
    assert line.startswith("error: index musa: connection refused") and "(5 requests failed alike" in line
    assert "after 3 attempts" in line


def test_hanging_server_times_out(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    musa.fault(TORCH_PAGE, hang(3))
    r = run(cli, profile, musa.url, public, "--timeout", "0.5", "--retries", "0")
    assert r.code == 3
    assert error_line(r) == f"error: index musa, project torch: no answer within 0.5s from {musa.url}torch/"


@pytest.mark.parametrize(("page", "cause"), [
    (f'<a href="javascript:alert(1)">torch-{TORCH}-cp310-cp310-linux_x86_64.whl</a>', "scheme 'javascript'"),
    (f'<a href="../../files/evil.whl#sha256={"a" * 64}">torch-{TORCH}-cp310-cp310-linux_x86_64.whl</a>',
     "points at a different file ('evil.whl')"),
    (f'<a href="../../files/torch-{TORCH}-cp310-cp310-linux_x86_64.whl#sha256=nothex">torch-{TORCH}-cp310-cp310-'
     'linux_x86_64.whl</a>', "is not 64 hex digits"),
])
def test_hostile_or_malformed_html(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer, page: str,
                                   cause: str) -> None:
    server = IndexServer(html_only=True)
    populate_musa(server, tmp_path / "w2")
    with server:
        server.fault(TORCH_PAGE, body(f"<html><body>{page}".encode(), "text/html"))
        r = run(cli, profile, server.url, public)
    assert r.code == 3
    line = error_line(r)
    assert line.startswith("error: index musa, project torch: ") and cause in line


def test_html_junk_links_are_ignored(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer) -> None:
    server = IndexServer(html_only=True)
    populate_musa(server, tmp_path / "w3")
    with server:
        server.fault(TORCH_PAGE, body(b'<a href="../etc/passwd">../../etc/passwd</a><a>no href</a>', "text/html"))
        r = run(cli, profile, server.url, public)
    assert r.code == 1  # nothing usable on the page: the pin is missing, which is a failed check
    assert "pin torch 2.11.0.post2+musa5.2.0: not on index musa" in error_line(r)


@pytest.mark.parametrize("payload", [
    b'{"meta": {"api-version": "1.1"}, "name": "torch", "files": "nope"}',
    b'{"meta": {"api-version": "1.1"}, "name": "torch", "files": [{"filename": "x.whl"}]}',
    b"{not json",
])
def test_json_not_pep691(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer, payload: bytes) -> None:
    musa.fault(TORCH_PAGE, body(payload, "application/vnd.pypi.simple.v1+json"))
    r = run(cli, profile, musa.url, public)
    assert r.code == 3
    assert error_line(r).startswith("error: index musa, project torch: JSON does not match PEP 691 (")


def test_metadata_file_that_does_not_match_its_digest(cli: Cli, profile: Path, musa: IndexServer,
                                                     public: IndexServer) -> None:
    name = f"torch-{TORCH}-cp310-cp310-linux_x86_64.whl"
    musa.fault(f"/files/{name}.metadata", body(b"Metadata-Version: 2.1\nName: torch\nVersion: 0\n",
                                               "application/octet-stream"))
    r = run(cli, profile, musa.url, public)
    assert r.code == 3
    line = error_line(r)
    assert line.startswith(f"error: index musa, file {name}.metadata: sha256 ")
    assert f"does not match the index's {hashlib.sha256(musa.files[name].core_metadata).hexdigest()}" in line
    assert not profile.with_suffix(".lock").exists()


def test_listed_metadata_file_that_is_missing(cli: Cli, profile: Path, musa: IndexServer,
                                              public: IndexServer) -> None:
    """A 404 for a file the page lists is the index failing (exit 3), not a missing pin (exit 1)."""
    name = f"torch-{TORCH}-cp312-cp312-manylinux_2_28_x86_64.whl"
    musa.fault(f"/files/{name}.metadata", status(404))
    r = run(cli, profile, musa.url, public)
    assert r.code == 3
    assert error_line(r) == (f"error: index musa, file {name}.metadata: listed on the project page, but HTTP 404 "
                             f"from {musa.base}files/{name}.metadata")


def test_wheel_that_does_not_match_the_index_sha256(cli: Cli, tmp_path: Path, profile: Path,
                                                   public: IndexServer) -> None:
    """No metadata file and no range requests: the wheel is downloaded, and its sha256 must be the index's."""
    server = IndexServer(ranges=False)
    populate_musa(server, tmp_path / "nr")
    name = f"torchaudio-{TORCH}-cp310-cp310-linux_x86_64.whl"
    real = server.files[name].sha256
    server.files[name].sha256 = "0" * 64  # the page now lies about the file
    with server:
        r = run(cli, profile, server.url, public)
    assert r.code == 3
    assert error_line(r) == (f"error: index musa, file {name}: downloaded sha256 {real} does not match the "
                             f"index's {'0' * 64}")
    assert not profile.with_suffix(".lock").exists()


def test_html_only_index_without_head(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer) -> None:
    """HEAD refused (405): the upload time stays unknown (said so in the lock), Requires-Dist comes from the
    wheel itself (range requests need no HEAD), and the run succeeds."""
    server = IndexServer(html_only=True, head=False)
    populate_musa(server, tmp_path / "nh")
    torch = f"torch-{TORCH}-cp310-cp310-linux_x86_64.whl"
    audio = f"torchaudio-{TORCH}-cp310-cp310-linux_x86_64.whl"  # no metadata file
    with server:
        r = run(cli, profile, server.url, public, "--json")
        log = list(server.log)
    assert r.code == 0, r.err
    files = {(f["filename"]): f for f in json.loads(r.out)["files"]}
    assert files[torch]["upload_time"] is None and files[torch]["upload_time_source"] == "none"
    assert files[audio]["requires_dist"] == [f"torch=={TORCH}"]
    assert ("HEAD", f"/files/{torch}") in [(m, p) for m, p, h in log]  # asked, and refused
    assert all(h.get("Range") for m, p, h in log if p == f"/files/{audio}" and m == "GET")  # never whole
    warnings = json.loads(r.out)["warnings"]
    assert "train musa-torch: torch has no known upload time; whether it trails is unchecked" in warnings
    # a server without HEAD at all: one line for its files, not one per file
    [head] = [w for w in warnings if "HEAD" in w]
    assert head.startswith("index musa: HEAD of ") and " files answered HTTP " in head
    assert "; upload time unknown (" in head and head.endswith(", ...)")


@pytest.mark.parametrize("ranges", [True, False])
def test_wheel_that_is_not_a_zip(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer, ranges: bool) -> None:
    """The index serves, under the sha256 it lists, bytes that are no wheel: one line, exit 3."""
    server = IndexServer(ranges=ranges)
    populate_musa(server, tmp_path / "nz")
    name = f"torchaudio-{TORCH}-cp312-cp312-manylinux_2_28_x86_64.whl"  # no metadata file
    junk = tmp_path / "junk" / name
    junk.parent.mkdir()
    junk.write_bytes(b"<html>maintenance</html>" * 100)
    entry = server.files[name]
    entry.path, entry.sha256, entry.size = junk, hashlib.sha256(junk.read_bytes()).hexdigest(), 2400
    with server:
        r = run(cli, profile, server.url, public)
    assert r.code == 3
    assert error_line(r).startswith(f"error: index musa, file {name}: not a readable wheel (")
    assert "Traceback" not in r.err


def test_redirect_to_another_host_drops_credentials(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSA_TEST_USER", "builder")
    monkeypatch.setenv("MUSA_TEST_PASSWORD", "s3cret-token")
    private = IndexServer(auth=("builder", "s3cret-token"))
    mirror = IndexServer()
    populate_musa(private, tmp_path / "wp")
    populate_musa(mirror, tmp_path / "wm")
    with private, mirror:
        private.fault(TORCH_PAGE, redirect(f"{mirror.url}torch/"))
        r = run(cli, profile, private.url, public, "--json")
        lock = profile.with_suffix(".lock").read_text()
    assert r.code == 0, r.err
    assert private.requests_to(f"^{TORCH_PAGE}$")[0][2].get("Authorization", "").startswith("Basic ")
    followed = mirror.requests_to(f"^{TORCH_PAGE}$")
    assert followed and all("Authorization" not in h for _, _, h in followed)
    assert not any("Authorization" in h for _, _, h in mirror.log)
    for text in (r.out, r.err, lock):
        assert "s3cret-token" not in text and "builder:" not in text


def test_tls_index_is_checked_against_the_machines_ca_bundle(cli: Cli, tmp_path: Path, profile: Path,
                                                            public: IndexServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind a TLS-inspecting proxy the CA exists only in the machine's bundle (REQUESTS_CA_BUNDLE, pip's
    `cert`): without it, one line naming the cause and no retries; with it, the index resolves."""
    cert, key = self_signed(tmp_path / "tls")
    server = IndexServer(tls=(cert, key))
    populate_musa(server, tmp_path / "wt")
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "no-pip.conf"))
    with server:
        r = run(cli, profile, server.url, public)
        assert r.code == 3
        line = error_line(r)
        assert line.startswith("error: index musa, project ") and f"TLS failed for {server.url}" in line
        assert "self-signed certificate" in line and "attempts" not in line  # a certificate is not retried
        monkeypatch.setenv("PIP_CERT", str(cert))
        ok = run(cli, profile, server.url, public, "--json")
        assert ok.code == 0, ok.err
        assert json.loads(ok.out)["files"][0]["url"].startswith(server.base)
        assert server.requests_to(f"^{TORCH_PAGE}$")
        # warm: every page revalidated over TLS by the standard library's client, checked against the same
        # bundle (the host name passed to the socket and the certificate check as ASCII bytes)
        import stackctl.index.client

        def no_requests(*args: object, **kwargs: object) -> None:
            raise AssertionError("a page that answered 304 went through requests")

        server.log.clear()
        monkeypatch.setattr(stackctl.index.client.IndexClient, "_send", no_requests)
        warm = run(cli, profile, server.url, public, "--json")
        assert warm.code == 0, warm.err
        assert json.loads(warm.out)["files"] == json.loads(ok.out)["files"]
        pages = server.requests_to(r"^/simple/[^/]+/$")
        assert pages and all("If-None-Match" in h for _, _, h in pages)


def test_interrupted_run_keeps_previous_lock(cli: Cli, profile: Path, musa: IndexServer,
                                             public: IndexServer) -> None:
    ok = run(cli, profile, musa.url, public)
    assert ok.code == 0, ok.err
    before = profile.with_suffix(".lock").read_bytes()
    musa.fault("/simple/deep-ep/", *[status(500)] * 10)
    profile.write_text(profile.read_text().replace('version = "1.26.4"', 'version = "2.0.0"'))
    r = run(cli, profile, musa.url, public, "--no-cache")
    assert r.code == 3
    assert error_line(r) == f"error: index musa, project deep-ep: HTTP 500 from {musa.url}deep-ep/ after 3 attempts"
    assert profile.with_suffix(".lock").read_bytes() == before
    assert not list(profile.parent.glob(".*.tmp"))


def test_closure_without_a_solution(cli: Cli, tmp_path: Path, musa: IndexServer, public: IndexServer) -> None:
    """uv finds no closure: a failed check naming the target and uv's reason; the lock is not written."""
    from tests.support.wheels import build_wheel

    musa.add(build_wheel(tmp_path / "extra", "musa_kernels", "1.0", requires_dist=["nosuchdep>=1"]))
    profile = musa_profile(tmp_path / "s", extra='\n[pins.musa_kernels]\nversion = "1.0"\nindex = "musa"\n')
    r = cli("resolve", str(profile), "--index", f"musa={musa.url}", "--index", f"public={public.url}")
    assert r.code == 1, r.err
    line = error_line(r)
    assert line.startswith("error: closure for cp310-linux_x86_64: uv pip compile failed: ")
    assert "nosuchdep" in line, line
    assert not profile.with_suffix(".lock").exists()


def test_bad_index_option(cli: Cli, profile: Path) -> None:
    r = cli("resolve", str(profile), "--index", "nosuch=http://127.0.0.1:9/simple/")
    assert r.code == 2
    assert error_line(r) == "error: --index nosuch: musa-stack has no index of that name (it has musa, public)"
    r = cli("resolve", str(profile), "--index", "musa")
    assert r.code == 2 and "expected NAME=URL" in error_line(r)


def test_unwritable_lock_and_bad_options(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer,
                                         public: IndexServer) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the lock's directory should be\n")
    r = run(cli, profile, musa.url, public, "--lock", str(blocker / "x.lock"))
    assert r.code == 2
    assert error_line(r).startswith(f"error: {blocker / 'x.lock'}: cannot write the lock (")
    assert "Traceback" not in r.err and blocker.read_text().startswith("a file")
    r = run(cli, profile, musa.url, public, "--train-window", "-1")
    assert r.code == 2 and error_line(r) == "error: --train-window -1: seconds must be 0 or more"
    (tmp_path / "dir.lock").mkdir()
    r = cli("lock", str(profile), "--check", "--lock", str(tmp_path / "dir.lock"))
    assert r.code == 2 and error_line(r).startswith(f"error: {tmp_path / 'dir.lock'}: cannot read the lock (")


def test_sigint_mid_run_keeps_previous_lock(tmp_path: Path, profile: Path, musa: IndexServer,
                                            public: IndexServer) -> None:
    """A real interrupt (Ctrl-C) while the index hangs: the lock on disk is the previous one."""
    import os
    import signal
    import subprocess
    import sys
    import time

    lock = profile.with_suffix(".lock")
    lock.write_text("previous lock\n")
    musa.fault(TORCH_PAGE, hang(600))  # far longer than any wait below: an exit proves Ctrl-C did not wait
    env = {**os.environ, "STACKCTL_CACHE_DIR": str(tmp_path / "c")}
    proc = subprocess.Popen([sys.executable, "-m", "stackctl", "resolve", str(profile), "--no-closure",
                             "--index", f"musa={musa.url}", "--index", f"public={public.url}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 60
        while not musa.requests_to(f"^{TORCH_PAGE}$") and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert musa.requests_to(f"^{TORCH_PAGE}$"), "the run never reached the hanging page"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert lock.read_text() == "previous lock\n"
    assert not list(lock.parent.glob(".*.tmp"))


@pytest.mark.parametrize("code", [405, 501, 403, 404])
def test_head_refused_leaves_the_upload_time_unknown_and_takes_the_size_from_get(
        cli: Cli, tmp_path: Path, profile: Path, public: IndexServer, code: int) -> None:
    """A server that refuses HEAD, however it says so: never fatal; the size still comes from a GET's
    Content-Length (its body is not read), the upload time is unknown and a warning says why."""
    server = IndexServer(html_only=True)
    populate_musa(server, tmp_path / "hr")
    torch = f"torch-{TORCH}-cp310-cp310-linux_x86_64.whl"
    with server:
        server.fault(f"/files/{torch}", status(code))
        r = run(cli, profile, server.url, public, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    files = {f["filename"]: f for f in doc["files"]}
    assert files[torch]["upload_time"] is None and files[torch]["upload_time_source"] == "none"
    assert files[torch]["size"] == server.files[torch].size
    assert f"index musa: {torch}: HEAD answered HTTP {code}; upload time unknown" in doc["warnings"]
    # every other file of an HTML-only index has its size from Content-Length and its time from Last-Modified
    others = [f for name, f in files.items() if name != torch and f["index"] == "musa"]
    assert all(f["size"] == server.files[f["filename"]].size for f in others)
    assert all(f["upload_time_source"] == "last-modified" for f in others)


def test_host_that_does_not_resolve_is_said_as_such(cli: Cli, profile: Path, public: IndexServer) -> None:
    r = run(cli, profile, "http://no-such-host.invalid/simple/", public)
    assert r.code == 3
    assert error_line(r) == ("error: index musa: cannot resolve host no-such-host.invalid at "
                             "http://no-such-host.invalid/simple/ (5 requests failed alike, the first for project "
                             "torch)")


def test_redirect_to_another_host_that_ends_in_404_names_the_redirect(
        cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    """Not "project not found": the index sent us elsewhere, and that host had nothing (exit 3)."""
    other = IndexServer()
    with other:
        musa.fault(TORCH_PAGE, redirect(f"{other.url}torch/"))
        r = run(cli, profile, musa.url, public)
        other_url = other.url
    assert r.code == 3
    assert error_line(r) == (f"error: index musa, project torch (redirected from {musa.url}torch/ to another "
                             f"host, sent without credentials): HTTP 404 from {other_url}torch/")


def test_resolve_verify_checks_every_locked_file(cli: Cli, profile: Path, musa: IndexServer,
                                                 public: IndexServer) -> None:
    """Without --verify the lock says whose word each sha256 is; with it every file is downloaded and
    checked, concurrently, and a lie is exit 3 with the previous lock kept byte for byte."""
    r = run(cli, profile, musa.url, public, "--json")
    assert r.code == 0, r.err
    lock_path = profile.with_suffix(".lock")
    first = json.loads(lock_path.read_text())
    assert not any(f["sha256_verified"] for p in first["pins"] for f in p["files"])
    v = run(cli, profile, musa.url, public, "--json", "--verify")
    assert v.code == 0, v.err
    assert all(f["sha256_verified"] for f in json.loads(v.out)["files"])
    human = run(cli, profile, musa.url, public, "--verify")
    assert human.code == 0 and re.search(r"^sha256: (\d+) of \1 files downloaded whole and checked by stackctl$",
                                         human.out, re.M), human.out
    good = lock_path.read_bytes()
    assert all(f["sha256_verified"] for p in json.loads(good)["pins"] for f in p["files"])
    name = "deep_ep-1.1.0+musa5.2.0torch2.11.0.post2-cp310-cp310-linux_x86_64.whl"
    real = musa.files[name].sha256
    musa.files[name].sha256 = "0" * 64  # the page now lies about one file
    bad = run(cli, profile, musa.url, public, "--verify", "--no-cache")
    assert bad.code == 3
    assert f"file {name}: downloaded sha256 {real} does not match the index's {'0' * 64}" in bad.err
    assert lock_path.read_bytes() == good


def test_resolve_without_pip_reads_pips_configuration(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer,
                                                      public: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip is not a dependency (a tool that makes environments without it installs stackctl too): the public
    index comes from pip's configuration all the same, and with none configured and no pip to ask for its
    default, one line says what to do."""
    import os
    import sys

    monkeypatch.setitem(sys.modules, "pip", None)  # `import pip` raises ImportError in this process
    blocker = tmp_path / "no-pip"
    (blocker / "pip").mkdir(parents=True)
    (blocker / "pip" / "__init__.py").write_text('raise ImportError("no pip in this environment")\n')
    monkeypatch.setenv("PYTHONPATH", str(blocker))  # and in any process it starts (`python -m pip` fails)
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = {public.url}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    r = cli("resolve", str(profile), "--index", f"musa={musa.url}", "--no-closure", "--json")
    assert r.code == 0, r.err
    files = json.loads(r.out)["files"]
    assert any(f["index"] == "public" and f["url"].startswith(public.base) for f in files)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip reads no configuration file at all
    r = cli("resolve", str(profile), "--index", f"musa={musa.url}", "--no-closure")
    assert r.code == 2 and "Traceback" not in r.err
    assert [ln for ln in r.err.splitlines() if ln.strip()] == [
        "error: indexes.public: from_pip = true, but no pip here names an index (no index-url configured, no pip "
        "to ask); pass --index public=URL or set PIP_INDEX_URL"]


def test_with_nothing_configured_the_index_is_pips_default_as_pip_states_it(tmp_path: Path) -> None:
    """pip's default index is pip's to know: asked of `pip install --help` once, then kept beside the cache."""
    from stackctl.index.cache import default_cache_dir
    from stackctl.index.pipconf import pip_default_index

    url = pip_default_index()
    assert url is not None and url.startswith("https://") and "@" not in url
    kept = default_cache_dir().parent / "pip-default-index.json"
    assert json.loads(kept.read_text())["url"] == url
    kept.write_text(json.dumps({**json.loads(kept.read_text()), "url": "https://kept.invalid/simple"}))
    assert pip_default_index() == "https://kept.invalid/simple"  # not asked again


def test_an_answer_from_another_host_leaves_nothing_behind_in_the_client(tmp_path: Path) -> None:
    """Answers from the host a file redirected to, allowed ones (416 to a range read) too, leave no state
    in the client's module that a later answer could pick up (a stale redirect named in its error), and
    a plain 404 on the index itself is still that project's "not found"."""
    from stackctl.index import client as module
    from stackctl.index.client import ClientOptions, IndexClient, ProjectNotFound
    from stackctl.index.config import IndexEndpoint

    def held() -> int:
        return sum(len(v) for v in vars(module).values() if isinstance(v, dict | list | set))

    other = IndexServer()
    index = IndexServer()
    with other, index:
        other.fault("/files/big.whl", *[status(416)] * 20)
        index.fault("/files/big.whl", *[redirect(f"{other.base}files/big.whl")] * 20)
        client = IndexClient(ClientOptions(retries=0))
        ep = IndexEndpoint("idx", index.url)
        before = held()
        for _ in range(20):
            r = client.get(ep, f"{index.base}files/big.whl", "file big.whl", {"Range": "bytes=9999-"}, allow=(416,))
            assert r.status_code == 416
            r.close()
        assert held() == before
        with pytest.raises(ProjectNotFound) as caught:
            client.project(ep, "nosuch")
    assert "redirected" not in str(caught.value), caught.value


def test_with_nothing_configured_resolve_says_pips_built_in_default_and_keeps_it_in_the_cache_dir(
        cli: Cli, tmp_path: Path, musa: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    profile = musa_profile(tmp_path / "s")
    text = profile.read_text()
    profile.write_text(text[:text.index("[pins.numpy]")])  # nothing is asked of the public index
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    mine = tmp_path / "mine"
    r = cli("resolve", str(profile), "--index", f"musa={musa.url}", "--no-closure", "--cache-dir", str(mine), "--json")
    assert r.code == 0, r.err
    public = next(i for i in json.loads(r.out)["indexes"] if i["name"] == "public")
    assert public["source"] == "pip's built-in default" and public["url"].startswith("https://")
    assert json.loads((mine / "pip-default-index.json").read_text())["url"] == public["url"].rstrip("/")
    assert not (tmp_path / "cache" / "pip-default-index.json").exists()  # not beside the default cache
    r = cli("resolve", str(profile), "--index", f"musa={musa.url}", "--no-closure", "--cache-dir", str(mine))
    assert f"index public: {public['url']} (from pip's built-in default)" in r.out, r.out


def test_an_index_that_is_down_is_one_error_for_the_index_with_a_hint(cli: Cli, profile: Path,
                                                                      public: IndexServer) -> None:
    down = f"http://127.0.0.1:{free_port()}/simple/"
    r = run(cli, profile, down, public)
    assert r.code == 3
    said = [ln for ln in r.err.splitlines() if ln.startswith(("error:", "hint:"))]
    assert said == [
        f"error: index musa: connection refused: nothing listens there at {down} after 3 attempts (5 requests "
        "failed alike, the first for project torch)",
        "hint: is the server of index musa running on this machine? (the project's example index: `python "
        "examples/vendor_index.py serve`, as README.md shows); or point the index elsewhere with --index musa=URL"]
    j = run(cli, profile, down, public, "--json")
    assert json.loads(j.out)["exit_code"] == 3 and "5 requests failed alike" in json.loads(j.out)["error"]


def test_ctrl_c_is_an_error_line_that_names_the_phase(tmp_path: Path, profile: Path, musa: IndexServer,
                                                      public: IndexServer) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    musa.fault(TORCH_PAGE, hang(60))
    proc = subprocess.Popen([sys.executable, "-m", "stackctl", "resolve", str(profile), "--index", f"musa={musa.url}",
                             "--index", f"public={public.url}", "--no-closure", "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        deadline = time.monotonic() + 30
        while not any(r[1] != TORCH_PAGE for r in musa.log) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the other pages answered: their progress line is out
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    # the work it was in: `resolve` (its pages, when one of them has answered), not only the command
    assert err.strip().splitlines()[-1] in ("error: interrupted during resolve",
                                            "error: interrupted during resolve pages"), err
