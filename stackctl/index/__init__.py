"""Stage 2, package indexes: where they are for this run (`config`), how pages parse (`pages`), the HTTP client
(`client`), its on-disk cache (`cache`), a remote file read by range (`remote`) and the warm run's
conditional GET (`revalidate`).

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.index.client import ClientOptions, IndexClient
    from stackctl.index.config import IndexEndpoint, endpoints, parse_overrides

__all__ = [
    "ClientOptions", "IndexClient", "IndexEndpoint", "endpoints", "parse_overrides",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "client": ("ClientOptions", "IndexClient"),
        "config": ("IndexEndpoint", "endpoints", "parse_overrides"),
    })
