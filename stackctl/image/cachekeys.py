"""The registry as the engines' shared build cache: which stage image each layer group has, under which tag.

Every layer group is built in a stage of its own (`layerNN-GROUP`); its image holds the base, the tools
stage and that one group's prefix. After a cell builds, those stage images are pushed under tags keyed by
what the stage installs (base, installer, the group's wheels by sha256, its epoch and byte-code choice), so
a sibling stack that installs the same group finds the same tag whichever engine built it, and another
engine pulls it and builds with `cache_from` instead of installing the wheels again. A key that matches
too often costs nothing but a pull: the builder itself decides, step by step, whether a cached layer fits.
Values in, values out: the pulls and pushes are the caller's.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from stackctl.image.render import BuildPlan

TAG_PREFIX = "stackctl-cache."
_STEP_FROM = re.compile(r"^Step \d+/\d+ : FROM \S+(?: AS (\S+))?\s*$", re.IGNORECASE)
_IMAGE_ID = re.compile(r"^ ---> ([0-9a-f]{12,64})\s*$")


@dataclass(frozen=True)
class StageCache:
    stage: str  # layer01-core: the Dockerfile's stage name
    group: str
    key: str  # sha256 hex of what the stage installs

    def tag(self) -> str:
        return f"{TAG_PREFIX}{self.group[:60]}.{self.key[:24]}"


def stage_caches(plan: BuildPlan) -> tuple[StageCache, ...]:
    """One entry per layer-group stage, in the Dockerfile's order (most stable first)."""
    tool = plan.installer
    common = {"base": plan.base, "python": plan.python,
              "installer": [tool.name, tool.version, tool.sha256] if tool else None}
    out = []
    for n, group in enumerate(plan.groups, 1):
        what = {**common, "group": group.name, "kind": group.kind, "epoch": group.epoch,
                "compiles": plan.compiles(group),
                "items": [[i.name, i.version, i.sha256] for i in group.items]}
        key = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()
        out.append(StageCache(f"layer{n:02d}-{group.name}", group.name, key))
    return tuple(out)


def stage_images(log: Sequence[str]) -> dict[str, str]:
    """Each named stage's image id, from a classic builder's log: the last ` ---> ID` before the next FROM."""
    found: dict[str, str] = {}
    stage: str | None = None
    for line in log:
        m = _STEP_FROM.match(line)
        if m:
            stage = m.group(1)
            continue
        m = _IMAGE_ID.match(line)
        if m and stage is not None:
            found[stage] = m.group(1)
    return found
