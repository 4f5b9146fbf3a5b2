"""The report's validation summary and sweep tables, from the record `stackctl ab` wrote.

Pure: the record and the stacks' current build records in, a report `Section` out. Each row names its record, the
images by digest and their revisions, and the device; a record whose image legs are no longer the stacks' latest
builds is stale, with the command that made it, to run again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackctl.ab import (
    METRIC_COLUMNS,
    PLACE_COLUMNS,
    SUMMARY_COLUMNS,
    SWEEP_COLUMNS,
    metric_rows,
    picture_name,
    place_rows,
    summary_rows,
    sweep_rows,
)
from stackctl.base.evidence import Evidence
from stackctl.review.sections import FAILED, NOT_RUN, OK, STALE, Section, Table

WHERE_COLUMNS = ("evidence", "images (control → candidate)", "revisions", "device")


def _short(digest: str | None) -> str:
    if not digest:
        return "—"
    algo, _, hexa = digest.partition(":")
    return f"{algo}:{hexa[:12]}" if hexa else digest[:12]


def _leg(leg: Mapping[str, Any]) -> tuple[str, str]:
    """One leg's image by digest (or id) and its revision."""
    if leg.get("kind") == "image":
        return f"{leg['ref']}@{_short(leg.get('digest') or leg.get('image_id'))}", str(leg.get("revision") or "—")
    return f"{leg['ref']} (host interpreter)", "—"


def _where(result: Mapping[str, Any], record_path: str) -> tuple[str, str, str, str]:
    c, t = result["control"], result["candidate"]
    if c.get("kind") == "image":
        images = (f"{c['ref']}@{_short(c.get('digest') or c.get('image_id'))} → "
                  f"{t['ref']}@{_short(t.get('digest') or t.get('image_id'))}")
    else:
        images = f"{c['ref']} → {t['ref']} (host interpreters)"
    revisions = f"{c.get('revision') or '—'} → {t.get('revision') or '—'}"
    seen = t.get("devices_seen") or []
    device = str(t.get("device_name") or (seen[0] if seen else "none"))
    if seen:
        driver = f", driver {seen[0].split(',', 1)[1].strip()}" if "," in seen[0] else ""
        device += f" (seen: {len(seen)}{driver})"
    return record_path, images, revisions, device


def stale_legs(result: Mapping[str, Any], builds: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """The image legs whose image is not the latest build of its stack (by image id), in words."""
    out = []
    for role in ("control", "candidate"):
        leg = result[role]
        if leg.get("kind") != "image":
            continue
        build = builds.get(str(leg["stack"]))
        if build is not None and build.get("image_id") and build.get("image_id") != leg.get("image_id"):
            out.append(f"the {role}'s image {leg['ref']} ({_short(leg.get('image_id'))}) is no longer the latest "
                       f"build of {leg['stack']} ({build.get('image')}, {_short(str(build.get('image_id')))})")
    return out


def validation_section(record: Evidence | None, record_path: str, builds: Mapping[str, Mapping[str, Any] | None],
                       candidate_arg: str, present: frozenset[str] = frozenset()) -> Section:
    """`present`: the picture files found beside the record; those of this record's metrics are shown."""
    title = "Validation summary"
    if record is None:
        cmd = f"stackctl ab CONTROL {candidate_arg}"
        return Section("validation", title, NOT_RUN, cmd, None,
                       text=f"no ab record at {record_path}; run `{cmd}`")
    result = record.result
    try:
        where = _where(result, record_path)
        stale = stale_legs(result, builds)
        summary = tuple((*r, *where) for r in summary_rows(result))
        # a sweep row is one leg's run: it names that leg's image
        sweep = tuple((*r, record_path, *_leg(result["control" if i % 2 == 0 else "candidate"]), where[3])
                      for i, r in enumerate(sweep_rows(result)))
        metrics = metric_rows(result)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a record another version wrote, or edited
        return Section("validation", title, FAILED, record.command, record.time,
                       text=f"{record_path} is not a readable ab record ({type(exc).__name__}: {exc}); "
                            f"run `{record.command}` again")
    status = STALE if stale else FAILED if result.get("failing") else OK
    tables = [Table((*SUMMARY_COLUMNS, *WHERE_COLUMNS), summary),
              Table((*SWEEP_COLUMNS, "evidence", "image", "revision", "device"), sweep, "sweeps")]
    if metrics:
        tables.append(Table(METRIC_COLUMNS, tuple(metrics), "benchmarks"))
    if places := place_rows(result):
        tables.append(Table(PLACE_COLUMNS, tuple(places), f"where each trial ran ({result['cluster']['address']})"))
    text = f"plan {result.get('plan')} ({result.get('plan_path')}): {'failed' if result.get('failing') else 'passed'}"
    if result.get("problems"):
        text += "; " + "; ".join(result["problems"])
    if stale:
        text = "stale: " + "; ".join(stale) + f". Rerun: `{record.command}`. " + text
    drawn = tuple(name for t in result.get("trials") or () for m in t.get("metrics") or ()
                  if (name := picture_name(record_path, str(t["trial"]), str(m["metric"]))) in present)
    return Section("validation", title, status, record.command, record.time, tuple(tables), text=text,
                   pictures=drawn)
