"""Page parsing and index configuration, without a server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackctl.errors import InputError
from stackctl.index.config import (
    Credentials,
    endpoint,
    env_var_for,
    parse_overrides,
    public_index_url,
    tls_verify,
)
from stackctl.index.pages import JSON_TYPE, PageError, listing_from_json, listing_to_json, parse_page
from stackctl.profile.model import Index

SHA = "ab" * 32
WHL = "torch-2.11.0-cp310-cp310-linux_x86_64.whl"


def test_json_page_with_pep714_fallback_and_pep700_fields() -> None:
    page = {"meta": {"api-version": "1.1"}, "name": "torch", "versions": ["2.11.0"], "files": [
        {"filename": WHL, "url": f"../../f/{WHL}", "hashes": {"sha256": SHA}, "size": 3,
         "upload-time": "2026-03-01T12:00:00.5Z", "data-dist-info-metadata": {"sha256": SHA},
         "yanked": "bad build", "requires-python": ">=3.10"},
        {"filename": "other-1.0-py3-none-any.whl", "url": "x", "hashes": {}},
    ]}
    lst = parse_page("torch", json.dumps(page).encode(), JSON_TYPE, "http://i.test/simple/torch/")
    [f] = lst.files
    assert f.url == f"http://i.test/f/{WHL}" and f.sha256 == SHA and f.size == 3
    assert f.upload_time is not None and f.upload_time.isoformat() == "2026-03-01T12:00:00.500000+00:00"
    assert f.yanked and f.yanked_reason == "bad build" and f.requires_python == ">=3.10"
    assert f.has_metadata and f.metadata_sha256 == SHA
    assert lst.source == "json" and lst.ignored == ("other-1.0-py3-none-any.whl",)


def test_html_page_with_entities_and_credentials_in_links() -> None:
    html = (f'<html><body><a href="http://user:pw@i.test/f/{WHL}#sha256={SHA.upper()}" '
            f'data-requires-python="&gt;=3.10" data-dist-info-metadata="sha256={SHA}" data-yanked="">{WHL}</a>')
    [f] = parse_page("torch", html.encode(), "text/html; charset=utf-8", "http://i.test/simple/torch/").files
    assert f.url == f"http://i.test/f/{WHL}"  # userinfo never survives into a URL we record
    assert f.sha256 == SHA and f.requires_python == ">=3.10" and f.metadata_sha256 == SHA and f.yanked


@pytest.mark.parametrize(("href", "cause"), [
    ("file:///etc/passwd", "local file system"),
    ("data:text/plain,hi", "scheme 'data'"),
    ("../../f/other.whl", "points at a different file"),
])
def test_hostile_links(href: str, cause: str) -> None:
    with pytest.raises(PageError, match=cause):
        parse_page("torch", f'<a href="{href}">{WHL}</a>'.encode(), "text/html", "http://i.test/simple/torch/")


def test_unexpected_content_type() -> None:
    with pytest.raises(PageError, match="unexpected content type 'application/xml'"):
        parse_page("torch", b"<x/>", "application/xml", "http://i.test/simple/torch/")


def test_endpoint_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    idx = Index("musa-mirror", "https://vendor.test/simple", username_env="U", password_env="P", netrc=False)
    env = {"U": "me", "P": "tok"}
    ep = endpoint(idx, None, env)
    assert ep.url == "https://vendor.test/simple/" and ep.url_source == "profile"
    assert ep.credentials == Credentials("me", "tok") and "tok" not in repr(ep) + repr(ep.credentials)
    assert env_var_for("musa-mirror") == "STACKCTL_INDEX_MUSA_MIRROR_URL"
    ep = endpoint(idx, None, {**env, "STACKCTL_INDEX_MUSA_MIRROR_URL": "http://127.0.0.1:1/s/"})
    assert (ep.url, ep.url_source) == ("http://127.0.0.1:1/s/", "env")
    ep = endpoint(idx, {"musa-mirror": "http://a:b@127.0.0.1:2/s/"}, {})
    assert (ep.url, ep.url_source, ep.credentials) == ("http://127.0.0.1:2/s/", "option", Credentials("a", "b"))


@pytest.fixture(name="pip_env")
def pip_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment whose pip configuration is only what a test writes: a home of its own, no global files
    (this machine's /etc/pip.conf is not the test's), and no pip to ask for its default (that is a process:
    tests/loopback/test_resolve_faults.py asks it)."""
    import stackctl.index.pipconf

    monkeypatch.setattr(stackctl.index.pipconf, "_global_files", lambda env: [])
    monkeypatch.setattr(stackctl.index.pipconf, "pip_default_index", lambda keep_in=None: None)
    monkeypatch.setattr(stackctl.index.pipconf.sys, "prefix", str(tmp_path / "venv"))
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config")}


