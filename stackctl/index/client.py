"""The only code that talks HTTP to package indexes.

Credentials go only to the index's own origin (scheme, host, port): redirects are followed by hand so a
hop to another host never carries them, and requests' own netrc lookup is off. Pages, metadata files
and HEAD answers go through the on-disk cache; 5xx answers and connection errors are retried with
exponential backoff; every failure becomes one `ServiceError` line naming index, subject and cause.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urljoin, urlsplit

from stackctl.base.files import new_file_mode
from stackctl.base.imageref import is_loopback_host
from stackctl.base.neterrors import cause_in_words
from stackctl.errors import CheckFailed, ServiceError, Unreachable
from stackctl.index.cache import Entry, HttpCache
from stackctl.index.config import IndexEndpoint, origin, tls_verify
from stackctl.index.pages import ACCEPT, IndexedFile, ProjectListing, listing, listing_from_json, listing_to_json

if TYPE_CHECKING:
    import requests

MAX_REDIRECTS = 5
# How resolvers word "no such name" (glibc, musl, macOS, Windows; urllib3 wraps them as NameResolutionError).
_DNS_FAILURES = ("name or service not known", "nodename nor servname", "temporary failure in name resolution",
                 "no address associated with hostname", "getaddrinfo failed", "nameresolutionerror",
                 "failed to resolve")
USER_AGENT = "stackctl (+index client)"


class HashMismatch(ServiceError):
    """A download whose bytes do not hash to the sha256 it was asked for. Said as the index's fault (exit 3),
    which it is when the sha256 is the index's own word; a caller that took the sha256 from a lock says
    whose word it was (`expected`, and the `got` the index served)."""

    def __init__(self, message: str, *, where: str, got: str, expected: str) -> None:
        super().__init__(message)
        self.where, self.got, self.expected = where, got, expected


class Downloadable(Protocol):
    """What a download needs of a file: an `IndexedFile` from a page, or a `LockedFile` from a lock."""

    @property
    def filename(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def sha256(self) -> str | None: ...


def _unreachable(ep: IndexEndpoint, what: str, cause: str, url: str, after: str, said: str | None = None,
                 ) -> Unreachable:
    """An index that did not answer: one error a run says once per index, with what to do about it."""
    local = is_loopback_host(urlsplit(ep.url).hostname or "")
    if ep.url_source == "url":  # a file named by its URL: no index to point elsewhere with --index
        hint = "is its server running on this machine?" if local else "check the URL and the network"
    elif local:
        hint = (f"is the server of index {ep.name} running on this machine? (the project's example index: "
                f"`python examples/vendor_index.py serve`, as README.md shows); or point the index elsewhere "
                f"with --index {ep.name}=URL")
    else:
        hint = f"check the URL and the network, or point index {ep.name} elsewhere with --index {ep.name}=URL"
    return Unreachable(f"index {ep.name}, {what}: {said or f'{cause} ({url})'}{after}", service=f"index {ep.name}",
                       base=ep.url, subject=what, cause=cause, after=after, hint=hint)


class NotCached(Exception):
    """Raised by a client from `cache_only()` where it would have to ask the index."""


class ProjectNotFound(CheckFailed):
    """The index answered, and the project is not there: the pin does not exist where the profile says."""


@dataclass(frozen=True)
class ClientOptions:
    cache_dir: Path | None = None  # None: no cache
    offline: bool = False
    timeout: float = 30.0
    retries: int = 3
    backoff: float = 0.25  # seconds before the first retry; doubles each time
    jobs: int = 16
    verify: str | bool | None = None  # CA bundle path; None: found as requests and pip find it


class IndexClient:
    def __init__(self, options: ClientOptions | None = None) -> None:
        self.options = options or ClientOptions()
        self._verify = tls_verify() if self.options.verify is None else self.options.verify
        self.cache = HttpCache(self.options.cache_dir) if self.options.cache_dir else None
        self._local = threading.local()
        self._cache_only = False
        # URLs whose whole bytes this client hashed and found equal to the index's sha256: evidence the
        # lock records per file, as against the index's word for it
        self.verified: set[str] = set()

    def cache_only(self) -> IndexClient:
        """This client answering from its cache alone: whatever needs a request (a missing entry, a stale one
        to revalidate) raises `NotCached` instead. It shares the cache and the `verified` set."""
        import copy

        view = copy.copy(self)
        view._cache_only = True
        return view

    # --- plumbing ------------------------------------------------------------------------------------
    def _session(self) -> requests.Session:
        s: requests.Session | None = getattr(self._local, "session", None)
        if s is None:
            import requests
            from requests.adapters import HTTPAdapter

            s = requests.Session()
            s.trust_env = False  # no netrc from requests: credentials are ours to place
            s.headers["User-Agent"] = USER_AGENT
            s.verify = self._verify
            adapter = HTTPAdapter(pool_connections=8, pool_maxsize=self.options.jobs)
            s.mount("http://", adapter)
            s.mount("https://", adapter)
            self._local.session = s
        return s

    def _send(self, ep: IndexEndpoint, method: str, url: str, what: str, headers: dict[str, str],
              stream: bool = False) -> requests.Response:
        """One logical request: redirects by hand, retries with backoff, errors as ServiceError."""
        if self._cache_only:
            raise NotCached(url)
        import requests

        if self.options.offline:
            raise ServiceError(f"index {ep.name}, {what}: not in the cache, and --offline forbids the network")
        # `timeout` bounds the whole request, retries included: an index that hangs fails in `timeout`
        # seconds, not (retries + 1) times that. Each attempt gets its share, or what is left.
        deadline = time.monotonic() + self.options.timeout
        share = self.options.timeout / (self.options.retries + 1)
        attempt = 0
        while True:
            current = url
            wait = max(0.01, min(share, deadline - time.monotonic()))
            try:
                for _ in range(MAX_REDIRECTS + 1):
                    auth = None
                    if ep.credentials is not None and origin(current) == ep.origin:
                        auth = (ep.credentials.username, ep.credentials.password)
                    proxies = requests.utils.get_environ_proxies(current)
                    r = self._session().request(method, current, headers=headers, auth=auth,
                                                timeout=wait, allow_redirects=False,
                                                stream=stream, proxies=proxies)
                    if r.is_redirect and "location" in r.headers:
                        current = urljoin(current, r.headers["location"])
                        r.close()
                        continue
                    break
                else:
                    raise ServiceError(f"index {ep.name}, {what}: more than {MAX_REDIRECTS} redirects from {url}")
            except requests.exceptions.Timeout:
                cause = f"no answer within {wait:.3g}s from {current}"
                silent: str | None = "no answer in time"
                retry = True
            except requests.exceptions.SSLError as exc:
                # Asking again cannot change a certificate; say which one failed and where the CA comes from.
                raise ServiceError(f"index {ep.name}, {what}: TLS failed for {current} ({_ssl_reason(exc)}); "
                                   "the CA bundle comes from REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE or pip's `cert`"
                                   ) from None
            except requests.exceptions.ConnectionError as exc:
                text = str(exc).lower()
                if any(m in text for m in _DNS_FAILURES):
                    # a name that does not resolve will not resolve on the next attempt either
                    host = urlsplit(current).hostname or current
                    raise _unreachable(ep, what, f"cannot resolve host {host}", current, "") from None
                cause = f"{cause_in_words(exc)} ({current})"
                silent = cause_in_words(exc)
                retry = True
            except requests.exceptions.RequestException as exc:
                raise ServiceError(f"index {ep.name}, {what}: {cause_in_words(exc)} for {current}") from exc
            else:
                if r.status_code < 500 or (method == "HEAD" and r.status_code == 501):
                    return r
                cause = f"HTTP {r.status_code} from {current}"
                silent = None  # it answered
                r.close()
                retry = True
            pause = self.options.backoff * (2 ** attempt)
            late = time.monotonic() + pause >= deadline
            if not retry or attempt >= self.options.retries or late:
                tries = f" after {attempt + 1} attempts" if attempt else ""
                spent = f" in {self.options.timeout:g}s (--timeout)" if late and attempt < self.options.retries else ""
                if silent is not None:
                    raise _unreachable(ep, what, silent, current, f"{tries}{spent}", said=cause)
                raise ServiceError(f"index {ep.name}, {what}: {cause}{tries}{spent}")
            time.sleep(pause)
            attempt += 1

    def _check(self, ep: IndexEndpoint, r: requests.Response, asked: str, what: str, *,
               project: bool = False) -> None:
        """`asked`: the URL the request was sent to. An answer from another host after a redirect names the
        redirect in its error (a 404 there is the other host's, not the index's verdict on the project)."""
        if r.status_code in (200, 206, 304):
            return
        redirected = origin(r.url) != origin(asked)
        if redirected:
            what = f"{what} (redirected from {asked} to another host, sent without credentials)"
        if r.status_code in (403, 404, 405, 501) and r.request.method == "HEAD":
            raise _NoHead(f"index {ep.name}, {what}: HEAD answered HTTP {r.status_code} from {r.url}",
                          r.status_code)
        if r.status_code == 404 and project and not redirected:
            raise ProjectNotFound(f"index {ep.name}, {what}: not found (HTTP 404 from {r.url})")
        if r.status_code == 404 and project:
            raise ServiceError(f"index {ep.name}, {what}: HTTP 404 from {r.url}")
        if r.status_code == 404:  # the index listed this file and cannot serve it
            raise ServiceError(f"index {ep.name}, {what}: listed on the project page, but HTTP 404 from {r.url}")
        if r.status_code in (401, 403):
            how = "credentials were sent" if ep.credentials else "no credentials are configured for it"
            raise ServiceError(f"index {ep.name}, {what}: HTTP {r.status_code} from {r.url} ({how})")
        raise ServiceError(f"index {ep.name}, {what}: HTTP {r.status_code} from {r.url}")

    def fetch(self, ep: IndexEndpoint, url: str, what: str, *, method: str = "GET", accept: str = "*/*",
              immutable: bool = False, project: bool = False) -> Entry:
        """GET (or HEAD) through the cache. `project`: a 404 means the index has no such project."""
        stored = self.cache.get(method, url, accept) if self.cache else None
        if stored is not None and (self.options.offline or immutable or stored.fresh()):
            return stored
        if self._cache_only:
            raise NotCached(url)
        headers = {"Accept": accept, **(stored.validators() if stored else {})}
        if stored is not None and method == "GET" and stored.validators() and not self.options.offline:
            from stackctl.index.revalidate import not_modified

            auth = ep.credentials if ep.credentials is not None and origin(url) == ep.origin else None
            # one attempt's share of the timeout: a hanging index then costs the same bounded time as a cold run
            same = not_modified(url, {**headers, "User-Agent": USER_AGENT},
                                (auth.username, auth.password) if auth else None, self._verify,
                                self.options.timeout / (self.options.retries + 1))
            if same is not None:  # a plain 304: no need for requests at all
                return self._not_modified(method, url, accept, stored, same)
        r = self._send(ep, method, url, what, headers)
        self._check(ep, r, url, what, project=project)
        now = time.time()
        if r.status_code == 304 and stored is not None:
            return self._not_modified(method, url, accept, stored, {k.lower(): v for k, v in r.headers.items()})
        entry = Entry(r.url, r.status_code, {k.lower(): v for k, v in r.headers.items()}, now,
                      r.content if method == "GET" else b"")
        if self.cache is not None:
            self.cache.put(method, url, accept, entry)
        return entry

    def _not_modified(self, method: str, url: str, accept: str, stored: Entry, headers: dict[str, str]) -> Entry:
        """The stored answer, with the validators and freshness the 304 (lower-cased `headers`) gave."""
        merged = {**stored.headers, **{k: v for k, v in headers.items()
                                       if k in ("etag", "cache-control", "last-modified")}}
        entry = Entry(stored.url, stored.status, merged, time.time(), stored.body)
        # Written again only when it changes something: new validators, or a freshness lifetime that the
        # 304 starts anew. Otherwise the stored entry already says all the 304 did.
        if self.cache is not None and (merged != stored.headers or (entry.max_age() or 0) > 0):
            self.cache.put(method, url, accept, entry, body_unchanged=True)
        return entry

    # --- what the resolver asks ----------------------------------------------------------------------
    def project(self, ep: IndexEndpoint, project: str) -> ProjectListing:
        from packaging.utils import canonicalize_name

        what = f"project {project}"
        url = urljoin(ep.url, canonicalize_name(project) + "/")
        entry = self.fetch(ep, url, what, accept=ACCEPT, project=True)
        if self.cache is not None:  # parsed before, from this very answer: no parser to import
            stored = self.cache.get_derived("GET", url, ACCEPT, entry)
            found = listing_from_json(stored) if stored is not None else None
            if found is not None and found.project == canonicalize_name(project):
                return found
        found = listing(ep.name, project, entry.body, entry.headers.get("content-type", "text/html"), entry.url)
        if self.cache is not None:
            self.cache.put_derived("GET", url, ACCEPT, entry, listing_to_json(found))
        return found

    def metadata(self, ep: IndexEndpoint, f: IndexedFile) -> bytes:
        return self._metadata_entry(ep, f).body

    def _metadata_entry(self, ep: IndexEndpoint, f: IndexedFile) -> Entry:
        what = f"file {f.filename}.metadata"
        entry = self.fetch(ep, f.metadata_url, what, immutable=f.metadata_sha256 is not None)
        if f.metadata_sha256 is not None:
            got = hashlib.sha256(entry.body).hexdigest()
            if got != f.metadata_sha256:
                raise ServiceError(f"index {ep.name}, {what}: sha256 {got} does not match the index's "
                                   f"{f.metadata_sha256}")
        return entry

    def requires_dist(self, ep: IndexEndpoint, f: IndexedFile) -> tuple[str, ...]:
        """Requires-Dist of a file, from its PEP 658 metadata file or else from the wheel itself.

        The list parsed once is kept beside the cached metadata, keyed to that very answer: a warm run
        reads it back instead of parsing again (and importing packaging's metadata parser and email).
        """
        if f.has_metadata:
            key = ("GET", f.metadata_url, "*/*")
            entry = self._metadata_entry(ep, f)
        else:
            key = ("GET", f.url + "#METADATA", f"sha256={f.sha256}")
            entry = Entry(f.url, 200, {}, 0.0, self.wheel_metadata(ep, f))
        if self.cache is not None:
            stored = self.cache.get_derived(*key, entry)
            found = _strings(stored) if stored is not None else None
            if found is not None:
                return found
        parsed = requires_dist(entry.body)
        if self.cache is not None and (f.has_metadata or f.sha256):
            self.cache.put_derived(*key, entry, json.dumps(list(parsed)).encode())
        return parsed

    def head(self, ep: IndexEndpoint, f: IndexedFile) -> HeadFacts:
        """Size and Last-Modified of a file (the upload-time stand-in on HTML-only indexes).

        A server that refuses HEAD (405, 501, 403, 404) is asked with a GET whose body is never read, for
        the size only: a GET's Last-Modified may be when a mirror or CDN fetched the file, not when it was
        uploaded. The upload time then stays unknown, with a warning; it is evidence, never fatal.
        """
        what = f"file {f.filename}"
        refused = None
        try:
            headers = self.fetch(ep, f.url, what, method="HEAD", immutable=True).headers
        except _NoHead as exc:
            refused = exc.status
            try:
                headers = self._get_headers(ep, f.url, what)
            except ServiceError:
                return HeadFacts(None, None, f"index {ep.name}: {f.filename}: HEAD answered HTTP {refused} and "
                                             "GET failed; upload time and size unknown")
        length = headers.get("content-length", "")
        size = int(length) if length.isdigit() else None
        lm = _http_date(headers.get("last-modified")) if refused is None else None
        warning = None
        if refused is not None:
            warning = f"index {ep.name}: {f.filename}: HEAD answered HTTP {refused}; upload time unknown"
        return HeadFacts(lm, size, warning)

    def last_modified(self, ep: IndexEndpoint, f: IndexedFile) -> datetime | None:
        return self.head(ep, f).last_modified

    def _get_headers(self, ep: IndexEndpoint, url: str, what: str) -> dict[str, str]:
        """The headers of a GET, cached like a HEAD answer; the body is not read."""
        stored = self.cache.get("HEAD", url, "*/*") if self.cache else None
        if stored is not None:
            return stored.headers
        # one byte asked: a server that honours it says the size in Content-Range, one that does not
        # sends the whole file with Content-Length (and the body is never read)
        r = self._send(ep, "GET", url, what, {"Accept": "*/*", "Range": "bytes=0-0"}, stream=True)
        try:
            self._check(ep, r, url, what)
            headers = {k.lower(): v for k, v in r.headers.items()}
        finally:
            r.close()
        total = headers.get("content-range", "").rpartition("/")[2]
        if r.status_code == 206:
            headers["content-length"] = total if total.isdigit() else ""
        if self.cache is not None:
            self.cache.put("HEAD", url, "*/*", Entry(r.url, r.status_code, headers, time.time(), b""))
        return headers

    def wheel_metadata(self, ep: IndexEndpoint, f: IndexedFile) -> bytes:
        """METADATA read from the wheel itself: HTTP range requests when served, else the whole file."""
        what = f"file {f.filename}"
        key = (f.url + "#METADATA", f"sha256={f.sha256}")  # what was read from a wheel of this exact hash
        stored = self.cache.get("GET", *key) if self.cache and f.sha256 else None
        if stored is not None:
            return stored.body
        if self._cache_only:
            raise NotCached(f.url)
        if self.options.offline:
            raise ServiceError(f"index {ep.name}, {what}: metadata not in the cache, and --offline is set")
        body = self._wheel_metadata(ep, f)
        if self.cache is not None and f.sha256:
            self.cache.put("GET", *key, Entry(f.url, 200, {}, time.time(), body))
        return body

    def core_metadata(self, ep: IndexEndpoint, f: IndexedFile) -> bytes:
        """A wheel's METADATA: the index's PEP 658 file where it has one, else read from the wheel by ranges."""
        return self.metadata(ep, f) if f.has_metadata else self._wheel_metadata(ep, f)

    def _wheel_metadata(self, ep: IndexEndpoint, f: IndexedFile) -> bytes:
        from stackctl.index.remote import RemoteFile, read_metadata

        try:
            with RemoteFile(self, ep, f.url, sha256=f.sha256) as remote, zipfile.ZipFile(remote) as zf:
                return read_metadata(zf)
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as exc:
            raise ServiceError(f"index {ep.name}, file {f.filename}: not a readable wheel ({exc})") from None

    def get(self, ep: IndexEndpoint, url: str, what: str, headers: dict[str, str],
            allow: tuple[int, ...] = ()) -> requests.Response:
        """A streamed GET of a file of `ep` (a range, or the whole file), with the client's policy; the
        caller reads and closes the response. Any answer but 200, 206 or one in `allow` is a ServiceError."""
        r = self._send(ep, "GET", url, what, {"Accept-Encoding": "identity", **headers}, stream=True)
        if r.status_code not in allow:
            self._check(ep, r, url, what)
        return r

    def download(self, ep: IndexEndpoint, f: Downloadable, dest: Path,
                 progress: Callable[[int], None] | None = None) -> None:
        """Stream `f` into `dest`, checking sha256; a partial or wrong file never stays at `dest`."""
        what = f"file {f.filename}"
        r = self._send(ep, "GET", f.url, what, {"Accept": "*/*"}, stream=True)
        self._check(ep, r, f.url, what)
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        h = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), new_file_mode())  # a wheelhouse is the user's, as their umask says
                for chunk in r.iter_content(1 << 20):
                    fh.write(chunk)
                    h.update(chunk)
                    if progress:
                        progress(len(chunk))
            if f.sha256 and h.hexdigest() != f.sha256:
                raise HashMismatch(f"index {ep.name}, {what}: downloaded sha256 {h.hexdigest()} does not match "
                                   f"the index's {f.sha256}", where=f"index {ep.name}, {what}",
                                   got=h.hexdigest(), expected=f.sha256)
            os.replace(tmp, dest)
            if f.sha256:
                self.verified.add(f.url)
        except BaseException as exc:
            Path(tmp).unlink(missing_ok=True)
            if _is_requests_error(exc):  # a RequestException is an OSError too: ask it first
                raise ServiceError(f"index {ep.name}, {what}: download interrupted ({type(exc).__name__})") from exc
            if isinstance(exc, OSError):
                raise ServiceError(f"index {ep.name}, {what}: cannot write {dest} ({exc.strerror or exc})") from exc
            raise
        finally:
            r.close()


def requires_dist(metadata: bytes) -> tuple[str, ...]:
    """The Requires-Dist lines of a METADATA file, as packaging reads them."""
    from packaging.metadata import parse_email

    raw, _ = parse_email(metadata)
    return tuple(raw.get("requires_dist", ()))


def _strings(data: bytes) -> tuple[str, ...] | None:
    """A JSON list of strings `requires_dist` stored, or None for anything else."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _ssl_reason(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("certificate verify failed: ", "SSL: "):
        if marker in text:
            return text.split(marker, 1)[1].split(" (_ssl")[0].split("')")[0][:120]
    return type(exc).__name__


def _is_requests_error(exc: BaseException) -> bool:
    import requests

    return isinstance(exc, requests.exceptions.RequestException)


class _NoHead(ServiceError):
    """The server refuses HEAD (405, 501, 403, 404): callers that can do without it catch this."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class HeadFacts:
    last_modified: datetime | None
    size: int | None
    warning: str | None = None  # set when the server refused HEAD and the time stays unknown


def _http_date(value: str | None) -> datetime | None:
    if not value:
        return None
    from email.utils import parsedate_to_datetime  # only HTML-only indexes' Last-Modified needs it

    try:
        return parsedate_to_datetime(value).astimezone(timezone.utc)
    except (TypeError, ValueError):
        return None

