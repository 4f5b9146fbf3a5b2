"""An image has one target: a pin limited to other targets is neither installed nor gated in it."""

from __future__ import annotations

import json

from stackctl.image.gatespec import gate_spec, installed_pins
from stackctl.image.render import plan_layers
from stackctl.profile.loader import load_stack
from stackctl.profile.model import Stack
from stackctl.resolve.lock import Lock, LockedFile, LockedPin
from tests.conftest import STACKS


def _lock() -> tuple[Lock, Stack]:
    stack = load_stack(STACKS / "torch-2.11-post2.toml")
    pins = tuple(LockedPin(p.name, p.version, p.index, tuple(
        LockedFile(t.label, f"{p.name}-{p.version}-{t.interpreter}-{t.interpreter}-linux_x86_64.whl",
                   f"https://index.invalid/{p.name}/{t.label}.whl", f"{n:064x}", 10)
        for n, t in enumerate(p.targets(stack.targets)))) for p in stack.pins)
    return Lock(stack.name, stack.digest(), pins), stack


def test_a_cp312_image_leaves_out_the_cp310_only_pin() -> None:
    lock, stack = _lock()
    installed = lambda groups: {i.name for g in groups for i in g.items}  # noqa: E731
    assert "deep_ep" in installed(plan_layers(stack, lock, "cp310-linux_x86_64"))
    assert "deep_ep" not in installed(plan_layers(stack, lock, "cp312-linux_x86_64"))
    assert "torch" in installed(plan_layers(stack, lock, "cp312-linux_x86_64"))
    for target, present in (("cp310-linux_x86_64", True), ("cp312-linux_x86_64", False)):
        spec = gate_spec(stack, installed_pins(stack, lock, target), target)
        assert ("deep_ep" in [e["dist"] for e in spec["entries"]]) is present
        assert ("deep_ep" in [p["dist"] for p in spec["preserve"]]) is present
    # without a target (`gate --spec-only` of the profile) every pin is gated
    assert "deep_ep" in json.dumps(gate_spec(stack)["entries"])
