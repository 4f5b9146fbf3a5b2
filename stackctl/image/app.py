"""The image a project ships: its own Dockerfile ([image.app]) built FROM the stack image, then the whole gate.

`stackctl build` with [image.app] makes three images: the stack image (its stack-phase gate, tagged
`TAG-stack`), the project's Dockerfile on top of it (the stack image passed by id in the stack argument,
untagged), and the final image (tagged TAG): the app image, the whole gate in its declared order as its last
build step, an SBOM of the locked pins plus what the app phase installed, and labels naming the stack image as
its base. The plan (spec, SBOM, labels, Dockerfile) is pure; `build_app` is the edge that drives the engine.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from stackctl.base.files import write_atomic
from stackctl.base.progress import Steps as StepProgress
from stackctl.base.words import count
from stackctl.errors import CheckFailed, InputError
from stackctl.image.buildlog import BuildFailed, BuildResult, ImageFacts
from stackctl.image.labels import LABEL_INSTALLED, LABEL_SBOM, OCI, ImageRef, image_ref
from stackctl.image.protocols import Engine
from stackctl.image.render import SBOM_PATH, label_value
from stackctl.profile.model import AppImage, GatePhase, Stack

if TYPE_CHECKING:
    from stackctl.image.gaterun import GateRun
    from stackctl.image.prepare import Prepared

STACK_SUFFIX = "-stack"  # the stack image's tag: the profile's tag and this
GATE_DIR = "/opt/stackctl/app-gate"
FREEZE = "/opt/stackctl/app-installed.json"  # what the whole gate found installed in the final image
LABEL_APP_DOCKERFILE = "io.stackctl.app.dockerfile-digest"
LABEL_APP_CONTEXT = "io.stackctl.app.context"
LABEL_APP_DOCKERFILE_PATH = "io.stackctl.app.dockerfile"
LABEL_STACK_IMAGE = "io.stackctl.stack-image"
PROPERTY_SOURCE = "stackctl:source"
FROM_APP = "app phase (not from the lock)"


def stack_image_ref(stack: Stack, repository: str | None = None) -> ImageRef:
    """The stack image's name: the profile's tag, with `-stack` appended when [image.app] builds on top of it
    (the final image takes the tag itself)."""
    ref = image_ref(stack, repository)
    if stack.app is None:
        return ref
    tag = ref.tag[:128 - len(STACK_SUFFIX)] + STACK_SUFFIX  # a Docker tag holds at most 128 characters
    return ImageRef(ref.repository, tag)


@dataclass(frozen=True)
class AppSources:
    """Where [image.app]'s files are, resolved against the repository root."""

    root: Path
    dockerfile: Path
    context: Path

    @classmethod
    def of(cls, stack: Stack, app: AppImage) -> AppSources:
        from stackctl.profile.sources import repo_root

        profile = Path(stack.sources[0]) if stack.sources and "@" not in stack.sources[0] else Path("stacks/x")
        root = repo_root(profile.parent)
        found = cls(root, root / app.dockerfile, root / app.context)
        if not found.dockerfile.is_file():
            raise InputError(f"{found.dockerfile}: no such file (image.app.dockerfile of {stack.name})")
        if not found.context.is_dir():
            raise InputError(f"{found.context}: no such directory (image.app.context of {stack.name})")
        return found

    def dockerfile_digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.dockerfile.read_bytes()).hexdigest()


def app_sbom(stack_sbom: str, freeze: Mapping[str, str], locked: set[str]) -> str:
    """The stack's CycloneDX SBOM plus one component per distribution the gate found installed that the lock
    does not install, each marked as coming from the app phase."""
    doc: dict[str, Any] = json.loads(stack_sbom) if stack_sbom.strip() else {}
    components = list(doc.get("components") or [])
    for name, version in sorted(freeze.items()):
        if canonicalize_name(name) in locked:
            continue
        ref = f"pkg:pypi/{canonicalize_name(name)}@{version}"
        components.append({"bom-ref": ref, "name": name, "version": version, "purl": ref, "type": "library",
                           "properties": [{"name": PROPERTY_SOURCE, "value": FROM_APP}]})
    doc["components"] = components
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def app_installed(sbom: str | bytes | None) -> dict[str, str]:
    """Canonical name → version of the SBOM's components the app phase installed (none for a stack image)."""
    try:
        doc = json.loads(sbom) if sbom else {}
        components = doc.get("components") or [] if isinstance(doc, dict) else []
    except ValueError:
        return {}
    mark = {"name": PROPERTY_SOURCE, "value": FROM_APP}
    return {canonicalize_name(str(c.get("name"))): str(c.get("version")) for c in components
            if isinstance(c, dict) and mark in (c.get("properties") or [])}


