"""The edge that lays a rendered build context down on disk, copying each wheel it sends with its sha256 checked
(a served wheel is checked by the wheel server as a stage asks for it, not here)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from pathlib import Path

from stackctl.base.files import inside, sha256_file
from stackctl.base.progress import Steps
from stackctl.errors import CheckFailed, InputError
from stackctl.image.render import Rendered
from stackctl.profile.model import Stack

MARKER = ".stackctl-context"


def check_wheelhouse_arg(wheelhouse: Path | None, fetch: bool,
                         hint: str = "check the path, or add --fetch to download the lock's wheels into it") -> None:
    """A typo'd --wheelhouse must not turn into a new directory and a multi-gigabyte download."""
    if wheelhouse is not None and not wheelhouse.is_dir() and not fetch:
        raise InputError(f"--wheelhouse {wheelhouse}: " + ("not a directory" if wheelhouse.exists() else
                                                           "no such directory"), hint=hint)


@dataclass(frozen=True)
class WrittenContext:
    """`stackctl render`: the context directory, path → sha256 of each file written, the wheels the
    Dockerfile installs (under groups/), and whether they were copied in."""

    context: str
    files: dict[str, str]
    wheels: list[str]
    wheels_copied: bool


def render_context(stack: Stack, lock: Path, out: Path, *, target: str | None = None,
                   wheelhouse: Path | None = None, revision: str | None = None, ref: str | None = None,
                   created: str | None = None, env: Mapping[str, str] | None = None,
                   on_wheel: Steps | None = None) -> WrittenContext:
    """The build context written into `out`: the Dockerfile, the requirement files, the gate and its spec;
    with `wheelhouse` also the wheels (and the SBOM's licences read from them). `on_wheel(n, of, name)`
    follows each wheel copied."""
    from stackctl.image.prepare import prepare_build, with_sbom

    check_wheelhouse_arg(wheelhouse, False, hint="check the path, or fill it first: `stackctl fetch PROFILE "
                         "--target LABEL --dest DIR`")
    prep = prepare_build(stack, lock, target, revision, ref, created, None, env or {})
    if wheelhouse is not None:
        prep = with_sbom(prep, wheelhouse)  # licences from the wheels' own metadata
    rendered = prep.rendered
    if wheelhouse is None:
        rendered = Rendered(rendered.dockerfile, tuple(f for f in rendered.files if f.wheel is None))
    count = sum(1 for f in rendered.files if f.wheel)
    done = [0]

    def each(name: str) -> None:
        done[0] += 1
        if on_wheel is not None:
            on_wheel(done[0], count, name)

    digests = write_context(rendered, wheelhouse or Path("."), out, each)
    wheels = [f.path for f in prep.rendered.files if f.wheel]
    return WrittenContext(str(out), digests, wheels, wheelhouse is not None)


