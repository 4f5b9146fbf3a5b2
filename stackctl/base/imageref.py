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
