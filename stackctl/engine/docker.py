"""The Docker engine adapter: build, inspect, push, pull, remove through the docker SDK (engine from
`DOCKER_HOST`). Nothing else in stackctl imports docker; every SDK and API error is wrapped here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from stackctl.base.neterrors import cause_in_words
from stackctl.base.progress import Progress, Steps
from stackctl.base.urls import strip_userinfo
from stackctl.errors import InputError, ServiceError
from stackctl.image.buildlog import BuildResult, ImageFacts, parse_build_stream

if TYPE_CHECKING:
    from stackctl.engine.wheelserver import WheelServer
    from stackctl.image.artefact import Artefact
    from stackctl.profile.model import Devices

SILENT_STEP_LIMIT = 3 * 3600  # seconds a build step may go without output before the engine counts as lost


def engine_address(url: str | None = None) -> str:
    """Where the engine was looked for, as the message should name it (a password in the URL dropped; an ssh
    user, which says which account reaches the engine, kept)."""
    if url is not None:
        return re.sub(r"//([^/@:]*):[^/@]*@", r"//\1@", url)
    host = os.environ.get("DOCKER_HOST")
    if not host:
        return "unix:///var/run/docker.sock (DOCKER_HOST is not set)"
    return f"{strip_userinfo(host)} (DOCKER_HOST)"


def bridge_gateway(network: Mapping[str, Any]) -> tuple[str | None, str]:
    """The IPv4 address build containers on the default bridge reach this machine at, and how it was found
    (or why there is none). IPAM lists the gateway, except on an engine that found its bridge already
    configured: then the address is the one the bridge interface itself carries."""
    configs = (network.get("IPAM") or {}).get("Config") or []
    gateway = next((c["Gateway"] for c in configs if isinstance(c, dict) and ":" not in c.get("Gateway", ":")),
                   None)
    if gateway is not None:
        return gateway, f"the default bridge's gateway {gateway}"
    name = (network.get("Options") or {}).get("com.docker.network.bridge.name") or "docker0"
    address = interface_ipv4(str(name))
    if address is None:
        return None, f"the default bridge lists no gateway and its interface {name} has no IPv4 address here"
    subnets = [c.get("Subnet") for c in configs if isinstance(c, dict) and c.get("Subnet")]
    import ipaddress

    try:
        inside = not subnets or any(ipaddress.ip_address(address) in ipaddress.ip_network(str(n), strict=False)
                                    for n in subnets)
    except ValueError:
        inside = False
    if not inside:
        return None, (f"the default bridge lists no gateway and its interface {name} carries {address}, "
                      f"outside the bridge's subnet {', '.join(map(str, subnets))}")
    return address, f"{address}, the address of the bridge interface {name} (the bridge lists no gateway)"


_LAYER = re.compile(r"[0-9a-f]{12}")
_LAYER_DONE = frozenset({"Pushed", "Layer already exists", "Pull complete", "Already exists"})


class DockerEngine:
    """The `Engine` protocol with the engine API's classic builder: its install stages fetch their wheels from a
    wheel server on this machine (`wheel_serving`), and the OCI layout is a copy of the engine's image
    (`layout`)."""

    builder: Literal["classic"] = "classic"
    mounts: Literal[""] = ""  # the classic builder bind-mounts nothing
    writes_layout = False  # it writes no OCI layout: the image is copied out of the engine
    baking = None  # it builds one image at a time: no bake
    transfer: Progress | None = None  # layer bytes of push and pull: (label, bytes done, bytes in all)

    @property
    def wheel_serving(self) -> DockerEngine:
        return self  # `wheel_server`

    def __init__(self, url: str | None = None) -> None:
        """`url`: the engine at this address (unix://, tcp:// with TLS from DOCKER_CERT_PATH and
        DOCKER_TLS_VERIFY as the SDK reads them, ssh:// through the ssh client); None: DOCKER_HOST's."""
        self._sizes: dict[str, int] = {}
        self._url = url
        self.address = engine_address(url)
        import docker
        import docker.errors
        import requests
        import urllib3.exceptions

        self._errors = docker.errors
        # The SDK reads build, push and pull streams from urllib3 directly: its errors arrive unwrapped.
        self._lost = (docker.errors.DockerException, requests.RequestException, urllib3.exceptions.HTTPError)
        try:
            if url is None:
                self._client = docker.from_env(version="auto", timeout=600)
            else:  # the SDK's own reading of the TLS variables, for this engine's address
                kwargs = docker.utils.kwargs_from_env(environment={**os.environ, "DOCKER_HOST": url})
                self._client = docker.DockerClient(**kwargs, version="auto", timeout=600,
                                                   use_ssh_client=url.startswith("ssh://"))
            self._client.ping()
        except self._lost as exc:
            raise ServiceError(f"cannot reach the Docker engine at {self.address}: {cause_in_words(exc)}",
                               hint="start the engine (`bash .ci/services.sh`) or point DOCKER_HOST at it") from exc

    def _transferred(self, verb: str, ev: dict[str, Any]) -> None:
        """Bytes of each layer as the engine reports them, to `self.transfer`; a layer that needs no bytes (it
        exists already) or whose bytes went by unreported is reported as done."""
        layer, detail = ev.get("id"), ev.get("progressDetail") or {}
        if self.transfer is None or not isinstance(layer, str) or not _LAYER.fullmatch(layer):
            return
        label = f"{verb} layer {layer}"
        total, current = detail.get("total"), detail.get("current")
        if isinstance(total, int) and total > 0 and isinstance(current, int):
            self._sizes[label] = total
            self.transfer(label, min(current, total), total)
        elif ev.get("status") in _LAYER_DONE:
            size = self._sizes.get(label, 1)
            self.transfer(label, size, size)

    @property
    def url(self) -> str | None:
        """The address it was opened with, its password left out (None: DOCKER_HOST's engine): where a later
        command reaches it again (the layout a build leaves to be made when first needed)."""
        return engine_address(self._url) if self._url is not None else None

    def api_version(self) -> str:
        """The engine API version this client speaks with the engine (negotiated: `version="auto"`)."""
        return str(self._client.api.api_version)

    @property
    def client(self) -> Any:
        return self._client

    @contextmanager
    def talking(self, what: str) -> Iterator[None]:
        """Every SDK error, and the connection dropping mid-stream, as one ServiceError."""
        try:
            yield
        except self._errors.APIError as exc:
            raise ServiceError(f"{what}: {exc.explanation or exc}") from exc
        except self._lost as exc:
            raise ServiceError(f"{what}: lost the engine at {self.address}: {cause_in_words(exc)}") from exc

    def build(self, context: Path, tag: str | None, on_step: Steps | None = None, *,
              nocache: bool = False, proxy: str | None = None, cache_from: Sequence[str] = (),
              buildargs: Mapping[str, str] | None = None, dockerfile: Path | None = None,
              target: str | None = None, layout: Path | None = None) -> BuildResult:
        # `layout`: the classic builder writes no OCI layout (its result has no artefact)
        # `http_proxy` is one of the builder's predefined arguments: kept out of the cache key and the
        # image's history, so the wheel server's port never costs a cached step.
        args = {**(buildargs or {}), **({"http_proxy": proxy} if proxy else {})} or None
        # A Dockerfile outside the context is sent inside it by the SDK, as the docker CLI does.
        extra = {"dockerfile": str(dockerfile)} if dockerfile is not None else {}
        with self.talking(f"build of {tag or context}"):
            # A step may print nothing for long (pip unpacking a multi-GB torch wheel, the engine committing
            # its layer): the client's 600 s read timeout would cut a healthy build's stream.
            events = self._client.api.build(path=str(context), tag=tag, rm=True, forcerm=True, decode=True,
                                            pull=False, nocache=nocache, timeout=SILENT_STEP_LIMIT,
                                            buildargs=args, cache_from=list(cache_from) or None, target=target,
                                            **extra)
            return parse_build_stream(events, on_step)

    def run_with_files(self, image: str, files: Mapping[str, bytes], argv: list[str], *, fetch: str | None = None,
                       timeout: float = 600.0, devices: Devices | None = None,
                       env: Mapping[str, str] | None = None) -> tuple[int, str, str, bytes | None]:
        """Run `argv` in a container of `image` with no network, after putting `files` (absolute path → bytes)
        into it; (exit status, stdout, stderr, the bytes of `fetch` afterwards or None). The container is
        removed however the run ends. `devices`: the profile's, given as the vendor's container stack expects
        them (`device_options`)."""
        import io
        import tarfile

        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for path, data in files.items():
                info = tarfile.TarInfo(path.lstrip("/"))
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        with self.talking(f"cannot run a container of {image}"):
            try:
                self._client.api.inspect_image(image)
            except self._errors.ImageNotFound:
                raise InputError(f"image {image} is not in the engine at {self.address}",
                                 hint="build or pull it first") from None
            options = device_options(devices)
            environment = {**dict(options.pop("environment")), **(env or {})}
            host_config = self._client.api.create_host_config(**options) if options else None
            container = self._client.api.create_container(image, command=argv[1:], entrypoint=[argv[0]],
                                                          network_disabled=True, user="",
                                                          environment=environment or None, host_config=host_config)
            cid = container["Id"]
            try:
                self._client.api.put_archive(cid, "/", archive.getvalue())
                self._client.api.start(cid)
                status = int(self._client.api.wait(cid, timeout=timeout).get("StatusCode", -1))
                out = self._client.api.logs(cid, stdout=True, stderr=False).decode("utf-8", "replace")
                err = self._client.api.logs(cid, stdout=False, stderr=True).decode("utf-8", "replace")
                fetched = self._fetch(cid, fetch) if fetch else None
            finally:
                with suppress(*self._lost):
                    self._client.api.remove_container(cid, force=True)
        return status, out, err, fetched

    def _fetch(self, cid: str, path: str) -> bytes | None:
        import io
        import tarfile

        try:
            stream, _ = self._client.api.get_archive(cid, path)
        except self._errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = next((m for m in tar.getmembers() if m.isfile()), None)
            handle = tar.extractfile(member) if member is not None else None
            return handle.read() if handle is not None else None

    def wheel_server(self, root: Path, sha256: Mapping[str, str]) -> WheelServer | str:
        """A server for `root/GROUP/NAME.whl` (each `GROUP/NAME.whl` in `sha256`, checked against it) that this
        engine's build containers reach: on the default bridge's gateway, an address of this machine when the
        engine runs here. When it cannot be (an engine elsewhere, no bridge, an address this machine does not
        have), the reason, in words: the wheels then go in the context."""
        from stackctl.engine.wheelserver import WheelServer

        host = self._url or os.environ.get("DOCKER_HOST", "unix://")
        if not host.startswith("unix://"):
            return "the engine is not on this machine (DOCKER_HOST is not a unix socket)"
        try:
            network = self._client.api.inspect_network("bridge")
        except (*self._lost, AttributeError, KeyError, TypeError):
            return "the engine has no default bridge network to serve the wheels on"
        gateway, how = bridge_gateway(network)
        if gateway is None:
            return how
        try:
            server = WheelServer(root, gateway, sha256)
        except OSError as exc:
            return f"cannot listen on the bridge's gateway {gateway} ({exc.strerror or exc})"
        server.how = how
        return server

    def facts(self, ref: str) -> ImageFacts | None:
        with self.talking(f"cannot inspect {ref}"):
            try:
                attrs = self._client.api.inspect_image(ref)
            except self._errors.ImageNotFound:
                return None
        config = attrs.get("Config") or {}
        return ImageFacts(
            id=attrs["Id"],
            labels=tuple(sorted((config.get("Labels") or {}).items())),
            repo_digests=tuple(attrs.get("RepoDigests") or ()),
            size=int(attrs.get("Size") or 0),
            layers=tuple((attrs.get("RootFS") or {}).get("Layers") or ()),
            parent=str(attrs.get("Parent") or ""),
        )

    def push(self, repository: str, tag: str) -> str:
        """Push with the Docker config's credentials, resolved here with any helper's stderr captured and
        handed to the push, so the SDK never runs a helper itself; nothing here prints them."""
        from stackctl.engine.credentials import resolve
        from stackctl.engine.registry import parse_ref

        ref = parse_ref(f"{repository}:{tag}")
        host = ref.registry if ref is not None else "docker.io"
        login = resolve(host)
        # An auth config without a login is still one: the SDK then sends none rather than looking one up.
        auth = login.auth_config() if login is not None else {"serveraddress": host}
        digest = None
        with self.talking(f"push of {repository}:{tag} failed"):
            for ev in self._client.api.push(repository, tag=tag, stream=True, decode=True, auth_config=auth):
                if "error" in ev:
                    msg = str(ev.get("errorDetail", {}).get("message") or ev["error"]).strip()
                    raise ServiceError(f"push of {repository}:{tag} failed: {msg}")
                self._transferred("push", ev)
                aux = ev.get("aux")
                if isinstance(aux, dict) and aux.get("Digest"):
                    digest = str(aux["Digest"])
        if not digest:
            raise ServiceError(f"push of {repository}:{tag} reported no digest")
        return digest

    def machine(self) -> str:
        """The engine's architecture as `uname -m` says it there (x86_64, aarch64)."""
        with self.talking("cannot read the engine's facts"):
            return str(self._client.info().get("Architecture") or "")

    def pull_cache(self, ref: str) -> int | None:
        """Pull `ref` if the registry has it: the compressed bytes its new layers took (0: it had them all);
        None when the registry has no such image (a cold cache is no error)."""
        repo, _, tag = ref.rpartition(":")
        sizes: dict[str, int] = {}
        try:
            with self.talking(f"pull of {ref} failed"):
                for ev in self._client.api.pull(repo, tag=tag, stream=True, decode=True):
                    if "error" in ev:
                        msg = str(ev["error"])
                        if "not found" in msg or "manifest unknown" in msg:
                            return None
                        raise ServiceError(f"pull of {ref} failed: {msg}")
                    total = (ev.get("progressDetail") or {}).get("total")
                    if ev.get("status") == "Downloading" and isinstance(total, int) and isinstance(ev.get("id"), str):
                        sizes[ev["id"]] = total
        except ServiceError as exc:
            if isinstance(exc.__cause__, self._errors.NotFound):
                return None
            raise
        return sum(sizes.values())

    def remove(self, ref: str) -> None:
        with self.talking(f"cannot remove {ref}"), suppress(self._errors.ImageNotFound):
            self._client.api.remove_image(ref, force=True, noprune=False)

    def versions(self) -> dict[str, str]:
        """stackctl's and the engine's versions: the builder the provenance statement names."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            mine = version("stackctl")
        except PackageNotFoundError:
            mine = "unknown"
        with self.talking("cannot read the engine's version"):
            engine = self._client.version()
        return {"stackctl": mine, "docker-engine": str(engine.get("Version", "")),
                "docker-api": str(engine.get("ApiVersion", "")), "builder": "classic"}

    def tag(self, source: str, repository: str, tag: str) -> None:
        with self.talking(f"cannot tag {source} as {repository}:{tag}"):
            self._client.api.tag(source, repository, tag=tag)

    def layout(self, image: str, dest: Path) -> Artefact:
        """`image` as an OCI image layout at `dest`, copied through this engine's API by skopeo."""
        from stackctl.engine.ocicopy import copy_to_layout

        return copy_to_layout(image, dest, host=self._url)


def device_options(devices: Devices | None) -> dict[str, Any]:
    """The container's host config for `devices`, as the docker CLI sends it: `--gpus` as a device request
    (count -1 for all, or device ids), CDI names as device requests of the `cdi` driver (Docker 25+), device
    nodes as HOST:CONTAINER:PERMISSIONS, the runtime by name; plus "environment", the variables to set."""
    if devices is None:
        return {"environment": {}}
    import docker.types

    requests_: list[Any] = []
    if devices.gpus:
        ids = devices.gpus.removeprefix("device=").split(",") if devices.gpus.startswith("device=") else None
        count = None if ids else (-1 if devices.gpus == "all" else int(devices.gpus))
        requests_.append(docker.types.DeviceRequest(driver=devices.driver or "", count=count, device_ids=ids,
                                                    capabilities=[list(devices.capabilities)]))
    if devices.cdi:
        requests_.append(docker.types.DeviceRequest(driver="cdi", device_ids=list(devices.cdi)))
    options: dict[str, Any] = {"environment": dict(devices.env)}
    if requests_:
        options["device_requests"] = requests_
    if devices.nodes:
        options["devices"] = [n if ":" in n else f"{n}:{n}:rwm" for n in devices.nodes]
    if devices.runtime:
        options["runtime"] = devices.runtime
    return options


def interface_ipv4(name: str) -> str | None:
    """The IPv4 address of this machine's network interface `name` (SIOCGIFADDR), None when it has none."""
    import fcntl
    import socket
    import struct

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            raw = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
    except (OSError, UnicodeError):
        return None
    return socket.inet_ntoa(raw[20:24])


def check_local_ref(ref: str) -> None:
    """An engine reference must be NAME[:TAG][@DIGEST] (or an image id): the engine's 400 for a malformed one
    is the user's input, not a failing service."""
    from stackctl.profile.tag import check_image_ref

    check_image_ref(ref)

