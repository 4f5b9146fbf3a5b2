"""A real package index on loopback: PEP 503 HTML and PEP 691 JSON pages, PEP 658 metadata files,
PEP 700 upload times, HTTP range requests on files, and injectable faults.

Tests add wheels they built, start the server, and point stackctl at `server.url`.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import html
import json
import re
import socket
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from packaging.utils import canonicalize_name, parse_wheel_filename

# A fault is a callable that writes a whole response itself and returns True, or returns False to
# let the normal response go out. `faults[path]` is a list consumed one request at a time.
Fault = Callable[["Handler"], bool]


@dataclass
class IndexFile:
    project: str
    path: Path
    upload_time: datetime | None = None
    yanked: str | bool = False
    metadata: bool = True  # serve the PEP 658 metadata file
    sha256: str = ""
    size: int = 0
    core_metadata: bytes = b""


@dataclass
class IndexServer:
    html_only: bool = False
    latency: float = 0.0  # seconds added to every request, to look like a real network
    ranges: bool = True  # honour Range requests on files
    head: bool = True  # answer HEAD; False: `head_status` for every HEAD, as some file servers do
    head_status: int = 405  # 405 Method Not Allowed, or 501 Unsupported method as Python's http.server says
    auth: tuple[str, str] | None = None  # require HTTP basic auth
    tls: tuple[Path, Path] | None = None  # (certificate, key): serve https
    port: int = 0  # 0: any free port
    files_at: str | None = None  # the base URL (`http://host:port/`) of another server holding the files, as an
    # index whose files live on a host of their own links them; None: this server's own `files/`
    files: dict[str, IndexFile] = field(default_factory=dict)
    faults: dict[str, list[Fault]] = field(default_factory=dict)
    log: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # (method, path, headers)
    most_at_once: int = 0  # the most requests this server was answering at the same moment
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    # --- content ---------------------------------------------------------------------------------
    def add(self, wheel: Path, *, project: str | None = None, upload_time: datetime | None = None,
            yanked: str | bool = False, metadata: bool = True) -> IndexFile:
        data = wheel.read_bytes()
        if project is None:
            project = str(parse_wheel_filename(wheel.name)[0])
        core = b""
        if wheel.suffix == ".whl":
            with zipfile.ZipFile(wheel) as zf:
                name = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
                core = zf.read(name) if name else b""
        f = IndexFile(canonicalize_name(project), wheel, upload_time, yanked, metadata,
                      hashlib.sha256(data).hexdigest(), len(data), core)
        self.files[wheel.name] = f
        return f

    def fault(self, path: str, *faults: Fault) -> None:
        self.faults.setdefault(path, []).extend(faults)

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() the server first"
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}/simple/"

    @property
    def base(self) -> str:
        return self.url.removesuffix("simple/")

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> IndexServer:
        server = self

        class _Bound(Handler):
            index = server

        self._httpd = _QuietServer(("127.0.0.1", self.port), _Bound)
        if self.tls is not None:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True)
        self._httpd.daemon_threads = True
        # shutdown() waits for the loop to notice; at the default 0.5 s poll that is most of a test's teardown
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> IndexServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests_to(self, pattern: str) -> list[tuple[str, str, dict[str, str]]]:
        return [r for r in self.log if re.search(pattern, r[1])]


class _QuietServer(ThreadingHTTPServer):
    request_queue_size = 128  # the default backlog of 5 drops concurrent connects: a 1 s SYN retry each
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up (a timeout test, Ctrl-C) is expected here, not a server bug


class Handler(BaseHTTPRequestHandler):
    index: IndexServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # --- helpers for faults and responses ----------------------------------------------------------
    def send(self, status: int, body: bytes = b"", ctype: str = "text/plain",
             headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            if getattr(self, "cut_body", False):
                # a flaky mirror: half the promised body, then the connection closes
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        if not self.index.head:
            self.index.log.append((self.command, self.path, dict(self.headers.items())))
            self.send(self.index.head_status, b"method not allowed", headers={"Allow": "GET"})
            return
        self.do_GET()

    def do_GET(self) -> None:
        idx = self.index
        with idx._lock:
            idx._in_flight += 1
            idx.most_at_once = max(idx.most_at_once, idx._in_flight)
        try:
            self._answer()
        finally:
            with idx._lock:
                idx._in_flight -= 1

    def _answer(self) -> None:
        idx = self.index
        idx.log.append((self.command, self.path, dict(self.headers.items())))
        if idx.latency:
            time.sleep(idx.latency)
        queue = idx.faults.get(self.path)
        if queue:
            fault = queue.pop(0)
            if fault(self):
                return
        if idx.auth is not None:
            expected = "Basic " + base64.b64encode(f"{idx.auth[0]}:{idx.auth[1]}".encode()).decode()
            if self.headers.get("Authorization") != expected:
                self.send(401, b"unauthorized", headers={"WWW-Authenticate": 'Basic realm="index"'})
                return
        path = unquote(self.path.split("?", 1)[0])  # clients may send "+" of a local label as %2B
        if path in ("/simple/", "/simple"):
            self._root()
        elif m := re.fullmatch(r"/simple/([^/]+)/?", path):
            self._project(m.group(1))
        elif m := re.fullmatch(r"/files/([^/]+)\.metadata", path):
            f = idx.files.get(m.group(1))
            if f is None or not f.metadata:
                self.send(404, b"not found")
            else:
                self.send(200, f.core_metadata, "application/octet-stream")
        elif m := re.fullmatch(r"/files/([^/]+)", path):
            self._file(m.group(1))
        else:
            self.send(404, b"not found")

    def _wants_json(self) -> bool:
        return not self.index.html_only and "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")

    def _root(self) -> None:
        projects = sorted({f.project for f in self.index.files.values()})
        if self._wants_json():
            body = json.dumps({"meta": {"api-version": "1.1"},
                               "projects": [{"name": p} for p in projects]}).encode()
            self.send(200, body, "application/vnd.pypi.simple.v1+json")
        else:
            links = "".join(f'<a href="{p}/">{p}</a>\n' for p in projects)
            self.send(200, f"<!DOCTYPE html><html><body>{links}</body></html>".encode(), "text/html")

    def _project(self, name: str) -> None:
        key = canonicalize_name(name)
        if key != name:
            self.send(301, b"", headers={"Location": f"/simple/{key}/"})
            return
        files = sorted((f for f in self.index.files.values() if f.project == key), key=lambda f: f.path.name)
        if not files:
            self.send(404, b"not found")
            return
        etag = '"' + hashlib.sha256("".join(f.sha256 for f in files).encode()).hexdigest()[:16] + '"'
        if self.headers.get("If-None-Match") == etag:
            self.send(304, b"", headers={"ETag": etag})
            return
        if self._wants_json():
            entries = []
            versions: set[str] = set()
            for f in files:
                e: dict[str, Any] = {"filename": f.path.name, "url": self._link(f.path.name),
                                     "hashes": {"sha256": f.sha256}, "size": f.size}
                if f.upload_time:
                    e["upload-time"] = f.upload_time.isoformat().replace("+00:00", "Z")
                if f.yanked:
                    e["yanked"] = f.yanked
                if f.metadata and f.core_metadata:
                    digest = {"sha256": hashlib.sha256(f.core_metadata).hexdigest()}
                    e["core-metadata"] = digest
                    e["data-dist-info-metadata"] = digest
                entries.append(e)
                if f.path.name.endswith(".whl"):
                    versions.add(str(parse_wheel_filename(f.path.name)[1]))
            body = json.dumps({"meta": {"api-version": "1.1"}, "name": key, "files": entries,
                               "versions": sorted(versions)}).encode()
            self.send(200, body, "application/vnd.pypi.simple.v1+json",
                      {"ETag": etag, "Cache-Control": "max-age=0, must-revalidate"})
            return
        links = []
        for f in files:
            attrs = f' href="{self._link(f.path.name)}#sha256={f.sha256}"'
            if f.yanked:
                reason = f.yanked if isinstance(f.yanked, str) else ""
                attrs += f' data-yanked="{html.escape(reason)}"'
            if f.metadata and f.core_metadata:
                attrs += f' data-dist-info-metadata="sha256={hashlib.sha256(f.core_metadata).hexdigest()}"'
                attrs += f' data-core-metadata="sha256={hashlib.sha256(f.core_metadata).hexdigest()}"'
            links.append(f"<a{attrs}>{html.escape(f.path.name)}</a><br/>")
        body = ("<!DOCTYPE html><html><head><meta name=\"pypi:repository-version\" content=\"1.0\"></head>"
                f"<body><h1>Links for {key}</h1>\n" + "\n".join(links) + "\n</body></html>").encode()
        self.send(200, body, "text/html", {"ETag": etag, "Cache-Control": "max-age=0, must-revalidate"})

    def _link(self, filename: str) -> str:
        return f"{self.index.files_at}files/{filename}" if self.index.files_at else f"../../files/{filename}"

    def _file(self, filename: str) -> None:
        f = self.index.files.get(filename)
        if f is None:
            self.send(404, b"not found")
            return
        size = f.path.stat().st_size  # a range reads only its bytes: a GB wheel is served by range quickly

        def read(start: int, end: int) -> bytes:
            with open(f.path, "rb") as fh:
                fh.seek(start)
                return fh.read(end - start)

        headers = {"Accept-Ranges": "bytes" if self.index.ranges else "none", "ETag": f'"{f.sha256[:16]}"'}
        if f.upload_time:
            headers["Last-Modified"] = email.utils.format_datetime(f.upload_time, usegmt=True)
        rng = self.headers.get("Range")
        if rng and self.index.ranges:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if m:
                start_s, end_s = m.groups()
                if start_s == "":
                    start, end = max(0, size - int(end_s)), size - 1
                else:
                    start = int(start_s)
                    end = min(int(end_s), size - 1) if end_s else size - 1
                if start >= size or start > end:
                    self.send(416, b"", headers={"Content-Range": f"bytes */{size}"})
                    return
                headers["Content-Range"] = f"bytes {start}-{end}/{size}"
                self.send(206, read(start, end + 1), "application/octet-stream", headers)
                return
        self.send(200, read(0, size), "application/octet-stream", headers)


def free_port() -> int:
    """A loopback port nobody listens on (closed again before it is returned)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- ready-made faults -----------------------------------------------------------------------------

