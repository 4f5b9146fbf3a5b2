"""Files: atomic writes (an interrupted run leaves the previous file intact) and content hashes."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """Write to a temporary file beside `path`, fsync it, then rename it over `path`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks (wheels run to gigabytes)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
