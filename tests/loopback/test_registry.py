"""Reading an image from a registry that misbehaves: one error line, never a traceback or a wrong answer."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.cli import Cli


class Fake:
    """A real loopback HTTP server answering the registry paths with whatever a test sets.

    With `login` set, every /v2/ path asks for it: as HTTP basic auth, or (`scheme = "bearer"`) as a token
    from the realm at /token, which itself takes the login as basic auth, as Docker's token servers do.
    """

    TOKEN = "tok-from-the-realm"

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        self.login: tuple[str, str] | None = None
        self.scheme = "basic"
        self.log: list[tuple[str, dict[str, str]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.log.append((self.path, dict(self.headers.items())))
                status, body, headers = fake.answer(self.path.split("?", 1)[0], self.headers.get("Authorization"))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def answer(self, path: str, authorization: str | None) -> tuple[int, bytes, dict[str, str]]:
        if self.login is not None:
            basic = "Basic " + base64.b64encode(":".join(self.login).encode()).decode()
            if path == "/token":
                if authorization != basic:
                    return 401, b"{}", {}
                return 200, json.dumps({"token": self.TOKEN}).encode(), {}
            wanted = basic if self.scheme == "basic" else f"Bearer {self.TOKEN}"
            if authorization != wanted:
                challenge = ('Basic realm="fake"' if self.scheme == "basic"
                             else f'Bearer realm="http://{self.host}/token",service="fake"')
                return 401, b"{}", {"WWW-Authenticate": challenge}
        return self.routes.get(path, (404, b"{}", {}))


@pytest.fixture
def fake() -> Iterator[Fake]:
    f = Fake()
    yield f
    f.server.shutdown()
    f.server.server_close()


def digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def test_labels_read_and_every_blob_hash_checked(fake: Fake, cli: Cli) -> None:
    config = json.dumps({"config": {"Labels": {"org.opencontainers.image.revision": "abc"}}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": digest(config)}}).encode()
    fake.routes["/v2/t/x/manifests/1"] = (200, manifest, {})
    fake.routes[f"/v2/t/x/blobs/{digest(config)}"] = (200, config, {})
    r = cli("inspect", f"{fake.host}/t/x:1", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["digest"] == digest(manifest) and data["image_id"] == digest(config)
    assert data["labels"] == {"org.opencontainers.image.revision": "abc"}
    # Label values are the image's text: shown as written, never read as terminal markup.
    odd = {"org.opencontainers.image.revision": "abc", "com.example.note": "a [/] b [bold]c"}
    config2 = json.dumps({"config": {"Labels": odd}}).encode()
    manifest2 = json.dumps({"schemaVersion": 2, "config": {"digest": digest(config2)}}).encode()
    fake.routes["/v2/t/x/manifests/2"] = (200, manifest2, {})
    fake.routes[f"/v2/t/x/blobs/{digest(config2)}"] = (200, config2, {})
    r = cli("inspect", f"{fake.host}/t/x:2")
    assert r.code == 0, r.err
    assert "a [/] b [bold]c" in r.out
    # A config blob that is not what its digest names is a lying registry, not an image.
    fake.routes[f"/v2/t/x/blobs/{digest(config)}"] = (200, config.replace(b"abc", b"abd"), {})
    r = cli("inspect", f"{fake.host}/t/x:1")
    assert r.code == 3 and r.err.startswith("error: ") and f"does not hash to {digest(config)}" in r.err
    # So is a manifest served under another digest than the one asked for.
    fake.routes[f"/v2/t/x/manifests/{digest(b'other')}"] = (200, manifest, {})
    r = cli("inspect", f"{fake.host}/t/x@{digest(b'other')}")
    assert r.code == 3 and f"sent manifest {digest(manifest)} instead of the one asked for" in r.err


@pytest.mark.parametrize(("status", "body", "code", "message"), [
    (200, b"<html>hello</html>", 3, "answered with something other than a JSON object"),
    (200, b"[1, 2]", 3, "answered with something other than a JSON object"),
    (401, b"{}", 3, "refused /v2/t/x/manifests/1 (401)"),
    (500, b"oops", 3, "answered 500"),
])
def test_a_broken_registry_is_one_error_line(fake: Fake, cli: Cli, status: int, body: bytes,
                                             code: int, message: str) -> None:
    fake.routes["/v2/t/x/manifests/1"] = (status, body, {})
    r = cli("inspect", f"{fake.host}/t/x:1")
    assert r.code == code, r.out + r.err
    assert r.err.count("error:") == 1 and message in r.err and "Traceback" not in r.err


@pytest.mark.parametrize("scheme", ["basic", "bearer"])
def test_registry_login_comes_from_the_docker_config_and_is_never_shown(
        fake: Fake, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str) -> None:
    fake.login, fake.scheme = ("robot", "p4ss-w0rd"), scheme
    config = json.dumps({"config": {"Labels": {"org.opencontainers.image.revision": "abc"}}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": digest(config)}}).encode()
    fake.routes["/v2/t/x/manifests/1"] = (200, manifest, {})
    fake.routes[f"/v2/t/x/blobs/{digest(config)}"] = (200, config, {})
    docker_config = tmp_path / "docker"
    docker_config.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(docker_config))

    # No login for this registry in the Docker config: refused, and said where the login would come from.
    r = cli("inspect", f"{fake.host}/t/x:1")
    assert r.code == 3, r.out + r.err
    assert r.err.count("error:") == 1 and "refused /v2/t/x/manifests/1 (401)" in r.err and "Docker config" in r.err

    auth = base64.b64encode(b"robot:p4ss-w0rd").decode()
    (docker_config / "config.json").write_text(json.dumps({"auths": {f"http://{fake.host}/v1/": {"auth": auth}}}))
    fake.log.clear()
    r = cli("inspect", f"{fake.host}/t/x:1", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["labels"] == {"org.opencontainers.image.revision": "abc"}
    for text in (r.out, r.err):
        assert "p4ss-w0rd" not in text and auth not in text and Fake.TOKEN not in text
    if scheme == "bearer":  # the login went to the realm only; the registry saw the token
        assert [p for p, h in fake.log if h.get("Authorization", "").startswith("Basic ")] == [
            "/token?service=fake&scope=repository%3At%2Fx%3Apull"]

    (docker_config / "config.json").write_text(json.dumps({"auths": {fake.host: {"auth": "not base64!"}}}))
    r = cli("inspect", f"{fake.host}/t/x:1")
    assert r.code == 2 and "is not base64 of user:password" in r.err and r.err.count("error:") == 1


@pytest.mark.parametrize("where", ["credHelpers", "credsStore"])
def test_registry_login_from_a_credential_helper_is_never_shown(
        fake: Fake, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    fake.login = ("robot", "h3lper-s3cret")
    config = json.dumps({"config": {"Labels": {"org.opencontainers.image.revision": "abc"}}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": digest(config)}}).encode()
    fake.routes["/v2/t/x/manifests/1"] = (200, manifest, {})
    fake.routes[f"/v2/t/x/blobs/{digest(config)}"] = (200, config, {})
    bin_dir, docker_config = tmp_path / "bin", tmp_path / "docker"
    bin_dir.mkdir()
    docker_config.mkdir()
    asked = tmp_path / "asked"
    helper = bin_dir / "docker-credential-test"
    # The protocol the docker CLI speaks: `get`, the server on stdin, JSON on stdout; exit 1 if unknown.
    helper.write_text(f"""#!/bin/sh