def app_labels(*, stack_ref: ImageRef, stack_id: str, sources: AppSources, revision: str, sbom: str,
               freeze: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Labels the final image adds to those it inherits from the stack image (revision, lock digest, ...)."""
    context = sources.context.relative_to(sources.root).as_posix() if sources.context != sources.root else "."
    return tuple(sorted({
        f"{OCI}.base.name": str(stack_ref),
        f"{OCI}.base.digest": stack_id,
        f"{OCI}.revision": revision,
        LABEL_STACK_IMAGE: stack_id,
        LABEL_APP_DOCKERFILE: sources.dockerfile_digest(),
        LABEL_APP_DOCKERFILE_PATH: sources.dockerfile.relative_to(sources.root).as_posix(),
        LABEL_APP_CONTEXT: f"{context}@{revision}",
        LABEL_SBOM: "sha256:" + hashlib.sha256(sbom.encode("utf-8")).hexdigest(),
        LABEL_INSTALLED: json.dumps(dict(freeze), sort_keys=True, separators=(",", ":")),
    }.items()))


def gate_argv(spec: str, freeze: str | None = None, epoch: int | None = None, python: str = "python3") -> list[str]:
    """The gate as a container runs it: the image's python3 (the stack's venv is first on its PATH)."""
    argv = [python, "-B", f"{GATE_DIR}/gate.py", spec]
    if freeze is not None:
        argv += ["--freeze", freeze]
    if epoch is not None:
        argv += ["--epoch", str(epoch)]
    return argv


def final_dockerfile(app_id: str, labels: tuple[tuple[str, str], ...], epoch: int) -> str:
    """The last build: the whole gate as the final image's last step, then its labels."""
    run = json.dumps(gate_argv(f"{GATE_DIR}/gate.json", FREEZE, epoch))
    label_lines = " \\\n      ".join(f"{label_value(k)}={label_value(v)}" for k, v in labels)
    return (f"# Generated by stackctl: the project's image ({app_id}) gated whole, in the gate's declared order.\n"
            f"FROM {app_id}\nCOPY rootfs/ /\nRUN {run}\nLABEL {label_lines}\n")


@dataclass(frozen=True)
class GateInImage:
    """One run of the gate in a container of an image: what it printed, and what it found installed."""

    returncode: int
    stdout: str
    stderr: str
    freeze: dict[str, str] | None


def gate_in_image(engine: Engine, image: str, spec: str, *, freeze: bool = False,
                  python: str = "python3") -> GateInImage:
    """Run `gates/gate.py` with `spec` in a container of `image` (no network), as a build step would."""
    from stackctl.base.assets import asset_root

    script = (asset_root() / "gates" / "gate.py").read_bytes()
    files = {f"{GATE_DIR}/gate.py": script, f"{GATE_DIR}/gate.json": spec.encode("utf-8")}
    status, out, err, frozen = engine.run_with_files(
        image, files, gate_argv(f"{GATE_DIR}/gate.json", "/tmp/stackctl-freeze.json" if freeze else None,
                                python=python),
        fetch="/tmp/stackctl-freeze.json" if freeze else None)
    found: dict[str, str] | None = None
    if frozen is not None:
        try:
            found = {str(k): str(v) for k, v in json.loads(frozen).items()}
        except (ValueError, AttributeError):
            found = None
    return GateInImage(status, out, err, found)


def gate_in_container(engine: Engine, image: str, spec: str, python: str | None = None) -> GateRun:
    """`stackctl gate PROFILE --image REF`: the gate's run in a container of any image, judged like any other."""
    from stackctl.image.gaterun import GateRun

    ran = gate_in_image(engine, image, spec, python=python or "python3")
    return GateRun.from_output(f"{python or 'python3'} in {image}", ran.returncode, ran.stdout, ran.stderr)


