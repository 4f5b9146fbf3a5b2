"""Registry logins resolved as Docker resolves them, and credential helpers that fail, lie or talk.

Output is captured at the file descriptors: a helper writes to the terminal directly unless its stderr is
captured, and that is what these tests look for.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.loopback.test_registry import Fake, digest
from tests.support.cli import Cli

SECRET = "h3lper-s3cret"


@pytest.fixture
def run(cli_fd: Cli) -> Cli:
    return cli_fd


@pytest.fixture
def server() -> Iterator[Fake]:
    f = Fake()
    yield f
    f.server.shutdown()
    f.server.server_close()


@pytest.fixture
def setup(server: Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, object]], None]:
    """An image behind a login; returns a function that writes the Docker config."""
    server.login = ("robot", SECRET)
    config = json.dumps({"config": {"Labels": {"org.opencontainers.image.revision": "abc"}}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": digest(config)}}).encode()
    server.routes["/v2/t/x/manifests/1"] = (200, manifest, {})
    server.routes[f"/v2/t/x/blobs/{digest(config)}"] = (200, config, {})
    bin_dir, docker = tmp_path / "bin", tmp_path / "docker"
    bin_dir.mkdir()
    docker.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_CONFIG", str(docker))
    helpers = {
        # The protocol: `get`, the server on stdin, JSON on stdout.
        "good": f"echo '{{\"ServerURL\": \"{server.host}\", \"Username\": \"robot\", \"Secret\": \"{SECRET}\"}}'",
        "leaky": f"echo 'token {SECRET} expired' >&2\necho 'helper crashed'\nexit 3",
        "liar": f"echo 'Username={SECRET}'",
        "nothing": "echo 'credentials not found in native keychain'\nexit 1",
    }
    for name, body in helpers.items():
        path = bin_dir / f"docker-credential-{name}"
        path.write_text(f"#!/bin/sh\ncat >/dev/null\n{body}\n")
        path.chmod(0o755)

    def write(cfg: dict[str, object]) -> None:
        (docker / "config.json").write_text(json.dumps(cfg))

    return write


def test_the_store_is_asked_before_auths_as_docker_does(
        server: Fake, setup: Callable[[dict[str, object]], None], run: Cli) -> None:
    wrong = base64.b64encode(b"robot:wrong").decode()
    setup({"auths": {server.host: {"auth": wrong}}, "credsStore": "good"})
    r = run("inspect", f"{server.host}/t/x:1", "--json")
    assert r.code == 0, r.err
    assert SECRET not in r.out + r.err
    # credHelpers before the store; a store that has nothing leaves it to auths.
    setup({"auths": {server.host: {"auth": wrong}}, "credsStore": "leaky", "credHelpers": {server.host: "good"}})
    assert run("inspect", f"{server.host}/t/x:1").code == 0
    right = base64.b64encode(f"robot:{SECRET}".encode()).decode()
    setup({"auths": {server.host: {"auth": right}}, "credsStore": "nothing"})
    r = run("inspect", f"{server.host}/t/x:1")
    assert r.code == 0 and SECRET not in r.out + r.err and right not in r.out + r.err, r.err


@pytest.mark.parametrize(("helper", "says"), [
    ("leaky", "credential helper docker-credential-leaky failed for"),
    ("liar", "credential helper docker-credential-liar answered something other than its JSON"),
])
def test_a_failing_or_lying_helper_is_one_line_and_shows_nothing_of_its_own(
        server: Fake, setup: Callable[[dict[str, object]], None], run: Cli, helper: str,
        says: str) -> None:
    setup({"credHelpers": {server.host: helper}})
    for args in (("inspect", f"{server.host}/t/x:1"), ("verify", f"{server.host}/t/x:1")):
        r = run(*args)
        assert r.code == 3, r.out + r.err
        assert r.err.count("error:") == 1 and says in r.err and "Traceback" not in r.err
        assert SECRET not in r.out + r.err


def test_a_signing_key_that_cannot_be_used_stops_publish_before_the_engine(
        tmp_path: Path, run: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.imagestack import make_stack_repo

    repo = make_stack_repo(tmp_path, "e2e", "127.0.0.1:9/t/x")
    key = tmp_path / "release.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA" + "A" * 20 + "\n-----END PRIVATE KEY-----\n")
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # an engine that is not there: never reached
    monkeypatch.chdir(repo.root)
    monkeypatch.setenv("STACKCTL_SIGN_KEY", str(key))
    r = run("publish", "e2e")
    assert r.code == 2 and r.err.count("error:") == 1 and f"{key}: not a PEM private key" in r.err, r.err
    assert "AAAA" not in r.out + r.err and "engine" not in r.err
