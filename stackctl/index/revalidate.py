"""A stored page revalidated without requests: one conditional GET over a socket of the standard library.

A warm run asks for every page again with `If-None-Match`, and the answer is nearly always a bodiless
304. requests (urllib3, charset_normalizer, idna) is not imported for that. Nor is http.client, measured
against this module by benchmarks/revalidate.py (figures in benchmarks/README.md): a round of 304s takes
about as long through either, but importing http.client and the email package it parses headers with
costs several times this module's import, in every warm run; and it takes what this reader refuses (a
folded header line, a line without a colon, a head cut off before its blank line), so those checks would
be written again around it.

A 304 is the one answer taken here: its status line and headers, and no body by definition. Anything
else — a changed page, a redirect, an error status, a malformed or unusual answer, a refused connection,
a non-ASCII host, a proxy in the environment — gives None, and the caller asks again through requests,
which follows redirects by hand, retries and names every failure.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from base64 import b64encode
from typing import IO, TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import ssl

_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_MAX_LINE = 65536  # bytes in one status or header line
_MAX_HEADERS = 100  # http.client's limits
_local = threading.local()


class _Connection:
    """A kept-alive connection to one host: its socket (TLS when https) and a buffered reader on it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader: IO[bytes] = sock.makefile("rb")

    def close(self) -> None:
        for part in (self.reader, self.sock):
            with contextlib.suppress(OSError):
                part.close()


def not_modified(url: str, headers: dict[str, str], auth: tuple[str, str] | None, verify: str | bool,
                 timeout: float) -> dict[str, str] | None:
    """The 304's headers (lower-cased), or None when the server said anything else or could not be asked.

    `auth` is sent as HTTP Basic, as requests would send it; the caller passes it only for the index's
    own origin. A connection is kept per thread and host for the next page.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or any(os.environ.get(v) for v in _PROXY_VARS):
        return None  # proxies (and their exceptions) are requests' to apply
    try:
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host.encode("ascii")
    except (ValueError, UnicodeEncodeError):  # a port that is no number; an internationalised host name
        return None
    # the Host header as http.client and urllib3 write it: IPv6 in brackets, the port unless the default
    named = f"[{host}]" if ":" in host else host
    send = {"Host": named if parts.port in (None, 443 if parts.scheme == "https" else 80) else f"{named}:{port}",
            # what requests would send: a server whose ETag depends on the encoding answers alike
            "Accept-Encoding": "gzip, deflate", "Connection": "keep-alive", **headers}
    if auth is not None:
        send["Authorization"] = "Basic " + b64encode(f"{auth[0]}:{auth[1]}".encode("latin-1")).decode("ascii")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request = _request(path, send)
    if request is None:
        return None
    key = (parts.scheme, host, port)
    conns: dict[tuple[str, str, int], _Connection] = getattr(_local, "conns", None) or {}
    _local.conns = conns
    for _ in (0, 1):  # a kept connection the server has since closed gets one fresh try
        conn = conns.pop(key, None)
        reused = conn is not None
        try:
            if conn is None:
                conn = _Connection(_connect(parts.scheme, host, port, verify, timeout))
            conn.sock.sendall(request)
            status, answer, keep = _response_head(conn.reader)
        except (OSError, ValueError):
            if conn is not None:
                conn.close()
            if reused:
                continue
            return None
        if status == 304 and keep:
            conns[key] = conn
        else:
            conn.close()  # another answer's body is not read here: the connection cannot be used again
        return answer if status == 304 else None
    return None


def _request(path: str, headers: dict[str, str]) -> bytes | None:
    """The request's bytes; None for a path or header that a control character would split or bend (as
    http.client refuses them)."""
    def bad(text: str, allowed: str = "") -> bool:
        return any((ord(c) < 0x20 or c == "\x7f") and c not in allowed for c in text)

    if not path.isascii() or bad(path) or " " in path:
        return None
    if any(bad(k) or ":" in k or " " in k or bad(v, "\t") for k, v in headers.items()):
        return None
    text = "".join([f"GET {path} HTTP/1.1\r\n", *(f"{k}: {v}\r\n" for k, v in headers.items()), "\r\n"])
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return None


def _response_head(reader: IO[bytes]) -> tuple[int, dict[str, str], bool]:
    """Status, lower-cased headers, and whether the connection can carry another request (ValueError for an
    answer that is not HTTP/1.x as RFC 9112 writes it)."""
    line = reader.readline(_MAX_LINE + 1)
    version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
    code = rest.partition(" ")[0]
    if not version.startswith("HTTP/1.") or len(line) > _MAX_LINE or not (code.isdigit() and len(code) == 3):
        raise ValueError(f"not an HTTP/1.x status line: {line[:80]!r}")
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADERS + 1):
        raw = reader.readline(_MAX_LINE + 1)
        if raw in (b"\r\n", b"\n"):
            break
        text = raw.decode("latin-1")
        name, colon, value = text.partition(":")
        if not raw.endswith(b"\n") or len(raw) > _MAX_LINE or not colon or name != name.strip() or not name:
            raise ValueError(f"not a header line: {raw[:80]!r}")  # also a folded line or the end of the stream
        headers[name.lower()] = value.strip()
    else:
        raise ValueError(f"more than {_MAX_HEADERS} headers")
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    # a 304 has no body; one that claims a length or an encoding for it leaves the connection unsure
    keep = (version == "HTTP/1.1" and "close" not in tokens and "transfer-encoding" not in headers
            and headers.get("content-length", "0") == "0")
    return int(code), headers, keep


_contexts: dict[str | bool, ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def _connect(scheme: str, host: str, port: int, verify: str | bool, timeout: float) -> socket.socket:
    # The host name as ASCII bytes: a str would be encoded with the idna codec, whose import (unicodedata,
    # stringprep) a warm run would otherwise pay for (a non-ASCII name never gets here).
    sock = socket.create_connection((host.encode("ascii"), port), timeout)  # type: ignore[arg-type]
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if scheme == "https":
            return _context(verify).wrap_socket(sock, server_hostname=host.encode("ascii"))
    except BaseException:
        sock.close()
        raise
    return sock


def _context(verify: str | bool) -> ssl.SSLContext:
    """One TLS context per CA setting for the whole run: a CA bundle is read and parsed once, not for each of
    the connections the worker threads open."""
    import ssl

    with _contexts_lock:
        context = _contexts.get(verify)
        if context is None:
            if verify is False:
                context = ssl._create_unverified_context()
            else:
                cafile = verify
                if cafile is True:
                    import certifi  # requests' own bundle, as `tls_verify` means by True

                    cafile = certifi.where()
                context = ssl.create_default_context(cafile=cafile if os.path.isfile(cafile) else None,
                                                     capath=cafile if os.path.isdir(cafile) else None)
            _contexts[verify] = context
        return context
