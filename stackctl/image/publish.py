"""Publication: push, pull back by digest, compare, and only then record.

`publish` takes an `Engine` (the Protocol in image/buildlog.py); the checks and the record are values.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from stackctl.base.files import write_atomic
from stackctl.base.times import now_iso
from stackctl.errors import CheckFailed, InputError, ServiceError, StackctlError
from stackctl.image.buildlog import Engine, ImageFacts
from stackctl.image.labels import LABEL_LOCK, LABEL_STACK, OCI, ImageRef
from stackctl.profile.model import Stack


@dataclass(frozen=True)
class Publication:
    tag: str  # repository:tag
    digest: str  # sha256:... of the manifest the registry stored
    image_id: str
    revision: str
    lock_digest: str | None
    stack: str | None
    time: str  # ISO 8601 UTC

    @property
    def pinned_ref(self) -> str:
        return f"{self.tag.rsplit(':', 1)[0]}@{self.digest}"


def mismatches(local: ImageFacts, pulled: ImageFacts) -> list[str]:
    """What differs between the image we built and the one the registry gave back."""
    out = []
    if local.id != pulled.id:
        out.append(f"image id {pulled.id} is not the pushed {local.id}")
    for key in (f"{OCI}.revision", LABEL_LOCK):
        if local.label(key) != pulled.label(key):
            out.append(f"label {key} {pulled.label(key)!r} is not the pushed {local.label(key)!r}")
    return out


def stale(local: ImageFacts, expect: Mapping[str, str]) -> list[str]:
    """The labels in which a local image differs from what the current profile and lock would build."""
    return [f"{key} {local.label(key)!r} is not the current {want!r}" for key, want in expect.items()
            if local.label(key) != want]


def publish(engine: Engine, ref: ImageRef, *, expect: Mapping[str, str] | None = None,
            now: datetime | None = None) -> Publication:
    """`expect`: labels the local image must carry (the current profile and lock digests) before any push:
    a tag that does not move when a pin does must not carry an image built before the change."""
    local = engine.facts(str(ref))
    if local is None:
        raise InputError(f"{ref}: no such image in the engine; run `stackctl build` first")
    revision = local.label(f"{OCI}.revision")
    if not revision:
        raise CheckFailed(f"{ref}: has no {OCI}.revision label; only images built by stackctl are published")
    old = stale(local, expect or {})
    if old:
        raise CheckFailed(f"{ref} was built from another profile or lock: " + "; ".join(old),
                          hint="run `stackctl build` again, then publish")
    digest = engine.push(ref.repository, ref.tag)
    pulled = engine.pull(f"{ref.repository}@{digest}")
    bad = mismatches(local, pulled)
    if bad:
        raise CheckFailed(f"{ref}@{digest} pulled back is not what was pushed: " + "; ".join(bad))
    return Publication(str(ref), digest, local.id, revision, local.label(LABEL_LOCK),
                       local.label(LABEL_STACK), now_iso(now))


def publish_stack(stack: Stack, lock: Path, engine: Engine, record: Path, repository: str | None = None) -> Publication:
    """`stackctl publish` as one call: refuse a stale image, push under the profile's (or another) name,
    pull back by digest and compare, then append the publication record."""
    from stackctl.image.labels import LABEL_PROFILE, image_ref
    from stackctl.resolve.lock import read_lock

    locked = read_lock(lock)
    locked.require_made_from(stack)
    expect = {LABEL_PROFILE: stack.digest(), LABEL_LOCK: locked.digest()}
    check_record_writable(record)
    built, ref = image_ref(stack), image_ref(stack, repository)
    moved: tuple[ImageFacts | None] | None = None
    if ref != built:
        # The other name follows the current build: an older image left under it must not be pushed.
        there, source = engine.facts(str(ref)), engine.facts(str(built))
        if (there is None or stale(there, expect)) and source is not None and there != source:
            engine.tag(str(built), ref.repository, ref.tag)
            moved = (there,)
    try:
        pub = publish(engine, ref, expect=expect)
    except StackctlError:
        if moved is not None:  # a failed publish leaves the other name as it found it
            if moved[0] is None:
                engine.remove(str(ref))
            else:
                engine.tag(moved[0].id, ref.repository, ref.tag)
        raise
    append_record(record, pub)
    return pub


def check_record_writable(path: Path) -> None:
    """Before any push: a publication that cannot be recorded must not happen at all."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the publication record: {exc.strerror or exc}") from None
    if (path.exists() and not path.is_file()) or not os.access(path.parent, os.W_OK):
        raise InputError(f"{path}: cannot write the publication record here")


def append_record(path: Path, pub: Publication) -> None:
    """JSON lines, one publication each; the whole file is rewritten atomically so a crash leaves the old one."""
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        write_atomic(path, old + json.dumps(asdict(pub), sort_keys=True) + "\n")
    except OSError as exc:
        raise ServiceError(f"{path}: cannot write the publication record ({exc.strerror or exc}); "
                           f"{pub.pinned_ref} was pushed") from None


def read_records(path: Path) -> list[Publication]:
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(Publication(**json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise InputError(f"{path}:{n}: not a publication record ({exc})") from None
    return out
