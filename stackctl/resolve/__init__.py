"""Stage 4, resolve: targets, the pick per target, newest in line, trains, the closure, the lock, exports,
the wheelhouse.

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.resolve.check import CheckReport as CheckReport
    from stackctl.resolve.check import check_stack as check_stack
    from stackctl.resolve.closure import uv_binary as uv_binary
    from stackctl.resolve.export import ExportResult as ExportResult
    from stackctl.resolve.export import export_requirements as export_requirements
    from stackctl.resolve.lock import Lock as Lock
    from stackctl.resolve.lock import LockStatus as LockStatus
    from stackctl.resolve.lock import is_lock_ref as is_lock_ref
    from stackctl.resolve.lock import lock_path as lock_path
    from stackctl.resolve.lock import lock_status as lock_status
    from stackctl.resolve.lock import lock_summary as lock_summary
    from stackctl.resolve.lock import read_lock as read_lock
    from stackctl.resolve.lock import read_lock_ref as read_lock_ref
    from stackctl.resolve.lock import write_lock as write_lock
    from stackctl.resolve.propose import Proposal as Proposal
    from stackctl.resolve.propose import Proposed as Proposed
    from stackctl.resolve.propose import propose_profile as propose_profile
    from stackctl.resolve.run import OutdatedPin as OutdatedPin
    from stackctl.resolve.run import Resolved as Resolved
    from stackctl.resolve.run import indexes_in_force as indexes_in_force
    from stackctl.resolve.run import make_client as make_client
    from stackctl.resolve.run import outdated as outdated
    from stackctl.resolve.run import resolve_stack as resolve_stack
    from stackctl.resolve.run import resolve_to as resolve_to
    from stackctl.resolve.wheelhouse import fetch_wheelhouse as fetch_wheelhouse

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
