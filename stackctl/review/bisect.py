"""The report's bisect section, from the latest record `stackctl bisect` wrote for the candidate.

Pure: the record and the candidate's profile digest in, a report `Section` out. Only a report whose candidate was
bisected has the section (bisect runs when ab found a regression, not on every upgrade); a record made for another
version of the candidate's profile is stale, with the command that made it, to run again.
"""

from __future__ import annotations

from stackctl.base.evidence import Evidence
from stackctl.bisect import culprits_table, steps_table
from stackctl.review.sections import FAILED, OK, STALE, Section, Table

TITLE = "Bisect"


def bisect_section(record: Evidence, record_path: str, candidate_digest: str) -> Section:
    result = record.result
    try:
        culprits = culprits_table(result)
        steps = steps_table(result)
        text = (f"{result['control']} → {result['candidate']} on trial {result['trial']}"
                + (f", metric {result['metric']}" if result.get("metric") else "")
                + f": {result['conclusion']} ({result['builds']} builds, {result['comparisons']} comparisons, "
                f"{result['seconds']:.0f} s; {record_path})")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a record another version wrote, or edited
        return Section("bisect", TITLE, FAILED, record.command, record.time,
                       text=f"{record_path} is not a readable bisect record ({type(exc).__name__}: {exc}); "
                            f"run `{record.command}` again")
    stale = len(record.profile_digests) > 1 and record.profile_digests[1] != candidate_digest
    status = STALE if stale else FAILED if result.get("failing") else OK
    if stale:
        text = (f"stale: made for another version of {result['candidate']}'s profile. Rerun: `{record.command}`. "
                + text)
    tables = [Table(*culprits, "culprits")] if culprits[1] else []
    tables.append(Table(*steps, "steps"))
    return Section("bisect", TITLE, status, record.command, record.time, tuple(tables), text=text)
