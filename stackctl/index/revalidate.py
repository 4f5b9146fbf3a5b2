"""A stored page revalidated without requests: one conditional GET through the standard library.

A warm run asks for every page again with `If-None-Match`, and the answer is nearly always a bodiless
304. Importing requests (urllib3, charset_normalizer, idna) for that costs more than the whole round
of 304s, so a stored page is revalidated here first. Anything but a plain 304 — a changed page, a
redirect, an error status, a refused connection, a proxy in the environment — gives None, and the
caller asks again through requests, which follows redirects by hand, retries and names every failure.
"""

from __future__ import annotations

import os
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
    import http.client

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


def _connect(scheme: str, host: str, port: int | None, verify: str | bool, timeout: float) -> Any:
    import http.client

    if scheme == "http":
        return http.client.HTTPConnection(host, port, timeout=timeout)
    import ssl

    if verify is False:
        context = ssl._create_unverified_context()
    else:
        if verify is True:
            import certifi  # requests' own bundle, as `tls_verify` means by True

            verify = certifi.where()
        context = ssl.create_default_context(cafile=verify if os.path.isfile(verify) else None,
                                             capath=verify if os.path.isdir(verify) else None)
    return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)

