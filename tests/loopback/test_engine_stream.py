"""The Docker adapter when the engine's connection drops mid-build (a loopback server plays the engine)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from stackctl.errors import ServiceError


class _DroppingEngine(BaseHTTPRequestHandler):
    """Answers like an engine, then drops the connection in the middle of a build's stream."""

    protocol_version = "HTTP/1.1"

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(b"OK" if self.path.endswith("/_ping") else json.dumps({"ApiVersion": "1.41"}).encode())

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        if self.headers.get("Transfer-Encoding") == "chunked":  # the context tarball
            while (size := int(self.rfile.readline().strip(), 16)) != 0:
                self.rfile.read(size + 2)
            self.rfile.readline()
        else:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = json.dumps({"stream": "Step 1/3 : FROM base\n"}).encode()
        self.wfile.write(b"%x\r\n%s\r\nff\r\npartial" % (len(chunk), chunk))
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, *args: object) -> None:
        pass


def test_engine_lost_mid_build_is_a_service_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stackctl.engine.docker import DockerEngine

    server = ThreadingHTTPServer(("127.0.0.1", 0), _DroppingEngine)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{server.server_address[1]}")
        (tmp_path / "Dockerfile").write_text("FROM scratch\n")
        with pytest.raises(ServiceError) as exc:
            DockerEngine().build(tmp_path, "x:y")
        assert str(exc.value) == (f"build of x:y: lost the engine at tcp://127.0.0.1:{server.server_address[1]} "
                                  "(DOCKER_HOST): the connection broke off in the middle of an answer")
    finally:
        server.shutdown()
        server.server_close()
