"""Small pieces every stage shares: atomic files and hashes, JSON for dataclasses, bounded concurrency, git,
image references, sizes.

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.base.annotations import Annotation as Annotation
    from stackctl.base.annotations import Level as Level
    from stackctl.base.annotations import from_problem as from_problem
    from stackctl.base.annotations import github_command as github_command
    from stackctl.base.annotations import github_endgroup as github_endgroup
    from stackctl.base.annotations import github_group as github_group
    from stackctl.base.annotations import gitlab_report as gitlab_report
    from stackctl.base.annotations import rebased as rebased
    from stackctl.base.concurrency import end_children as end_children
    from stackctl.base.concurrency import workers_alive as workers_alive
    from stackctl.base.evidence import Evidence as Evidence
    from stackctl.base.evidence import Recorded as Recorded
    from stackctl.base.evidence import add_to_evidence as add_to_evidence
    from stackctl.base.evidence import read_evidence as read_evidence
    from stackctl.base.evidence import write_evidence as write_evidence
    from stackctl.base.files import check_output as check_output
    from stackctl.base.files import sha256_file as sha256_file
    from stackctl.base.files import write_atomic as write_atomic
    from stackctl.base.imageref import ImageName as ImageName
    from stackctl.base.imageref import looks_like_image as looks_like_image
    from stackctl.base.imageref import parse_image_ref as parse_image_ref
    from stackctl.base.jsonout import dumps as dumps
    from stackctl.base.jsonout import to_jsonable as to_jsonable
    from stackctl.base.progress import Progress as Progress
    from stackctl.base.progress import Steps as Steps
    from stackctl.base.progress import is_phase as is_phase
    from stackctl.base.scratch import remove_scratch as remove_scratch
    from stackctl.base.scratch import scratch_dir as scratch_dir
    from stackctl.base.sizes import human_size as human_size
    from stackctl.base.times import now_iso as now_iso
    from stackctl.base.times import short_time as short_time
    from stackctl.base.urls import strip_userinfo as strip_userinfo
    from stackctl.base.words import count as count

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
