"""`stackctl verify`: an image in a registry re-checked through the registry client, and with --rebuild built
again from its revision on the engine (the builder chosen as `build` chooses it) and compared."""

from __future__ import annotations

from pathlib import Path

from stackctl.base.progress import Steps
from stackctl.errors import InputError
from stackctl.verify.verification import Verification


def verify_remote(ref: str, lock: Path | None = None, *, stream_layers: bool = False, key: Path | None = None,
                  rebuild_from: Path | None = None, wheelhouse: Path | None = None,
                  builder: str | None = None, on_step: Steps | None = None) -> Verification:
    """An image in a registry re-checked from the registry alone (and against the lock file `lock` when given);
    with `key` (a PEM public key file) its statements must be signed by it; with `rebuild_from` (a git work
    tree) the image is rebuilt from its revision on the Docker engine, with `builder` chosen as `build` chooses
    it, and its layout's manifest digest compared with the registry's."""
    import dataclasses

    from stackctl.engine.registry import Registry, parse_ref
    from stackctl.profile.tag import check_image_ref
    from stackctl.resolve.lock import read_lock
    from stackctl.verify.sign import read_verifying_key
    from stackctl.verify.verification import verify_image

    check_image_ref(ref)  # a malformed REF is said as inspect says it, before the lock or the registry is read
    locked = read_lock(lock) if lock is not None else None
    parsed = parse_ref(ref)
    if parsed is None:
        raise InputError(f"{ref}: names no registry host; verify reads host[:port]/name[:tag|@digest]")
    public = read_verifying_key(key) if key is not None else None
    registry, repository = Registry(), f"{parsed.registry}/{parsed.name}"
    result = verify_image(registry, repository, parsed.reference, locked, stream_layers=stream_layers, key=public)
    if rebuild_from is None:
        return result
    from stackctl.usecases.build import open_engine
    from stackctl.verify.rebuild import rebuild_and_compare
    from stackctl.verify.verification import named_profiles, with_rebuild

    rebuilt = rebuild_and_compare(registry, open_engine(builder), repository, result.digest, source=rebuild_from,
                                  profiles=named_profiles(registry, repository, result.digest),
                                  wheelhouse=wheelhouse, on_step=on_step)
    return dataclasses.replace(result, findings=with_rebuild(rebuilt, result.findings), rebuild=rebuilt)
