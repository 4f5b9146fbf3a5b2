"""The registry client (distribution v2 API): an image's manifest, config and chosen layer files read without
pulling the image, and the blobs and manifests `publish` pushes beside it."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from stackctl.base.imageref import is_loopback_host
from stackctl.base.neterrors import cause_in_words
from stackctl.errors import ContentMismatch, InputError, NotInRegistry, ServiceError

MANIFEST_TYPES = ", ".join([
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.index.v1+json",
])


@dataclass(frozen=True)
class RemoteRef:
    registry: str  # host[:port]
    name: str
    reference: str  # tag or sha256:...

    def __str__(self) -> str:
        sep = "@" if self.reference.startswith("sha256:") else ":"
        return f"{self.registry}/{self.name}{sep}{self.reference}"


@dataclass(frozen=True)
class RemoteImage:
    ref: str
    digest: str  # the manifest's digest
    image_id: str  # the config blob's digest: what `docker images` calls the id
    labels: tuple[tuple[str, str], ...]


def parse_ref(ref: str) -> RemoteRef | None:
    """None when `ref` names no registry host (a local or default-registry image)."""
    from stackctl.base.imageref import parse_image_ref

    parsed = parse_image_ref(ref)
    return None if parsed.host is None else RemoteRef(parsed.host, parsed.repository, parsed.reference)


def _docker_auth(registry: str) -> tuple[str, str] | None:
    """user/password for `registry`, resolved as Docker resolves it (engine/credentials.py); used in
    headers only, never shown."""
    from stackctl.engine.credentials import resolve

    login = resolve(registry)
    return (login.username, login.password) if login is not None else None


def _json(r: Any, what: str) -> dict[str, Any]:
    try:
        data = r.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ServiceError(f"{what}: the registry answered with something other than a JSON object")
    return data


def _checked(r: Any, digest: str, what: str) -> None:
    """Content addressing: what the registry sent must hash to the digest it is named by."""
    algorithm, _, want = digest.partition(":")
    if algorithm != "sha256":
        raise ServiceError(f"{what}: digest {digest!r} is not sha256")
    if hashlib.sha256(r.content).hexdigest() != want:
        raise ContentMismatch(f"{what}: the registry sent content that does not hash to {digest}")


class _Client:
    def __init__(self, ref: RemoteRef) -> None:
        import requests

        self.ref = ref
        self.session = requests.Session()
        self.session.trust_env = True
        self.base = f"https://{ref.registry}"
        self._requests = requests
        self._scope = "pull"

    def _send(self, method: str, path: str, headers: dict[str, str], data: bytes | None = None,
              stream: bool = False) -> Any:
        while True:
            url = path if path.startswith(("http://", "https://")) else self.base + path
            try:
                return self.session.request(method, url, headers=headers, data=data, timeout=(30, 300),
                                            stream=stream, allow_redirects=method in ("GET", "HEAD"))
            except self._requests.RequestException as exc:
                loopback = is_loopback_host(self.ref.registry)
                if self.base.startswith("https://") and loopback and url.startswith(self.base):
                    self.base = f"http://{self.ref.registry}"  # as the engine does for loopback registries
                    continue
                raise ServiceError(f"registry {self.ref.registry} unreachable at {self.base}/v2/: "
                                   f"{cause_in_words(exc)}",
                                   hint="check that the registry runs and that REF names its host:port "
                                   "(CI: `bash .ci/services.sh` starts one on 127.0.0.1:5000)") from None

    def request(self, method: str, path: str, *, accept: str | None = None, data: bytes | None = None,
                content_type: str | None = None, ok: tuple[int, ...] = (200,), stream: bool = False,
                push: bool = False, missing_ok: bool = False, extra: dict[str, str] | None = None) -> Any:
        headers = {"Accept": accept} if accept else {}
        headers.update(extra or {})
        if content_type:
            headers["Content-Type"] = content_type
        if push and self._scope != "pull,push":
            self._scope = "pull,push"
            self.session.headers.pop("Authorization", None)  # a pull token cannot push: ask again
        r = self._send(method, path, headers, data, stream)
        if r.status_code == 401 and self._authenticate(r.headers.get("WWW-Authenticate", "")):
            r = self._send(method, path, headers, data, stream)
        if r.status_code in ok:
            return r
        if r.status_code == 404:
            if missing_ok:
                return None
            last = path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
            sep = "@" if last.startswith("sha256:") else ":"
            raise InputError(f"{self.ref.registry}/{self.ref.name}{sep}{last}: not found in the registry")
        if r.status_code in (401, 403):
            raise ServiceError(f"registry {self.ref.registry} refused {path.split('?')[0]} ({r.status_code}): the "
                               "Docker config (credHelpers, credsStore, auths) holds no accepted login for it")
        raise ServiceError(f"registry {self.ref.registry} answered {r.status_code} for {method} {path.split('?')[0]}")

    def get(self, path: str, accept: str | None = None) -> Any:
        return self.request("GET", path, accept=accept)

    def _authenticate(self, challenge: str) -> bool:
        creds = _docker_auth(self.ref.registry)
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() == "basic" and creds:
            self.session.auth = creds
            return True
        if scheme.lower() != "bearer":
            return False
        fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
        if "realm" not in fields:
            return False
        query = {k: v for k, v in fields.items() if k in ("service", "scope")}
        if self._scope != "pull" or "scope" not in query:
            query["scope"] = f"repository:{self.ref.name}:{self._scope}"
        try:
            r = self.session.get(fields["realm"], params=query, auth=creds, timeout=30)
            token = r.json().get("token") or r.json().get("access_token")
        except (self._requests.RequestException, ValueError):
            return False
        if not token:
            return False
        self.session.headers["Authorization"] = f"Bearer {token}"
        return True


def check_registry(ref_text: str) -> None:
    """Fail fast when the registry REF names does not answer at all (before any tag is moved or layer pushed).
    Any HTTP answer counts: a 401 is the push's business, with the Docker config's credentials."""
    ref = parse_ref(ref_text)
    if ref is not None:
        _Client(ref)._send("GET", "/v2/", {}).close()


def asks_login(host: str) -> bool:
    """Whether the registry at `host` answers its API root with 401: only then is a login looked up (a
    credential helper is a program of the user's, run only where a login is needed)."""
    r = _Client(RemoteRef(host, "x", "x"))._send("GET", "/v2/", {})
    r.close()
    return bool(r.status_code == 401)


class Registry:
    """The registry API for one process: manifests and blobs read with their digests checked, blobs and
    manifests written. A repository is `host[:port]/name`. Implements `image.protocols.RegistryApi`."""

    def __init__(self) -> None:
        self._clients: dict[str, _Client] = {}

    def _client(self, repository: str) -> _Client:
        ref = parse_ref(f"{repository}:x")
        if ref is None:
            raise InputError(f"{repository}: names no registry host (host[:port]/name)")
        key = f"{ref.registry}/{ref.name}"
        if key not in self._clients:
            self._clients[key] = _Client(RemoteRef(ref.registry, ref.name, "x"))
        return self._clients[key]

    def manifest(self, repository: str, reference: str) -> tuple[str, bytes] | None:
        """(digest, bytes) of a manifest by tag or digest, checked against its digest; None if absent."""
        c = self._client(repository)
        r = c.request("GET", f"/v2/{c.ref.name}/manifests/{reference}", accept=MANIFEST_TYPES, missing_ok=True)
        if r is None:
            return None
        what = f"{repository}:{reference}"
        digest = r.headers.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(r.content).hexdigest()
        if reference.startswith("sha256:"):
            digest = reference
        _checked(r, digest, what)
        return digest, bytes(r.content)

    def tags(self, repository: str) -> list[str]:
        """The repository's tags (the first 1000 the registry lists); none for a repository it does not have."""
        c = self._client(repository)
        r = c.request("GET", f"/v2/{c.ref.name}/tags/list?n=1000", missing_ok=True)
        if r is None:
            return []
        try:
            listed = r.json().get("tags") or []
        except ValueError:
            raise ServiceError(f"registry {c.ref.registry}: its tag list of {c.ref.name} is not JSON") from None
        return [t for t in listed if isinstance(t, str)]

    def blob(self, repository: str, digest: str) -> bytes:
        c = self._client(repository)
        r = c.get(f"/v2/{c.ref.name}/blobs/{digest}")
        _checked(r, digest, f"{repository}@{digest}")
        return bytes(r.content)

    def layer(self, repository: str, digest: str) -> tuple[str, int]:
        """Stream a layer blob: check it hashes to `digest`; return the sha256 of its uncompressed tar (the
        diff_id an engine computes) and the compressed size."""
        import zlib

        c = self._client(repository)
        r = c.request("GET", f"/v2/{c.ref.name}/blobs/{digest}", stream=True)
        packed, plain, size = hashlib.sha256(), hashlib.sha256(), 0
        inflate: Any = None
        try:
            for chunk in r.iter_content(1 << 20):
                if size == 0 and chunk[:2] == b"\x1f\x8b":
                    inflate = zlib.decompressobj(wbits=31)
                packed.update(chunk)
                size += len(chunk)
                plain.update(inflate.decompress(chunk) if inflate is not None else chunk)
            if inflate is not None:
                plain.update(inflate.flush())
        except zlib.error:
            raise ContentMismatch(f"{repository}@{digest}: the layer is not valid gzip") from None
        except self._requests_errors() as exc:
            raise ServiceError(f"{repository}@{digest}: the registry stopped sending: {type(exc).__name__}") from None
        finally:
            r.close()
        if "sha256:" + packed.hexdigest() != digest:
            raise ContentMismatch(f"{repository}@{digest}: the registry sent a layer that does not hash to its digest")
        return "sha256:" + plain.hexdigest(), size

    @staticmethod
    def _requests_errors() -> tuple[type[BaseException], ...]:
        import requests

        return (requests.RequestException,)

    def layer_files(self, repository: str, digest: str, wanted: tuple[str, ...]) -> dict[str, bytes]:
        """The members of a (small) layer whose paths are in `wanted` (leading / dropped)."""
        import gzip
        import tarfile

        from stackctl.image.layers import tar_files

        data = self.blob(repository, digest)
        raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        try:
            return tar_files(raw, wanted)
        except tarfile.TarError as exc:
            raise ServiceError(f"{repository}@{digest}: the layer is not a tar archive ({exc})") from None

    def put_blob(self, repository: str, data: bytes) -> str:
        """Upload a blob in one request (monolithic upload), unless the registry has it already."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        c = self._client(repository)
        if c.request("HEAD", f"/v2/{c.ref.name}/blobs/{digest}", missing_ok=True, push=True) is not None:
            return digest
        r = c.request("POST", f"/v2/{c.ref.name}/blobs/uploads/", ok=(202,), push=True)
        location = r.headers.get("Location")
        if not location:
            raise ServiceError(f"registry {c.ref.registry} started an upload without a Location")
        if location.startswith("/"):
            location = c.base + location
        location += ("&" if "?" in location else "?") + f"digest={digest}"
        c.request("PUT", location, data=data, content_type="application/octet-stream", ok=(201,), push=True)
        return digest

    def blob_size(self, repository: str, digest: str) -> int | None:
        """The size the registry gives for a blob (HEAD), or None when the repository does not have it."""
        c = self._client(repository)
        r = c.request("HEAD", f"/v2/{c.ref.name}/blobs/{digest}", missing_ok=True, push=True)
        if r is None:
            return None
        try:
            return int(r.headers.get("Content-Length", ""))
        except ValueError:
            raise ServiceError(f"{repository}@{digest}: the registry gave no size for the blob") from None

    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> str:
        c = self._client(repository)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        r = c.request("PUT", f"/v2/{c.ref.name}/manifests/{reference}", data=data, content_type=media_type,
                      ok=(201,), push=True)
        stored = r.headers.get("Docker-Content-Digest") or digest
        if stored != digest:
            raise ServiceError(f"{repository}:{reference}: the registry stored {stored}, not the {digest} sent")
        return digest

    def referrers(self, repository: str, digest: str) -> list[dict[str, Any]] | None:
        """The OCI referrers API's answer, or None where the registry does not offer it."""
        c = self._client(repository)
        r = c.request("GET", f"/v2/{c.ref.name}/referrers/{digest}", accept="application/vnd.oci.image.index.v1+json",
                      missing_ok=True, ok=(200, 400, 405))
        if r is None or r.status_code != 200:
            return None
        try:
            data = r.json()
        except ValueError:
            return None
        found = data.get("manifests") if isinstance(data, dict) else None
        return found if isinstance(found, list) else None


def read_remote(ref_text: str, registry: Registry | None = None) -> RemoteImage:
    """`registry`: share its logins (a token is asked for once per repository)."""
    ref = parse_ref(ref_text)
    if ref is None:
        raise InputError(f"{ref_text}: names no registry host; inspect reads host[:port]/name[:tag|@digest]")
    client = (registry or Registry())._client(f"{ref.registry}/{ref.name}")
    what = str(ref)
    r = client.request("GET", f"/v2/{ref.name}/manifests/{ref.reference}", accept=MANIFEST_TYPES, missing_ok=True)
    if r is None:  # said as verify says it: the registry answered, the image is not there
        raise NotInRegistry(f"{ref.registry}/{ref.name}", ref.reference)
    digest = r.headers.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(r.content).hexdigest()
    _checked(r, digest, what)
    if ref.reference.startswith("sha256:") and digest != ref.reference:
        raise ContentMismatch(f"{what}: the registry sent manifest {digest} instead of the one asked for")
    manifest = _json(r, what)
    if "manifests" in manifest:  # a list: take linux/amd64
        chosen = next((m for m in manifest["manifests"]
                       if m.get("platform", {}).get("os") == "linux"
                       and m.get("platform", {}).get("architecture") == "amd64"), None)
        if chosen is None:
            raise InputError(f"{ref}: the manifest list has no linux/amd64 image")
        r = client.get(f"/v2/{ref.name}/manifests/{chosen['digest']}", MANIFEST_TYPES)
        _checked(r, chosen["digest"], what)
        digest, manifest = chosen["digest"], _json(r, what)
    config_digest = (manifest.get("config") or {}).get("digest")
    if not config_digest:
        raise ServiceError(f"{ref}: the manifest names no config blob")
    r = client.get(f"/v2/{ref.name}/blobs/{config_digest}")
    _checked(r, config_digest, what)
    labels = ((_json(r, what).get("config") or {}).get("Labels")) or {}
    return RemoteImage(str(ref), digest, config_digest, tuple(sorted(labels.items())))
