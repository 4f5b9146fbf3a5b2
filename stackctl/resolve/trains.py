"""Release trains: pins published together. The spread of their upload times, and who trails."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from stackctl.base.times import utc_iso
from stackctl.resolve.lock import TrainReport

DEFAULT_WINDOW = 3600.0  # seconds


def _iso(t: datetime) -> str:
    return utc_iso(t)


def train_reports(members: Mapping[str, Sequence[str]], published: Mapping[str, datetime | None],
                  window: float = DEFAULT_WINDOW) -> tuple[TrainReport, ...]:
    """`members`: train → pin names; `published`: pin → when its files went up (None: unknown).

    A member trails when it was published more than `window` seconds after the train's first member.
    """
    out = []
    for train in sorted(members):
        names = tuple(sorted(members[train]))
        times = {n: published.get(n) for n in names}
        known = {n: t for n, t in times.items() if t is not None}
        if not known:
            out.append(TrainReport(train, names, None, None, None))
            continue
        first, last = min(known.values()), max(known.values())
        trailing = tuple(n for n, t in sorted(known.items()) if (t - first).total_seconds() > window)
        out.append(TrainReport(train, names, _iso(first), _iso(last), (last - first).total_seconds(), trailing))
    return tuple(out)
