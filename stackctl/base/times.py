"""Times as stackctl writes them: ISO 8601 in UTC with a `Z` (locks, labels, records)."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_iso(t: datetime) -> str:
    """`t` in UTC as `2026-03-01T12:00:00Z` (a naive time is taken as UTC already)."""
    aware = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
    return aware.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def now_iso(now: datetime | None = None) -> str:
    """This moment (or `now`) to the second: a record or label never claims more precision than that."""
    return utc_iso((now or datetime.now(timezone.utc)).replace(microsecond=0))


def short_time(t: str | None) -> str:
    """An ISO 8601 time to the minute for a table (`2026-03-01 12:03`); `—` for none."""
    return t[:16].replace("T", " ") if t else "—"
