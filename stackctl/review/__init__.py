"""Stage 11, review: diffs of profiles, locks and images; the stale-reference scan; the pull request report.

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.review.diff import ImageDiff, LockDiff, StackDiff, compare, rendered_tag
    from stackctl.review.images import ImageView, inspect_image
    from stackctl.review.report import Report, report_for
    from stackctl.review.scan import ScanResult, scan_stale
    from stackctl.review.sections import Section

__all__ = [
    "ImageDiff", "ImageView", "LockDiff", "Report", "ScanResult", "Section", "StackDiff", "compare", "inspect_image",
    "rendered_tag", "report_for", "scan_stale",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "diff": ("ImageDiff", "LockDiff", "StackDiff", "compare", "rendered_tag"),
        "images": ("ImageView", "inspect_image"),
        "report": ("Report", "report_for"),
        "sections": ("Section",),
        "scan": ("ScanResult", "scan_stale"),
    })