def write_context(rendered: Rendered, wheelhouse: Path, dest: Path,
                  on_wheel: Callable[[str], None] | None = None, *, served: Container[str] = (),
                  distinct_times: bool = False) -> dict[str, str]:
    """Write the context into `dest` (fresh each time); return path → sha256 of every file in it.

    Written beside `dest` and renamed into place, so a missing or tampered wheel leaves the old context
    (or none), never a half-written one a later `docker build` could pick up. `on_wheel(name)` follows
    each wheel hashed (gigabytes for a torch stack: worth a progress bar). The wheels at the context paths
    in `served` are not read here: the wheel server checks each one a stage asks for, so a build whose
    stages all come from the cache does not read gigabytes it never uses; their digest is the lock's.

    `distinct_times` (BuildKit): each file's mtime carries nanoseconds taken from its sha256. BuildKit's context
    transfer keeps what an earlier build of any context sent under the same name and sends only files whose
    size, mode or mtime differ: two wheels of one name and size, both dated by the lock to the same second,
    would otherwise be taken for one (measured: pip then refused the older wheel's hash).
    """
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{dest}: exists and is not a directory; pick an empty directory")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / MARKER).exists():
        raise InputError(f"{dest}: exists and is not a stackctl build context; pick an empty directory")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        tmp.chmod(0o755)
    except OSError as exc:
        raise InputError(f"{dest}: cannot write the build context here: {exc.strerror or exc}") from None
    try:
        digests = _fill(rendered, wheelhouse, tmp, on_wheel, served, distinct_times)
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(f"{dest}: cannot write the build context: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return digests


def _fill(rendered: Rendered, wheelhouse: Path, dest: Path,
          on_wheel: Callable[[str], None] | None, served: Container[str],
          distinct_times: bool = False) -> dict[str, str]:
    (dest / MARKER).write_text("written by stackctl; replaced on every render\n", encoding="utf-8")
    digests: dict[str, str] = {}
    for f in rendered.files:
        # every part of a context path is one safe name (group slugs, file names the lock validated):
        # checked again here, where it meets the file system
        parent = dest
        *dirs, last = f.path.split("/")
        for part in dirs:
            parent = inside(parent, part, f"context path {f.path[:120]!r}")
        out = inside(parent, last, f"context path {f.path[:120]!r}")
        out.parent.mkdir(parents=True, exist_ok=True)
        if f.wheel is not None:
            src = inside(wheelhouse, f.wheel, f"the lock's file name {f.wheel[:80]!r}")
            if not src.is_file():
                raise InputError(f"{src}: wheel missing from the wheelhouse; fetch it from the lock first")
            digest = f.sha256 if f.sha256 and f.path in served else sha256_file(src)
            if f.sha256 and digest != f.sha256:
                raise CheckFailed(wheel_mismatch(src, digest, f.sha256), hint=WHEEL_MISMATCH_HINT)
            _link_or_copy(src, out)
            digests[f.path] = digest
            if on_wheel:
                on_wheel(f.wheel)
        else:
            data = (f.text or "").encode("utf-8")
            out.write_bytes(data)
            digests[f.path] = hashlib.sha256(data).hexdigest()
        # What COPY puts in a layer keeps mode and mtime (owners become root): fixed here, not left to the
        # umask and the clock of whoever rendered. A wheel's mode also enters the builder's cache key.
        out.chmod(0o644)
        if distinct_times:
            ns = f.epoch * 1_000_000_000 + int(digests[f.path][:8], 16) % 1_000_000_000
            os.utime(out, ns=(ns, ns))
        else:
            os.utime(out, (f.epoch, f.epoch))
    # A directory's date is its newest file's: COPY keeps it, and the builder's cache key leaves dates out,
    # so a directory whose files did not change must not change its date either.
    newest: dict[Path, int] = {}
    for f in rendered.files:
        for parent in (dest / f.path).parents:
            newest[parent] = max(newest.get(parent, 0), f.epoch)
            if parent == dest:
                break
    for d in sorted((p for p in dest.rglob("*") if p.is_dir()), reverse=True):
        d.chmod(0o755)
        os.utime(d, (newest.get(d, 0), newest.get(d, 0)))
    return dict(sorted(digests.items()))


def wheel_mismatch(path: Path, digest: str, locked: str) -> str:
    return f"{path}: sha256 {digest} does not match the lock's {locked}"


# A wheelhouse's copy that is not the lock's: fetched again it is the lock's file, or the fetch says that the
# index serves other bytes than the lock names (the lock is then resolved again, which no fetch can do)
WHEEL_MISMATCH_HINT = ("fetch the wheel again (`stackctl fetch`): it replaces the wheelhouse's copy, or says that "
                       "the index no longer serves the lock's bytes and the lock must be resolved again")


def _link_or_copy(src: Path, out: Path) -> None:
    """A hard link costs nothing for a multi-GB wheel; its mode and mtime are then set on the wheelhouse's
    file too (0644 and a date the lock fixes, harmless there). A file we may not change is copied."""
    try:
        out.hardlink_to(src)
        out.chmod(0o644)
    except OSError:
        if out.exists():
            out.unlink()
        shutil.copyfile(src, out)
