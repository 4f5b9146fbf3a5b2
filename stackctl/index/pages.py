"""Project pages of a simple repository, parsed into values: PEP 691 JSON or PEP 503 HTML.

Parsing is `pypi-simple`'s (BeautifulSoup for HTML, a pydantic model of PEP 691 for JSON), so a
hand-written parser does not have to get HTML entities, `<base href>` and PEP 629 versions right. On
top of it this module adds what pip also insists on: the PEP 714 fallback to the older
`data-dist-info-metadata` key, and a refusal of links that would send a download somewhere odd.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from packaging.tags import Tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from stackctl.base.files import unsafe_component
from stackctl.errors import ServiceError
from stackctl.profile.versions import too_long_number

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
_HEX64 = re.compile(r"[0-9a-f]{64}")


class PageError(ValueError):
    """The page is not a simple-repository page we can trust; the message says why."""


@dataclass(frozen=True)
class IndexedFile:
    """One distribution file as the index lists it."""

    filename: str
    url: str  # absolute, no fragment, no credentials
    name: NormalizedName
    version: Version
    sha256: str | None
    tags: frozenset[Tag]  # empty for an sdist
    build: tuple[int, str] | tuple[()] = ()
    size: int | None = None
    upload_time: datetime | None = None
    yanked: bool = False
    yanked_reason: str | None = None
    requires_python: str | None = None
    metadata_sha256: str | None = None  # PEP 658/714 digest of the metadata file
    has_metadata: bool = False

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def metadata_url(self) -> str:
        return self.url + ".metadata"


@dataclass(frozen=True)
class ProjectListing:
    project: NormalizedName
    files: tuple[IndexedFile, ...]
    source: str  # "json" | "html"
    ignored: tuple[str, ...] = ()  # links that are not distribution files of this project


def _clean_url(url: str, page_url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a broken IPv6 host, a port out of range or not a number
        raise PageError(f"link {url[:200]!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https", "file"):
        raise PageError(f"link {url!r} has scheme {parts.scheme or 'none'!r}, not http(s)")
    if parts.scheme == "file" and not page_url.startswith("file:"):
        raise PageError(f"link {url!r} points into the local file system")
    host = parts.hostname or ""
    netloc = host if port is None else f"{host}:{port}"
    if ":" in host:
        netloc = f"[{host}]" if port is None else f"[{host}]:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def _check_filename(filename: str, url: str) -> None:
    if unsafe_component(filename) is not None:  # it becomes a path in a wheelhouse and a build context
        raise PageError(f"link text {filename[:200]!r} is not a file name")
    last = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if last != filename:
        raise PageError(f"link {filename!r} points at a different file ({last!r})")


def _digest(value: Any) -> str | None:
    if isinstance(value, dict):
        d = value.get("sha256")
        return d.lower() if isinstance(d, str) and _HEX64.fullmatch(d.lower()) else None
    return None


def _make(project: NormalizedName, filename: str, url: str, page_url: str, sha256: str | None,
          **extra: Any) -> IndexedFile | None:
    """An `IndexedFile`, or None for a link that is not one of `project`'s distribution files."""
    if too_long_number(filename):
        return None  # no version has such numbers, and turning them into ints costs quadratic time
    try:
        if filename.endswith(".whl"):
            name, version, build, tags = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
            build, tags = (), frozenset()
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    if name != project:
        return None
    clean = _clean_url(url, page_url)
    _check_filename(filename, clean)
    if sha256 is not None and not _HEX64.fullmatch(sha256):
        raise PageError(f"{filename}: sha256 {sha256[:80]!r} is not 64 hex digits")
    return IndexedFile(filename=filename, url=clean, name=name, version=version, sha256=sha256,
                       tags=frozenset(tags), build=build, **extra)


def _utc(t: datetime | None, filename: str) -> datetime | None:
    try:
        return t.astimezone(timezone.utc) if t else None
    except (OverflowError, ValueError):  # 9999-12-31T23:59-01:00 is a valid time with no UTC year
        raise PageError(f"{filename[:200]}: upload-time {t} is out of range") from None


