"""The wheel server of one build: the install stages fetch their group's wheels from it, so the engine is not
sent the wheels in the build context on every build (the classic builder receives and checksums the whole
context each time: seconds for a multi-GB stack, even when every stage comes from the cache).

It answers only as the proxy of one made-up host (`render.WHEEL_HOST`): the stages reach it through the
`http_proxy` build argument, which the builder keeps out of its cache key and the image's history, so a
rebuild on another port still finds its stages in the cache. It serves the context's `groups/GROUP/*.whl`
files read-only, one listing page per group, and only the lock's files; anything else is refused. It checks
each wheel's sha256 against the lock before its first byte goes out (refusing one that does not match), and
the stages check each again (`--require-hashes`); a wheel no stage asks for (its step is cached) is never read.

It listens on the engine's bridge, where any container on this machine could reach it while the build runs;
a vendor's wheels are not for them. So every request must carry this build's own proxy password (the
`user:password@` of the `http_proxy` value: clients send it as Proxy-Authorization), made afresh for each
build and worthless after it.
"""

from __future__ import annotations

import base64
import hmac
import html
import re
import secrets
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import unquote, urlsplit

from stackctl.base.files import sha256_file
from stackctl.image.context import wheel_mismatch
from stackctl.image.render import WHEEL_HOST

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # a group slug or a wheel file name: one plain path part


class WheelServer:
    """Serves `root/GROUP/NAME.whl` on `address` (an address of this machine the engine's containers reach)
    while entered, for each `GROUP/NAME.whl` in `sha256` (the lock's digest of each). `proxy` is the value
    of the build's `http_proxy`, password included (never print it: `where` names the server); `requests`
    counts what it answered, `refused` says which wheels did not match the lock."""

    def __init__(self, root: Path, address: str, sha256: Mapping[str, str]) -> None:
        self.root = root
        self.sha256 = dict(sha256)
        self.requests = 0
        self.refused: list[str] = []
        self.how = address  # the engine adapter says how it found the address
        self._checked: dict[str, bool] = {}
        self._checking = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "stackctl-wheelhouse"

            def do_GET(self) -> None:
                server.answer(self, body=True)

            def do_HEAD(self) -> None:
                server.answer(self, body=False)

            def log_message(self, format: str, *args: object) -> None:
                pass  # the build's own log says what failed

        self._httpd = ThreadingHTTPServer((address, 0), Handler)
        self._httpd.daemon_threads = True
        self.where = f"http://{address}:{self._httpd.server_port}"
        password = secrets.token_urlsafe(18)
        self.proxy = f"http://stackctl:{password}@{address}:{self._httpd.server_port}"
        self._auth = "Basic " + base64.b64encode(f"stackctl:{password}".encode()).decode()
        self._thread: threading.Thread | None = None

    def file_for(self, target: str) -> Path | None:
        """The file or group directory a request names, or None: only `http://WHEEL_HOST/groups/G/[NAME.whl]`."""
        url = urlsplit(target)
        if url.scheme != "http" or url.hostname != WHEEL_HOST or url.query:
            return None
        parts = unquote(url.path).split("/")
        if len(parts) != 4 or parts[:2] != ["", "groups"] or not _NAME.fullmatch(parts[2]):
            return None
        group = self.root / parts[2]
        if parts[3] == "":
            return group if group.is_dir() else None
        if f"{parts[2]}/{parts[3]}" not in self.sha256 or not _NAME.fullmatch(parts[3]):
            return None
        wheel = group / parts[3]
        return wheel if wheel.is_file() else None

    def matches(self, wheel: Path) -> bool:
        """Whether the wheel's bytes are the lock's: read once per build, on the first request for it."""
        key = f"{wheel.parent.name}/{wheel.name}"
        with self._checking:
            if key not in self._checked:
                digest = sha256_file(wheel)
                self._checked[key] = digest == self.sha256[key]
                if not self._checked[key]:
                    self.refused.append(wheel_mismatch(wheel, digest, self.sha256[key]))
            return self._checked[key]

    def answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        if not hmac.compare_digest(handler.headers.get("Proxy-Authorization", "").encode(), self._auth.encode()):
            handler.send_response(407)
            handler.send_header("Proxy-Authenticate", 'Basic realm="stackctl wheel server"')
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        self.requests += 1
        # a proxy's request line carries the whole URL; a direct one only the path, and the host in a header
        target = handler.path if "://" in handler.path else f"http://{handler.headers.get('Host', '')}{handler.path}"
        found = self.file_for(target)
        if found is None:
            handler.send_error(404 if urlsplit(target).hostname == WHEEL_HOST else 403)
            return
        if found.is_dir():
            names = sorted(p.name for p in found.iterdir() if f"{found.name}/{p.name}" in self.sha256)
            page = "".join(f'<a href="{html.escape(n)}">{html.escape(n)}</a>\n' for n in names)
            data = f"<!DOCTYPE html>\n<html><body>\n{page}</body></html>\n".encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "text/html")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            if body:
                handler.wfile.write(data)
            return
        if not self.matches(found):
            handler.send_error(409, "not the lock's bytes")
            return
        with found.open("rb") as f:
            size = found.stat().st_size
            handler.send_response(200)
            handler.send_header("Content-Type", "application/octet-stream")
            handler.send_header("Content-Length", str(size))
            handler.end_headers()
            if body:
                handler.connection.sendfile(f)

    def __enter__(self) -> WheelServer:
        # shutdown() waits for the serving loop to look up: the default half second would end every build late
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="wheel-server", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()
