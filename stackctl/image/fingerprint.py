"""The build fingerprint: sha256 of every input, and the source and base image they were built against."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Fingerprint:
    stack: str
    image: str  # repository:tag
    image_id: str | None
    revision: str
    ref: str
    branch: str | None
    head: str | None
    dirty: bool
    base_image: str
    base_image_id: str | None
    base_image_digests: tuple[str, ...]
    inputs: tuple[tuple[str, str], ...]  # (name, sha256): profile files, lock, every context file

    def digest(self) -> str:
        """One sha256 over the inputs and the base image: equal digests, equal builds."""
        h = hashlib.sha256()
        for name, digest in self.inputs:
            h.update(f"{name}\0{digest}\n".encode())
        h.update(f"base\0{self.base_image_id}\n".encode())
        return "sha256:" + h.hexdigest()


def file_inputs(files: Mapping[str, Path]) -> dict[str, str]:
    from stackctl.base.files import sha256_file

    return {name: sha256_file(path) for name, path in files.items()}
