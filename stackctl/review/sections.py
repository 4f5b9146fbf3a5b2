"""What a report is made of: sections of tables and lines, each with its status. Apart from report.py so that
the sections other modules build (validation.py) need not import the report that gathers them."""

from __future__ import annotations

from dataclasses import dataclass

OK, FAILED, NOT_RUN, STALE = "ok", "failed", "not run", "stale"
# a comparison with the old stack, for a stack that extends none: nothing to prove, so never "not proved"
NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str = ""


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    status: str  # ok | failed | not run | stale
    source: str  # the command whose output this is
    time: str | None  # when that command ran
    tables: tuple[Table, ...] = ()
    lines: tuple[str, ...] = ()  # a log, quoted as written
    text: str = ""  # one paragraph: what the tables say, or why there is nothing
    pictures: tuple[str, ...] = ()  # SVG files the section shows (paths as recorded)
