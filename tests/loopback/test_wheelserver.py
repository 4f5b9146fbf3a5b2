"""The build's wheel server on loopback: what uv in an install stage sees through `http_proxy`, and what it refuses."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from stackctl.base.files import sha256_file
from stackctl.engine.wheelserver import WheelServer
from stackctl.image.build import BuildRequest, build_image
from stackctl.image.buildlog import BuildFailed, BuildResult, ImageFacts
from stackctl.image.order import BuildOrder
from stackctl.image.prepare import prepare_build
from stackctl.image.render import WHEEL_HOST
from stackctl.resolve.closure import uv_binary
from stackctl.resolve.lock import read_lock
from tests.support.imagestack import make_stack_repo
from tests.support.wheels import build_wheel


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[WheelServer, Path]]:
    groups = tmp_path / "ctx" / "groups"
    wheel = build_wheel(groups / "pin-toplib", "toplib", "0.3.0",
                        files={"toplib/__init__.py": "__version__ = '0.3.0'\n"})
    build_wheel(groups / "pin-toplib", "other", "1.0")  # in the directory, not in the lock
    (groups / "pin-toplib" / "requirements.txt").write_text("not served\n")
    (tmp_path / "ctx" / "secret.txt").write_text("outside the groups\n")
    with WheelServer(groups, "127.0.0.1", {f"pin-toplib/{wheel.name}": sha256_file(wheel)}) as server:
        yield server, groups


def proxied(proxy: str, method: str, url: str, password: str | None = None) -> tuple[int, bytes]:
    """One request as a client configured with `http_proxy` sends it: the whole URL on the request line, the
    proxy's user:password as Proxy-Authorization (`password` stands in for the proxy's own)."""
    parts = urlsplit(proxy)
    user = f"{parts.username}:{parts.password if password is None else password}"
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=10)
    try:
        conn.request(method, url, headers={"Proxy-Authorization": "Basic " + b64encode(user.encode()).decode()})
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def install(server: WheelServer, requirements: Path, target: Path) -> subprocess.CompletedProcess[str]:
    """uv as the install stage runs it (no --offline: the wheels come over HTTP, through the proxy)."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["http_proxy"] = server.proxy
    return subprocess.run(
        [uv_binary(), "pip", "install", "--no-index", "--find-links", f"http://{WHEEL_HOST}/groups/pin-toplib/",
         "--require-hashes", "--no-deps", "--no-config", "--no-cache", "--python", sys.executable,
         "--target", str(target), "-r", str(requirements)],
        capture_output=True, text=True, env=env, timeout=120, check=False)


def test_uv_installs_a_group_through_the_proxy_and_checks_every_hash(served: tuple[WheelServer, Path],
                                                                     tmp_path: Path) -> None:
    server, groups = served
    wheel = next((groups / "pin-toplib").glob("toplib-*.whl"))
    req = tmp_path / "requirements.txt"
    req.write_text(f"toplib==0.3.0 --hash=sha256:{sha256_file(wheel)}\n")
    done = install(server, req, tmp_path / "t")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "t" / "toplib" / "__init__.py").read_text() == "__version__ = '0.3.0'\n"
    assert server.requests >= 2  # the group's page, then its wheel

    # a wheel whose bytes are not the lock's: uv refuses it, as it would from the context
    req.write_text(f"toplib==0.3.0 --hash=sha256:{'0' * 64}\n")
    bad = install(server, req, tmp_path / "u")
    assert bad.returncode != 0 and "hash" in bad.stderr.lower()
    assert not (tmp_path / "u" / "toplib").exists()
    assert server.refused == []  # the server's bytes were the lock's; the requirement lied


