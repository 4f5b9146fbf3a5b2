"""The pull request's tables from an `ab` result in its recorded (JSON) form: the validation summary (trial,
configuration, correctness, candidate vs control, verdict), the sweep (sweep, stack, result, status), the
metrics and the legs. Pure: `ab` renders them from its report, `report` from the record it reads back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SUMMARY_COLUMNS = ("trial", "configuration", "correctness", "candidate vs control", "verdict")
SWEEP_COLUMNS = ("sweep", "stack", "result", "status")
METRIC_COLUMNS = ("trial", "metric", "control mean", "candidate mean", "delta", "median (control / candidate)",
                  "spread (control / candidate)", "control drift", "Mann-Whitney p", "verdict")
LEG_COLUMNS = ("leg", "stack", "image / interpreter", "digest", "revision", "python", "device")


def _num(x: Any) -> str:
    v = float(x)
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:.1f}"


def _counts(c: Mapping[str, Any]) -> str:
    words = f"{c['passed']} passed, {c['skipped']} skipped, {c['failed']} failed"
    if c.get("flaky"):
        words += f", {c['flaky']} flaky"
    return words + f" of {c['collected']} collected"


def _nodes(items: Sequence[Mapping[str, Any]], limit: int = 3) -> str:
    names = [str(i["node"]) for i in items]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _correctness(t: Mapping[str, Any]) -> str:
    parts = []
    tests = t.get("tests")
    if tests:
        c, d = _counts(tests["control"]), _counts(tests["candidate"])
        parts.append(f"both: {c}" if c == d else f"control: {c}; candidate: {d}")
        if not tests["same_inventory"]:
            parts.append(f"not the same inventory: {len(tests['only_control'])} only on the control, "
                         f"{len(tests['only_candidate'])} only on the candidate")
        if tests["regressions"]:
            parts.append("fails only on the candidate: " + _nodes(tests["regressions"]))
        if tests["flaky"]:
            parts.append("flaky: " + _nodes(tests["flaky"]))
        if tests["failing_both"]:
            parts.append("fails on both: " + _nodes(tests["failing_both"]))
    outputs = t.get("outputs") or []
    if outputs:
        same = [o["file"] for o in outputs if o["equal"]]
        differ = [o["file"] for o in outputs if not o["equal"]]
        parts.append(("exact outputs: " + ", ".join(same) if same else "")
                     + ("; " if same and differ else "") + ("outputs differ: " + ", ".join(differ) if differ else ""))
    if t.get("errors"):
        parts.append(str(t["errors"][0]))
    if t.get("note"):
        parts.append(str(t["note"]))
    return "; ".join(p for p in parts if p) or "—"


def _performance(t: Mapping[str, Any]) -> str:
    metrics = t.get("metrics") or []
    if not metrics:
        return "not a perf test"
    return "; ".join(f"{m['metric']} {m['delta_pct']:+.3f}% (p={m['p']:.2g})" for m in metrics)


def summary_rows(result: Mapping[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    gates = result.get("gates") or []
    if gates:
        ok = all(g["ok"] for g in gates)
        phases = sorted({g["phase"] for g in gates})
        config = "exact package imports/versions" + (" and the device phase" if "device" in phases else "")
        bad = [f"{g['leg']} ({g['phase']}): {g['failed']} failed" for g in gates if not g["ok"]]
        rows.append(("installed dependency gate", config, "passed on both stacks" if ok else "; ".join(bad),
                     "not a perf test", "Pass" if ok else "Fail"))
    for t in result.get("trials") or []:
        rows.append((str(t["trial"]), str(t.get("config") or "—"), _correctness(t), _performance(t),
                     str(t["verdict"]).capitalize()))
    return rows


def sweep_rows(result: Mapping[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    legs = {role: result[role] for role in ("control", "candidate")}
    for t in result.get("trials") or []:
        tests = t.get("tests")
        if not tests:
            continue
        for role in ("control", "candidate"):
            c = tests[role]
            bad = c["failed"] or (role == "candidate" and (tests["regressions"] or not tests["same_inventory"]))
            rows.append((str(t["trial"]), f"{legs[role]['stack']} {role}",
                         _counts(c) + f" in {float(c['seconds']):.2f}s", "Fail" if bad else "Pass"))
    return rows


def metric_rows(result: Mapping[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for t in result.get("trials") or []:
        for m in t.get("metrics") or []:
            c, d = m["control"], m["candidate"]
            unit = f" {m['unit']}" if m.get("unit") else ""
            spread_c = float(c["stdev"]) / float(c["mean"]) * 100 if c["mean"] else 0.0
            spread_d = float(d["stdev"]) / float(d["mean"]) * 100 if d["mean"] else 0.0
            rows.append((str(t["trial"]), f"{m['metric']} ({m['better']} is better)", _num(c["mean"]) + unit,
                         _num(d["mean"]) + unit, f"{m['delta_pct']:+.3f}%",
                         f"{_num(c['median'])} / {_num(d['median'])} ({m['median_delta_pct']:+.3f}%)",
                         f"±{spread_c:.2f}% / ±{spread_d:.2f}%", f"{m['drift_pct']:.2f}%", f"{m['p']:.3g}",
                         f"{m['verdict']} (band ±{m['band']:g}%)"))
    return rows


def leg_rows(result: Mapping[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for role in ("control", "candidate"):
        leg = result[role]
        seen = ", ".join(leg.get("devices_seen") or ())
        device = leg.get("device_name") or "none"
        if leg.get("devices") not in (None, "none"):
            device += f" ({leg['devices']})"
        if seen:
            device += f"; seen: {seen}"
        rows.append((role, str(leg["stack"]), str(leg["ref"]), str(leg.get("digest") or leg.get("image_id") or "—"),
                     str(leg.get("revision") or "—"), str(leg.get("python") or "—"), device))
    return rows


def inventory_lines(result: Mapping[str, Any]) -> list[str]:
    """Every node id that differs between the legs, and every regression, named in full."""
    out: list[str] = []
    for t in result.get("trials") or []:
        tests = t.get("tests")
        if not tests:
            continue
        out += [f"{t['trial']}: only on the control: {n}" for n in tests["only_control"]]
        out += [f"{t['trial']}: only on the candidate: {n}" for n in tests["only_candidate"]]
        out += [f"{t['trial']}: regression: {r['node']}" + (f" ({r['message']})" if r.get("message") else "")
                for r in tests["regressions"]]
        out += [f"{t['trial']}: flaky on the {'control' if f['control'] == 'flaky' else 'candidate'}: {f['node']}"
                for f in tests["flaky"]]
    return out
