"""An image's library inventory, read through the engine: run it once with `sh` and `ldconfig`, copy the
versioned libraries out of the stopped container, and hand the parsing to `stackctl.abi.inventory`."""

from __future__ import annotations

import contextlib
import io
import posixpath
from pathlib import Path
from typing import Any

from stackctl.abi.inventory import VERSIONED_LIBRARIES, Inventory, merge, parse_ldconfig_cache, parse_ldconfig_dirs
from stackctl.base.neterrors import cause_in_words
from stackctl.errors import InputError, ServiceError

_DOCKER_ARCH = {"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x",
                "riscv64": "riscv64", "386": "i686", "arm": "armv7l"}

# The loader searches LD_LIBRARY_PATH (from the image's ENV) before its cache; those directories are
# listed in ldconfig's "-v" format so one parser reads both.
_SCRIPT = r"""ldconfig -p; echo @@stackctl@@
IFS=:; for d in $LD_LIBRARY_PATH; do
  [ -d "$d" ] || continue
  echo "$d: (LD_LIBRARY_PATH)"
  for f in "$d"/*.so "$d"/*.so.*; do [ -e "$f" ] && printf '\t%s -> %s\n' "${f##*/}" "${f##*/}"; done
done
unset IFS; ldconfig -v -N -X 2>/dev/null; exit 0"""
_MAX_LIB = 64 << 20
_MAX_LINKS = 8


def collect(client: Any, image: str, timeout: float = 300.0) -> Inventory:
    """Run IMAGE once through the engine `client` (a docker SDK client) and read its loader's view."""
    import docker.errors
    import requests

    from stackctl.wheels.elf import NotElf, read_elf_bytes

    try:
        img = client.images.get(image)
    except docker.errors.ImageNotFound:
        raise InputError(f"image {image!r} is not on the engine; build or pull it first") from None
    except docker.errors.APIError as exc:
        raise ServiceError(f"engine refused to look up image {image!r}: {exc.explanation or exc}") from None
    except (requests.RequestException, docker.errors.DockerException) as exc:
        from stackctl.engine.docker import engine_address

        raise ServiceError(f"cannot reach the Docker engine at {engine_address()}: {cause_in_words(exc)}") from None
    arch = _DOCKER_ARCH.get(str(img.attrs.get("Architecture", "")), str(img.attrs.get("Architecture", "")))
    container = None
    try:
        container = client.containers.create(img.id, command=["sh", "-c", _SCRIPT], entrypoint=[],
                                             network_disabled=True, labels={"stackctl": "inventory"})
        container.start()
        status = container.wait(timeout=timeout)
        out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace").strip()
        if status.get("StatusCode", 1) != 0 or "@@stackctl@@" not in out:
            detail = err.splitlines()[-1] if err else f"exit status {status.get('StatusCode')}"
            raise InputError(f"image {image!r}: cannot list its libraries with sh and ldconfig ({detail})")
        cache_text, _, dirs_text = out.partition("@@stackctl@@")
        cache = parse_ldconfig_cache(cache_text)
        dirs, scanned = parse_ldconfig_dirs(dirs_text)
        if not cache and not scanned:
            raise InputError(f"image {image!r}: ldconfig reports no libraries")
        probe = merge(image, str(img.id), arch, cache, dirs, scanned, {})
        versions: dict[str, tuple[str, ...]] = {}
        for soname in VERSIONED_LIBRARIES:
            lib = probe.find(soname)
            if lib is None:
                continue
            try:
                versions[soname] = read_elf_bytes(_copy_out(container, lib.path)).version_defs
            except NotElf as exc:
                raise InputError(f"image {image!r}: {lib.path} is unreadable ({exc})") from None
        first = tuple(line.split(":", 1)[0] for line in dirs_text.splitlines() if line.endswith("(LD_LIBRARY_PATH)"))
        return merge(image, str(img.id), arch, cache, dirs, scanned, versions, first)
    except docker.errors.APIError as exc:
        raise ServiceError(f"engine failed running {image!r}: {exc.explanation or exc}") from None
    except (requests.RequestException, docker.errors.DockerException) as exc:
        raise ServiceError(f"engine failed running {image!r} ({type(exc).__name__}: {exc})") from None
    finally:
        if container is not None:
            with contextlib.suppress(docker.errors.DockerException):
                container.remove(force=True)


def _copy_out(container: Any, path: str) -> bytes:
    """A file's bytes from a container, following symlinks (libc.so.6 -> libc-2.36.so on older images)."""
    import tarfile

    for _ in range(_MAX_LINKS):
        chunks, _stat = container.get_archive(path)
        buf = io.BytesIO()
        for chunk in chunks:
            buf.write(chunk)
            if buf.tell() > _MAX_LIB + (1 << 20):
                raise InputError(f"{path} in the image is over {_MAX_LIB} bytes; not a library")
        buf.seek(0)
        with tarfile.open(fileobj=buf) as tar:
            member = tar.next()
            if member is None:
                raise InputError(f"{path}: empty archive from the engine")
            if member.issym():
                path = posixpath.normpath(posixpath.join(posixpath.dirname(path), member.linkname))
                continue
            fh = tar.extractfile(member)
            if fh is None:
                raise InputError(f"{path} in the image is not a regular file")
            return fh.read()
    raise InputError(f"{path}: too many symbolic links")


def image_inventory(image: str, out: Path | None = None) -> Inventory:
    """IMAGE's inventory from the engine of `DOCKER_HOST` (or the default socket); with `out`, also written
    there for `stackctl abi --inventory`."""
    from stackctl.engine.docker import DockerEngine

    engine = DockerEngine()
    try:
        inv = collect(engine.client, image)
    finally:
        engine.client.close()
    if out is not None:
        from stackctl.abi.inventory import write_inventory

        write_inventory(out, inv)
    return inv
