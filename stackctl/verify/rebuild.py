"""`stackctl verify --rebuild`: reproducibility as the check.

The image in the registry names its revision, lock and SOURCE_DATE_EPOCH. A clean checkout of that
revision (a detached `git worktree` in a temporary directory) is built without cache, on the engine and
builder `verify` opened, by the same `build_image` as `stackctl build`: it ends with its OCI layout, the
config already reproducible (BuildKit's exporter dated it, or the build rewrote a copy's), as the
published image's was when it was built. The check is that layout's manifest digest against the
registry's; where they part, the config's digest (which covers every layer's diff_id, the labels, the
environment and the history), the diff_ids layer by layer and the labels say where. Nothing is
rewritten here and nothing is pushed. A forged image, however well its records are copied, is not what
its revision and lock build.
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from stackctl.base.progress import Steps
from stackctl.base.words import count
from stackctl.errors import CheckFailed, InputError, ServiceError
from stackctl.image.artefact import Artefact
from stackctl.image.labels import LABEL_EPOCH, LABEL_LOCK, LABEL_STACK, LABEL_TARGET, OCI
from stackctl.image.protocols import Engine, RegistryApi
from stackctl.verify import remote


class RebuildEngine(Engine, Protocol):
    def layout(self, image: str, dest: Path) -> Artefact: ...


@dataclass(frozen=True)
class Rebuilt:
    ref: str  # what was rebuilt: repository@digest
    revision: str
    registry_config: str  # the config digest the registry's manifest names
    rebuilt_config: str  # the rebuilt layout's
    registry_layers: tuple[str, ...]  # diff_ids
    rebuilt_layers: tuple[str, ...]
    seconds: float  # the whole rebuild: checkout, build (its layout included), compare
    compared: tuple[str, ...]
    differences: tuple[str, ...]
    registry_digest: str = ""  # the manifest digest checked
    rebuilt_digest: str = ""  # the rebuilt artefact's (its OCI layout's) manifest digest: equal when reproduced


def compare(registry_config: Mapping[str, Any], config_digest: str,
            rebuilt_raw: bytes) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(rebuilt config digest, rebuilt diff_ids, differences): pure, on the two configs. The rebuilt config is
    the rebuilt layout's own, as final as the published one (BuildKit's exporter wrote it, or the build made a
    copy's reproducible): rewriting it again here would compare a config no build made."""
    rebuilt = _object(rebuilt_raw)
    digest = remote.sha256(rebuilt_raw)
    theirs = [str(x) for x in (registry_config.get("rootfs") or {}).get("diff_ids") or []]
    mine = [str(x) for x in (rebuilt.get("rootfs") or {}).get("diff_ids") or []]
    out = []
    if digest != config_digest:
        out.append(f"the rebuilt config is {digest}, the registry's {config_digest}")
    for n in range(max(len(theirs), len(mine))):
        a = theirs[n] if n < len(theirs) else None
        b = mine[n] if n < len(mine) else None
        if a != b:
            out.append(f"layer {n + 1}: registry {(a or 'none')[:19]}, rebuilt {(b or 'none')[:19]}")
    ours_labels = (rebuilt.get("config") or {}).get("Labels") or {}
    their_labels = (registry_config.get("config") or {}).get("Labels") or {}
    out += [f"label {k}: registry {their_labels.get(k)!r}, rebuilt {ours_labels.get(k)!r}"
            for k in sorted(set(ours_labels) | set(their_labels)) if ours_labels.get(k) != their_labels.get(k)]
    return digest, tuple(mine), tuple(out)


def _object(raw: bytes) -> dict[str, Any]:
    import json

    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise ServiceError("the engine's image config is not a JSON object")
    return data


def profile_in(tree: Path, stack: str, named: tuple[str, ...]) -> Path | None:
    """The profile in the checkout: a relative path the statement names, else the stack's usual file."""
    for text in named:
        path = Path(text)
        if not path.is_absolute() and ".." not in path.parts and (tree / path).is_file():
            return tree / path
    usual = tree / "stacks" / f"{stack}.toml"
    return usual if usual.is_file() else None


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ServiceError("git is not installed; --rebuild checks out the image's revision") from None


