"""The conditional GET a warm run revalidates pages with: the request it writes and the answers it takes.

Only a clean 304 is taken; everything else is left to requests (tests/loopback/test_resolve.py runs both
against a real server)."""

from __future__ import annotations

import io

import pytest

from stackctl.index.revalidate import _request, _response_head


def head(raw: bytes) -> tuple[int, dict[str, str], bool]:
    return _response_head(io.BytesIO(raw))


def test_a_clean_304_keeps_the_connection_and_gives_lower_cased_headers() -> None:
    status, headers, keep = head(b'HTTP/1.1 304 Not Modified\r\nETag: "abc"\r\nCache-Control: max-age=0\r\n\r\n')
    assert (status, keep) == (304, True)
    assert headers == {"etag": '"abc"', "cache-control": "max-age=0"}
    assert head(b"HTTP/1.1 304\r\nContent-Length: 0\r\n\r\n")[::2] == (304, True)  # no reason phrase, no body


@pytest.mark.parametrize("raw", [
    b"HTTP/1.0 304 Not Modified\r\n\r\n",  # HTTP/1.0 closes unless told otherwise
    b"HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",  # a body where none belongs
    b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
])
def test_a_304_that_leaves_the_connection_unsure_is_not_reused(raw: bytes) -> None:
    status, _, keep = head(raw)
    assert status == 304 and keep is False


def test_any_other_status_is_reported_as_it_is() -> None:
    assert head(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")[0] == 200
    assert head(b"HTTP/1.1 301 Moved\r\nLocation: /x/\r\n\r\n")[0] == 301


@pytest.mark.parametrize("raw", [
    b"",  # the server closed the kept connection
    b"SSH-2.0-OpenSSH\r\n\r\n",
    b"HTTP/1.1 3040 Not Modified\r\n\r\n",
    b"HTTP/2 304\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nETag: x\r\n folded: y\r\n\r\n",  # an obsolete folded line
    b"HTTP/1.1 304 Not Modified\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nETag: x\r\n",  # cut off before the blank line
    b"HTTP/1.1 304 Not Modified\r\n" + b"X-A: b\r\n" * 101 + b"\r\n",
    b"HTTP/1.1 304 Not Modified\r\nX-A: " + b"b" * 70000 + b"\r\n\r\n",
])
def test_a_malformed_answer_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        head(raw)


def test_the_request_is_a_plain_http11_get() -> None:
    sent = _request("/simple/torch/?x=1", {"Host": "127.0.0.1:8080", "If-None-Match": '"abc"'})
    assert sent == b'GET /simple/torch/?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nIf-None-Match: "abc"\r\n\r\n'


@pytest.mark.parametrize(("path", "headers"), [
    ("/simple/torch/", {"If-None-Match": '"abc"\r\nX-Injected: 1'}),  # a stored validator cannot add a header
    ("/simple/torch/", {"X\nY": "1"}),
    ("/simple/torch/", {"Bad:Name": "1"}),
    ("/simple/to rch/", {}),
    ("/simple/tørch/", {}),
    ("/simple/torch/", {"User-Agent": "\u2603"}),
])
def test_a_request_a_value_would_split_is_not_sent(path: str, headers: dict[str, str]) -> None:
    assert _request(path, headers) is None