def test_public_index_from_pip_configuration(tmp_path: Path, pip_env: dict[str, str]) -> None:
    assert public_index_url({"PIP_INDEX_URL": "http://mirror.test/simple/ http://x"}) == "http://mirror.test/simple/"
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://conf.test/simple/\nextra-index-url = file:///x\n")
    env = {**pip_env, "PIP_CONFIG_FILE": str(conf)}
    assert public_index_url(env) == "http://conf.test/simple/"
    conf.write_text("[global]\nextra-index-url = http://extra.test/simple/\nfind-links = /opt/wheels\n")
    assert public_index_url(env) is None  # extras and find-links are not the index
    with pytest.raises(InputError, match=r"^indexes\.public: from_pip = true, but no pip here names an index \(no "
                       r"index-url configured, no pip to ask\); pass --index public=URL or set PIP_INDEX_URL$"):
        endpoint(Index("public", None, from_pip=True), None, env)


def test_pip_configuration_files_in_pips_order(tmp_path: Path, pip_env: dict[str, str]) -> None:
    """The user's files (legacy, then XDG), the environment's, then PIP_CONFIG_FILE: the later wins; `[install]`
    counts where `[global]` says nothing; `index_url` is `index-url`; the null device reads nothing."""
    import os

    home = Path(pip_env["HOME"])
    legacy, xdg = home / ".pip" / "pip.conf", home / ".config" / "pip" / "pip.conf"
    site = tmp_path / "venv" / "pip.conf"
    for path in (legacy, xdg, site):
        path.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text("[install]\nindex_url = http://legacy.test/simple/\n")
    assert public_index_url(pip_env) == "http://legacy.test/simple/"
    xdg.write_text("[install]\nindex-url = http://xdg.test/simple/\n")
    assert public_index_url(pip_env) == "http://xdg.test/simple/"
    site.write_text("[global]\nindex-url = http://venv.test/simple/\n")
    assert public_index_url(pip_env) == "http://venv.test/simple/"
    named = tmp_path / "named.conf"
    named.write_text("[global]\nindex-url = http://named.test/simple/\n")
    assert public_index_url({**pip_env, "PIP_CONFIG_FILE": str(named)}) == "http://named.test/simple/"
    site.unlink()
    named.write_text("[global]\ncert = /x.pem\n")  # a named file that exists leaves the user's files out
    assert public_index_url({**pip_env, "PIP_CONFIG_FILE": str(named)}) is None
    assert public_index_url({**pip_env, "PIP_CONFIG_FILE": os.devnull}) is None
    xdg.write_text("[install\nbroken")  # pip would refuse it; here it sets nothing
    assert public_index_url(pip_env) == "http://legacy.test/simple/"


