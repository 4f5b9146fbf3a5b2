"""An on-disk HTTP cache for index pages, metadata files and HEAD answers.

Entries are keyed by method, URL and Accept header (never by credentials). A stored response is
reused while `Cache-Control: max-age` says it is fresh, revalidated with ETag / Last-Modified when it
is not, and never stored under `no-store`. Immutable entries (a metadata file checked against the
digest the page gave, the HEAD of a published file) are reused without asking.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

KEPT_HEADERS = ("content-type", "etag", "last-modified", "cache-control", "accept-ranges", "content-length")


def default_cache_dir() -> Path:
    if os.environ.get("STACKCTL_CACHE_DIR"):
        return Path(os.environ["STACKCTL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stackctl" / "http"


@dataclass(frozen=True)
class Entry:
    url: str  # the final URL after redirects
    status: int
    headers: dict[str, str] = field(hash=False)
    stored: float
    body: bytes = b""

    def max_age(self) -> float | None:
        cc = self.headers.get("cache-control", "").lower()
        if "no-cache" in cc:
            return 0.0
        m = re.search(r"max-age=(\d+)", cc)
        return float(m.group(1)) if m else None

    def fresh(self, now: float | None = None) -> bool:
        age = (now or time.time()) - self.stored
        ma = self.max_age()
        return ma is not None and age < ma

    def validators(self) -> dict[str, str]:
        out = {}
        if "etag" in self.headers:
            out["If-None-Match"] = self.headers["etag"]
        if "last-modified" in self.headers:
            out["If-Modified-Since"] = self.headers["last-modified"]
        return out


def _write(path: Path, data: bytes) -> None:
    """Replace atomically but without fsync: a cache entry lost in a crash is only a miss (and a torn
    one fails its body hash), while an fsync per entry would make a warm run wait on the disk for every
    page it revalidates."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class HttpCache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _key(self, method: str, url: str, accept: str) -> Path:
        h = hashlib.sha256(f"{method} {url} {accept}".encode()).hexdigest()
        return self.root / h[:2] / h

    def get(self, method: str, url: str, accept: str) -> Entry | None:
        p = self._key(method, url, accept)
        try:
            meta = json.loads((p.with_suffix(".json")).read_text(encoding="utf-8"))
            body = p.with_suffix(".body").read_bytes() if method == "GET" else b""
        except (OSError, ValueError):
            return None
        if hashlib.sha256(body).hexdigest() != meta.get("body_sha256"):
            return None  # a torn or tampered entry is a miss, never an answer
        return Entry(meta["url"], meta["status"], meta["headers"], meta["stored"], body)

    def put(self, method: str, url: str, accept: str, entry: Entry, *, body_unchanged: bool = False) -> None:
        """`body_unchanged`: a revalidation (304) of the stored entry; only its headers are written again."""
        if "no-store" in entry.headers.get("cache-control", "").lower():
            return
        p = self._key(method, url, accept)
        headers = {k: v for k, v in entry.headers.items() if k in KEPT_HEADERS}
        if method == "GET" and not body_unchanged:
            _write(p.with_suffix(".body"), entry.body)
        meta = {"url": entry.url, "status": entry.status, "headers": headers, "stored": entry.stored,
                "body_sha256": hashlib.sha256(entry.body).hexdigest()}
        _write(p.with_suffix(".json"), json.dumps(meta, sort_keys=True).encode())

    # --- a derived form of a stored body (a parsed page), valid only for the exact answer it came from ------
    @staticmethod
    def _derived_key(entry: Entry) -> str:
        """The validator the server sent (ETag, else Last-Modified), the final URL and the body's sha256:
        a page that changed, moved or was revalidated into another body never meets an old parse."""
        validator = entry.headers.get("etag") or entry.headers.get("last-modified") or ""
        body = hashlib.sha256(entry.body).hexdigest()
        return hashlib.sha256(f"{validator}\n{entry.url}\n{body}".encode()).hexdigest()

    def get_derived(self, method: str, url: str, accept: str, entry: Entry) -> bytes | None:
        p = self._key(method, url, accept).with_suffix(".parsed")
        try:
            data = p.read_bytes()
        except OSError:
            return None
        key, _, payload = data.partition(b"\n")
        return payload if key.decode("ascii", "replace") == self._derived_key(entry) else None

    def put_derived(self, method: str, url: str, accept: str, entry: Entry, payload: bytes) -> None:
        if "no-store" in entry.headers.get("cache-control", "").lower():
            return
        p = self._key(method, url, accept).with_suffix(".parsed")
        _write(p, self._derived_key(entry).encode() + b"\n" + payload)