def test_a_wheel_that_is_not_the_locks_never_leaves_the_server(served: tuple[WheelServer, Path],
                                                              tmp_path: Path) -> None:
    server, groups = served
    wheel = next((groups / "pin-toplib").glob("toplib-*.whl"))
    locked = server.sha256[f"pin-toplib/{wheel.name}"]
    wheel.write_bytes(wheel.read_bytes() + b"\0")  # changed in the wheelhouse after the lock was made
    status, body = proxied(server.proxy, "GET", f"http://{WHEEL_HOST}/groups/pin-toplib/{wheel.name}")
    assert status == 409 and wheel.read_bytes()[:4] not in body
    assert server.refused == [f"{wheel}: sha256 {sha256_file(wheel)} does not match the lock's {locked}"]
    req = tmp_path / "requirements.txt"
    req.write_text(f"toplib==0.3.0 --hash=sha256:{locked}\n")
    assert install(server, req, tmp_path / "t").returncode != 0
    assert len(server.refused) == 1  # read once per build


def test_only_the_groups_wheels_of_the_one_host_are_served(served: tuple[WheelServer, Path]) -> None:
    server, groups = served
    wheel = next((groups / "pin-toplib").glob("toplib-*.whl"))
    status, page = proxied(server.proxy, "GET", f"http://{WHEEL_HOST}/groups/pin-toplib/")
    assert status == 200 and f'href="{wheel.name}"'.encode() in page and b"requirements" not in page
    assert b"other-" not in page  # only the lock's files
    status, body = proxied(server.proxy, "GET", f"http://{WHEEL_HOST}/groups/pin-toplib/{wheel.name}")
    assert status == 200 and body == wheel.read_bytes()
    status, body = proxied(server.proxy, "HEAD", f"http://{WHEEL_HOST}/groups/pin-toplib/{wheel.name}")
    assert status == 200 and body == b""
    refused = [
        f"http://{WHEEL_HOST}/groups/pin-toplib/requirements.txt",  # not a wheel
        f"http://{WHEEL_HOST}/groups/pin-toplib/other-1.0-py3-none-any.whl",  # not the lock's
        f"http://{WHEEL_HOST}/groups/pin-toplib/../../secret.txt",
        f"http://{WHEEL_HOST}/groups/%2e%2e/secret.txt",
        f"http://{WHEEL_HOST}/groups/nope/",
        f"http://{WHEEL_HOST}/secret.txt",
        f"http://{WHEEL_HOST}/groups/pin-toplib/{wheel.name}?x=1",
    ]
    for url in refused:
        status, _ = proxied(server.proxy, "GET", url)
        assert status == 404, url
    # a proxy for one made-up host only: nothing else goes anywhere through it
    for url in ("http://127.0.0.1:9/simple/", f"http://{WHEEL_HOST}.example.invalid/groups/pin-toplib/"):
        status, _ = proxied(server.proxy, "GET", url)
        assert status == 403, url
    status, _ = proxied(server.proxy, "CONNECT", f"{WHEEL_HOST}:443")
    assert status in (405, 501)
    # another container on the bridge, without this build's password, gets nothing, not even a listing
    answered = server.requests
    for password in ("", "guess"):
        status, body = proxied(server.proxy, "GET", f"http://{WHEEL_HOST}/groups/pin-toplib/{wheel.name}", password)
        assert status == 407 and body == b""
    assert server.requests == answered


def test_the_password_is_the_builds_own_and_never_in_what_is_printed(tmp_path: Path) -> None:
    with WheelServer(tmp_path, "127.0.0.1", {}) as one, WheelServer(tmp_path, "127.0.0.1", {}) as two:
        assert urlsplit(one.proxy).password != urlsplit(two.proxy).password
        assert len(urlsplit(one.proxy).password or "") >= 24
        assert one.where == f"http://127.0.0.1:{urlsplit(one.proxy).port}" and "@" not in one.where


def test_the_server_stops_with_its_build(tmp_path: Path) -> None:
    with WheelServer(tmp_path, "127.0.0.1", {}) as server:
        port = urlsplit(server.proxy).port
    with pytest.raises(OSError):
        http.client.HTTPConnection("127.0.0.1", port, timeout=2).connect()


