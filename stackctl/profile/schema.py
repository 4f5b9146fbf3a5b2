"""The JSON Schema (draft 2020-12) of one profile file, made from the table the loader checks keys with.

What the schema says is what one file may hold: every known key, its type, and the values a choice takes.
Rules that need more than one key, or the whole `extends` chain, stay with the loader alone: no key is
required in a file (a child profile may set only what it changes), and gate order, declared indexes,
versions in canonical form, tag templates and target names are checked by `stackctl validate` only.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from stackctl.profile.loader import SCHEMA

DIALECT = "https://json-schema.org/draft/2020-12/schema"

_SCALARS: dict[Any, dict[str, Any]] = {str: {"type": "string"}, int: {"type": "integer"},
                                       bool: {"type": "boolean"}, float: {"type": "number"}}


def _node(t: Any) -> dict[str, Any]:
    if isinstance(t, dict):
        if "*" in t:
            return {"type": "object", "additionalProperties": _node(t["*"])}
        return {"type": "object", "properties": {k: _node(v) for k, v in t.items()}, "additionalProperties": False}
    if isinstance(t, list):
        return {"type": "array", "items": _node(t[0])}
    if isinstance(t, tuple):
        return {"anyOf": [_node(x) for x in t]}
    if isinstance(t, type) and issubclass(t, Enum):
        return {"type": "string", "enum": [m.value for m in t]}
    return dict(_SCALARS[t])


def profile_schema() -> dict[str, Any]:
    """The schema document `stackctl schema` prints."""
    return {"$schema": DIALECT, "title": "stackctl profile",
            "description": "One stackctl profile file (stacks/*.toml). Cross-key rules (gate order, declared "
                           "indexes, the extends chain) are checked by `stackctl validate`.",
            **_node(SCHEMA)}
