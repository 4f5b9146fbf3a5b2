"""Hints a newcomer follows word for word must be true."""

from __future__ import annotations

from stackctl.image.build import base_image_hint


def test_a_missing_vendor_base_is_not_sent_to_the_ci_script() -> None:
    hint = base_image_hint("musa-runtime:5.2.0-ubuntu22.04")
    assert "services.sh" not in hint  # it builds only stackctl-base:bookworm
    assert "docker pull musa-runtime:5.2.0-ubuntu22.04" in hint and "[image] base" in hint


def test_the_example_base_is_sent_to_the_script_that_builds_it() -> None:
    assert base_image_hint("stackctl-base:bookworm") == "`bash .ci/services.sh` builds stackctl-base:bookworm"
