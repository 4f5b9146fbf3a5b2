"""The build record (RECORD_DIR/STACK.build.json) read back: one reader for the build's own later steps (the
layout made when first needed), `publish` and `ab`'s legs, so a record missing or malformed reads the same to
each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stackctl.errors import InputError


def build_entry(build_record: Path, stack_image: bool = False, *,
                hint: str = "run `stackctl build` first") -> tuple[dict[str, Any], dict[str, Any]]:
    """(the build record, the entry of its image: the record itself or, under [image.app], its `stack_image`);
    `hint`: what to do where there is no record."""
    try:
        data = json.loads(build_record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{build_record}: no build record", hint=hint) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{build_record}: not a build record ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{build_record}: not a build record")
    entry = data.get("stack_image") if stack_image else data
    if not isinstance(entry, dict):
        raise InputError(f"{build_record}: names no stack image; build the stack again")
    return data, entry
