"""Stage 2, package indexes: where they are for this run (`config`), how pages parse (`pages`), the HTTP client
(`client`), its on-disk cache (`cache`), a remote file read by range (`remote`) and the warm run's
conditional GET (`revalidate`).

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.index.client import ClientOptions as ClientOptions
    from stackctl.index.client import IndexClient as IndexClient
    from stackctl.index.config import IndexEndpoint as IndexEndpoint
    from stackctl.index.config import endpoints as endpoints
    from stackctl.index.config import parse_overrides as parse_overrides

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
