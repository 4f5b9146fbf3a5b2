"""What an image says about itself: its labels and installed distributions, read from its registry
(without pulling layers) or from the local engine. `stackctl inspect` and `stackctl diff IMAGE IMAGE`."""

from __future__ import annotations

from dataclasses import dataclass

from stackctl.errors import InputError, NotInRegistry
from stackctl.image.labels import LABEL_INSTALLED, installed_from_labels, recorded_installed
from stackctl.verify.verification import Attached


@dataclass(frozen=True)
class ImageView:
    ref: str
    source: str  # "registry" | "engine"
    digest: str | None
    image_id: str
    labels: dict[str, str]
    installed: dict[str, str]
    attached: Attached | None = None  # the SBOM and provenance beside a registry image

    @property
    def other_labels(self) -> dict[str, str]:
        """The labels but the one listing the installed distributions (`installed` holds them, read)."""
        return {k: v for k, v in self.labels.items() if k != LABEL_INSTALLED}


def inspect_image(ref: str) -> ImageView:
    """From the registry when REF names a registry host, else from the engine. A malformed REF (exit 2) and an
    image the registry does not hold (exit 1) are said as `verify` says them."""
    from stackctl.engine.docker import DockerEngine, check_local_ref
    from stackctl.engine.registry import Registry, parse_ref, read_remote
    from stackctl.profile.tag import check_image_ref
    from stackctl.verify.verification import attached

    check_image_ref(ref)
    if (parsed := parse_ref(ref)) is not None:
        api = Registry()  # one login for the image and what is beside it
        remote = read_remote(ref, api)
        labels = dict(remote.labels)
        return ImageView(ref, "registry", remote.digest, remote.image_id, labels, installed_from_labels(labels),
                         attached(api, f"{parsed.registry}/{parsed.name}", remote.digest))
    check_local_ref(ref)
    facts = DockerEngine().facts(ref)
    if facts is None:
        raise InputError(f"{ref}: no such image in the engine (name a registry host to read it remotely)")
    labels = dict(facts.labels)
    return ImageView(ref, "engine", None, facts.id, labels, installed_from_labels(labels))


def image_pins(ref: str) -> dict[str, str]:
    """Installed distributions of an image, from its registry, else the local engine.

    For `stackctl diff IMAGE IMAGE`: rows come from `diff_installed(image_pins(a), image_pins(b))` (image.labels).
    """
    from stackctl.engine.registry import parse_ref, read_remote

    if parse_ref(ref) is not None:
        try:
            remote = read_remote(ref)
        except (InputError, NotInRegistry):  # not pushed (yet): the engine may hold it
            remote = None
        if remote is not None:
            return recorded_installed(ref, dict(remote.labels))
    from stackctl.engine.docker import DockerEngine, check_local_ref

    check_local_ref(ref)
    facts = DockerEngine().facts(ref)
    if facts is None:
        raise InputError(f"{ref}: no such image in the registry or the engine")
    return recorded_installed(ref, dict(facts.labels))
