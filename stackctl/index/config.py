"""Where each index of a stack lives for this run, and how to log in to it (by reference only)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from stackctl.base.urls import split_userinfo
from stackctl.errors import InputError
from stackctl.profile.model import Index, Stack


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    def __repr__(self) -> str:  # never show the secret, not even in a traceback
        return f"Credentials(username={self.username!r}, password=***)"


@dataclass(frozen=True)
class IndexEndpoint:
    """An index of the stack, bound to a URL for this run."""

    name: str
    url: str  # ends with "/", never carries credentials
    credentials: Credentials | None = field(default=None, repr=False, compare=False)
    url_source: str = "profile"  # "profile" | "pip" | "pip-default" | "option" | "env" | "lock" | "url"

    @property
    def origin(self) -> tuple[str, str, int | None]:
        return origin(self.url)

    @property
    def overridden(self) -> bool:
        """The URL is this run's (`--index` or the environment), not the profile's or pip's."""
        return self.url_source in ("option", "env")

    @property
    def source_label(self) -> str:
        """Where the URL came from, as a user would look for it."""
        return {"option": f"--index {self.name}", "env": env_var_for(self.name), "profile": "the profile",
                "pip": "pip's index-url", "pip-default": "pip's built-in default",
                "url": "the URL given"}.get(self.url_source, self.url_source)

    @property
    def described(self) -> str:
        """One line for people: `index NAME: URL (from SOURCE)`, an override said as one."""
        if self.overridden:
            return f"index {self.name}: {self.url} (override from {self.source_label}, not the profile's)"
        return f"index {self.name}: {self.url} (from {self.source_label})"


def endpoint_of(url: str) -> IndexEndpoint:
    """An index for a file named by URL alone: the URL's origin, no credentials."""
    p = urlsplit(url)
    # "url": no index of a profile, so nothing --index could point elsewhere (wheel-diff, abi WHEEL-URL)
    return IndexEndpoint(p.hostname or url, f"{p.scheme}://{p.netloc.rsplit('@', 1)[-1]}/", url_source="url")


def origin(url: str) -> tuple[str, str, int | None]:
    p = urlsplit(url)
    return (p.scheme, (p.hostname or "").lower(), p.port or {"http": 80, "https": 443}.get(p.scheme))


def env_var_for(name: str) -> str:
    """`STACKCTL_INDEX_<NAME>_URL`, NAME upper-cased with every other character as `_`."""
    return "STACKCTL_INDEX_" + re.sub(r"[^A-Z0-9]", "_", name.upper()) + "_URL"


