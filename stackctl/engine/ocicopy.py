"""A copy of an engine's image into an OCI image layout, by skopeo (`docker-daemon:` to `oci:`).

The engine hands the image over through its own API (the `docker save` stream skopeo reads), so this works
against any engine skopeo can reach, local or remote, whatever its store; nothing reads the engine's data
root. skopeo writes gzip layers with its own compressor: two copies of one image give one manifest digest
(measured with Debian 12's skopeo 1.9.3 on engine 20.10), so the digest depends on the image and skopeo,
not on the run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from stackctl.engine.skopeo import run_skopeo
from stackctl.errors import ServiceError
from stackctl.image.artefact import Artefact, read_layout

MADE_BY = "a copy of the engine's image (skopeo docker-daemon: to oci:)"


def daemon_host(host: str | None) -> str | None:
    """The engine skopeo reads from: `host`, else DOCKER_HOST; None for the default socket."""
    return host or os.environ.get("DOCKER_HOST") or None


def copy_to_layout(image: str, dest: Path, *, host: str | None = None) -> Artefact:
    """`image` (a name or id the engine knows) copied into the OCI image layout `dest`, which is replaced
    whole or not at all: skopeo writes a directory beside it, renamed over it once read back."""
    dest = dest.absolute()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        argv = ["copy", "--quiet"]
        where = daemon_host(host)
        if where:
            argv += ["--src-daemon-host", where]
        argv += [f"docker-daemon:{image}", f"oci:{tmp / 'layout'}"]
        run_skopeo(argv, what=f"copy of {image} from the engine")
        read_layout(tmp / "layout", made_by=MADE_BY)  # a bad copy never replaces a good one
        old = None
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            os.rename(dest, old / "layout")
        os.rename(tmp / "layout", dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        raise ServiceError(f"{dest}: cannot write the image layout: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return read_layout(dest, made_by=MADE_BY)
