"""`build --all` through BuildKit: the bake file of a queue of cells, and the bake's progress split by cell.

Pure: `bake_document(targets, oci=...)` turns the cells' rendered contexts into the JSON document `docker buildx
bake --file` reads (a target per cell); `BakeSplit` takes the `--progress=rawjson` documents of that one bake,
whose vertices carry the target's name in front (`[s1-cp311-linux_x86_64 layer01-core 2/3] RUN ...`, measured
with buildx 0.13.1), and hands each target its own documents with the names as a single build writes them, so
each cell's steps, log and gate verdict are read exactly as a single build's. A stage two targets share is one
vertex of BuildKit's (one digest, run once); each target is told of it under its own name, and its log
belongs to both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackctl.errors import StackctlError
from stackctl.image.buildlog import BuildResult
from stackctl.image.rawjson import Stream

CACHE_TAG_PREFIX = "buildcache-"
# BuildKit names a registry-cache import that finds nothing as a failed vertex; the build goes on without it
CACHE_IMPORT = "importing cache manifest from "

_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]+")
_TAG_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
_PREFIX = re.compile(r"^\[([A-Za-z0-9_-]+)(?:\] | )")


@dataclass(frozen=True)
class BakeTarget:
    """One cell as a bake target: what `docker buildx build` would be given for it."""

    name: str  # the target's name in the bake file (target_name)
    context: Path
    tag: str
    dockerfile: str = "Dockerfile"  # relative to the context, as bake reads it
    args: Mapping[str, str] = field(default_factory=dict)
    contexts: Mapping[str, Path] = field(default_factory=dict)  # named build contexts (`wheels`)
    layout: Path | None = None  # where the cell's OCI layout goes (the artefact its build record names)
    no_cache: bool = False
    cache_from: tuple[str, ...] = ()
    cache_to: tuple[str, ...] = ()


@dataclass(frozen=True)
class Baked:
    """What the bake gave one target: its build's result, or its failure, and whether the target's registry
    cache was there to import (None: none asked for, or the build stopped before)."""

    result: BuildResult | None = None
    error: StackctlError | None = None
    cache_imported: bool | None = None


def target_name(stack: str, target: str) -> str:
    """The bake target of a cell: stack and target, in the letters bake allows (`[A-Za-z0-9_-]`)."""
    return _NAME_BAD.sub("-", f"{stack}-{target}").strip("-") or "cell"


def cache_ref(repository: str, stack: str, target: str) -> str:
    """The registry cache of a cell: REPOSITORY:buildcache-STACK-TARGET (a tag of at most 128 characters)."""
    tag = _TAG_BAD.sub("-", f"{CACHE_TAG_PREFIX}{stack}-{target}")[:128]
    return f"{repository}:{tag}"


def registry_cache(ref: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The cache-from and cache-to entries of a target whose registry cache is `ref` (every stage's layers:
    mode=max, so a sibling cell or a pruned builder finds the group stages, not only the final image's)."""
    return (f"type=registry,ref={ref}",), (f"type=registry,ref={ref},mode=max",)


SIBLING_CACHES = 8  # other stacks' caches a target imports beside its own: each import costs a manifest fetch


def with_sibling_caches(cache_from: tuple[str, ...], tags: Sequence[str]) -> tuple[str, ...]:
    """A target's cache-from (its own registry cache first), then the other build caches its cache repository
    holds: a sibling stack built elsewhere (the same groups, one pin moved) wrote the group stages this one
    needs under its own tag. Those of the same target come first (the longest common ending of the tag)."""
    if not cache_from:
        return cache_from
    repo, _, mine = cache_from[0].rpartition("ref=")[2].partition(",")[0].rpartition(":")

    def shared_end(tag: str) -> int:
        n = 0
        while n < min(len(tag), len(mine)) and tag[-1 - n] == mine[-1 - n]:
            n += 1
        return n

    others = sorted((t for t in set(tags) if t.startswith(CACHE_TAG_PREFIX) and t != mine),
                    key=lambda t: (-shared_end(t), t))[:SIBLING_CACHES]
    return cache_from + tuple(f"type=registry,ref={repo}:{t}" for t in others)


def bake_document(targets: Sequence[BakeTarget], outputs: Mapping[str, Sequence[str]] | None = None
                  ) -> dict[str, Any]:
    """The bake file (JSON) of `targets`: its default group names them all, in order. `outputs`: a target's
    exporters, as the engine chose them for its layout (BuildxEngine.outputs: the OCI layout, and the engine's
    image store beside it); a target without any is loaded into the engine (`type=docker`)."""
    outputs = outputs or {}
    seen: set[str] = set()
    out: dict[str, Any] = {}
    for t in targets:
        if t.name in seen:
            raise ValueError(f"two bake targets are named {t.name}")
        seen.add(t.name)
        doc: dict[str, Any] = {"context": str(t.context), "dockerfile": t.dockerfile, "tags": [t.tag]}
        if t.args:
            doc["args"] = dict(t.args)
        if t.contexts:
            doc["contexts"] = {k: str(v) for k, v in t.contexts.items()}
        doc["output"] = list(outputs.get(t.name) or ("type=docker",))
        if t.no_cache:
            doc["no-cache"] = True
        if t.cache_from:
            doc["cache-from"] = list(t.cache_from)
        if t.cache_to:
            doc["cache-to"] = list(t.cache_to)
        out[t.name] = doc
    return {"group": {"default": {"targets": [t.name for t in targets]}}, "target": out}


