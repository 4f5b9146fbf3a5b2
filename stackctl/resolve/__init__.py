"""Stage 4, resolve: targets, the pick per target, newest in line, trains, the closure, the lock, exports,
the wheelhouse.

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.resolve.check import CheckReport, check_stack
    from stackctl.resolve.closure import uv_binary
    from stackctl.resolve.export import ExportResult, export_requirements
    from stackctl.resolve.lock import (
        Lock,
        LockStatus,
        is_lock_ref,
        lock_path,
        lock_status,
        lock_summary,
        read_lock,
        read_lock_ref,
        write_lock,
    )
    from stackctl.resolve.propose import Proposal, Proposed, propose_profile
    from stackctl.resolve.run import (
        OutdatedPin,
        Resolved,
        indexes_in_force,
        make_client,
        outdated,
        resolve_stack,
        resolve_to,
    )
    from stackctl.resolve.wheelhouse import fetch_wheelhouse

__all__ = [
    "CheckReport", "ExportResult", "Lock", "LockStatus", "OutdatedPin", "Proposal", "Proposed", "Resolved",
    "check_stack", "export_requirements", "fetch_wheelhouse", "indexes_in_force", "is_lock_ref",
    "lock_path", "lock_status", "lock_summary", "make_client", "outdated", "propose_profile", "read_lock",
    "read_lock_ref", "resolve_stack", "resolve_to", "uv_binary", "write_lock",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "check": ("CheckReport", "check_stack"),
        "closure": ("uv_binary",),
        "export": ("ExportResult", "export_requirements"),
        "lock": (
            "Lock",
            "LockStatus",
            "is_lock_ref",
            "lock_path",
            "lock_status",
            "lock_summary",
            "read_lock",
            "read_lock_ref",
            "write_lock",
        ),
        "propose": ("Proposal", "Proposed", "propose_profile"),
        "run": ("OutdatedPin", "Resolved", "indexes_in_force", "make_client", "outdated",
                "resolve_stack", "resolve_to"),
        "wheelhouse": ("fetch_wheelhouse",),
    })
