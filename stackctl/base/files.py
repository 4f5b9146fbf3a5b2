"""Files: atomic writes (an interrupted run leaves the previous file intact) and content hashes."""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from pathlib import Path

from stackctl.errors import InputError


def _umask() -> int:
    """The process's umask. Linux states it in /proc; elsewhere it is read by setting it, which is safe
    only before any thread runs (this module is imported long before any does)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()


def new_file_mode() -> int:
    """The mode `open()` gives a new file (0666 less the umask): mkstemp's files are 0600, which would make
    every file stackctl writes private whatever the user's umask says."""
    return 0o666 & ~_UMASK


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """Write to a temporary file beside `path`, fsync it, then rename it over `path`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), new_file_mode())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_output(path: Path, option: str, *, directory: bool = False) -> None:
    """The one rule for what an option names for stackctl to write (`--out`, `--record`): the file, or with
    `directory` the directory, is made; the directories above it are not. A parent that is not there is a
    typo as much as a mistyped `--wheelhouse` is, and creating it would hide the typo: said before any work."""
    if directory and path.exists() and not path.is_dir():
        raise InputError(f"{option} {path}: not a directory")
    if not directory and path.is_dir():
        raise InputError(f"{option} {path}: a directory; name the file to write")
    parent = path.parent
    if resolved(parent) == Path("build").resolve():
        return  # stackctl's own record directory (`--record build/X.json`, as report's hints say): made on demand
    if not parent.exists():
        raise InputError(f"{option} {path}: no directory {parent}", hint=f"create it first (mkdir -p {parent})")
    if not parent.is_dir():
        raise InputError(f"{option} {path}: {parent} is not a directory")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks (wheels run to gigabytes)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_MAX_COMPONENT = 255  # bytes: what Linux file systems take for one name


def unsafe_component(name: object) -> str | None:
    """Why `name` (from a profile, a lock or an index) cannot be used as one file name, or None.

    A name that becomes a path must stay one component inside the directory it is joined to: no
    separator, no `..`, no NUL or control character (a NUL makes `open` itself fail).
    """
    if not isinstance(name, str):
        return f"must be a string, not {type(name).__name__}"
    if name in ("", ".", ".."):
        return f"{name!r} is not a file name"
    if "/" in name or "\\" in name:
        return f"{name[:80]!r} is not a single file name (no directory separators)"
    if any(ord(c) < 0x20 or c == "\x7f" for c in name):
        return f"{name[:80]!r} holds a control character or NUL"
    if len(name.encode("utf-8", "surrogatepass")) > _MAX_COMPONENT:
        return f"file name longer than {_MAX_COMPONENT} bytes"
    return None


def resolved(path: Path) -> Path:
    """`path.resolve()`; a loop of symbolic links on the way (a file linked to itself) is an InputError naming
    `path`, not the RuntimeError (before Python 3.13) or OSError that `resolve` raises."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else os.strerror(errno.ELOOP)
        raise InputError(f"{path}: cannot follow its symbolic links ({why})") from None


def inside(directory: Path, name: str, what: str) -> Path:
    """`directory / name`, refused (InputError naming `what`) unless `name` is one safe component that
    resolves inside `directory`, symbolic links followed."""
    why = unsafe_component(name)
    path = directory / name if why is None else directory
    if why is None and resolved(path).parent != resolved(directory):
        why = f"{name!r} resolves outside {directory}"
    if why is not None:
        raise InputError(f"{what}: {why}; refusing to write or read outside {directory}")
    return path
