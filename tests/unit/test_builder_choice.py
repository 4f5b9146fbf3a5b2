"""The builder a build runs on: the option, then STACKCTL_BUILDER, then auto."""

from __future__ import annotations

import pytest

from stackctl.errors import InputError
from stackctl.usecases.build import chosen_builder


def test_the_builder_is_the_options_then_the_environments_then_auto() -> None:
    assert chosen_builder(None, {}) == "auto"
    assert chosen_builder(None, {"STACKCTL_BUILDER": "classic"}) == "classic"
    assert chosen_builder("BuildKit", {"STACKCTL_BUILDER": "classic"}) == "buildkit"
    with pytest.raises(InputError, match="STACKCTL_BUILDER 'kaniko': pick one of auto, buildkit, classic"):
        chosen_builder(None, {"STACKCTL_BUILDER": "kaniko"})
