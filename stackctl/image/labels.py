"""The image's name and labels, as values: the reference, the OCI labels, the pins a label carries."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stackctl.base.git import GitInfo
from stackctl.errors import InputError
from stackctl.profile.model import Stack
from stackctl.profile.tag import TagTemplateError, check_repository, stack_tag

OCI = "org.opencontainers.image"
LABEL_STACK = "io.stackctl.stack"
LABEL_LOCK = "io.stackctl.lock-digest"
LABEL_PROFILE = "io.stackctl.profile-digest"
LABEL_TARGET = "io.stackctl.target"
LABEL_EPOCH = "io.stackctl.source-date-epoch"  # the time the published config carries (seconds)
LABEL_SBOM = "io.stackctl.sbom-digest"  # sha256 of the CycloneDX SBOM stored in the image
LABEL_INSTALLED = "io.stackctl.installed"  # JSON {name: version}: every distribution the gate preserved


@dataclass(frozen=True)
class ImageRef:
    repository: str
    tag: str

    def __str__(self) -> str:
        return f"{self.repository}:{self.tag}"


def image_ref(stack: Stack, repository: str | None = None) -> ImageRef:
    if stack.image is None:
        raise InputError(f"{stack.name}: the profile has no image table")
    repo = repository or stack.image.repository
    problem = check_repository(repo)
    if problem:
        raise InputError(f"{stack.name}: image repository {problem}")
    try:
        tag = stack_tag(stack)
    except TagTemplateError as exc:
        raise InputError(f"{stack.name}: image.tag {stack.image.tag!r}: {exc}") from None
    return ImageRef(repo, tag)


@dataclass(frozen=True)
class Provenance:
    """Where the build's source came from: read from git, or given for a build from a source archive."""

    revision: str  # the label's value: a commit id, "-dirty" appended when the tree was dirty
    ref: str
    source: str | None = None
    note: str | None = None  # why there is no source label (the origin is a path on this machine)


_SCP_LIKE = re.compile(r"(?:[^@/:\s]+@)?([^/:\s]+):(?!//)(.+)")  # git's `[user@]host:path`


def public_source(remote: str | None) -> tuple[str | None, str | None]:
    """(the `.source` label's value, or None and why): the origin remote as a URL a reader can fetch from,
    its userinfo removed; a path or file URL names this machine's disk, not where the source lives."""
    from urllib.parse import urlsplit

    from stackctl.base.urls import strip_userinfo

    if not remote:
        return None, None
    scheme = urlsplit(remote).scheme.lower() if "://" in remote else ""
    if scheme in ("http", "https", "ssh", "git"):
        return strip_userinfo(remote), None
    found = _SCP_LIKE.fullmatch(remote) if not scheme and not remote.startswith(("/", ".", "~")) else None
    if found is not None and len(found.group(1)) > 1:  # `C:...` is a Windows path
        return f"ssh://{found.group(1)}/{found.group(2).lstrip('/')}", None
    return None, (f"the origin remote is a path on this machine ({strip_userinfo(remote)}), so the image "
                  f"has no {OCI}.source label; give the repository a remote URL or set the label in [image.labels]")


def provenance(git: GitInfo | None, revision: str | None, ref: str | None) -> Provenance:
    """An explicit revision wins over git's, but a dirty work tree still marks it: the label must be true."""
    if revision is not None or git is None:
        if not revision or not ref:
            raise InputError("a build outside a git work tree needs both --revision and --ref")
        dirty = "-dirty" if git is not None and git.dirty else ""
        return Provenance(revision + dirty, ref, *public_source(git.remote if git else None))
    return Provenance(git.revision_label, ref or git.ref, *public_source(git.remote))


def oci_labels(stack: Stack, *, prov: Provenance, lock_digest: str, target: str,
               installed: Iterable[tuple[str, str]], created: str | None = None) -> tuple[tuple[str, str], ...]:
    """Profile labels may set `.source` and their own keys; what stackctl proves always wins."""
    soft: dict[str, str] = {f"{OCI}.title": stack.name}
    if stack.description:
        soft[f"{OCI}.description"] = stack.description
    if prov.source:
        soft[f"{OCI}.source"] = prov.source
    hard = {
        f"{OCI}.revision": prov.revision,
        f"{OCI}.version": prov.ref,
        LABEL_STACK: stack.name,
        LABEL_PROFILE: stack.digest(),
        LABEL_LOCK: lock_digest,
        LABEL_TARGET: target,
        LABEL_INSTALLED: json.dumps(dict(installed), sort_keys=True, separators=(",", ":")),
    }
    if created:
        hard[f"{OCI}.created"] = created
    merged = {**soft, **dict(stack.image.labels if stack.image else ()), **hard}
    return tuple(sorted(merged.items()))


_USERINFO = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s]*:[^/@\s]*@", re.I)


def credential_labels(labels: Iterable[tuple[str, str]], secrets: Mapping[str, str]) -> list[str]:
    """Labels that would publish a credential: a URL with user:password, or the value of an index's
    password variable (`secrets`: variable name → value). Names what and where, never the value."""
    found = []
    for key, value in labels:
        if _USERINFO.search(value):
            found.append(f"label {key} holds a URL with user:password")
        found += [f"label {key} holds the value of ${name}" for name, secret in sorted(secrets.items())
                  if len(secret) >= 4 and secret in value]
    return found


def installed_from_labels(labels: Mapping[str, str]) -> dict[str, str]:
    raw = labels.get(LABEL_INSTALLED)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def recorded_installed(ref: str, labels: Mapping[str, str]) -> dict[str, str]:
    """The distributions an image records as installed, for a diff: an image without the record (not built by
    `stackctl build`) is refused, since comparing nothing would list every package of the other as added."""
    installed = installed_from_labels(labels)
    if not installed:
        what = "an unreadable" if labels.get(LABEL_INSTALLED) else "no"
        raise InputError(f"{ref} records no installed distributions ({what} {LABEL_INSTALLED} label): "
                         "it was not built by `stackctl build`, so there is nothing to compare",
                         hint="compare images that `stackctl build` made, or their profiles or locks")
    return installed


@dataclass(frozen=True)
class PinRow:
    package: str
    before: str | None
    after: str | None

    @property
    def change(self) -> str:
        if self.before == self.after:
            return "unchanged"
        return "added" if self.before is None else "removed" if self.after is None else "changed"


def diff_installed(before: Mapping[str, str], after: Mapping[str, str]) -> tuple[PinRow, ...]:
    """package / before / after from two images' own installed distributions (label or installed.json)."""
    from packaging.utils import canonicalize_name

    a = {canonicalize_name(k): (k, v) for k, v in before.items()}
    b = {canonicalize_name(k): (k, v) for k, v in after.items()}
    rows = [PinRow((b.get(k) or a[k])[0], a[k][1] if k in a else None, b[k][1] if k in b else None)
            for k in sorted(set(a) | set(b))]
    return tuple(rows)
