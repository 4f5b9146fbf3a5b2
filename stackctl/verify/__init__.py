"""Stage 8, verify and signatures: an image in a registry re-checked against its lock, labels, SBOM and
provenance (`verification`) through the registry reads publish checks its copy with too (`remote`), rebuilt
from its revision for the same manifest digest (`rebuild`), and the DSSE envelopes its statements travel in,
signed and opened (`sign`).

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.verify.verification import Verification as Verification
    from stackctl.verify.verification import raise_if_failed as raise_if_failed
    from stackctl.verify.verification import verify_image as verify_image

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