def gate_phase(text: str) -> GatePhase | None:
    """`--phase stack|app|device|all` → the phase, None for the whole gate (which leaves the device phase out)."""
    if text == "all":
        return None
    try:
        return GatePhase(text)
    except ValueError:
        raise InputError(f"--phase {text!r}: give stack, app, device or all") from None


@dataclass(frozen=True)
class AppBuilt:
    image: str  # repository:tag of the final image
    image_id: str
    app_image_id: str  # the project's Dockerfile's result, before the gate
    stack_image: str
    stack_image_id: str
    result: BuildResult  # the final build: its last step is the gate
    app_result: BuildResult
    sbom: str
    labels: tuple[tuple[str, str], ...]
    dockerfile_digest: str


def _write_tree(root: Path, files: Mapping[str, bytes | str], epoch: int) -> None:
    """The final build's context, every file and directory dated `epoch`: the classic builder keeps the times
    COPY is given, so the same inputs give the same layer."""
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*filenames, *dirnames]:
            os.utime(Path(dirpath) / name, (epoch, epoch))


def unlabelled(facts: ImageFacts | None, stack_id: str, engine: Engine) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The id the project's Dockerfile builds FROM, and the labels the final image must carry again: the stack
    image's last step only sets its labels (the revision among them), so its parent holds the very same layers
    and keeps its id from one commit to the next: the project's own cached steps stay cached when only its
    source moves. Falls back to the stack image itself when the engine names no parent of the same layers."""
    if facts is None:
        return stack_id, ()
    parent = engine.facts(facts.parent) if facts.parent else None
    if parent is not None and parent.layers == facts.layers:
        return parent.id, facts.labels
    return stack_id, ()


def from_ref(engine: Engine, image_id: str, repository: str) -> str:
    """What a FROM names to get the engine's image `image_id`: the id itself for the classic builder; for BuildKit,
    whose frontend reads `sha256:...` as an image to pull from Docker Hub, a local tag of it under the image's
    repository (REPOSITORY:stackctl-from-ID12, removed with the repository's images)."""
    if engine.builder != "buildkit":
        return image_id
    tag = f"stackctl-from-{image_id.removeprefix('sha256:')[:12]}"
    engine.tag(image_id, repository, tag)
    return f"{repository}:{tag}"


def build_app(*, stack: Stack, spec: str, stack_sbom: str, locked: set[str], stack_ref: ImageRef, stack_id: str,
              final_ref: ImageRef, revision: str, epoch: int, work: Path, engine: Engine, no_cache: bool,
              on_step: StepProgress | None = None, stack_facts: ImageFacts | None = None,
              layout: Path | None = None) -> AppBuilt:
    """The project's Dockerfile FROM the stack image (by id), the whole gate run in it (its freeze makes the
    SBOM), then the final image: the gate as its last build step, the labels after it. Raises BuildFailed with
    the FAIL lines when the gate fails."""
    from stackctl.image.gaterun import GateRun, verdict

    app = stack.app
    assert app is not None
    sources = AppSources.of(stack, app)
    base_id, inherited = unlabelled(stack_facts, stack_id, engine)
    args = {**dict(app.args), app.stack_arg: from_ref(engine, base_id, final_ref.repository)}
    if engine.builder == "buildkit":
        args["SOURCE_DATE_EPOCH"] = str(epoch)  # the project's own steps dated as the stack's
    app_result = engine.build(sources.context, None, on_step, nocache=no_cache, buildargs=args,
                              dockerfile=sources.dockerfile, target=app.target)
    ran = gate_in_image(engine, app_result.image_id, spec, freeze=True)
    run = GateRun.from_output(f"the image of {app.dockerfile}", ran.returncode, ran.stdout, ran.stderr)
    problem = verdict(stack.name, run)
    if problem is not None:
        fails = tuple(ln for ln in run.lines if ln.startswith("FAIL "))
        if fails:
            raise BuildFailed(f"the gate failed in the image of {app.dockerfile}: {count(len(fails), 'check')} did not "
                              "pass", fails, run.lines)
        raise problem
    if ran.freeze is None:
        raise CheckFailed(f"the gate in the image of {app.dockerfile} passed but left no list of what is installed")
    sbom = app_sbom(stack_sbom, ran.freeze, locked)
    labels = tuple(sorted({**dict(inherited), **dict(app_labels(
        stack_ref=stack_ref, stack_id=stack_id, sources=sources, revision=revision, sbom=sbom,
        freeze=ran.freeze))}.items()))
    from stackctl.base.assets import asset_root

    ctx = work / "app-gate"
    try:
        _write_tree(ctx, {
            "Dockerfile": final_dockerfile(from_ref(engine, app_result.image_id, final_ref.repository), labels,
                                           epoch),
            f"rootfs{GATE_DIR}/gate.py": (asset_root() / "gates" / "gate.py").read_bytes(),
            f"rootfs{GATE_DIR}/gate.json": spec,
            f"rootfs{SBOM_PATH}": sbom,
        }, epoch)
    except OSError as exc:
        raise InputError(f"{ctx}: cannot write the final build's context: {exc.strerror or exc}") from None
    final_args = {"SOURCE_DATE_EPOCH": str(epoch)} if engine.builder == "buildkit" else None
    # `layout`: the final image's OCI layout, the artefact publish copies (where the builder writes one)
    result = engine.build(ctx, str(final_ref), on_step, nocache=no_cache, buildargs=final_args, layout=layout)
    return AppBuilt(str(final_ref), result.image_id, app_result.image_id, str(stack_ref), stack_id, result,
                    app_result, sbom, labels, sources.dockerfile_digest())



def finish_app(prep: Prepared, stack_result: BuildResult, stack_image: str, repository: str | None, work: Path,
               engine: Engine, no_cache: bool, on_step: StepProgress | None) -> tuple[AppBuilt, dict[str, Any]]:
    """After the stack image: the app and final builds, and what the build record says of them."""
    from stackctl.image import gatespec
    from stackctl.image.labels import LABEL_EPOCH

    stack, plan = prep.stack, prep.plan
    assert plan is not None
    installed = gatespec.installed_pins(stack, prep.lock, prep.target)
    spec = gatespec.dumps(gatespec.gate_spec(stack, installed, prep.target))  # the whole gate
    stack_ref = stack_image_ref(stack, repository)
    epoch = int(dict(plan.labels).get(LABEL_EPOCH, "0"))
    facts = engine.facts(stack_result.image_id)
    built = build_app(stack=stack, spec=spec, stack_sbom=plan.sbom, locked={canonicalize_name(n) for n, _ in installed},
                      stack_ref=stack_ref, stack_id=stack_result.image_id, final_ref=image_ref(stack, repository),
                      revision=prep.revision, epoch=epoch, work=work, engine=engine, no_cache=no_cache,
                      on_step=on_step, stack_facts=facts, layout=work.parent / f"{stack.name}.oci")
    final = engine.facts(built.image)
    sbom_path = work / "app.sbom.cdx.json"
    try:
        write_atomic(sbom_path, built.sbom)
    except OSError as exc:
        raise InputError(f"{sbom_path}: cannot write the app image's SBOM: {exc.strerror or exc}") from None
    fields: dict[str, Any] = {
        "image": built.image, "image_id": built.image_id, "labels": dict(final.labels) if final else {},
        "steps": built.result.steps, "cached_steps": built.result.cached_steps, "gate": list(built.result.gate_lines),
        "gate_cached": built.result.gate_cached,
        "artefact": built.result.artefact.record() if built.result.artefact is not None else None,
        "stack_image": {"image": stack_image, "image_id": stack_result.image_id, "steps": stack_result.steps,
                        "labels": dict(facts.labels) if facts else {},
                        "cached_steps": stack_result.cached_steps, "gate": list(stack_result.gate_lines),
                        "gate_cached": stack_result.gate_cached,
                        "artefact": stack_result.artefact.record() if stack_result.artefact is not None else None},
        "app": {"dockerfile": stack.app.dockerfile if stack.app else "", "dockerfile_digest": built.dockerfile_digest,
                "image_id": built.app_image_id, "steps": built.app_result.steps,
                "cached_steps": built.app_result.cached_steps, "sbom": str(sbom_path),
                "installed_by_app": app_installed(built.sbom)},
    }
    return built, fields
