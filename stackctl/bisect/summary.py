"""The rows people read, from a bisect result as JSON (the record's form): the units, the culprits, the steps.

Pure; the command line renders them as tables or markdown, and `report` quotes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

UNIT_COLUMNS = ("unit", "moves", "why together")
CULPRIT_COLUMNS = ("finding", "unit", "moves (before → after)", "alone", "candidate without it")
STEP_COLUMNS = ("step", "for", "units moved", "stack", "outcome", "verdict", "delta", "record")


def _moves(moves: Sequence[Mapping[str, Any]]) -> str:
    return "; ".join(f"{m['pin']} {m.get('before') or '—'} → {m.get('after') or '—'}" for m in moves)


Rows = tuple[tuple[str, ...], ...]
Table = tuple[tuple[str, ...], Rows]  # columns, rows


def units_table(result: Mapping[str, Any]) -> Table:
    return UNIT_COLUMNS, tuple((f"{i + 1}. {u['name']}", _moves(u["moves"]), "; ".join(u.get("why") or ()) or "—")
                 for i, u in enumerate(result.get("units") or ()))


def culprits_table(result: Mapping[str, Any]) -> Table:
    rows = []
    for c in [*(result.get("culprits") or ()), *(result.get("ambiguous") or ())]:
        kind = {"culprit": "culprit", "interaction": "interaction (together only)",
                "ambiguous": "one of these (skips between)"}.get(str(c["kind"]), str(c["kind"]))
        rows.append((kind, " + ".join(c["units"]), _moves(c["moves"]), str(c.get("alone") or "—"),
                     str(c.get("without") or "—")))
    return CULPRIT_COLUMNS, tuple(rows)


def steps_table(result: Mapping[str, Any]) -> Table:
    rows = []
    for n, s in enumerate(result.get("steps") or (), 1):
        delta = f"{s['delta_pct']:+.1f} %" if isinstance(s.get("delta_pct"), (int, float)) else ""
        if s.get("regressions"):
            delta = (delta + " " if delta else "") + "regressed: " + ", ".join(s["regressions"])
        verdict = str(s.get("verdict") or "")
        if s.get("outcome") == "skip" and s.get("why"):
            verdict += f": {s['why']}"
        rows.append((str(n) + (" (reused)" if s.get("reused") else ""), str(s.get("role", "")),
                     " + ".join(s.get("units") or ()) or "—", str(s.get("stack", "")), str(s.get("outcome", "")),
                     verdict, delta, str(s.get("record") or "—")))
    return STEP_COLUMNS, tuple(rows)
