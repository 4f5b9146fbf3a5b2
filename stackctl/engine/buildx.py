"""The BuildKit builder: `docker buildx build` against the engine at DOCKER_HOST (the engine API alone cannot run
a BuildKit session, so the CLI plugin drives it). Progress is read from `--progress=rawjson`, the result from
`--metadata-file`; every other part of the `Engine` protocol is the Docker adapter's.

Each build ends with an OCI image layout on disk (the artefact) and the same image in the engine: on the
containerd image store BuildKit's OCI exporter writes the layout (gzip, OCI media types) and, on Docker 26, the
image exporter puts the same image into the engine's store in the same build (before 26 the engine loads the
layout), so the engine's image id is the layout's manifest digest; on overlay2 (and 20.10) the engine's exporter
keeps the image and the layout is a copy of it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from stackctl.base.progress import Phases, Steps
from stackctl.base.scratch import scratch_dir
from stackctl.engine.buildxrun import read_metadata, run_buildx
from stackctl.engine.docker import DockerEngine
from stackctl.errors import ServiceError
from stackctl.image.artefact import Artefact, read_layout, settle_layout
from stackctl.image.bakefile import Baked, BakeTarget
from stackctl.image.buildlog import BuildResult, ImageFacts
from stackctl.image.rawjson import Folder, Stream, documents, fold, result_of
from stackctl.image.render import wheels_context

# The exporter's options for the layout. The render already dates every file (SOURCE_DATE_EPOCH dates the config),
# so neither `rewrite-timestamp` nor `force-compression` is asked for: each re-read and re-gzipped every layer on
# every build (measured, torch stack on the containerd store: a rebuild after one small pin moved took 34.7 s with
# them, 8.1 s without; two --no-cache builds and a cached build against a fresh one still give one digest).
# gzip stays at its default level. Level 1 took the same stack's cold build from 51 s to 35 s, but without
# force-compression BuildKit reuses a layer's blob of any level it holds: a build whose cached steps were
# compressed at the default level (an earlier stackctl, a plain `docker build`) then differed from its own
# --no-cache rebuild at level 1, and `verify --rebuild` failed on an image whose every diff_id matched.
REPRODUCIBLE = "compression=gzip,oci-mediatypes=true"
CONTAINERD_STORE = "io.containerd.snapshotter.v1"
EXPORTED = "BuildKit's OCI exporter"
SCRATCH = ".buildx."  # build/STACK/.buildx.XXXXXXXX: a build's metadata files and the layout as exported


def buildx_version(env: Mapping[str, str] | None = None) -> str | None:
    """`docker buildx version`'s line, or None when the plugin is not there (or the docker CLI is not)."""
    try:
        done = subprocess.run(["docker", "buildx", "version"], capture_output=True, text=True, timeout=60,
                              env=dict(env) if env is not None else None, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


class BuildxEngine:
    """The `Engine` protocol with BuildKit as its builder (`docker buildx build`): its install stages bind-mount
    their wheels (`mounts`), so it needs no wheel server; on the containerd store its build writes the OCI layout
    itself (`writes_layout`)."""

    builder: Literal["buildkit"] = "buildkit"
    wheel_serving = None  # the install stages mount their wheels: no server
    mounts: Literal["named", "context"] = "named"  # how the install stages mount them: the engine's version says

    def __init__(self, docker: DockerEngine | None = None, url: str | None = None, buildx: str | None = None) -> None:
        self.docker = docker or DockerEngine(url)
        self._url = url
        self._buildx = buildx  # `docker buildx version`'s line where the caller ran it (0.05 s a run)
        self.address = self.docker.address
        with self.docker.talking("cannot read the engine's storage facts"):
            info = self.docker.client.info()
        status = dict(tuple(x) for x in (info.get("DriverStatus") or []) if isinstance(x, list) and len(x) == 2)
        self.containerd_store = status.get("driver-type") == CONTAINERD_STORE
        # Named build contexts need the Dockerfile frontend 1.4 (BuildKit 0.10, Docker 23); 20.10 has v0.8
        self.server_version = str(info.get("ServerVersion") or "0")
        major = self.server_version.split(".", 1)[0]
        recent = major.isdigit() and int(major) >= 23
        self.mounts = "named" if recent else "context"
        # measured: two --no-cache builds give one digest on 26 (both stores), not on 20.10's BuildKit v0.8
        self.reproducible = recent
        # two --output at once: BuildKit 0.13 (Docker 26); before, the layout is loaded into the engine after
        self.exporters = 2 if major.isdigit() and int(major) >= 26 else 1
        self.transfer = None

    @property
    def url(self) -> str | None:
        return self.docker.url

    @property
    def baking(self) -> BuildxEngine:
        return self  # a queue of cells as one `docker buildx bake`: `bake`, `named_contexts`, `registry_cache`

    @property
    def writes_layout(self) -> bool:
        """Whether the build writes the image's OCI layout (BuildKit's OCI exporter): on the containerd store;
        on overlay2 the engine's exporter keeps the image and the layout is copied out of the engine."""
        return self.containerd_store

    @property
    def registry_cache(self) -> bool:
        """Whether BuildKit's own cache export (`cache-to type=registry`) works here: the docker driver refuses
        it on overlay2 ("Cache export is not supported for the docker driver", measured on 26.1.5), not on the
        containerd store."""
        return self.containerd_store

    def env(self) -> dict[str, str]:
        """The environment buildx runs in for this engine."""
        return buildx_env(self._url)

    def named_contexts(self, context: Path, given: Mapping[str, Path] | None = None) -> dict[str, Path]:
        """The build's named contexts: the wheels' where the render mounts them from one (`mounts`)."""
        named = dict(given or {})
        if self.mounts == "named" and (context / "groups").is_dir():
            for group in sorted(p for p in (context / "groups").iterdir() if p.is_dir()):
                named.setdefault(wheels_context(group.name), group)
        return named

    def base_contexts(self, dockerfile: Path, args: Mapping[str, str],
                      named: Mapping[str, object] | None = None) -> dict[str, str]:
        """On the containerd store, each image the Dockerfile builds FROM that the engine holds under another
        registry's name too, as a named context pinning it there by digest (`docker-image://HOST/NAME:TAG@DIGEST`):
        no registry is asked about it. `named`: contexts the build names already.

        Why: BuildKit takes a FROM image from the engine's store without asking a registry only when the store's
        content records that image's registry as its source (containerd's `distribution.source` label); else it
        asks the registry first and falls back to the store. An image pulled from a registry and tagged with a
        short name (`stackctl-base:bookworm`, as .ci/services.sh does) is docker.io's by that name: every build
        asked docker.io about it (a failed name lookup where there is no DNS, paid each build). Under its
        registry's name the store's copy is taken as it is. Elsewhere nothing is pinned: on overlay2 the engine
        looks in its own store first; a FROM that names a registry host is that registry's already."""
        if not self.containerd_store or self.mounts != "named":  # named contexts: Docker 23 and later
            return {}
        try:
            text = dockerfile.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return {}  # buildx says what is wrong with it
        import docker.errors

        pins: dict[str, str] = {}
        for ref in from_images(text, args):
            if ref in (named or {}) or ref in pins:
                continue
            with self.docker.talking(f"cannot inspect the base image {ref}"):
                try:
                    attrs = self.docker.client.api.inspect_image(ref)
                except docker.errors.ImageNotFound:
                    continue  # BuildKit pulls it, from the registry its name names
            source = source_name(ref, attrs.get("RepoTags") or (), attrs.get("RepoDigests") or ())
            if source is not None:
                pins[ref] = f"docker-image://{source}"
        return pins

    def outputs(self, oci: Path, tag: str | None, layout: Path | None, *, together: bool = True) -> tuple[str, ...]:
        """The exporters of a build whose layout goes to `layout`, by way of `oci` (seeded with the previous
        layout's blobs): on the containerd store BuildKit's OCI exporter and, on Docker 26 and `together`, the
        engine's image store beside it; elsewhere none (the image is loaded, and the layout copied out of the
        engine)."""
        if layout is None or not self.containerd_store:
            return ()
        _seed(oci, layout)
        out: tuple[str, ...] = (f"type=oci,dest={oci},tar=false,{REPRODUCIBLE}",)
        if tag is not None and together and self.exporters > 1:  # the engine gets the same image: nothing to load
            out += (self.image_output(tag),)
        return out

    def image_output(self, tag: str) -> str:
        """The exporter that puts the image into the engine's own store under `tag`."""
        return f"type=image,name={tag},{REPRODUCIBLE}"

    def build(self, context: Path, tag: str | None, on_step: Steps | None = None, *,
              nocache: bool = False, proxy: str | None = None, cache_from: Sequence[str] = (),
              buildargs: Mapping[str, str] | None = None, dockerfile: Path | None = None,
              target: str | None = None, layout: Path | None = None,
              contexts: Mapping[str, Path] | None = None) -> BuildResult:
        """Build `context`; with `layout`, the image's OCI layout is written there (replacing what was)."""
        args = {**(buildargs or {}), **({"http_proxy": proxy} if proxy else {})}
        phases = Phases.over(on_step)  # the steps, then the exporters and the layout's phases, each with its time
        with scratch_dir(context.parent, SCRATCH) as work:
            meta = work / "metadata.json"
            argv = ["docker", "buildx", "build", "--progress=rawjson", "--metadata-file", str(meta)]
            for k, v in args.items():
                argv += ["--build-arg", f"{k}={v}"]
            named = self.named_contexts(context, contexts)
            for name, where in named.items():
                argv += ["--build-context", f"{name}={where}"]
            for ref in cache_from:
                argv += ["--cache-from", ref]
            for name, pinned in self.base_contexts(dockerfile or context / "Dockerfile", args, named).items():
                argv += ["--build-context", f"{name}={pinned}"]
            if nocache:
                argv.append("--no-cache")
            if dockerfile is not None:
                argv += ["--file", str(dockerfile)]
            if target is not None:
                argv += ["--target", target]
            oci = work / "oci"
            outputs = self.outputs(oci, tag, layout, together=False)
            exports = [a for output in outputs for a in ("--output", output)] if outputs \
                else ["--load"] + (["--tag", tag] if tag else [])
            # The engine's copy in a second build, every step from the first one's cache. Measured on Docker 26.1's
            # containerd store (torch stack, every step cached, a label moved): a build with both exporters took
            # 0.6-1.7 s, one with either alone 0.3 s, buildx's whole run. It begins once the first one's layers
            # are gzipped (its exporter's manifest): its own exporter finds them so, and its unpacking into the
            # engine's store runs while the first writes the layout (torch stack, cold: 4.5 s of layout, 9 s of
            # unpacking, loaded machine).
            second = _Second() if outputs and tag is not None and self.exporters > 1 else None
            if second is not None:
                assert tag is not None
                again = [a for a in argv if a != "--no-cache"]
                again[again.index("--metadata-file") + 1] = str(work / "engine.json")
                second.argv, second.env = [*again, "--output", self.image_output(tag), str(context)], self.env()

            def on_phase(name: str) -> None:
                phases.phase(name)
                if second is not None and name.startswith("exporting manifest"):
                    second.start()

            text, code = run_buildx([*argv, *exports, str(context)], self.env(), Folder(phases, on_phase).feed)
            both = False
            if second is not None and (code == 0 or second.started):
                phases.phase("the engine's image: a second build, every step from the first one's cache"
                             + (" (begun with the layout)" if second.started else ""), "the engine's image")
                both = second.wait() == 0 and code == 0  # else the layout is loaded into the engine (`finished`)
            docs, trailer = documents(text)
            return self.finished(fold(docs, trailer), tag, code == 0, read_metadata(meta).get,
                                 oci if outputs else None, layout, both=both, phases=phases)

    def finished(self, stream: Stream, tag: str | None, ok: bool, meta: Callable[[str], Any],
                 oci: Path | None, layout: Path | None, *, both: bool = False,
                 phases: Phases | None = None) -> BuildResult:
        """A build's result from what buildx said of it (`meta`: its metadata file's entry): the exporter's
        layout (`oci`) settled on the image built, loaded into the engine unless the image exporter put it
        there (`both`), and moved to `layout`; the image id from the engine, else from the metadata."""
        image_id = ""
        artefact = None
        phases = phases or Phases()
        if ok:
            if oci is not None:
                phases.phase("the OCI layout settled on the image built", "settling the layout")
                artefact = settle_layout(oci, _digest(meta), made_by=EXPORTED)
                shutil.rmtree(oci / "ingest", ignore_errors=True)  # the exporter's unfinished writes: none
                if not both or self._image_id(meta, tag) != artefact.digest:
                    phases.phase("the OCI layout loaded into the engine", "the load into the engine")
                    load_layout(self.docker, oci, tag)
            image_id = self._image_id(meta, tag)
        result = result_of(stream, image_id, ok)
        if artefact is not None:  # elsewhere the image is copied out of the engine once built (image/build.py)
            assert layout is not None and oci is not None
            phases.phase(f"the OCI layout moved to {layout}", "the layout's move")
            replace_layout(oci, layout)
            result = BuildResult(result.image_id, result.log, result.steps, result.cached_steps,
                                 artefact=read_layout(layout, made_by=EXPORTED), ran=result.ran)
        return result

    def _image_id(self, meta: Callable[[str], Any], tag: str | None) -> str:
        facts = self.docker.facts(tag) if tag else None
        if facts is not None:
            return facts.id
        # the engine's image id: on the containerd store the image's own digest, on overlay2 its config's
        keys = ("containerimage.digest",) if self.containerd_store else ("containerimage.config.digest",
                                                                         "containerimage.digest")
        return next((str(meta(k)) for k in keys if meta(k)), "")

    def bake(self, targets: Sequence[BakeTarget], on_step: Callable[[str], Steps | None],
             on_event: Callable[[str, str], None]) -> dict[str, Baked]:
        """Every target built by one `docker buildx bake` on this engine (engine/bake.py)."""
        from stackctl.engine.bake import run_bake

        return run_bake(self, targets, on_step, on_event)

    # The rest of the protocol is the engine's own
    def run_with_files(self, image: str, files: Mapping[str, bytes], argv: list[str], *, fetch: str | None = None,
                       timeout: float = 600.0, **kw: Any) -> tuple[int, str, str, bytes | None]:
        return self.docker.run_with_files(image, files, argv, fetch=fetch, timeout=timeout, **kw)

    def facts(self, ref: str) -> ImageFacts | None:
        return self.docker.facts(ref)

    def push(self, repository: str, tag: str) -> str:
        return self.docker.push(repository, tag)

    def remove(self, ref: str) -> None:
        self.docker.remove(ref)

    def tag(self, source: str, repository: str, tag: str) -> None:
        self.docker.tag(source, repository, tag)

    def layout(self, image: str, dest: Path) -> Artefact:
        return self.docker.layout(image, dest)

    def versions(self) -> dict[str, str]:
        if self._buildx is None:
            self._buildx = buildx_version(self.env()) or ""
        return {**self.docker.versions(), "builder": "buildkit", "buildx": self._buildx}

    def __getattr__(self, name: str) -> Any:  # export, image_config, machine, ...: the engine's
        return getattr(self.docker, name)


class _Second:
    """The build that gives the engine its image, run beside the first one's end (`start`) or after it (`wait`)."""

    def __init__(self) -> None:
        self.argv: list[str] = []
        self.env: dict[str, str] = {}
        self.started = False
        self._thread: threading.Thread | None = None
        self._code: int | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        if not self.started:
            self.started = True
            self._thread = threading.Thread(target=self._run, name="buildx-engine-image", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            _, self._code = run_buildx(self.argv, self.env, lambda doc: None)
        except BaseException as exc:  # raised again in the caller's thread by `wait`
            self._error = exc

    def wait(self) -> int:
        """Its exit status (run now where it had not begun)."""
        self.start()
        assert self._thread is not None
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._code if self._code is not None else 1


_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?\s*$", re.I)
_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?\s*$", re.I)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def from_images(dockerfile: str, args: Mapping[str, str]) -> list[str]:
    """The images a Dockerfile builds FROM, in order, each once: not its own stages, not `scratch`; a build
    argument in the name is given its value (`args`, else the ARG's default), and a name left with one unknown
    is left out."""
    stages: set[str] = set()
    defaults: dict[str, str] = {}  # the ARGs before the first FROM, which a FROM may use
    out: list[str] = []
    first = True
    for line in re.sub(r"\\\n", " ", dockerfile).splitlines():
        if (arg := _ARG.match(line)) and arg.group(2) is not None and first:
            defaults[arg.group(1)] = arg.group(2).strip("\"'")
        m = _FROM.match(line)
        if m is None:
            continue
        first = False
        ref = _VAR.sub(lambda v: args.get(v[1] or v[2], defaults.get(v[1] or v[2], "$")), m.group(1))
        if "$" not in ref and ref.lower() not in stages and ref.lower() != "scratch" and ref not in out:
            out.append(ref)
        if m.group(2):
            stages.add(m.group(2).lower())
    return out


def names_host(ref: str) -> bool:
    """Whether an image reference names its registry (`HOST[:PORT]/...`, `localhost/...`), as Docker reads it:
    else it is Docker Hub's."""
    first, slash, _ = ref.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def source_name(ref: str, tags: Sequence[str], repo_digests: Sequence[str]) -> str | None:
    """The name under which the containerd store's copy of `ref` is taken without asking a registry, pinned by
    digest: one of the image's own tags that names a registry host, when `ref` names none (the image came from
    that registry and was tagged short here). None where `ref` names its registry (its own name serves) or the
    image has no such tag or no digest (never pushed or pulled: BuildKit asks the registry its name names)."""
    if names_host(ref):
        return None
    digest = ref.partition("@")[2] or next((d.partition("@")[2] for d in repo_digests if "@" in d), "")
    hosted = sorted(t for t in tags if names_host(t) and "@" not in t)
    return f"{hosted[0]}@{digest}" if digest and hosted else None


def buildx_env(url: str | None) -> dict[str, str]:
    """The environment buildx runs in: the engine's DOCKER_HOST, and no provenance manifest beside the image's."""
    env = dict(os.environ)
    if url is not None:
        env["DOCKER_HOST"] = url
    env.setdefault("BUILDX_NO_DEFAULT_ATTESTATIONS", "1")
    return env


def load_layout(docker: DockerEngine, oci: Path, tag: str | None) -> None:
    """Load the layout into the engine (the containerd store keeps its manifest digest as the image id)."""
    with docker.talking(f"cannot load the built image {tag or ''} into the engine"):
        for ev in docker.client.api.load_image(_tar_stream(oci), quiet=True):
            if isinstance(ev, dict) and ev.get("error"):
                raise ServiceError(f"cannot load the built image into the engine: {ev['error']}")


def _tar_stream(root: Path) -> Iterator[bytes]:
    """The layout as a tar, written to a temporary file first: the SDK sends a file or bytes, not a pipe."""
    with tempfile.TemporaryFile(dir=root.parent) as f:
        with tarfile.open(fileobj=f, mode="w") as tar:
            for path in sorted(root.rglob("*")):
                tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
        f.seek(0)
        while piece := f.read(1 << 20):
            yield piece


def _digest(meta: Callable[[str], Any]) -> str:
    """The image's digest as the exporter reports it in the metadata file (`meta`: its entry's `get`)."""
    digest = meta("containerimage.digest")
    if not isinstance(digest, str):
        raise ServiceError("buildx's metadata names no image digest of the build")
    return digest


def _seed(oci: Path, previous: Path) -> None:
    """A fresh layout directory holding the previous build's blobs as hard links: the exporter skips each
    blob the layout has (the torch stack's cached rebuild exported in 0.4 s instead of 3 s), and the previous
    layout stays whole until the new one replaces it (blobs are written anew, never in place)."""
    blobs = previous / "blobs" / "sha256"
    if not blobs.is_dir():
        return
    (oci / "blobs" / "sha256").mkdir(parents=True)
    for path in blobs.iterdir():
        try:
            os.link(path, oci / "blobs" / "sha256" / path.name)
        except OSError:  # another file system: the exporter writes that blob again
            shutil.rmtree(oci, ignore_errors=True)
            return


def replace_layout(src: Path, dest: Path) -> None:
    """Move the fresh layout into place: the old one goes only once the new one is whole."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    old = dest.with_name(dest.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    shutil.move(str(src), str(dest))
    shutil.rmtree(old, ignore_errors=True)
