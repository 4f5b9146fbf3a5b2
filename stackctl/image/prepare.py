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
from stackctl.image.render import BuildPlan, Rendered
from stackctl.profile.model import GatePhase, Stack
from stackctl.resolve.gatelock import require_installable
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


def source_date_epoch(env: Mapping[str, str], stack: Stack, git: GitInfo | None, fallback: int) -> int:
    """The time the published image's config carries: SOURCE_DATE_EPOCH, else the commit time of the
    revision built, else (a source archive) the date of the newest layer."""
    from stackctl.base.git import commit_time

    given = env.get("SOURCE_DATE_EPOCH")
    if given is not None:
        if not given.strip().isdigit():
            raise InputError(f"SOURCE_DATE_EPOCH={given!r}: give whole seconds since 1970")
        return int(given)
    if git is not None:
        where = Path(stack.sources[0]).parent if stack.sources and "@" not in stack.sources[0] else Path.cwd()
        found = commit_time(where, git.revision)
        if found is not None:
            return found
    return fallback


@dataclass(frozen=True)
class Prepared:
    stack: Stack
    lock: Lock
    target: str
    rendered: Rendered
    git: GitInfo | None
    revision: str
    ref: str
    plan: BuildPlan | None = None
    notes: tuple[str, ...] = ()  # what the build should say it left out (a source label it cannot give)
    # the profile files' sha256 as they were read here (the fingerprint's inputs): a build on another machine
    # (a cluster's node) fingerprints the profile it was given, not a file it does not have
    profile_inputs: tuple[tuple[str, str], ...] = ()


def with_sbom(prep: Prepared, wheelhouse: Path | None) -> Prepared:
    """The plan with its SBOM (licences read from the wheelhouse's wheels when there) and the SBOM's digest
    in a label, rendered again. `prepare_build` calls it without a wheelhouse; `build` again with one."""
    import dataclasses
    import hashlib

    from stackctl.image.labels import LABEL_SBOM
    from stackctl.image.render import load_templates, render
    from stackctl.image.sbom import licences, make_sbom

    assert prep.plan is not None
    plan = prep.plan
    found = {i.filename: licences(wheelhouse / i.filename) for g in plan.groups for i in g.items
             if wheelhouse is not None and (wheelhouse / i.filename).is_file()}
    urls = {i.name: i.url for i in prep.stack.indexes if i.url}
    requires: dict[str, tuple[str, ...] | None] = {}
    for pin in prep.lock.pins:
        for f in pin.files:
            if f.target == plan.target and f.filename.endswith(".whl"):
                requires[pin.name] = f.requires_dist
    for c in prep.lock.closure:
        if c.target == plan.target and c.file is not None:
            requires.setdefault(c.name, c.file.requires_dist)
    text = make_sbom(stack=plan.stack, target=plan.target, lock_digest=plan.lock_digest, groups=plan.groups,
                     index_urls=urls, licences_of=found, epoch=plan.epoch, requires=requires)
    digest = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    labels = tuple(sorted({**dict(plan.labels), LABEL_SBOM: digest}.items()))
    plan = dataclasses.replace(plan, sbom=text, labels=labels)
    return dataclasses.replace(prep, plan=plan, rendered=render(plan, load_templates()))


def prepare_build(stack: Stack, lock: Path, target: str | None, revision: str | None, ref: str | None,
            created: str | None, allow_dirty: bool | None, env: Mapping[str, str]) -> Prepared:
    """allow_dirty None: render only, the label says -dirty; False: refuse a dirty tree. `env` holds the
    index password variables, so no label can carry one."""
    from stackctl.image import gatespec
    from stackctl.image.fingerprint import file_inputs
    from stackctl.image.labels import LABEL_EPOCH, OCI, credential_labels, oci_labels, provenance
    from stackctl.image.render import load_templates, plan_installer, plan_layers, render

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
    require_installable(stack, locked, (tgt,))  # before anything is fetched or built
    installed = gatespec.installed_pins(stack, locked, tgt)
    # The stack image gates what the lock installs; app-phase entries run after [image.app] (or `gate --image`).
    spec = gatespec.dumps(gatespec.gate_spec(stack, installed, tgt, GatePhase.STACK))
    labels = oci_labels(stack, prov=prov, lock_digest=locked.digest(), target=tgt, installed=installed,
                        created=created_value(created))
    layers = plan_layers(stack, locked, tgt)
    epoch = source_date_epoch(env, stack, git, max((g.epoch for g in layers), default=0))
    labels = tuple(sorted({**dict(labels), LABEL_EPOCH: str(epoch)}.items()))
    leaks = credential_labels(labels, {i.password_env: env[i.password_env] for i in stack.indexes
                                        if i.password_env and env.get(i.password_env)})
    if leaks:
        raise InputError(f"{stack.name}: {'; '.join(leaks)}: an image label is public, a credential must not be one")
    python = next(t.python for t in stack.targets if t.label == tgt)
    plan = BuildPlan(stack.name, tgt, stack.image.base, locked.digest(), layers, spec, labels, python,
                     plan_installer(stack, locked, tgt), stack.image.bytecode)
    given = f"{OCI}.source" in dict(stack.image.labels)
    notes = (prov.note,) if prov.note and not given else ()
    read = tuple(sorted(file_inputs({f"profile:{s}": Path(s) for s in stack.sources if "@" not in s}).items()))
    return with_sbom(Prepared(stack, locked, tgt, render(plan, load_templates()), git, prov.revision, prov.ref,
                              plan, notes, read), None)
