"""Stage 11, review: diffs of profiles, locks and images; the stale-reference scan; the pull request report.

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.review.diff import ImageDiff as ImageDiff
    from stackctl.review.diff import LockDiff as LockDiff
    from stackctl.review.diff import StackDiff as StackDiff
    from stackctl.review.diff import compare as compare
    from stackctl.review.diff import rendered_tag as rendered_tag
    from stackctl.review.images import ImageView as ImageView
    from stackctl.review.images import inspect_image as inspect_image
    from stackctl.review.report import Report as Report
    from stackctl.review.report import report_for as report_for
    from stackctl.review.scan import ScanResult as ScanResult
    from stackctl.review.scan import scan_stale as scan_stale
    from stackctl.review.sections import Section as Section

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