read server
echo "$1 $server" >> {asked}
[ "$server" = "{fake.host}" ] || {{ echo "credentials not found in native keychain"; exit 1; }}
echo '{{"ServerURL": "{fake.host}", "Username": "robot", "Secret": "h3lper-s3cret"}}'
""")
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("DOCKER_CONFIG", str(docker_config))
    entry: dict[str, object] = ({"credHelpers": {fake.host: "test"}} if where == "credHelpers"
                                else {"credsStore": "test"})
    (docker_config / "config.json").write_text(json.dumps(entry))
    r = cli("inspect", f"{fake.host}/t/x:1", "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["labels"] == {"org.opencontainers.image.revision": "abc"}
    assert "h3lper-s3cret" not in r.out + r.err
    assert asked.read_text().splitlines()[0] == f"get {fake.host}"

    # A helper the config names but PATH lacks: one input error naming it.
    (docker_config / "config.json").write_text(json.dumps({"credHelpers": {fake.host: "missing"}}))
    r = cli("inspect", f"{fake.host}/t/x:1")
    assert r.code == 2 and "docker-credential-missing is not on PATH" in r.err and r.err.count("error:") == 1


@pytest.mark.parametrize("reference", [":v9", "@sha256:" + "ab" * 32])
def test_inspect_and_verify_say_a_missing_image_alike(fake: Fake, cli: Cli, reference: str) -> None:
    """The registry answers, and the image is not there: one wording, one exit code (1), in both commands."""
    ref = f"{fake.host}/stackctl/gone{reference}"
    for command in ("inspect", "verify"):
        r = cli(command, ref)
        assert (r.code, [ln for ln in r.err.splitlines() if ln.startswith("error:")]) == (
            1, [f"error: {ref}: not in the registry"]), (command, r.err)
