"""Read an image's manifest and config from a registry (distribution v2 API) without pulling its layers."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackctl.base.neterrors import cause_in_words
from stackctl.errors import InputError, ServiceError

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
    first, _, rest = ref.partition("/")
    if not rest or not ("." in first or ":" in first or first == "localhost"):
        return None
    if "@" in rest:
        name, _, reference = rest.partition("@")
    else:
        m = re.match(r"^(.*?)(?::([\w][\w.-]{0,127}))?$", rest)
        assert m is not None
        name, reference = m.group(1), m.group(2) or "latest"
    return RemoteRef(first, name, reference)


def _loopback(host: str) -> bool:
    h = host.rsplit(":", 1)[0].strip("[]")
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _docker_auth(registry: str) -> tuple[str, str] | None:
    """user/password for `registry` from the Docker config's `auths`; used in headers only, never shown."""
    cfg = Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker")) / "config.json"
    try:
        auths = json.loads(cfg.read_text(encoding="utf-8")).get("auths", {})
    except (OSError, ValueError, AttributeError):
        return None
    for key, entry in auths.items():
        if re.sub(r"^https?://", "", key).rstrip("/").split("/")[0] == registry and entry.get("auth"):
            try:
                user, _, password = base64.b64decode(entry["auth"], validate=True).decode().partition(":")
            except ValueError:
                raise InputError(f"{cfg}: the auth entry for {registry} is not base64 of user:password") from None
            return user, password
    return None


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
        raise ServiceError(f"{what}: the registry sent content that does not hash to {digest}")


class _Client:
    def __init__(self, ref: RemoteRef) -> None:
        import requests

        self.ref = ref
        self.session = requests.Session()
        self.session.trust_env = True
        self.base = f"https://{ref.registry}"
        self._requests = requests

    def _send(self, path: str, headers: dict[str, str]) -> Any:
        while True:
            try:
                return self.session.get(self.base + path, headers=headers, timeout=30)
            except self._requests.RequestException as exc:
                if self.base.startswith("https://") and _loopback(self.ref.registry):
                    self.base = f"http://{self.ref.registry}"  # as the engine does for loopback registries
                    continue
                raise ServiceError(f"registry {self.ref.registry} unreachable at {self.base}/v2/: "
                                   f"{cause_in_words(exc)}",
                                   hint="check that the registry runs and that REF names its host:port "
                                   "(CI: `bash .ci/services.sh` starts one on 127.0.0.1:5000)") from None

    def get(self, path: str, accept: str | None = None) -> Any:
        headers = {"Accept": accept} if accept else {}
        r = self._send(path, headers)
        if r.status_code == 401 and self._authenticate(r.headers.get("WWW-Authenticate", "")):
            r = self._send(path, headers)
        if r.status_code == 404:
            raise InputError(f"{self.ref}: not found in the registry")
        if r.status_code in (401, 403):
            raise ServiceError(f"registry {self.ref.registry} refused {path} ({r.status_code}): the Docker "
                               "config's auths hold no accepted login for it (credential helpers are not read)")
        if r.status_code != 200:
            raise ServiceError(f"registry {self.ref.registry} answered {r.status_code} for {path}")
        return r

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
        query.setdefault("scope", f"repository:{self.ref.name}:pull")
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
        _Client(ref)._send("/v2/", {}).close()


def read_remote(ref_text: str) -> RemoteImage:
    ref = parse_ref(ref_text)
    if ref is None:
        raise InputError(f"{ref_text}: names no registry host; inspect reads host[:port]/name[:tag|@digest]")
    client = _Client(ref)
    what = str(ref)
    r = client.get(f"/v2/{ref.name}/manifests/{ref.reference}", MANIFEST_TYPES)
    digest = r.headers.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(r.content).hexdigest()
    _checked(r, digest, what)
    if ref.reference.startswith("sha256:") and digest != ref.reference:
        raise ServiceError(f"{what}: the registry sent manifest {digest} instead of the one asked for")
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
