"""Real wheels for tests: correct METADATA, WHEEL and RECORD (sha256 + size of every member)."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    *,
    tag: str = "py3-none-any",
    files: Mapping[str, bytes | str] | None = None,
    requires_dist: Sequence[str] = (),
    requires_python: str | None = None,
    extra_metadata: str = "",
    executable: Sequence[str] = (),
) -> Path:
    """Write `{name}-{version}-{tag}.whl` into `directory` and return its path.

    `files` maps archive paths (`pkg/__init__.py`, `pkg/lib/libx.so`) to contents; the .dist-info
    members are generated, RECORD last, as installers expect.
    """
    dist = canonicalize_name(name).replace("-", "_")
    dist_info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        metadata += f"Requires-Python: {requires_python}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires_dist) + extra_metadata
    root_is_purelib = "true" if tag.endswith("-none-any") else "false"
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: stackctl-tests\nRoot-Is-Purelib: {root_is_purelib}\nTag: {tag}\n"
    members: dict[str, bytes] = {
        path: data.encode() if isinstance(data, str) else data for path, data in (files or {}).items()
    }
    members[f"{dist_info}/METADATA"] = metadata.encode()
    members[f"{dist_info}/WHEEL"] = wheel_meta.encode()
    record_lines = [f"{p},{_record_hash(d)},{len(d)}" for p, d in members.items()]
    record_lines.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if member in executable else 0o644) << 16  # pip wants S_IFREG
            zf.writestr(info, data)
    return path
