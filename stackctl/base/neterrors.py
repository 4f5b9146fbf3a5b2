"""Why a connection failed, in words: never urllib3's or the docker SDK's repr in a message."""

from __future__ import annotations

import errno
import socket
import sys

# Substrings of library messages, lower-cased, most specific first: urllib3 and requests wrap the socket
# error several times over, and only the text survives every layer.
_BY_TEXT = (
    ("certificate verify failed", "the TLS certificate is not trusted (CA bundle: REQUESTS_CA_BUNDLE)"),
    ("wrong version number", "TLS handshake failed: the server speaks plain HTTP"),
    ("ssl", "the TLS handshake failed"),
    ("name or service not known", "the host name does not resolve"),
    ("temporary failure in name resolution", "the host name does not resolve"),
    ("nodename nor servname", "the host name does not resolve"),
    ("failed to resolve", "the host name does not resolve"),
    ("connection refused", "connection refused: nothing listens there"),
    ("timed out", "no answer in time (timed out)"),
    ("read timeout", "no answer in time (timed out)"),
    ("connection reset", "the connection was reset"),
    ("connection broken", "the connection broke off in the middle of an answer"),
    ("ended prematurely", "the connection broke off in the middle of an answer"),
    ("incompleteread", "the connection broke off in the middle of an answer"),
    ("connection aborted", "the connection was closed mid-way"),
    ("remote end closed", "the connection was closed mid-way"),
    ("no such file or directory", "no socket at that path"),
    ("permission denied", "permission denied (the socket's group, e.g. docker, admits whom it lists)"),
    ("network is unreachable", "the network is unreachable"),
    ("no route to host", "no route to the host"),
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop(0)
        if e in seen or len(seen) > 20:
            continue
        seen.append(e)
        todo += [x for x in (e.__cause__, e.__context__, getattr(e, "reason", None)) if isinstance(x, BaseException)]
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
    return seen


def cause_in_words(exc: BaseException) -> str:
    """The reason a connection failed, as a person would say it ("connection refused: nothing listens there")."""
    chain = _chain(exc)
    # An SSL error can only come from a loaded ssl module: a run over plain HTTP never imports it for this
    ssl = sys.modules.get("ssl")
    for e in chain:
        if ssl is not None and isinstance(e, ssl.SSLCertVerificationError):
            return "the TLS certificate is not trusted (CA bundle: REQUESTS_CA_BUNDLE)"
        if isinstance(e, socket.gaierror):
            return "the host name does not resolve"
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return "connection refused: nothing listens there"
        if isinstance(e, FileNotFoundError):
            return "no socket at that path"
        if isinstance(e, PermissionError):
            return "permission denied (the socket's group, e.g. docker, admits whom it lists)"
        if isinstance(e, TimeoutError | socket.timeout):
            return "no answer in time (timed out)"
    text = " ".join(str(e) for e in chain).lower()
    for marker, words in _BY_TEXT:
        if marker in text:
            return words
    return f"the connection failed ({type(exc).__name__})"
