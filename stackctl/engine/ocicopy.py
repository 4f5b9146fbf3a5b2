"""A copy of an engine's image into an OCI image layout, by skopeo (`docker-daemon:` to `oci:`).

The engine hands the image over through its own API (the `docker save` stream skopeo reads), so this works
against any engine skopeo can reach, local or remote, whatever its store; nothing reads the engine's data
root. skopeo writes gzip layers with its own compressor: two copies of one image give one manifest digest
(measured with Debian 12's skopeo 1.9.3 on engine 20.10 and on Docker 26.1, both stores), so the digest
depends on the image and skopeo, not on the run.

Debian 12's skopeo speaks engine API 1.22, which Docker 25 and later refuse (their minimum is 1.24), and it
cannot be told another. There the same stream is read through the docker SDK (which negotiates the
version) into a file beside the layout and skopeo copies that (`docker-archive:`): the bytes skopeo reads
are the same either way, so is the digest.
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
TOO_OLD = "is too old. Minimum supported API version"  # the engine's answer to skopeo 1.9's API 1.22


def _save(image: str, host: str | None, out: Path) -> None:
    """The engine's export of `image` (`docker save`) into `out`, through the SDK."""
    import docker
    import docker.errors
    import requests

    try:
        client = docker.DockerClient(base_url=host, version="auto", timeout=600) if host else \
            docker.from_env(version="auto", timeout=600)
        try:
            with open(out, "wb") as fh:
                for chunk in client.api.get_image(image, chunk_size=1 << 20):
                    fh.write(chunk)
        finally:
            client.close()
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise ServiceError(f"the engine's export of {image} failed: {exc}") from None


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
        try:
            run_skopeo([*argv, f"docker-daemon:{image}", f"oci:{tmp / 'layout'}"],
                       what=f"copy of {image} from the engine")
        except ServiceError as exc:
            if TOO_OLD not in str(exc):
                raise
            shutil.rmtree(tmp / "layout", ignore_errors=True)
            _save(image, where, tmp / "image.tar")
            run_skopeo(["copy", "--quiet", f"docker-archive:{tmp / 'image.tar'}", f"oci:{tmp / 'layout'}"],
                       what=f"copy of {image} from the engine's export")
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
