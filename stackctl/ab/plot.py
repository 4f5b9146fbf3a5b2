"""The picture of one benchmark metric: every run in schedule order (each run's samples, control and candidate in two
colours, the run's median marked) above each bracket's delta with the interval and the band, so a reviewer sees
the drift and what the brackets made of it instead of reading about it.

Pure: the recorded (JSON) forms of a trial's metric and runs in, SVG text out. matplotlib draws it (the `plots`
extra): axes, scales and SVG output are what a hand-written drawing would get wrong at the edges.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from stackctl.ab.plan import Better
from stackctl.ab.stats import as_pct, log_band, run_statistic

CONTROL_COLOUR, CANDIDATE_COLOUR = "#1f77b4", "#d62728"


class PlotsMissing(ImportError):
    """matplotlib is not installed: pictures need stackctl's `plots` extra."""


def picture_name(record: str, trial: str, metric: str) -> str:
    """`build/b.ab.json`, `decode[bs=4]`, `tok_s` → `build/b.ab.decode-bs-4.tok_s.svg`: beside the record, one
    file a trial and metric, named in characters every file system and URL takes."""
    stem = record[:-len(".json")] if record.endswith(".json") else record

    def safe(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "x"

    return f"{stem}.{safe(trial)}.{safe(metric)}.svg"


def metric_svg(trial: str, metric: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str:
    """The SVG of `metric` (a trial's recorded metric verdict) over `runs` (that trial's recorded runs)."""
    try:
        import matplotlib

        matplotlib.use("svg")
        from matplotlib import pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise PlotsMissing(str(exc)) from None

    name, unit, band = str(metric["metric"]), str(metric.get("unit") or ""), float(metric["band"])
    statistic, better = str(metric.get("statistic") or "median"), Better(metric["better"])
    ordered = sorted((r for r in runs if r.get("trial") == trial), key=lambda r: int(r["order"]))
    with matplotlib.rc_context({"svg.hashsalt": "stackctl", "svg.fonttype": "none", "font.size": 9}):
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.2), height_ratios=(3, 2), constrained_layout=True)
        for r in ordered:
            samples = next((list(v) for k, v in r.get("samples") or () if k == name), [])
            if not samples:
                continue
            colour = CONTROL_COLOUR if r["leg"] == "control" else CANDIDATE_COLOUR
            x = int(r["order"]) + 1
            top.scatter([x] * len(samples), samples, s=9, color=colour, alpha=0.55, linewidths=0)
            top.hlines(run_statistic(samples, statistic, better), x - 0.35, x + 0.35, color=colour, linewidth=2)
        top.scatter([], [], color=CONTROL_COLOUR, label="control")
        top.scatter([], [], color=CANDIDATE_COLOUR, label="candidate")
        top.legend(loc="best", fontsize=8, frameon=False)
        top.xaxis.set_major_locator(MaxNLocator(integer=True))
        top.set_xlabel(f"run, in schedule order (C T C T … C); a bar is the run's {statistic}")
        top.set_ylabel(f"{name}" + (f" ({unit})" if unit else "") + f", {metric['better']} is better")
        top.set_title(f"{trial}: {name}", loc="left")
        deltas = [float(b["delta_pct"]) for b in metric.get("brackets") or ()]
        xs = list(range(1, len(deltas) + 1))
        # the band is a factor either way: ±3% runs from -2.91% to +3%
        bottom.axhspan(as_pct(-log_band(band)), band, color="#2ca02c", alpha=0.12, label=f"band ±{band:g}%")
        low, high = metric.get("low_pct"), metric.get("high_pct")
        if low is not None and high is not None:
            bottom.axhspan(float(low), float(high), color="#7f7f7f", alpha=0.25,
                           label=f"interval at {float(metric['level']) * 100:.3g}%")
        bottom.axhline(float(metric["delta_pct"]), color="#7f7f7f", linewidth=1, linestyle="--",
                       label=f"mean {float(metric['delta_pct']):+.2f}%")
        bottom.axhline(0, color="black", linewidth=0.6)
        bottom.scatter(xs, deltas, color=CANDIDATE_COLOUR, s=18, zorder=3, label="bracket delta")
        bottom.set_xticks(xs)
        bottom.set_xlabel("bracket: a candidate run against the geometric mean of the control runs around it")
        bottom.set_ylabel("delta, %")
        bottom.set_title(f"{metric['verdict']}: {metric.get('why', '')}", loc="left", fontsize=8)
        bottom.legend(loc="best", fontsize=7, frameon=False)
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": "stackctl"})
        plt.close(fig)
    return out.getvalue()


def pictures(result: Mapping[str, Any], record: str) -> dict[str, str]:
    """Every benchmark metric's picture of an `ab` result (its JSON form), by the file it goes to."""
    out: dict[str, str] = {}
    for t in result.get("trials") or ():
        for m in t.get("metrics") or ():
            out[picture_name(record, str(t["trial"]), str(m["metric"]))] = metric_svg(str(t["trial"]), m,
                                                                                      result.get("runs") or ())
    return out
