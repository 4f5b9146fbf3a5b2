"""`report` and `scan`: the profiles named resolved once, and the review stage asked with them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stackctl.review.report import Report
    from stackctl.review.scan import ScanResult


def report_profile(profile: str, lock: Path | None = None, *, since: str | None = None, since_lock: Path | None = None,
           record_dir: Path = Path("build")) -> Report:
    """The pull request's report of the profile's upgrade, from the records under `record_dir`; nothing run."""
    from stackctl.profile.locate import stack_ref
    from stackctl.review.report import report_for

    return report_for(stack_ref(profile), lock, since=since, since_lock=since_lock, record_dir=record_dir)


def scan_profile(root: Path, stack: str, since: str, allow: Path | None = None, *, record: Path | None = None,
         no_record: bool = False, command: str = "") -> ScanResult:
    """Every reference under `root` to a pin `stack` superseded in `since`, recorded for `report`."""
    from stackctl.profile.locate import stack_ref
    from stackctl.review.scan import scan_stale

    new, old = stack_ref(stack), stack_ref(since)
    return scan_stale(root, new, old, allow, record=record, no_record=no_record, command=command)