def configured_index_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The index the user configured for pip: PIP_INDEX_URL, then pip's configuration files (`[global]`,
    `[install]`, `[download]` index-url); None when neither names one.

    `extra-index-url` and `find-links` are deliberately ignored: they are additions, not the index.
    """
    from stackctl.index.pipconf import pip_setting

    env = os.environ if environ is None else environ
    if env.get("PIP_INDEX_URL", "").strip():
        return env["PIP_INDEX_URL"].split()[0]
    return pip_setting(("global.index-url", "install.index-url", "download.index-url"), env)


def public_index_url(environ: Mapping[str, str] | None = None, keep_in: Path | None = None) -> str | None:
    """The user's public index: as configured, else pip's default as pip states it (kept in `keep_in`, the
    run's cache directory, when given); None when neither is known (nothing configured and no pip here to
    ask)."""
    from stackctl.index.pipconf import pip_default_index

    return configured_index_url(environ) or pip_default_index(keep_in)


def tls_verify(environ: Mapping[str, str] | None = None) -> str | bool:
    """The CA bundle to check index certificates against, as requests and pip would find it.

    Sessions here do not trust the environment (that would also hand them netrc credentials), so the
    bundle is looked up explicitly: REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, then pip's `cert` (PIP_CERT or
    the configuration files); True means requests' own bundle. A machine behind a TLS-inspecting proxy
    has its CA only in these.
    """
    env = os.environ if environ is None else environ
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT"):
        if env.get(var):
            return env[var]
    from stackctl.index.pipconf import pip_setting

    return pip_setting(("global.cert", "install.cert", "download.cert"), env) or True


def _scheme(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  raises on a port that is not one
    except ValueError:
        return None
    return parts.scheme


def _shown(url: str) -> str:
    """`url` without its credentials, for a message; the URL as far as it parses when it does not."""
    try:
        return _strip_userinfo(url)[0]
    except ValueError:
        return url.rsplit("@", 1)[-1][:120]


def _strip_userinfo(url: str) -> tuple[str, Credentials | None]:
    bare, userinfo = split_userinfo(url)
    return bare, Credentials(*userinfo) if userinfo else None


def parse_overrides(values: list[str] | tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, url = v.partition("=")
        if not sep or not name or not url:
            raise InputError(f"--index {v!r}: expected NAME=URL")
        if _scheme(url) not in ("http", "https"):
            raise InputError(f"--index {name}: {_shown(url)!r} is not an http(s) URL")
        out[name] = url
    return out


def _netrc_credentials(url: str) -> Credentials | None:
    import netrc

    try:
        rc = netrc.netrc(os.environ.get("NETRC") or None)
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return None
    entry = rc.authenticators(urlsplit(url).hostname or "")
    if entry is None:
        return None
    login, _, password = entry
    return Credentials(login or "", password or "")


def credentials_for(index: Index, url: str, environ: Mapping[str, str] | None = None) -> Credentials | None:
    env = os.environ if environ is None else environ
    if index.username_env or index.password_env:
        user = env.get(index.username_env or "", "")
        password = env.get(index.password_env or "", "")
        if user or password:
            return Credentials(user, password)
    return _netrc_credentials(url) if index.netrc else None


def endpoint(index: Index, overrides: Mapping[str, str] | None = None,
             environ: Mapping[str, str] | None = None, locked: str | None = None,
             keep_in: Path | None = None) -> IndexEndpoint:
    """Where `index` is for this run: `--index`, STACKCTL_INDEX_<NAME>_URL, the profile, pip's configuration.
    `locked` is the origin of the index's files in a lock, for work that reads only those files by their
    URL (fetch, abi): it stands in for a pip index that pip's configuration does not name (pip's default
    is then not asked for). `keep_in`: where pip's default, once asked, is kept (the run's cache directory)."""
    env = os.environ if environ is None else environ
    if overrides and index.name in overrides:
        url, source = overrides[index.name], "option"
    elif env.get(env_var_for(index.name)):
        url, source = env[env_var_for(index.name)], "env"
    elif index.url:
        url, source = index.url, "profile"
    else:
        public = configured_index_url(env)
        if public is not None:
            url, source = public, "pip"
        elif locked is not None:  # the lock's files are named by URL: no index page is asked for
            url, source = locked, "lock"
        elif (public := public_index_url(env, keep_in)) is not None:
            url, source = public, "pip-default"
        else:
            raise InputError(f"indexes.{index.name}: from_pip = true, but no pip here names an index (no "
                             f"index-url configured, no pip to ask); pass --index {index.name}=URL or set "
                             "PIP_INDEX_URL")
    if _scheme(url) not in ("http", "https"):
        where = {"option": f"--index {index.name}", "env": env_var_for(index.name),
                 "profile": f"indexes.{index.name}.url", "pip": "pip's index-url",
                 "pip-default": "pip's built-in default",
                 "lock": f"the lock's files of index {index.name}"}[source]
        raise InputError(f"{where}: {_shown(url)!r} is not an http(s) URL; stackctl reads indexes over HTTP")
    url, inline = _strip_userinfo(url)
    if not url.endswith("/"):
        url += "/"
    return IndexEndpoint(index.name, url, inline or credentials_for(index, url, env), source)


def endpoints(stack: Stack, overrides: Mapping[str, str] | None = None,
              environ: Mapping[str, str] | None = None,
              locked: Mapping[str, str] | None = None, keep_in: Path | None = None) -> dict[str, IndexEndpoint]:
    """Every index of the stack for this run; `locked`: index name → the origin of its files in the lock,
    `keep_in`: the run's cache directory (see `endpoint`)."""
    unknown = sorted(set(overrides or {}) - {i.name for i in stack.indexes})
    if unknown:
        raise InputError(f"--index {unknown[0]}: {stack.name} has no index of that name "
                         f"(it has {', '.join(i.name for i in stack.indexes)})")
    return {i.name: endpoint(i, overrides, environ, (locked or {}).get(i.name), keep_in) for i in stack.indexes}
