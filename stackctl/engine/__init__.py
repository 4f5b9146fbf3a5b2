"""Stage 7, the engine adapters: the Docker engine (`docker`, the only code importing docker), buildx and its bake,
skopeo, the registry client and its credentials, a build's wheel server and an image's library inventory. They
implement the image stage's protocols (`image/protocols.py`) and read with its parsers; the use cases
(`stackctl.usecases`) wire them to a command.

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.engine.docker import DockerEngine as DockerEngine
    from stackctl.engine.inventory import image_inventory as image_inventory

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
