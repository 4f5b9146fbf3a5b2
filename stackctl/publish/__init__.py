"""Stage 9, publish: the build's OCI layout copied to the registry and checked there, the SBOM and signed
provenance statements put beside it, the tag moved last, and the publication record (`publication`); the
statements and what is pushed beside the image (`attest`).

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.publish.publication import Publication as Publication
    from stackctl.publish.publication import publish_stack as publish_stack

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
