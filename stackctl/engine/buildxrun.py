"""Running buildx (`build` or `bake`) and reading what it writes: its rawjson documents as they come, its
metadata file. Shared by the single build (engine/buildx.py) and the bake (engine/bake.py)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from stackctl.base.concurrency import streaming_child
from stackctl.errors import ServiceError


def run_buildx(argv: list[str], env: Mapping[str, str], feed: Callable[[dict[str, Any]], None]) -> tuple[str, int]:
    """Run buildx (build or bake), each rawjson document given to `feed` as it comes (a document ends with a
    line `}`); its stderr whole, and its exit status."""
    chunks: list[str] = []
    doc: list[str] = []
    # a child `end_children` ends on an interrupt, before the build's scratch directory, which buildx writes
    # into, is removed (base/scratch.py)
    with contextlib.ExitStack() as stack:
        try:
            proc = stack.enter_context(streaming_child(argv, env))
        except OSError as exc:
            raise ServiceError(f"cannot run `docker buildx`: {exc.strerror or exc}") from None
        assert proc.stderr is not None
        for line in proc.stderr:
            chunks.append(line)
            doc.append(line)
            if line.rstrip("\n") == "}":
                with contextlib.suppress(ValueError):
                    parsed = json.loads("".join(doc))
                    if isinstance(parsed, dict):
                        feed(parsed)
                doc = []
        code = proc.wait()
    return "".join(chunks), code


def read_metadata(path: Path) -> dict[str, Any]:
    """The `--metadata-file` buildx wrote (none when the build failed: then empty)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
