"""The indexes of one run as uv sees them: a loopback mirror of the named indexes, answered by stackctl.

uv asks its own questions of an index, and some answers real indexes give it end the closure where
stackctl's resolve carried on: a server that refuses HEAD (501) fails uv's range probe of a wheel that has
no PEP 658 metadata file, three times, and uv gives up. Here uv asks this mirror instead, on 127.0.0.1,
and the mirror answers from stackctl's own client (its cache, retries, credentials, which never reach uv):
project pages as PEP 691 JSON, every wheel with a metadata file (the index's, or the METADATA stackctl
reads from the wheel by ranges), HEAD of a file from a one-byte ranged GET, and the files themselves
passed through. The pages are the ones resolve read in this run, so the pins and their closure come from
one view of the index.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from datetime import timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import quote, unquote

from stackctl.errors import StackctlError
from stackctl.index.client import IndexClient, ProjectNotFound
from stackctl.index.config import IndexEndpoint
from stackctl.index.pages import JSON_TYPE, IndexedFile

_PASSED_HEADERS = ("Content-Length", "Content-Range", "Accept-Ranges", "Last-Modified", "ETag")


class IndexMirror:
    """Serves `/NAME/simple/PROJECT/`, `/NAME/files/N/FILE` and `FILE.metadata` for each index in `eps`
    while entered; `url(NAME)` is the index URL to give uv."""

    def __init__(self, client: IndexClient, eps: Mapping[str, IndexEndpoint]) -> None:
        self.client = client
        self.eps = dict(eps)
        self._files: list[tuple[IndexEndpoint, IndexedFile]] = []
        self._lock = threading.Lock()
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                mirror.answer(self, body=True)

            def do_HEAD(self) -> None:
                mirror.answer(self, body=False)

            def log_message(self, format: str, *args: object) -> None:
                pass  # what failed reaches the user through uv's own error, and the index client's

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self._httpd.server_port}/"
        self._thread: threading.Thread | None = None

    def url(self, name: str) -> str:
        return f"{self.base}{quote(name, safe='')}/simple/"

    def original(self, url: str) -> str:
        """The index's own URL of a file this mirror served as `url` (any other URL as it is)."""
        parts = [unquote(p) for p in url.removeprefix(self.base).split("/")]
        if url.startswith(self.base) and len(parts) == 4 and parts[1] == "files" and parts[2].isdigit():
            with self._lock:
                known = self._files[int(parts[2])] if int(parts[2]) < len(self._files) else None
            if known is not None and parts[3] in (known[1].filename, f"{known[1].filename}.metadata"):
                return known[1].url
        return url

    def __enter__(self) -> IndexMirror:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # --- answers -------------------------------------------------------------------------------------
    def answer(self, req: BaseHTTPRequestHandler, *, body: bool) -> None:
        parts = [unquote(p) for p in req.path.split("?", 1)[0].split("/")]
        try:
            if len(parts) == 5 and parts[2] == "simple" and parts[1] in self.eps and parts[4] == "":
                self._page(req, self.eps[parts[1]], parts[3], body)
            elif len(parts) == 5 and parts[2] == "files" and parts[1] in self.eps and parts[3].isdigit():
                self._file(req, int(parts[3]), parts[4], body)
            else:
                self._send(req, 404, b"not found", "text/plain", body)
        except StackctlError as exc:
            # the index failed stackctl's client too: uv sees a server error, and says which file
            self._send(req, 502, str(exc).encode(), "text/plain", body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # uv went away (it had what it needed, or gave up)

    def _page(self, req: BaseHTTPRequestHandler, ep: IndexEndpoint, project: str, body: bool) -> None:
        try:
            found = self.client.project(ep, project)
        except ProjectNotFound:  # uv then asks the next index, as it would have
            self._send(req, 404, b"not found", "text/plain", body)
            return
        files = []
        for f in found.files:
            with self._lock:
                self._files.append((ep, f))
                n = len(self._files) - 1
            entry: dict[str, object] = {"filename": f.filename,
                                        "url": f"{self.base}{quote(ep.name, safe='')}/files/{n}/"
                                               f"{quote(f.filename)}",
                                        "hashes": {"sha256": f.sha256} if f.sha256 else {}}
            # PEP 700's size and upload time, as the index gave them: uv writes them into its pylock.toml, and
            # the lock's closure entries (and `export --format pylock`) carry them on
            if f.size is not None:
                entry["size"] = f.size
            if f.upload_time is not None:
                entry["upload-time"] = f.upload_time.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            if f.requires_python:
                entry["requires-python"] = f.requires_python
            if f.yanked:
                entry["yanked"] = f.yanked_reason or True
            if f.is_wheel:
                entry["core-metadata"] = True  # the index's file, or METADATA read from the wheel
            files.append(entry)
        page = json.dumps({"meta": {"api-version": "1.1"}, "name": str(found.project), "files": files}).encode()
        self._send(req, 200, page, JSON_TYPE, body)

    def _file(self, req: BaseHTTPRequestHandler, n: int, filename: str, body: bool) -> None:
        with self._lock:
            known = self._files[n] if n < len(self._files) else None
        if known is None:
            self._send(req, 404, b"not found", "text/plain", body)
            return
        ep, f = known
        if filename == f"{f.filename}.metadata" and f.is_wheel:
            self._send(req, 200, self.client.core_metadata(ep, f), "application/octet-stream", body)
            return
        if filename != f.filename:
            self._send(req, 404, b"not found", "text/plain", body)
            return
        wanted = req.headers.get("Range") or ("bytes=0-0" if not body else None)
        resp = self.client.get(ep, f.url, f"file {f.filename}", {"Range": wanted} if wanted else {})
        try:
            headers = {k: resp.headers[k] for k in _PASSED_HEADERS if k in resp.headers}
            if not body:  # HEAD, answered from a one-byte range: the size is the range's total
                total = headers.get("Content-Range", "").rpartition("/")[2]
                status = 200
                headers.pop("Content-Range", None)
                if total.isdigit():
                    headers["Content-Length"], headers["Accept-Ranges"] = total, "bytes"
            else:
                status = resp.status_code
            req.send_response(status)
            req.send_header("Content-Type", "application/octet-stream")
            for k, v in headers.items():
                req.send_header(k, v)
            req.end_headers()
            if body:
                for chunk in resp.raw.stream(1 << 16, decode_content=False):
                    req.wfile.write(chunk)
        finally:
            resp.close()

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, status: int, data: bytes, ctype: str, body: bool) -> None:
        req.send_response(status)
        req.send_header("Content-Type", ctype)
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        if body:
            req.wfile.write(data)
