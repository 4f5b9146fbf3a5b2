"""The user-info of a URL (`https://user:token@host/`): taken apart once here, so no credential rides a
URL into a message, a lock or a label."""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without user-info, and (username, password) when it had one."""
    p = urlsplit(url)
    if "@" not in p.netloc:
        return url, None
    userinfo, _, host = p.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return p._replace(netloc=host).geturl(), (unquote(user), unquote(password))


def strip_userinfo(url: str) -> str:
    return split_userinfo(url)[0]


def with_userinfo(url: str, username: str, password: str) -> str:
    p = urlsplit(url)
    userinfo = quote(username, safe="") + (":" + quote(password, safe="") if password else "")
    return p._replace(netloc=f"{userinfo}@{p.netloc}").geturl()
