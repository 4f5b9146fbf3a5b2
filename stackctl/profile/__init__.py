"""Stage 1, the profile: the model, the validating loader, TOML positions, sources (path, PATH@GITREV), the tag.

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.profile.locate import StackRef as StackRef
    from stackctl.profile.locate import key_position as key_position
    from stackctl.profile.locate import load_profile as load_profile
    from stackctl.profile.locate import load_profiles as load_profiles
    from stackctl.profile.locate import profile_file as profile_file
    from stackctl.profile.locate import resolve_profile_arg as resolve_profile_arg
    from stackctl.profile.locate import stack_ref as stack_ref
    from stackctl.profile.model import Pin as Pin
    from stackctl.profile.model import Stack as Stack
    from stackctl.profile.schema import profile_schema as profile_schema
    from stackctl.profile.versions import classify as classify

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
