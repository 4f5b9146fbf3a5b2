"""`docker buildx bake` on one engine: a queue of cells as one bake, each cell's result as a single build's.

One bake runs every target at once: BuildKit builds their stages in parallel and runs a stage two cells share
once. The rawjson stream is split by target (image/bakefile.BakeSplit) and each target's share folded as a
single build's (image/rawjson), so steps, gate verdict and failure read the same; the result (loading the
layout, the image id, the artefact) is BuildxEngine.finished, the single build's own code. A step two cells
share runs once: each cell's share names it twice (bakefile.merged makes it one step again).

When one target fails, buildx cancels the others and writes no metadata file at all (measured, buildx 0.13.1):
the failed targets are the cells' failures, and the rest are baked again at once (what they had built is in
BuildKit's cache), until every target has either its result or its own failure.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from stackctl.base.files import write_atomic
from stackctl.base.progress import Phases, Steps
from stackctl.base.scratch import scratch_dir
from stackctl.engine.buildxrun import read_metadata, run_buildx
from stackctl.errors import ServiceError, StackctlError
from stackctl.image.bakefile import (
    Baked,
    BakeSplit,
    BakeTarget,
    bake_document,
    failed_on_its_own,
    merged,
    with_sibling_caches,
)
from stackctl.image.buildlog import BuildResult
from stackctl.image.rawjson import Folder, Stream, documents


class Baker(Protocol):
    """What the bake needs of a BuildKit engine (engine/buildx.BuildxEngine): buildx's environment, and the
    single build's own exporters and ending (the layout settled, loaded or not, moved; the image id)."""

    def env(self) -> dict[str, str]: ...
    def base_contexts(self, dockerfile: Path, args: Mapping[str, str],
                      named: Mapping[str, object] | None = None) -> dict[str, str]: ...
    def outputs(self, oci: Path, tag: str | None, layout: Path | None) -> tuple[str, ...]: ...
    def finished(self, stream: Stream, tag: str | None, ok: bool, meta: Callable[[str], Any], oci: Path | None,
                 layout: Path | None, *, both: bool = False, phases: Phases | None = None) -> BuildResult: ...

BAKE_FILE = "bake.json"
SCRATCH = ".bake."  # RECORD_DIR/.bake.XXXXXXXX: the bake file, its metadata, each target's layout as exported


def _bake_error(trailer: str) -> str:
    lines = [ln for ln in trailer.splitlines() if ln.strip()]
    said = next((ln.removeprefix("ERROR: ") for ln in reversed(lines) if ln.startswith("ERROR: ")), None)
    return said or (lines[-1] if lines else "it exited with an error")


def _cache_tags(target: BakeTarget, on_event: Callable[[str, str], None]) -> list[str]:
    """The tags of the target's cache repository; none (said) where the registry does not list them."""
    from stackctl.engine.registry import Registry

    if not target.cache_from:
        return []
    repo = target.cache_from[0].rpartition("ref=")[2].partition(",")[0].rpartition(":")[0]
    try:
        return Registry().tags(repo)
    except StackctlError as exc:
        on_event(target.name, f"cache: no sibling caches, {repo} lists no tags: {exc}")
        return []


def run_bake(engine: Baker, targets: Sequence[BakeTarget], on_step: Callable[[str], Steps | None],
             on_event: Callable[[str, str], None]) -> dict[str, Baked]:
    """Each target's result, or its failure (BuildFailed for a step or the gate, ServiceError for the engine).
    Raises only when buildx cannot be run at all."""
    if not targets:
        return {}
    targets = [dataclasses.replace(t, cache_from=with_sibling_caches(t.cache_from, _cache_tags(t, on_event)))
               for t in targets]
    out: dict[str, Baked] = {}
    # each target's base images where the engine's store has them, as a single build names them (no registry asked)
    bases = {t.name: engine.base_contexts(t.context / t.dockerfile, t.args, t.contexts) for t in targets}
    with scratch_dir(targets[0].context.parent.parent, SCRATCH) as work:
        pending, round_ = list(targets), 0
        while pending:
            round_ += 1
            why = "" if round_ == 1 else " (buildx stopped them when another cell failed; their steps are cached)"
            for t in pending:
                on_event(t.name, f"bake {round_}: {len(pending)} targets{why}")
            # each target's exporters as a single build's: on the containerd store BuildKit writes its layout (and
            # the engine's image); on overlay2 the image is loaded and copied out of the engine afterwards
            oci, outputs = {}, {}
            for t in pending:
                where = work / t.name / "oci"
                shutil.rmtree(where, ignore_errors=True)
                if exporters := engine.outputs(where, t.tag, t.layout):
                    oci[t.name], outputs[t.name] = where, exporters
            bake_file, meta = work / BAKE_FILE, work / "metadata.json"
            meta.unlink(missing_ok=True)
            document = bake_document(pending, outputs)
            for t in pending:
                if bases[t.name]:
                    document["target"][t.name].setdefault("contexts", {}).update(bases[t.name])
            write_atomic(bake_file, json.dumps(document, indent=2) + "\n")
            split = BakeSplit([t.name for t in pending])
            phases = {t.name: Phases.over(on_step(t.name)) for t in pending}  # steps, then exporters, each timed
            folders = {t.name: Folder(phases[t.name], phases[t.name].phase) for t in pending}

            def feed(doc: dict[str, object], split: BakeSplit = split, folders: dict[str, Folder] = folders) -> None:
                for name, part in split.feed(doc).items():
                    folders[name].feed(part)

            argv = ["docker", "buildx", "bake", "--file", str(bake_file), "--metadata-file", str(meta),
                    "--progress=rawjson"]
            text, code = run_buildx(argv, engine.env(), feed)
            _, trailer = documents(text)
            metadata = read_metadata(meta)
            again = []
            for t in pending:
                found = split.cache_found.get(t.name)
                if t.cache_from and found is not None:
                    ref = t.cache_from[0].rpartition("ref=")[2]
                    on_event(t.name, f"cache: imported {ref}" if found else
                             f"cache: none yet at {ref} (this build writes it)")
                # buildx's closing words name one failure of the bake: only a lone target's is surely its own
                said = trailer if code and len(pending) == 1 else ""
                stream = merged(folders[t.name].stream(said), code == 0 and isinstance(metadata.get(t.name), dict))
                if code != 0 and not failed_on_its_own(stream):  # cancelled, or built but left without metadata: again
                    again.append(t)
                    continue
                entry = metadata.get(t.name)
                got = entry.get if isinstance(entry, dict) else {}.get
                try:
                    result = engine.finished(stream, t.tag, code == 0, got, oci.get(t.name), t.layout,
                                             both=len(outputs.get(t.name, ())) > 1, phases=phases[t.name])
                    out[t.name] = Baked(result, None, found if t.cache_from else None)
                except StackctlError as exc:
                    out[t.name] = Baked(None, exc, found if t.cache_from else None)
            if again and len(again) == len(pending):  # no target failed of its own: the bake itself did
                error = ServiceError(f"docker buildx bake failed: {_bake_error(trailer)}")
                out.update({t.name: Baked(None, error) for t in again})
                break
            pending = again
    return out
