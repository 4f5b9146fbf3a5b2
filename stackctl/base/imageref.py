"""An image reference taken apart once: `[HOST[:PORT]/]NAME[:TAG][@DIGEST]`, the way Docker reads it.

The first path component is a registry host only when it looks like one (a dot, a port or `localhost`);
otherwise the name is on the engine or the default registry. Checking that each part is well formed is
the caller's business (the engine and the registry each say what they accept).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImageName:
    host: str | None  # host[:port] of a registry, when the reference names one
    repository: str  # the name without host, tag or digest
    tag: str | None  # "" for a reference ending in a bare colon (which no one accepts)
    digest: str | None  # "sha256:..."

    @property
    def reference(self) -> str:
        """What a registry's manifest URL takes: the digest, else the tag, else `latest`."""
        return self.digest or self.tag or "latest"


def is_registry_host(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost"


def names_registry(repository: str) -> bool:
    """`HOST[:PORT]/NAME`: the repository is in a registry, not only on an engine."""
    first, _, rest = repository.partition("/")
    return bool(rest) and is_registry_host(first)


def is_loopback_host(host: str) -> bool:
    """`host[:port]` names this machine: `localhost`, 127.0.0.0/8 or ::1, bracketed (`[::1]:5000`) or bare.
    Docker reaches a loopback registry over plain http, and so do the registry client and skopeo."""
    import ipaddress

    if host.startswith("["):  # [v6] or [v6]:port
        name, closed, port = host[1:].partition("]")
        if not closed or port[:1] not in ("", ":"):
            return False
    elif host.count(":") == 1:  # name:port or v4:port
        name = host.partition(":")[0]
    else:  # a name, v4, or a bare v6 address (its colons are not a port's)
        name = host
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def parse_image_ref(ref: str) -> ImageName:
    name, _, digest = ref.partition("@")
    path, colon, tag = name.rpartition(":")
    if not colon or "/" in tag:  # no colon, or it was a host's port: `host:5000/name`
        path, colon, tag = name, "", ""
    first, slash, rest = path.partition("/")
    host = first if slash and rest and is_registry_host(first) else None
    return ImageName(host, rest if host else path, tag if colon else None, digest or None)


def looks_like_image(spec: str) -> bool:
    """`name:tag`, `host:port/name:tag` or `name@sha256:...`, and not a file, profile or lock."""
    if Path(spec).exists() or Path(spec.partition("@")[0]).suffix in (".toml", ".lock"):
        return False
    return "@sha256:" in spec or ":" in spec.rpartition("/")[2]
