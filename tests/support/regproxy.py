"""A registry proxy on loopback with write access to what passes: every request forwarded to the real
registry (chunked uploads included, as skopeo sends them), each answer through `edit`, which may change it
(a forger between publish and the registry) or fail it. `edit` is asked first with status 0, before the
request is forwarded: an answer with another status is given instead, and the registry never sees it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

# (method, path with its query, status, headers, body) -> the same, changed or not; the query tells a blob upload
# started from a cross-repository mount (`?mount=…&from=…`, which a client falls back from) from a plain one
Edit = Callable[[str, str, int, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]


def _body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += handler.rfile.read(size)
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


@contextmanager
def registry_proxy(upstream: str, edit: Edit | None = None, *,
                   login: tuple[str, str] | None = None) -> Iterator[tuple[str, list[str]]]:
    """(host:port of the proxy, the requests seen as "METHOD /path") for the block's duration. With `login`
    (user, password) every request without that Basic authorization is answered 401, as a registry with
    an htpasswd file does."""
    import base64

    edit = edit or (lambda m, p, status, headers, body: (status, headers, body))
    wanted = "Basic " + base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode() if login else None
    seen: list[str] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            path = self.path.split("?")[0]
            with lock:
                seen.append(f"{self.command} {path}")
            body = _body(self)
            if wanted is not None and self.headers.get("Authorization") != wanted:
                self._answer(401, {"WWW-Authenticate": 'Basic realm="stackctl-test"',
                                   "Docker-Distribution-API-Version": "registry/2.0"}, b"{}", None)
                return
            status, out, content = edit(self.command, self.path, 0, {}, b"")
            if status:
                self._answer(status, out, content, None)
                return
            skip = ("content-length", "connection", "transfer-encoding", "authorization")
            # the Host header kept: the registry's upload Locations then name the proxy, not itself
            headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
            r = requests.request(self.command, f"http://{upstream}{self.path}", headers=headers, data=body,
                                 allow_redirects=False, timeout=120)
            out = {k: v for k, v in r.headers.items() if k.lower() not in (*skip, "content-encoding")}
            status, out, content = edit(self.command, self.path, r.status_code, out, r.content)
            self._answer(status, out, content, r.headers.get("Content-Length") if self.command == "HEAD" else None)

        def _answer(self, status: int, out: dict[str, str], content: bytes, head_length: str | None) -> None:
            self.send_response(status)
            for k, v in out.items():
                self.send_header(k, v)
            if "Content-Length" not in out:  # a HEAD's is the blob's
                self.send_header("Content-Length", head_length or str(len(content)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(content)

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