def status(code: int, body: bytes = b"") -> Fault:
    def fault(h: Handler) -> bool:
        h.send(code, body or f"status {code}".encode())
        return True

    return fault


def hang(seconds: float) -> Fault:
    def fault(h: Handler) -> bool:
        time.sleep(seconds)
        h.send(200, b"too late")
        return True

    return fault


def body(content: bytes, ctype: str) -> Fault:
    def fault(h: Handler) -> bool:
        h.send(200, content, ctype)
        return True

    return fault


def partial(content_range: str | None, data: bytes = b"\0" * 16) -> Fault:
    """A 206 answer whose Content-Range is `content_range` (None: no header at all), body `data`."""
    def fault(h: Handler) -> bool:
        h.send(206, data, "application/octet-stream", {"Content-Range": content_range} if content_range else {})
        return True

    return fault


def cut() -> Fault:
    """The normal answer with its full Content-Length, but only half the body sent before the connection closes."""
    def fault(h: Handler) -> bool:
        h.cut_body = True  # type: ignore[attr-defined]
        return False

    return fault


def redirect(location: str) -> Fault:
    def fault(h: Handler) -> bool:
        h.send(302, b"", headers={"Location": location})
        return True

    return fault


# --- a ready-made MUSA-like stack ------------------------------------------------------------------

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
TORCH = "2.11.0.post2+musa5.2.0"
DEEP_EP = "1.1.0+musa5.2.0torch2.11.0.post2"
PLATFORMS = ("cp310-cp310-linux_x86_64", "cp312-cp312-manylinux_2_28_x86_64")