def test_pip_configuration_without_pip(tmp_path: Path, pip_env: dict[str, str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without pip (a tool that makes environments without it) reads the same configuration."""
    import sys

    monkeypatch.setitem(sys.modules, "pip", None)  # `import pip` now raises ImportError
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://conf.test/simple/\ncert = /conf/ca.pem\n")
    env = {**pip_env, "PIP_CONFIG_FILE": str(conf)}
    ep = endpoint(Index("public", None, from_pip=True), None, env)
    assert (ep.url, ep.url_source) == ("http://conf.test/simple/", "pip")
    assert tls_verify(env) == "/conf/ca.pem"
    # Work that reads only a lock's files by their URLs (fetch, abi) needs no page: with nothing configured,
    # the origin the lock's files came from stands in for the index.
    ep = endpoint(Index("public", None, from_pip=True), None, pip_env, locked="http://files.test/")
    assert (ep.url, ep.url_source) == ("http://files.test/", "lock")


def test_ca_bundle_as_requests_then_pip_find_it(tmp_path: Path, pip_env: dict[str, str]) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\ncert = /conf/ca.pem\n")
    env = {**pip_env, "PIP_CONFIG_FILE": str(conf)}
    assert tls_verify(env) == "/conf/ca.pem"
    assert tls_verify({**env, "PIP_CERT": "/pip/ca.pem"}) == "/pip/ca.pem"
    assert tls_verify({**env, "PIP_CERT": "/pip/ca.pem", "CURL_CA_BUNDLE": "/curl/ca.pem"}) == "/curl/ca.pem"
    assert tls_verify({**env, "CURL_CA_BUNDLE": "/curl/ca.pem", "REQUESTS_CA_BUNDLE": "/req/ca.pem"}) == "/req/ca.pem"


def test_override_syntax() -> None:
    assert parse_overrides(["a=http://x/simple/"]) == {"a": "http://x/simple/"}
    with pytest.raises(InputError, match="expected NAME=URL"):
        parse_overrides(["a"])
    with pytest.raises(InputError, match="not an http"):
        parse_overrides(["a=ftp://x"])
    with pytest.raises(InputError, match=r"^--index a: 'file:///opt/simple' is not an http\(s\) URL$"):
        parse_overrides(["a=file://u:secret@/opt/simple"])  # requests cannot read it; never echo a secret
    idx = Index("vendor", "https://vendor.test/simple/")
    with pytest.raises(InputError, match=r"^STACKCTL_INDEX_VENDOR_URL: 'ftp://x/simple/' is not an http\(s\) URL"):
        endpoint(idx, None, {"STACKCTL_INDEX_VENDOR_URL": "ftp://x/simple/"})
    with pytest.raises(InputError, match=r"^pip's index-url: 'file:///opt/simple/' is not an http\(s\) URL"):
        endpoint(Index("public", None, from_pip=True), None, {"PIP_INDEX_URL": "file:///opt/simple/"})


def test_http_cache_freshness_validators_and_torn_entries(tmp_path: Path) -> None:
    from stackctl.index.cache import Entry, HttpCache

    cache = HttpCache(tmp_path)
    url, accept = "http://i.test/simple/torch/", "application/json"
    page = Entry(url, 200, {"etag": '"v1"', "last-modified": "Sun, 01 Mar 2026 12:00:00 GMT",
                            "cache-control": "max-age=60", "set-cookie": "s=1"}, 1000.0, b"page")
    cache.put("GET", url, accept, page)
    got = cache.get("GET", url, accept)
    assert got is not None and got.body == b"page" and "set-cookie" not in got.headers
    assert got.fresh(now=1059.0) and not got.fresh(now=1061.0)
    assert got.validators() == {"If-None-Match": '"v1"', "If-Modified-Since": "Sun, 01 Mar 2026 12:00:00 GMT"}
    assert cache.get("GET", url, "text/html") is None  # another representation, another entry
    assert not Entry(url, 200, {"cache-control": "no-cache, max-age=60"}, 1000.0).fresh(now=1001.0)
    assert not Entry(url, 200, {}, 1000.0).fresh(now=1000.5)  # no max-age: always revalidate
    secret = "http://i.test/simple/secret/"
    cache.put("GET", secret, accept, Entry(secret, 200, {"cache-control": "no-store"}, 1000.0, b"x"))
    assert cache.get("GET", secret, accept) is None and not list(tmp_path.rglob("*.body"))[1:]
    [body] = tmp_path.rglob("*.body")
    body.write_bytes(b"torn")
    assert cache.get("GET", url, accept) is None  # a body that fails its hash is a miss, never an answer


def test_a_stored_listing_reads_back_equal_to_the_parse() -> None:
    page = {"meta": {"api-version": "1.1"}, "name": "torch", "versions": ["2.11.0"], "files": [
        {"filename": WHL, "url": f"../../f/{WHL}", "hashes": {"sha256": SHA}, "size": 3,
         "upload-time": "2026-03-01T12:00:00.5Z", "core-metadata": {"sha256": SHA}, "yanked": "bad build"},
        {"filename": "torch-2.11.0.tar.gz", "url": "../../f/torch-2.11.0.tar.gz", "hashes": {}},
        {"filename": "other-1.0-py3-none-any.whl", "url": "x", "hashes": {}},
    ]}
    parsed = parse_page("torch", json.dumps(page).encode(), JSON_TYPE, "http://i.test/simple/torch/")
    assert listing_from_json(listing_to_json(parsed)) == parsed
    html = f'<a href="/f/{WHL}#sha256={SHA}" data-requires-python="&gt;=3.10">{WHL}</a>'
    parsed = parse_page("torch", html.encode(), "text/html", "http://i.test/simple/torch/")
    assert listing_from_json(listing_to_json(parsed)) == parsed
    # anything else is a miss, never a wrong answer
    assert listing_from_json(b"{") is None
    assert listing_from_json(listing_to_json(parsed).replace(b'"format":1', b'"format":99')) is None