def unprefixed(name: str, target: str) -> str:
    """A vertex's name as a single build of `target` names it: `[T stage 2/3] RUN` → `[stage 2/3] RUN`,
    `[T] exporting to image` → `exporting to image`."""
    head = f"[{target}"
    if not name.startswith(head):
        return name
    rest = name[len(head):]
    if rest.startswith("] "):
        return rest[2:]
    if rest.startswith(" "):
        return "[" + rest[1:]
    return name


def merged(stream: Stream, built: bool) -> Stream:
    """A target's stream with each step once. A step two targets share runs once, yet each target's share
    names it under two digests (its own solve's, cached or cancelled, and the run that did the work, measured
    with buildx 0.13.1 on Docker 26.1): one step, cached only if every copy was, its log the fuller copy's.
    A copy's `context canceled` is no failure of the step where another copy ran, or where the target was
    `built` (buildx named its image)."""
    groups: dict[str, list[tuple[str, bool, str | None, tuple[str, ...]]]] = {}
    for v in stream.vertices:
        groups.setdefault(v[0], []).append(v)
    out = []
    for name, copies in groups.items():
        errors = [e for _, _, e, _ in copies if e]
        real = [e for e in errors if "canceled" not in e]
        error = real[0] if real else (errors[0] if errors and len(errors) == len(copies) and not built else None)
        lines = max((c[3] for c in copies), key=len)
        out.append((name, all(c[1] for c in copies), error, lines))
    return Stream(tuple(out), stream.trailer)


def failed_on_its_own(stream: Stream) -> bool:
    """Whether a target of a failed bake failed of its own: a Dockerfile step or the frontend's (`[stage 2/9]
    RUN ...`, `[internal] load build definition ...`) with an error that is not BuildKit cancelling it because
    another target failed. The exporters' vertices (`exporting to oci image format`) of a target stopped that
    way fail with words of their own (`failed to send write: EOF`, measured), so their errors are not counted:
    should one really fail, the next round fails with it alone, and says so."""
    return any(error and "canceled" not in error and name.startswith("[")
               for name, _, error, _ in stream.vertices)


class BakeSplit:
    """The bake's status documents, split by target as they arrive: `feed(doc)` returns each target's share."""

    def __init__(self, targets: Sequence[str]) -> None:
        self._targets = set(targets)
        self._owners: dict[str, set[str]] = {}  # vertex digest → the targets that named it
        self.cache_found: dict[str, bool] = {}  # target → whether its registry cache was there to import

    def target_of(self, name: str) -> str | None:
        if len(self._targets) == 1:  # buildx prefixes the names only when it builds several targets
            return next(iter(self._targets))
        m = _PREFIX.match(name)
        return m.group(1) if m and m.group(1) in self._targets else None

    def feed(self, doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}

        def share(target: str, key: str, item: Any) -> None:
            out.setdefault(target, {}).setdefault(key, []).append(item)

        for raw in doc.get("vertexes") or ():
            if not isinstance(raw, dict) or not isinstance(raw.get("digest"), str):
                continue
            name = str(raw.get("name") or "")
            target = self.target_of(name)
            if target is None:  # "[internal] load local bake definitions": the bake's, no cell's
                continue
            self._owners.setdefault(raw["digest"], set()).add(target)
            vertex = {**raw, "name": unprefixed(name, target) if len(self._targets) > 1 else name}
            if vertex["name"].startswith(CACHE_IMPORT):
                if vertex.get("error"):  # nothing there yet: a cold cache, not a failed build
                    self.cache_found[target] = False
                    vertex.pop("error")
                elif vertex.get("completed"):
                    self.cache_found.setdefault(target, True)
            share(target, "vertexes", vertex)
        for key in ("logs", "statuses", "warnings"):
            for item in doc.get(key) or ():
                if not isinstance(item, dict):
                    continue
                for target in sorted(self._owners.get(str(item.get("vertex") or ""), ())):
                    share(target, key, item)
        return out


__all__ = [
    "BakeSplit",
    "BakeTarget",
    "Baked",
    "bake_document",
    "cache_ref",
    "failed_on_its_own",
    "merged",
    "registry_cache",
    "target_name",
    "unprefixed",
]
