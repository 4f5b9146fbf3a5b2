"""The pull request's tables from an `ab` result in its recorded (JSON) form: the validation summary (trial,
configuration, correctness, candidate vs control, verdict), the sweep (sweep, stack, result, status), the
metrics and the legs. Pure: `ab` renders them from its report, `report` from the record it reads back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stackctl.ab.stats import percent, tell_words

SUMMARY_COLUMNS = ("trial", "configuration", "correctness", "candidate vs control", "verdict")
SWEEP_COLUMNS = ("sweep", "stack", "result", "status")
METRIC_COLUMNS = ("trial", "metric", "control", "candidate", "delta (brackets)", "interval", "control drift",
                  "pooled samples (secondary)", "verdict")
LEG_COLUMNS = ("leg", "stack", "image / interpreter", "digest", "revision", "python", "device")
PLACE_COLUMNS = ("trial", "node", "cards", "attempts", "ran by")


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


def _interval(m: Mapping[str, Any]) -> str:
    if m.get("low_pct") is None or m.get("high_pct") is None:
        return "unbounded"
    return f"[{percent(m['low_pct'], True)}, {percent(m['high_pct'], True)}]"


def _performance(t: Mapping[str, Any]) -> str:
    metrics = t.get("metrics") or []
    if not metrics:
        return "not a perf test"
    return "; ".join(f"{m['metric']} {percent(m['delta_pct'], True)} {_interval(m)}" for m in metrics)


def _label(t: Mapping[str, Any]) -> str:
    return " ".join(f"{k.upper()}{v}" for k, v in t.get("cell") or ())


def _sweep_performance(cells: Sequence[Mapping[str, Any]]) -> str:
    """A sweep as the pull request writes it: per metric each cell's delta ("BS1 -0.279%; BS4 -0.078%"), or the
    range of the deltas when every cell is neutral ("-0.148% to +0.242%")."""
    names = list(dict.fromkeys(m["metric"] for t in cells for m in t.get("metrics") or []))
    if not names:
        return "not a perf test"
    parts = []
    for name in names:
        found = [(t, m) for t in cells for m in t.get("metrics") or [] if m["metric"] == name]
        lead = f"{name} " if len(names) > 1 else ""
        if all(m["verdict"] == "neutral" for _, m in found):
            deltas = [m["delta_pct"] for _, m in found]
            parts.append(f"{lead}{percent(min(deltas), True)} to {percent(max(deltas), True)}, all neutral")
        else:
            parts.append(lead + "; ".join(f"{_label(t)} {percent(m['delta_pct'], True)}"
                                          + ("" if m["verdict"] == "neutral" else f" ({m['verdict']})")
                                          for t, m in found))
    return "; ".join(parts)


_WORST = ("broken", "outputs differ", "inventory changed", "regressed", "undecided", "fails on both", "flaky",
          "neutral-to-positive", "neutral", "improved", "pass", "skipped")


def _sweeps(trials: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """The trials in the plan's order, each sweep's cells gathered under its name."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for t in trials:
        groups.setdefault(str(t.get("sweep") or t["trial"]), []).append(t)
    return list(groups.items())


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
    for name, cells in _sweeps(result.get("trials") or []):
        if not cells[0].get("sweep"):
            t = cells[0]
            rows.append((str(t["trial"]), str(t.get("config") or "—"), _correctness(t), _performance(t),
                         str(t["verdict"]).capitalize()))
            continue
        keys = [k for k, _ in cells[0]["cell"]]
        values = {k: list(dict.fromkeys(v for t in cells for kk, v in t["cell"] if kk == k)) for k in keys}
        config = "; ".join(f"{k} = {', '.join(vs)}" for k, vs in values.items())
        correct = "; ".join(dict.fromkeys(c for t in cells if (c := _correctness(t)) != "—")) or "—"
        verdicts = [str(t["verdict"]) for t in cells]
        worst = min(verdicts, key=lambda v: _WORST.index(v) if v in _WORST else 0)
        rows.append((name, f"sweep {config}", correct, _sweep_performance(cells), worst.capitalize()))
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
            unit = f" {m['unit']}" if m.get("unit") else ""
            verdict = f"{m['verdict']} (band ±{m['band']:g}%"
            if m["verdict"] == "neutral":
                verdict += f", equivalence p={m['equivalence_p']:.2g}"
            elif m["verdict"] == "undecided":
                verdict += "; " + tell_words(m.get("reach_pct"), float(m["band"]), m.get("equivalence_brackets"),
                                             bool(m.get("below_noise")))
            per_run = "" if m.get("statistic", "median") == "median" else f", each run's {m['statistic']}"
            rows.append((str(t["trial"]), f"{m['metric']} ({m['better']} is better{per_run})",
                         _leg(m["control"]) + unit, _leg(m["candidate"]) + unit, percent(m["delta_pct"], True),
                         f"{_interval(m)} at {float(m['level']) * 100:.3g}%, {len(m['brackets'])} brackets",
                         percent(m["drift_pct"]), f"{percent(m['pooled_delta_pct'], True)}, Mann-Whitney "
                         f"p={m['p']:.3g}",
                         verdict + ")"))
    return rows


def _leg(s: Mapping[str, Any]) -> str:
    """A leg's pooled samples: the mean and the spread of one sample around it."""
    spread = float(s["stdev"]) / float(s["mean"]) * 100 if s["mean"] else 0.0
    return f"{_num(s['mean'])} ±{percent(abs(spread))}"


def place_rows(result: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Where each trial ran on a cluster (`ab --cluster`): its task's node and host, the cards it held, every
    attempt's node where its first died, the stackctl and Ray that ran it. None for a run in one process."""
    rows: list[tuple[str, ...]] = []
    for task in (result.get("cluster") or {}).get("tasks") or ():
        attempts = task.get("attempts") or ()
        tried = "; ".join(f"{str(a.get('node') or '')[:8]} {a.get('outcome')}" for a in attempts) or "—"
        rows.append((str(task.get("task")), f"{task.get('host')}/{str(task.get('node') or '')[:8]}",
                     ", ".join(task.get("devices") or ()) or "none", tried,
                     f"stackctl {task.get('stackctl')}, Ray {task.get('ray')}"))
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
        # an image that was never pushed has no registry digest: its id is a digest of its config, and says so
        digest = leg.get("digest") or (f"image id {leg['image_id']}" if leg.get("image_id") else "—")
        rows.append((role, str(leg["stack"]), str(leg["ref"]), str(digest),
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


def gate_failures(result: Mapping[str, Any]) -> list[str]:
    """Each FAIL line of a leg's gate that failed, named by its leg and phase."""
    from stackctl.image.gaterun import LineKind

    return [f"{g['leg']} gate ({g['phase']}): {ln}" for g in result.get("gates") or [] if not g["ok"]
            for ln in g["lines"] if LineKind.of(ln) is LineKind.FAIL]