def populate_musa(server: IndexServer, wheels: Path, *, range_only: str | None = "torchaudio") -> None:
    """A vendor index: a torch release train with a trailing member, other lines, yanked files.

    - torch, torch_musa, torchvision published within 20 minutes; torchaudio three hours later
    - torch_musa 2.11.0.post3+musa5.2.0 (newer, same line); torch 2.11.0.post3+musa5.2.1mp22 aarch64 only
      (another platform line); torch 2.11.0.post4+musa5.2.0 yanked (never an upgrade)
    - deep_ep built against torch post3 (another line: its label names the torch build); it declares
      no Requires-Dist
    - `range_only`'s files have no metadata file: their Requires-Dist must come from the wheel itself
    """
    from datetime import timedelta

    from tests.support.wheels import build_wheel

    def add(name: str, version: str, minutes: float, *, tags: tuple[str, ...] = PLATFORMS,
            requires: tuple[str, ...] = (), yanked: str | bool = False) -> None:
        for tag in tags:
            w = build_wheel(wheels, name, version, tag=tag, requires_dist=requires,
                            files={f"{name}/__init__.py": f"__version__ = {version!r}\n"})
            server.add(w, upload_time=T0 + timedelta(minutes=minutes), yanked=yanked,
                       metadata=name != range_only)

    add("torch", TORCH, 0, requires=("numpy", "filelock; python_version >= '3.10'"))
    add("torch", "2.11.0.post1+musa5.2.0", -60 * 24 * 30, requires=("numpy",))
    add("torch", "2.11.0.post3+musa5.2.1mp22", 60 * 24, tags=("cp310-cp310-linux_aarch64",))
    add("torch", "2.11.0.post4+musa5.2.0", 60 * 24 * 2, yanked="broken build")
    add("torch_musa", TORCH, 10, requires=(f"torch=={TORCH}",))
    add("torch_musa", "2.11.0.post3+musa5.2.0", 60 * 24 * 3, requires=("torch",))
    add("torchvision", "0.26.0.post2+musa5.2.0", 20, requires=(f"torch=={TORCH}",))
    add("torchaudio", TORCH, 180, requires=(f"torch=={TORCH}",))
    add("deep_ep", DEEP_EP, 30)
    add("deep_ep", "1.1.0+musa5.2.0torch2.11.0.post3", 60 * 24 * 3)