def parse_json(project: str, data: bytes, page_url: str) -> ProjectListing:
    import json

    from pydantic import ValidationError
    from pypi_simple import ProjectPage, UnsupportedRepoVersionError

    key = canonicalize_name(project)
    try:
        raw = json.loads(data)
        page = ProjectPage.from_json_data(raw, page_url)
    except RecursionError:
        raise PageError("JSON nested too deeply to be a PEP 691 page") from None
    except (ValueError, UnicodeDecodeError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        where = ".".join(str(p) for p in first["loc"]) + ": " + first["msg"] if first else str(exc)[:120]
        raise PageError(f"JSON does not match PEP 691 ({where})") from None
    except UnsupportedRepoVersionError as exc:
        raise PageError(str(exc)) from None
    if canonicalize_name(page.project) != key:
        raise PageError(f"JSON page names project {page.project!r}, not {project!r}")
    files: list[IndexedFile] = []
    ignored: list[str] = []
    for pkg, rawf in zip(page.packages, raw["files"], strict=True):
        md = rawf.get("core-metadata", rawf.get("data-dist-info-metadata"))
        made = _make(key, pkg.filename, pkg.url, page_url, _digest(pkg.digests),
                     size=pkg.size, upload_time=_utc(pkg.upload_time, pkg.filename),
                     yanked=pkg.is_yanked, yanked_reason=pkg.yanked_reason or None,
                     requires_python=pkg.requires_python, metadata_sha256=_digest(md),
                     has_metadata=bool(md))
        if made is None:
            ignored.append(pkg.filename)
        else:
            files.append(made)
    return ProjectListing(key, tuple(files), "json", tuple(ignored))


def parse_html(project: str, data: bytes, page_url: str, encoding: str | None = None) -> ProjectListing:
    from bs4.exceptions import ParserRejectedMarkup
    from pypi_simple import DistributionPackage, UnsupportedRepoVersionError
    from pypi_simple.html import RepositoryPage

    key = canonicalize_name(project)
    # pypi-simple's own errors, a `pypi:repository-version` that is no version, a `<base href>` or link
    # URL urllib cannot split (ValueError), HTML the parser gives up on: the page is not one to trust.
    rejected = (UnsupportedRepoVersionError, ValueError, ParserRejectedMarkup, RecursionError)
    try:
        page = RepositoryPage.from_html(data, page_url, encoding)
    except rejected as exc:
        raise PageError(f"HTML not readable as a PEP 503 page ({_one_line(exc)})") from None
    files: list[IndexedFile] = []
    ignored: list[str] = []
    for link in page.links:
        try:
            pkg = DistributionPackage.from_link(link, project)
        except rejected as exc:
            raise PageError(f"link {link.text[:80]!r}: {_one_line(exc)}") from None
        md_attr = link.get_str_attrib("data-core-metadata") or link.get_str_attrib("data-dist-info-metadata")
        md_sha = None
        if md_attr and md_attr.startswith("sha256="):
            md_sha = md_attr.removeprefix("sha256=").lower()
            if not _HEX64.fullmatch(md_sha):
                md_sha = None
        sha = pkg.digests.get("sha256")
        made = _make(key, pkg.filename, pkg.url, page_url, sha.lower() if sha else None,
                     yanked=pkg.is_yanked, yanked_reason=pkg.yanked_reason or None,
                     requires_python=pkg.requires_python, metadata_sha256=md_sha,
                     has_metadata=md_attr is not None and md_attr.lower() not in ("", "false"))
        if made is None:
            ignored.append(pkg.filename[:80])
        else:
            files.append(made)
    return ProjectListing(key, tuple(files), "html", tuple(ignored))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def parse_page(project: str, data: bytes, content_type: str, page_url: str) -> ProjectListing:
    ctype, _, params = content_type.partition(";")
    ctype = ctype.strip().lower()
    if ctype == JSON_TYPE:
        return parse_json(project, data, page_url)
    if ctype in ("text/html", "application/vnd.pypi.simple.v1+html", ""):
        m = re.search(r"charset=([\w-]+)", params)
        return parse_html(project, data, page_url, m.group(1) if m else None)
    raise PageError(f"unexpected content type {ctype!r}")


def listing(index: str, project: str, data: bytes, content_type: str, page_url: str) -> ProjectListing:
    """`parse_page` at the edge of the index: a page it cannot trust is the index's failure (exit 3),
    named by index and project."""
    try:
        return parse_page(project, data, content_type, page_url)
    except PageError as exc:
        raise ServiceError(f"index {index}, project {project}: {exc}") from None


# --- parsed pages, kept beside the HTTP cache -------------------------------------------------------------
# A warm run revalidates every page (304) and would parse it again: importing pypi-simple's pydantic model
# and BeautifulSoup would be most of a warm run (benchmarks/README.md). A listing parsed once is
# stored as plain JSON; name, version, build and tags come back from the file name (`packaging` is
# imported anyway), so reading it imports neither parser.

LISTING_FORMAT = 1
_KEPT = ("filename", "url", "sha256", "size", "yanked", "yanked_reason", "requires_python", "metadata_sha256",
         "has_metadata")


def listing_to_json(listing: ProjectListing) -> bytes:
    import json

    files = [{**{k: getattr(f, k) for k in _KEPT},
              "upload_time": f.upload_time.isoformat() if f.upload_time else None} for f in listing.files]
    return json.dumps({"format": LISTING_FORMAT, "project": listing.project, "source": listing.source,
                       "ignored": list(listing.ignored), "files": files}, separators=(",", ":")).encode()


def listing_from_json(data: bytes) -> ProjectListing | None:
    """The listing `listing_to_json` stored, or None for anything else (another format, a damaged file)."""
    import json

    try:
        d = json.loads(data)
        if d.get("format") != LISTING_FORMAT:
            return None
        project = canonicalize_name(d["project"])
        files = []
        for f in d["files"]:
            name_fields = _from_filename(f["filename"])
            if name_fields is None:
                return None
            when = f["upload_time"]
            files.append(IndexedFile(**{k: f[k] for k in _KEPT}, **name_fields,
                                     upload_time=datetime.fromisoformat(when) if when else None))
        return ProjectListing(project, tuple(files), d["source"], tuple(d["ignored"]))
    except (ValueError, KeyError, TypeError):
        return None


def _from_filename(filename: str) -> dict[str, Any] | None:
    try:
        if filename.endswith(".whl"):
            name, version, build, tags = parse_wheel_filename(filename)
            return {"name": name, "version": version, "build": build, "tags": frozenset(tags)}
        name, version = parse_sdist_filename(filename)
        return {"name": name, "version": version, "build": (), "tags": frozenset()}
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
