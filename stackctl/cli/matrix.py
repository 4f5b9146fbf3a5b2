"""`build --all` and `publish --all`: stacks by targets, here or on a Ray cluster, one progress view, one summary."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackctl.cli.app import console, emit, err_is_terminal, progress_display, table

if TYPE_CHECKING:
    from stackctl.image import CellProgress, CellResult, Event, Matrix
    from stackctl.usecases import BuildOrder

def _say(where: str, cell: str, what: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} [{where}] {cell}: {what}", file=sys.stderr, flush=True)


def build_all(order: BuildOrder, *, as_json: bool) -> None:
    """`build --all`: the order built here or on its cluster, one view of every cell, one summary."""
    from stackctl.usecases import build_all as build_every

    with _view(not as_json) as (event, steps):
        built = build_every(order, os.environ, event, steps)
    _report(built.matrix, as_json, built.cluster)
    if (failure := built.failure()) is not None:
        raise failure


@contextmanager
def _view(show: bool) -> Iterator[tuple[Event, CellProgress]]:
    """One view of every cell: on a terminal a row per cell (its engine, its step, its latest news); in a CI
    log one timestamped line per event, `12:03:04 [engine] stack target: what`, whichever thread says it."""
    from stackctl.base import is_phase
    from stackctl.usecases import BuildProgress

    lock = threading.Lock()
    if not err_is_terminal() or not show:
        def event(where: str, cell: str, what: str) -> None:
            with lock:
                _say(where, cell, what)

        def steps(where: str, cell: str) -> BuildProgress:
            def step(n: int, of: int, what: str) -> None:
                event(where, cell, f"phase: {what[:100]}" if is_phase(n) else f"step {n}/{of}: {what[:100]}")
            return BuildProgress(step=step)

        yield event, steps
        return
    with progress_display("build --all") as bar:
        tasks: dict[tuple[str, str], Any] = {}

        def task(where: str, cell: str) -> Any:
            with lock:
                if (where, cell) not in tasks:
                    tasks[(where, cell)] = bar.add_task(f"{where} {cell}", total=None)
                return tasks[(where, cell)]

        def show_event(where: str, cell: str, what: str) -> None:
            bar.update(task(where, cell), description=f"{where} {cell}: {what[:70]}")

        def show_steps(where: str, cell: str) -> BuildProgress:
            def step(n: int, of: int, what: str) -> None:
                bar.update(task(where, cell), completed=of if is_phase(n) else n - 1, total=of,
                           description=f"{where} {cell}: {what[:70]}")
            return BuildProgress(step=step)

        yield show_event, show_steps


def _seconds(c: CellResult) -> str:
    return f"{c.seconds:.1f}" if c.engine else "-"


def _report(matrix: Matrix, as_json: bool, cluster: str | None) -> None:
    def human() -> None:
        rows = [(c.stack, c.target, c.engine or "-", c.result, c.image.rpartition(":")[2],
                 (c.image_id or "")[7:19] or "-", f"{c.steps_cached}/{c.steps}" if c.steps else "-", _seconds(c),
                 (f"{c.cache_pulled} ({c.cache_bytes} B)" if c.cache_bytes else str(c.cache_pulled))
                 if c.cache_pulled else "-") for c in matrix.cells]
        console.print(table("build --all", ["stack", "target", "engine", "result", "tag", "image id", "cached",
                                            "seconds", "cache pulled"], rows))
        for c in matrix.cells:
            if c.error:
                console.print(f"{c.stack} {c.target}: {c.result}: {c.error}", markup=False, style="red")
        console.print(f"record {matrix.record}", markup=False, style="dim")

    emit({"cells": [_cell_json(c) for c in matrix.cells], "record": str(matrix.record), "cluster": cluster},
         as_json, human)


def _cell_json(c: CellResult) -> dict[str, Any]:
    return {"stack": c.stack, "target": c.target, "engine": c.engine, "image_id": c.image_id,
            "tag": c.image, "steps": c.steps, "steps_cached": c.steps_cached, "seconds": c.seconds,
            "result": c.result, "error": c.error, "cache_pulled": c.cache_pulled, "cache_bytes": c.cache_bytes,
            "cache_pushed": c.cache_pushed, "record": c.record, "builder": c.builder, "node": c.node,
            "host": c.host, "digest": c.digest, "attempts": list(c.attempts), "versions": c.versions}


def publish_all(*, repository: str | None, record_dir: Path, as_json: bool, sign_key: Path | None = None,
                profile: str | None = None, lock: Path | None = None, record_file: Path | None = None) -> None:
    """Publish every cell the last `build --all` built (a single publish's PROFILE, --lock and --record
    refused)."""
    from stackctl.cli.app import invoked
    from stackctl.usecases import publish_cells

    guard = threading.Lock()

    def event(where: str, cell: str, what: str) -> None:
        with guard:
            _say(where, cell, what)

    done = publish_cells(record_dir, repository, event, sign_key=sign_key, profile=profile, lock=lock,
                         record=record_file, command=invoked())
    out = done.cells

    def human() -> None:
        console.print(table("publish --all", ["stack", "target", "engine", "result", "digest"],
                            [(r.stack, r.target, r.engine or "-", r.result, r.digest or "-") for r in out]))
        for r in out:
            if r.error:
                console.print(f"{r.stack} {r.target}: {r.error}", markup=False, style="red")

    emit({"cells": list(out)}, as_json, human)
    if (failure := done.failure()) is not None:
        raise failure


__all__ = ["build_all", "publish_all"]
