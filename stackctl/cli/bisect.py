"""bisect: which pin move makes the candidate regress on a trial of the validation plan."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from stackctl.cli.app import Phase, app, console, emit_result, invoked, markdown_table, markdown_text, table
from stackctl.cli.options import BuilderOpt, ClusterOpt, IndexOpt, JsonOpt, MarkdownOpt, NoRecordOpt, one_format

if TYPE_CHECKING:
    from stackctl.bisect import BisectReport


def _progress(line: str) -> None:
    """One timestamped line a step and a stage of it (resolve, ABI, build, each A/B run, the verdict)."""
    Phase.said(f"stackctl bisect: {line.strip()}")
    print(f"{time.strftime('%H:%M:%S')} bisect {line}", file=sys.stderr, flush=True)


def _figures(result: dict[str, Any]) -> str:
    from stackctl.base import count

    return (f"{count(result['builds'], 'build')}, {count(result['comparisons'], 'comparison')}"
            + (f" ({count(result['reused'], 'step')} reused)" if result.get("reused") else "")
            + f" in {result['seconds']:.0f} s")


def render_markdown(result: dict[str, Any]) -> str:
    from stackctl.bisect import culprits_table, steps_table, units_table

    metric = f", metric {result['metric']}" if result.get("metric") else ""
    out = [f"### Bisect: {markdown_text(result['control'])} → {markdown_text(result['candidate'])} on "
           f"{markdown_text(result['trial'])}{metric}", "", markdown_text(result["conclusion"]) + ".", ""]
    columns, rows = culprits_table(result)
    if rows:
        out += [markdown_table(list(columns), [list(r) for r in rows]), ""]
    columns, rows = units_table(result)
    out += ["**Units of moves**", "", markdown_table(list(columns), [list(r) for r in rows]), ""]
    if result.get("kept"):
        out += [f"Not bisected (only the candidate has them): {markdown_text(', '.join(result['kept']))}.", ""]
    columns, rows = steps_table(result)
    out += [f"**Steps** ({_figures(result)})", "", markdown_table(list(columns), [list(r) for r in rows]), ""]
    return "\n".join(out)


def _human(result: dict[str, Any]) -> None:
    from stackctl.bisect import culprits_table, steps_table, units_table

    console.print(table("units of moves", *units_table(result)))
    if result.get("kept"):
        console.print(f"not bisected (only the candidate has them): {', '.join(result['kept'])}", markup=False)
    console.print(table(f"steps ({_figures(result)})", *steps_table(result)))
    columns, rows = culprits_table(result)
    if rows:
        console.print(table("culprits", columns, rows))
    console.print(f"bisect: {result['conclusion']}", markup=False,
                  style="bold red" if result["culprits"] else "green")


@app.command()
def bisect(
    control: Annotated[str, typer.Argument(metavar="CONTROL", help="The control's profile (file or stack name).")],
    candidate: Annotated[str, typer.Argument(metavar="CANDIDATE", help="The candidate's profile.")],
    trial: Annotated[str, typer.Option("--trial", metavar="NAME", help="The trial of the plan that regressed.")],
    metric: Annotated[str | None, typer.Option("--metric", metavar="M", help="Judge a bench trial on this metric "
                                               "alone (default: the trial's verdict).")] = None,
    plan: Annotated[Path | None, typer.Option("--plan", metavar="FILE", help="The validation plan (default: "
                                              "validation/plan.toml beside the candidate's profile).")] = None,
    repeat: Annotated[int | None, typer.Option("--repeat", metavar="N", help="Runs of each intermediate stack "
                                               "in the trial.")] = None,
    max_repeat: Annotated[int | None, typer.Option("--max-repeat", metavar="N", help="Brackets a benchmark may "
                                                   "reach while a metric is undecided, as in `ab` (an undecided "
                                                   "comparison is a skip).")] = None,
    index: IndexOpt = None,
    inventory: Annotated[str | None, typer.Option("--inventory", metavar="FILE", help="Base image inventory for "
                                                  "each intermediate's ABI check (default: the profile's).")] = None,
    builder: BuilderOpt = None,
    work_dir: Annotated[Path | None, typer.Option("--work-dir", metavar="DIR", help="Where the intermediate "
                                                  "profiles, locks, builds, A/B records and the ledger of steps "
                                                  "go (default: DIR/bisect/CANDIDATE under --record-dir).")] = None,
    record_dir: Annotated[Path, typer.Option("--record-dir", metavar="DIR", help="Where this run is recorded.")]
    = Path("build"),
    record: Annotated[Path | None, typer.Option("--record", metavar="PATH", help="Record here instead "
                                                "(default: DIR/CANDIDATE.bisect.json, where report reads it).")]
    = None,
    no_record: NoRecordOpt = False,
    cluster: ClusterOpt = None,
    markdown: MarkdownOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Find the pin move that makes the candidate regress on a trial.

    The profile diff is grouped into units that move together (a release train; a pin whose local label names
    another pin's version); intermediate stacks (the control with some units moved, in --work-dir) are
    resolved, ABI-checked, built and A/B'd against the control as `ab` does; a binary search over the units
    names the culprit and verifies it (the control with it alone, the candidate without it). A stack that
    cannot resolve, pass its ABI check or gate, or whose comparison cannot tell, is skipped. Steps already
    recorded for the same locks and plan are reused. Exit 1 when no culprit could be named. With --cluster each
    round builds and compares up to N stacks side by side, N the build nodes' stackctl-engine slots (a k-ary
    search: about log_(N+1)(k) rounds for k units).
    """
    from stackctl.base import to_jsonable
    from stackctl.usecases import BisectAsk, bisect_moves

    fmt = one_format(as_json, markdown)
    ask = BisectAsk(control, candidate, trial, plan=plan, metric=metric, repeat=repeat, max_repeat=max_repeat,
                    index=tuple(index or ()), inventory=inventory, work_dir=work_dir, record_dir=record_dir,
                    record=record, no_record=no_record, builder=builder, command=invoked(),
                    cluster=cluster)
    rep: BisectReport = bisect_moves(ask, say=_progress)
    result = to_jsonable(rep) | {"failing": rep.failing}
    emit_result(result, fmt, lambda: _human(result), markdown=lambda: render_markdown(result), failure=rep.failure())