def populate_public(server: IndexServer, wheels: Path) -> None:
    """A public-like index: numpy and filelock for the closure, and an unrelated project named torch."""
    from datetime import timedelta

    from tests.support.wheels import build_wheel

    for name, version, minutes in (("numpy", "1.26.4", 0), ("numpy", "2.0.0", 100), ("filelock", "3.13.1", 5),
                                   ("torch", "9.9.9", 50), ("packaging", "24.0", 0), ("packaging", "24.2", 60)):
        w = build_wheel(wheels / "public", name, version, files={f"{name}/__init__.py": ""})
        server.add(w, upload_time=T0 + timedelta(minutes=minutes))


def musa_profile(directory: Path, name: str = "musa-stack", extra: str = "") -> Path:
    """A profile over both indexes; their URLs come from `--index NAME=URL` in the tests."""
    text = f'''
[stack]
name = "{name}"

[targets]
python = ["3.10", "3.12"]
platforms = ["linux_x86_64"]

[indexes.musa]
url = "http://127.0.0.1:9/simple/"
username_env = "MUSA_TEST_USER"
password_env = "MUSA_TEST_PASSWORD"

[indexes.public]
from_pip = true

[pins.torch]
version = "{TORCH}"
index = "musa"
train = "musa-torch"
file = "musa.txt"

[pins.torch_musa]
version = "{TORCH}"
index = "musa"
train = "musa-torch"
file = "musa.txt"

[pins.torchvision]
version = "0.26.0.post2+musa5.2.0"
index = "musa"
train = "musa-torch"
file = "musa.txt"

[pins.torchaudio]
version = "{TORCH}"
index = "musa"
train = "musa-torch"
file = "musa.txt"

[pins.deep_ep]
version = "{DEEP_EP}"
index = "musa"
file = "musa.txt"

[pins.numpy]
version = "1.26.4"
index = "public"
file = "requirements.txt"
{extra}'''
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that no CA bundle trusts but itself (what a TLS-inspecting proxy
    looks like to a client without the machine's bundle)."""
    import subprocess

    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key
