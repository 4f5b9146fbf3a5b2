"""skopeo, the one program that moves image bytes: an engine's image into an OCI layout (engine/ocicopy.py)
and a layout to a registry (`copy_to_registry`).

Why skopeo and not more of engine/registry.py: it is Debian's, it speaks the whole distribution API
(chunked and cross-repository uploads, blobs the registry has skipped by HEAD, retries, token auth) and keeps
digests with `--preserve-digests`; the registry client here stays for reads, checks and the small documents
(SBOM, statements, the tag). Credentials go to skopeo in an auth file of its own format, private to this
process (0600 in a 0700 directory removed afterwards): never on its argv, in the environment or a message.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from stackctl.base.imageref import is_loopback_host
from stackctl.errors import ServiceError

INSECURE_ENV = "STACKCTL_INSECURE_REGISTRIES"  # host[:port],... to reach over plain http / without TLS checks


def skopeo() -> str:
    found = shutil.which("skopeo")
    if found is None:
        raise ServiceError("skopeo is not on PATH; publish and the build's image layout need it",
                           hint="install Debian's `skopeo` package (`bash .ci/services.sh` does)")
    return found


def skopeo_version() -> str:
    """`skopeo --version`'s version ("1.9.3"), or "" where it does not answer: a fact for the provenance."""
    try:
        out = run_skopeo(["--version"], what="version query", timeout=30)
    except ServiceError:
        return ""
    return out.strip().rsplit(" ", 1)[-1] if out.strip() else ""


def _last_line(text: str) -> str:
    """skopeo's own message (the `msg` of its last log line), the query strings of the URLs in it dropped:
    an upload's state token says nothing to a reader and fills the line."""
    import re

    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "no message"
    last = lines[-1]
    found = re.search(r'msg="((?:[^"\\]|\\.)*)"', last)
    if found:
        last = found.group(1).replace('\\"', '"')
    return re.sub(r"\?[^\s\":]*", "", last)[:500]


def run_skopeo(argv: Sequence[str], *, what: str, timeout: float = 3600.0,
               env: Mapping[str, str] | None = None) -> str:
    """skopeo's stdout; a failure is a ServiceError naming `what` and skopeo's own last line (its messages
    carry no secret: credentials reach it only through the auth file)."""
    try:
        proc = subprocess.run([skopeo(), *argv], capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, **env} if env is not None else None)
    except subprocess.TimeoutExpired:
        raise ServiceError(f"skopeo: the {what} did not finish in {timeout:.0f} s") from None
    except OSError as exc:
        raise ServiceError(f"skopeo could not run for the {what}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        raise ServiceError(f"skopeo: the {what} failed: {_last_line(proc.stderr)}")
    return proc.stdout


def insecure(host: str) -> bool:
    """A loopback registry (plain http, as the engine treats it), or one the user marks in INSECURE_ENV."""
    marked = {h.strip() for h in os.environ.get(INSECURE_ENV, "").split(",") if h.strip()}
    return host in marked or is_loopback_host(host)


@contextmanager
def auth_file(host: str) -> Iterator[Path]:
    """The Docker config's login for `host` (engine/credentials.py), where the registry asks for one, in
    skopeo's auth file format; with none the file is empty (skopeo then goes anonymous, and reads no other
    file: not the user's containers auth.json)."""
    from stackctl.engine.credentials import resolve
    from stackctl.engine.registry import asks_login

    login = resolve(host) if asks_login(host) else None
    folder = Path(tempfile.mkdtemp(prefix="stackctl-auth-"))  # 0700
    try:
        path = folder / "auth.json"
        token = base64.b64encode(f"{login.username}:{login.password}".encode()).decode() if login else None
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"auths": {host: {"auth": token}} if token else {}}, fh)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def copy_to_registry(layout: Path, host: str, repository: str, digest: str) -> None:
    """The layout's image to `repository` (host[:port]/name) by its manifest digest only: no tag is made.
    skopeo skips each blob the registry has (HEAD) and keeps every digest (`--preserve-digests`: it never
    recompresses or converts)."""
    with auth_file(host) as auth:
        argv = ["copy", "--quiet", "--preserve-digests", "--retry-times", "2"]
        argv += ["--dest-authfile", str(auth)]
        if insecure(host):
            argv.append("--dest-tls-verify=false")
        argv += [f"oci:{layout}", f"docker://{repository}@{digest}"]
        # DOCKER_CONFIG at the auth file's private folder: skopeo would otherwise also read the user's Docker
        # config and run its credential helpers itself, where stackctl's own resolution (and its silence on
        # a helper's stderr) is the one that counts
        run_skopeo(argv, what=f"copy to {repository}@{digest[:19]}", env={"DOCKER_CONFIG": str(auth.parent)})
