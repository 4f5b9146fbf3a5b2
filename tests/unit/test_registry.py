"""Reading an image from a registry that misbehaves: one error line, never a traceback or a wrong answer."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import Result


class Fake:
    """A real loopback HTTP server answering the registry paths with whatever a test sets."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        routes = self.routes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body, headers = routes.get(self.path, (404, b"{}", {}))
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
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def fake() -> Iterator[Fake]:
    f = Fake()
    yield f
    f.server.shutdown()
    f.server.server_close()


def digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def test_labels_read_and_every_blob_hash_checked(fake: Fake, cli: Callable[..., Result]) -> None:
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
def test_a_broken_registry_is_one_error_line(fake: Fake, cli: Callable[..., Result], status: int, body: bytes,
                                             code: int, message: str) -> None:
    fake.routes["/v2/t/x/manifests/1"] = (status, body, {})
    r = cli("inspect", f"{fake.host}/t/x:1")
    assert r.code == code, r.out + r.err
    assert r.err.count("error:") == 1 and message in r.err and "Traceback" not in r.err
