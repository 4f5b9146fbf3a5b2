"""Stage 9, publish: the build's OCI layout copied to the registry and checked there, the SBOM and signed
provenance statements put beside it, the tag moved last, and the publication record (`publication`); the
statements and what is pushed beside the image (`attest`).

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.publish.publication import Publication, publish_stack

__all__ = ["Publication", "publish_stack"]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "publication": ("Publication", "publish_stack"),
    })
