"""Small pieces every stage shares: atomic files and hashes, JSON for dataclasses, bounded concurrency, git,
image references, sizes.

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.base.annotations import (
        Annotation,
        Level,
        from_problem,
        github_command,
        github_endgroup,
        github_group,
        gitlab_report,
        rebased,
    )
    from stackctl.base.concurrency import end_children, workers_alive
    from stackctl.base.evidence import Evidence, Recorded, add_to_evidence, read_evidence, write_evidence
    from stackctl.base.files import check_output, sha256_file, write_atomic
    from stackctl.base.imageref import ImageName, looks_like_image, parse_image_ref
    from stackctl.base.jsonout import dumps, to_jsonable
    from stackctl.base.progress import Progress, Steps, is_phase
    from stackctl.base.scratch import remove_scratch, scratch_dir
    from stackctl.base.sizes import human_size
    from stackctl.base.times import now_iso, short_time
    from stackctl.base.urls import strip_userinfo
    from stackctl.base.words import count

__all__ = [
    "Annotation", "Evidence", "ImageName", "Level", "Progress", "Recorded", "Steps", "add_to_evidence",
    "check_output",
    "count", "dumps",
    "end_children", "from_problem", "github_command", "github_endgroup", "github_group", "gitlab_report",
    "human_size", "is_phase", "looks_like_image", "now_iso", "parse_image_ref", "read_evidence", "rebased",
    "remove_scratch", "scratch_dir", "sha256_file", "short_time", "strip_userinfo", "to_jsonable", "workers_alive",
    "write_atomic", "write_evidence",
]

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__, {
        "annotations": ("Annotation", "Level", "from_problem", "github_command", "github_endgroup", "github_group",
                        "gitlab_report", "rebased"),
        "concurrency": ("end_children", "workers_alive"),
        "evidence": ("Evidence", "Recorded", "add_to_evidence", "read_evidence", "write_evidence"),
        "files": ("check_output", "sha256_file", "write_atomic"),
        "imageref": ("ImageName", "looks_like_image", "parse_image_ref"),
        "jsonout": ("dumps", "to_jsonable"),
        "progress": ("Progress", "Steps", "is_phase"),
        "scratch": ("remove_scratch", "scratch_dir"),
        "sizes": ("human_size",),
        "times": ("now_iso", "short_time"),
        "urls": ("strip_userinfo",),
        "words": ("count",),
    })