def rebuild_and_compare(registry: RegistryApi, engine: RebuildEngine, repository: str, reference: str, *,
                        source: Path, profiles: tuple[str, ...] = (), wheelhouse: Path | None = None,
                        overrides: Mapping[str, str] | None = None, on_step: Steps | None = None) -> Rebuilt:
    """Rebuild the registry's image from its revision (a commit of the git repository at `source`) and
    compare: the profile built is one of `profiles` (what the provenance statement names, read by verify),
    where the checkout has it (the statement only picks the file: whatever it says, the build is held
    against the registry's image).
    CheckFailed for a difference; what cannot be read or built is ServiceError or InputError."""
    from stackctl.image.build import BuildRequest, build_image, made_artefact
    from stackctl.image.labels import image_ref
    from stackctl.image.order import BuildOrder
    from stackctl.image.prepare import prepare_build
    from stackctl.profile.loader import load_stack

    began = time.monotonic()
    digest, manifest, config = remote.remote_image(registry, repository, reference)
    config_digest = str(manifest["config"]["digest"])
    labels: dict[str, str] = (config.get("config") or {}).get("Labels") or {}
    revision = labels.get(f"{OCI}.revision") or ""
    epoch = labels.get(LABEL_EPOCH) or ""
    stack_name = labels.get(LABEL_STACK) or ""
    if not revision or not epoch.isdigit() or not stack_name:
        raise CheckFailed(f"{repository}@{digest}: names no revision, stack or SOURCE_DATE_EPOCH in its labels; "
                          "not an image stackctl published")
    if revision.endswith("-dirty"):
        raise CheckFailed(f"{repository}@{digest} was built from a dirty tree ({revision}): no checkout of a "
                          "revision holds what was built")
    top = _git(source, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise InputError(f"{source}: not a git work tree; --rebuild checks the image's revision out of one",
                         hint="run it in a clone of the repository the image was built from, or pass --source DIR")
    root = Path(top.stdout.strip())
    if _git(root, "cat-file", "-e", f"{revision}^{{commit}}").returncode != 0:
        raise InputError(f"{root}: has no commit {revision}", hint="fetch it (`git fetch origin`) and run again")
    with tempfile.TemporaryDirectory(prefix="stackctl-rebuild-") as tmp:
        tree = Path(tmp) / "src"
        added = _git(root, "worktree", "add", "--detach", str(tree), revision)
        if added.returncode != 0:
            raise ServiceError(f"{root}: git worktree add {revision[:12]} failed")
        # A name of its own: the rebuild must not move the tag the user's own build of this stack has.
        name = f"stackctl-rebuild/{hashlib.sha256(tmp.encode()).hexdigest()[:12]}"
        image: str | None = None
        try:
            profile = profile_in(tree, stack_name, profiles)
            if profile is None:
                raise InputError(f"revision {revision[:12]} has no profile of stack {stack_name} "
                                 f"({', '.join(profiles) or f'stacks/{stack_name}.toml'})")
            stack = load_stack(profile)
            env = {"SOURCE_DATE_EPOCH": epoch}
            prep = prepare_build(stack, profile.with_suffix(".lock"), labels.get(LABEL_TARGET), revision,
                           labels.get(f"{OCI}.version") or revision, labels.get(f"{OCI}.created"), False, env)
            if prep.lock.digest() != labels.get(LABEL_LOCK):
                raise CheckFailed(f"the lock at revision {revision[:12]} is {prep.lock.digest()}, the image's label "
                                  f"says {labels.get(LABEL_LOCK)}")
            order = BuildOrder(repository=name, wheelhouse=wheelhouse, no_cache=True, overrides=dict(overrides or {}))
            req = BuildRequest(prep, profile.with_suffix(".lock"), order, Path(tmp) / "records", Path(tmp) / "context")
            image = str(image_ref(stack, name))
            built = build_image(req, engine, on_step=on_step)
            artefact = made_artefact(built.record_path, engine)  # where the build left it to be made: now
            raw = artefact.blob_path(artefact.config.digest).read_bytes()
        finally:
            if image is not None:
                with suppress(ServiceError):
                    engine.remove(image)
            _git(root, "worktree", "remove", "--force", str(tree))
    mine_digest, mine_layers, differences = compare(config, config_digest, raw)
    if artefact.digest != digest:  # the check itself; the config and layer lines say where they part
        differences = (f"the rebuilt manifest is {artefact.digest}, the registry's {digest}", *differences)
    theirs = tuple(str(x) for x in (config.get("rootfs") or {}).get("diff_ids") or [])
    compared = (f"manifest {artefact.digest[:19]} of the rebuilt image's layout, against the registry's",
                f"config {mine_digest[:19]} rebuilt from revision {revision[:12]} and lock "
                f"{labels.get(LABEL_LOCK, '')[:19]} with SOURCE_DATE_EPOCH {epoch}, against the registry's",
                f"{count(len(theirs), 'layer')} of the registry's image by diff_id, against the "
                f"{len(mine_layers)} rebuilt")
    return Rebuilt(f"{repository}@{digest}", revision, config_digest, mine_digest,
                   theirs, mine_layers, time.monotonic() - began, compared, differences, digest, artefact.digest)
