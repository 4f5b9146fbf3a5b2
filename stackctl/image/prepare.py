"""From a profile and its lock to a rendered build: the lock checked against the profile, the target, the
work tree's state and provenance, the labels, and the Dockerfile with its context files.

Errors only, no terminal: `stackctl render` and `stackctl build` share it. The edges it touches are the
lock file and git; the environment comes in as a mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from stackctl.base.git import GitInfo, read_git
from stackctl.base.times import now_iso
from stackctl.errors import InputError, StackctlError
from stackctl.image.render import Rendered
from stackctl.profile.model import Stack
from stackctl.resolve.lock import Lock, read_lock


def read_stack_lock(stack: Stack, lock: Path) -> Lock:
    found = read_lock(lock)
    found.require_made_from(stack)
    return found


def pick_target(stack: Stack, target: str | None) -> str:
    labels = [t.label for t in stack.targets]
    if target is not None:
        if target not in labels:
            raise InputError(f"{stack.name}: target {target} is not one of {', '.join(labels) or 'none'}")
        return target
    python = stack.image.python if stack.image else None
    mine = [t for t in stack.targets if t.python == python]
    mine.sort(key=lambda t: t.platform != "linux_x86_64")
    if not mine:
        raise InputError(f"{stack.name}: no target for the image's python {python}; pass --target")
    return mine[0].label


def created_value(created: str | None, now: datetime | None = None) -> str | None:
    """`now`, or an ISO 8601 time with its zone: a label that says when must say it unambiguously."""
    if created is None:
        return None
    if created == "now":
        return now_iso(now)
    try:
        parsed = datetime.fromisoformat(created[:-1] + "+00:00" if created.endswith("Z") else created)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InputError(f"--created {created!r}: give `now` or an ISO 8601 time with its zone, "
                         "e.g. 2026-01-02T03:04:05Z")
    return created


def work_tree(stack: Stack, revision: str | None, inputs: tuple[Path, ...]) -> GitInfo | None:
    """The work tree's state; with an explicit --revision, None when there is no work tree to read."""
    where = Path(stack.sources[0]).parent if stack.sources and "@" not in stack.sources[0] else Path.cwd()
    try:
        return read_git(where, inputs)
    except StackctlError:
        if revision is None:
            raise
        return None  # a source archive: no git, or no work tree


@dataclass(frozen=True)
class Prepared:
    stack: Stack
    lock: Lock
    target: str
    rendered: Rendered
    git: GitInfo | None
    revision: str
    ref: str


def prepare(stack: Stack, lock: Path, target: str | None, revision: str | None, ref: str | None,
            created: str | None, allow_dirty: bool | None, env: Mapping[str, str]) -> Prepared:
    """allow_dirty None: render only, the label says -dirty; False: refuse a dirty tree. `env` holds the
    index password variables, so no label can carry one."""
    from stackctl.image import gatespec
    from stackctl.image.labels import credential_labels, oci_labels, provenance
    from stackctl.image.render import BuildPlan, load_templates, plan_installer, plan_layers, render

    if stack.image is None:
        raise InputError(f"{stack.name}: the profile has no image table")
    locked = read_stack_lock(stack, lock)
    tgt = pick_target(stack, target)
    inputs = (*(Path(s) for s in stack.sources if "@" not in s), lock)
    git = work_tree(stack, revision, inputs)
    if git is not None and git.dirty and allow_dirty is False:
        what = (f"{', '.join(git.untracked_inputs)} not committed" if git.untracked_inputs
                else "uncommitted changes")
        raise InputError(f"the work tree of {stack.name} has {what}: the revision label would lie",
                         hint="commit first, or pass --allow-dirty (the label then says <revision>-dirty)")
    prov = provenance(git, revision, ref)
    installed = gatespec.installed_pins(stack, locked, tgt)
    spec = gatespec.dumps(gatespec.gate_spec(stack, installed, tgt))
    labels = oci_labels(stack, prov=prov, lock_digest=locked.digest(), target=tgt, installed=installed,
                        created=created_value(created))
    leaks = credential_labels(labels, {i.password_env: env[i.password_env] for i in stack.indexes
                                        if i.password_env and env.get(i.password_env)})
    if leaks:
        raise InputError(f"{stack.name}: {'; '.join(leaks)}: an image label is public, a credential must not be one")
    python = next(t.python for t in stack.targets if t.label == tgt)
    plan = BuildPlan(stack.name, tgt, stack.image.base, locked.digest(), plan_layers(stack, locked, tgt), spec,
                     labels, python, plan_installer(stack, locked, tgt), stack.image.bytecode)
    return Prepared(stack, locked, tgt, render(plan, load_templates()), git, prov.revision, prov.ref)
