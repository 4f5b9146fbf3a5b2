"""Stage 1, the profile: the model, the validating loader, TOML positions, sources (path, PATH@GITREV), the tag.

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.profile.locate import (
        StackRef,
        key_position,
        load_profile,
        load_profiles,
        profile_file,
        resolve_profile_arg,
        stack_ref,
    )
    from stackctl.profile.model import Pin, Stack
    from stackctl.profile.schema import profile_schema
    from stackctl.profile.versions import classify

__all__ = [
    "Pin", "Stack", "StackRef", "classify", "key_position", "load_profile", "load_profiles", "profile_file",
    "profile_schema", "resolve_profile_arg", "stack_ref",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "locate": ("StackRef", "key_position", "load_profile", "load_profiles", "profile_file",
                   "resolve_profile_arg", "stack_ref"),
        "model": ("Pin", "Stack"),
        "schema": ("profile_schema",),
        "versions": ("classify",),
    })
