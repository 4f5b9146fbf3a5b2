"""A stored page revalidated without requests: one conditional GET through the standard library.

A warm run asks for every page again with `If-None-Match`, and the answer is nearly always a bodiless
304. Importing requests (urllib3, charset_normalizer, idna) for that costs more than the whole round
of 304s, so a stored page is revalidated here first. Anything but a plain 304 — a changed page, a
redirect, an error status, a refused connection, a proxy in the environment — gives None, and the
caller asks again through requests, which follows redirects by hand, retries and names every failure.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import threading
from base64 import b64encode
from typing import Any
from urllib.parse import urlsplit

_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_local = threading.local()


def not_modified(url: str, headers: dict[str, str], auth: tuple[str, str] | None, verify: str | bool,
                 timeout: float) -> dict[str, str] | None:
    """The 304's headers (lower-cased), or None when the server said anything else or could not be asked.

    `auth` is sent as HTTP Basic, as requests would send it; the caller passes it only for the index's
    own origin. A connection is kept per thread and host for the next page.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or any(os.environ.get(v) for v in _PROXY_VARS):
        return None  # proxies (and their exceptions) are requests' to apply
    key = (parts.scheme, parts.hostname, parts.port)
    conns: dict[Any, http.client.HTTPConnection] = getattr(_local, "conns", None) or {}
    _local.conns = conns
    # what requests would send: a server whose ETag depends on the encoding answers alike
    send = {"Accept-Encoding": "gzip, deflate", "Connection": "keep-alive", **headers}
    if auth is not None:
        send["Authorization"] = "Basic " + b64encode(f"{auth[0]}:{auth[1]}".encode("latin-1")).decode("ascii")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    for attempt in (0, 1):  # a kept connection the server has since closed gets one fresh try
        conn = conns.get(key)
        if conn is None:
            conn = _connect(parts.scheme, parts.hostname or "", parts.port, verify, timeout)
            conns[key] = conn
        try:
            conn.request("GET", path, headers=send)
            r = conn.getresponse()
            r.read()
        except (OSError, http.client.HTTPException, ValueError):
            conn.close()
            del conns[key]
            if attempt == 0:
                continue
            return None
        if r.status != 304:
            return None
        return {k.lower(): v for k, v in r.getheaders()}
    return None


_contexts: dict[str | bool, ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def _connect(scheme: str, host: str, port: int | None, verify: str | bool,
             timeout: float) -> http.client.HTTPConnection:
    if scheme == "http":
        return _Plain(host, port, timeout=timeout)
    return _Tls(host, port, timeout=timeout, context=_context(verify))


def _context(verify: str | bool) -> ssl.SSLContext:
    """One TLS context per CA setting for the whole run: loading a CA bundle costs more than a 304, and
    every worker thread opens a connection of its own."""
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


def _ascii(host: str) -> str | bytes:
    """The host name as the socket calls take it. A str is encoded with the idna codec, whose import
    (unicodedata, stringprep) costs about as much as a round of 304s; an ASCII name needs no encoding."""
    try:
        return host.encode("ascii")
    except UnicodeEncodeError:
        return host


def _create_connection(address: tuple[str, int], timeout: float | None = None,
                       source_address: tuple[str, int] | None = None) -> socket.socket:
    host, port = address
    return socket.create_connection((_ascii(host), port), timeout, source_address)  # type: ignore[arg-type]


class _Plain(http.client.HTTPConnection):
    def __init__(self, host: str, port: int | None, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._create_connection = _create_connection


class _Tls(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int | None, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._create_connection = _create_connection
        self._tls = context

    def connect(self) -> None:
        # HTTPSConnection.connect, with the name for SNI and the certificate check passed as ASCII bytes
        # (never through a tunnel: with a proxy in the environment this module is not used)
        http.client.HTTPConnection.connect(self)
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=_ascii(self.host))