class _Engine:
    """The engine's side of a build that fails: `reach` says whether the stages got to the wheel server."""

    builder, mounts, writes_layout = "classic", "", False

    def __init__(self, reach: bool) -> None:
        self.reach, self.proxy, self.context = reach, "", Path()

    @property
    def wheel_serving(self) -> _Engine:
        return self

    def wheel_server(self, root: Path, sha256: dict[str, str]) -> WheelServer:
        self.sha256 = sha256
        return WheelServer(root, "127.0.0.1", sha256)

    def build(self, context: Path, tag: str, on_step: object = None, *, nocache: bool = False,
              proxy: str | None = None, **options: object) -> BuildResult:
        self.proxy, self.context = proxy or "", context
        if self.reach:
            proxied(self.proxy, "GET", f"http://{WHEEL_HOST}/groups/pin-toplib/")
        raise BuildFailed("the build failed: step 9 exited 1", ("connection refused",), ())

    def facts(self, ref: str) -> ImageFacts | None:
        return ImageFacts("sha256:" + "1" * 64, (), (), 1)


@pytest.mark.parametrize("reach", [False, True])
def test_a_build_whose_stages_never_reached_the_server_names_send_wheels(tmp_path: Path, reach: bool) -> None:
    repo = make_stack_repo(tmp_path, "r", "stackctl-test/served", commit=False, installer="uv")
    prep = prepare_build(repo.stack, repo.lock, None, "r1", "t", None, None, {})
    engine = _Engine(reach)
    req = BuildRequest(prep, repo.lock, BuildOrder(wheelhouse=repo.wheelhouse), tmp_path / "records", tmp_path / "ctx")
    with pytest.raises(BuildFailed) as info:
        build_image(req, engine)  # type: ignore[arg-type]
    assert urlsplit(engine.proxy).hostname == "127.0.0.1" and urlsplit(engine.proxy).password
    dockerfile = (engine.context / "Dockerfile").read_text()
    assert f"--find-links http://{WHEEL_HOST}/groups/pin-toplib/" in dockerfile and "--offline" not in dockerfile
    assert (engine.context / ".dockerignore").read_text() == "groups/*/*.whl\n"
    # the server knows every group wheel of the lock, and nothing else (uv's own wheel goes in the context)
    lock = read_lock(repo.lock)
    locked = [f.sha256 for p in lock.pins if p.name != "uv" for f in p.files]
    locked += [c.file.sha256 for c in lock.closure if c.file]
    assert sorted(engine.sha256.values()) == sorted(locked)
    assert all(k.count("/") == 1 and k.endswith(".whl") for k in engine.sha256)
    if reach:  # the stages got there: the cause is elsewhere, and the message says only what failed
        assert info.value.hint is None
    else:
        where = f"http://127.0.0.1:{urlsplit(engine.proxy).port}"
        assert info.value.hint == (f"no install stage reached the wheel server at {where}; if this engine's "
                                   "containers cannot reach this machine, build with --send-wheels")


def test_the_gateway_comes_from_the_bridge_interface_when_ipam_lists_none() -> None:
    """An engine that found its bridge already configured lists a subnet and no Gateway; the interface the
    network names carries the address (here the loopback interface stands in for docker0)."""
    from stackctl.engine.docker import bridge_gateway

    listed = {"IPAM": {"Config": [{"Subnet": "172.17.0.0/16", "Gateway": "172.17.0.1"}]}}
    assert bridge_gateway(listed) == ("172.17.0.1", "the default bridge's gateway 172.17.0.1")
    bare = {"IPAM": {"Config": [{"Subnet": "127.0.0.0/8"}]}, "Options": {"com.docker.network.bridge.name": "lo"}}
    assert bridge_gateway(bare) == ("127.0.0.1", "127.0.0.1, the address of the bridge interface lo "
                                                 "(the bridge lists no gateway)")
    elsewhere = {**bare, "IPAM": {"Config": [{"Subnet": "10.99.0.0/16"}]}}
    assert bridge_gateway(elsewhere) == (None, "the default bridge lists no gateway and its interface lo carries "
                                               "127.0.0.1, outside the bridge's subnet 10.99.0.0/16")
    missing = {**bare, "Options": {"com.docker.network.bridge.name": "nosuchbr0"}}
    assert bridge_gateway(missing) == (None, "the default bridge lists no gateway and its interface nosuchbr0 "
                                             "has no IPv4 address here")
