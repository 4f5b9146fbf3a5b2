"""ab: the validation plan run in the control's and the candidate's legs, and the verdicts."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from stackctl.cli.app import app, console, emit_result, invoked, markdown_table, markdown_text, table
from stackctl.cli.options import ClusterOpt, JsonOpt, MarkdownOpt, NoRecordOpt, one_format

if TYPE_CHECKING:
    from stackctl.ab import AbReport


def _progress(line: str) -> None:
    """One timestamped line a run: a trial of several minutes is never silent, and a CI log reads the same."""
    print(f"{time.strftime('%H:%M:%S')} ab {line}", file=sys.stderr, flush=True)


def render_markdown(result: dict[str, Any]) -> str:
    from stackctl.ab import (
        LEG_COLUMNS,
        METRIC_COLUMNS,
        PLACE_COLUMNS,
        SUMMARY_COLUMNS,
        SWEEP_COLUMNS,
        inventory_lines,
        leg_rows,
        metric_rows,
        place_rows,
        summary_rows,
        sweep_rows,
    )

    out = [f"### Validation summary: {markdown_text(str(result['plan']))} ({result['verdict']})", ""]
    if result.get("description"):
        out += [markdown_text(str(result["description"])), ""]
    out += [markdown_table(list(SUMMARY_COLUMNS), [list(r) for r in summary_rows(result)]), ""]
    if sweep := sweep_rows(result):
        out += ["**Test sweeps**", "", markdown_table(list(SWEEP_COLUMNS), [list(r) for r in sweep]), ""]
    if metrics := metric_rows(result):
        out += ["**Benchmarks** (each candidate run against the geometric mean of the control runs around it: "
                "C T C … C; the interval of those deltas against the band)", "",
                markdown_table(list(METRIC_COLUMNS), [list(r) for r in metrics]), ""]
        out += [f"![{markdown_text(Path(p).name)}]({p})" for p in result.get("pictures") or ()]
        out += [""] if result.get("pictures") else []
    out += ["**Legs**", "", markdown_table(list(LEG_COLUMNS), [list(r) for r in leg_rows(result)]), ""]
    if places := place_rows(result):
        out += ["**Where each trial ran**", "", markdown_table(list(PLACE_COLUMNS), [list(r) for r in places]), ""]
    if lines := inventory_lines(result):
        out += ["```", *lines, "```", ""]
    return "\n".join(out)


def _human(result: dict[str, Any]) -> None:
    from stackctl.ab import (
        LEG_COLUMNS,
        METRIC_COLUMNS,
        PLACE_COLUMNS,
        SUMMARY_COLUMNS,
        SWEEP_COLUMNS,
        gate_failures,
        inventory_lines,
        leg_rows,
        metric_rows,
        place_rows,
        summary_rows,
        sweep_rows,
    )

    console.print(table(f"validation summary: {result['plan']}", SUMMARY_COLUMNS, summary_rows(result)))
    if sweep := sweep_rows(result):
        console.print(table("test sweeps", SWEEP_COLUMNS, sweep))
    if metrics := metric_rows(result):
        console.print(table("benchmarks", METRIC_COLUMNS, metrics))
        for p in result.get("pictures") or ():
            console.print(f"picture: {p}", markup=False)
    console.print(table("legs", LEG_COLUMNS, leg_rows(result)))
    if places := place_rows(result):
        console.print(table("where each trial ran", PLACE_COLUMNS, places))
    for line in inventory_lines(result):
        console.print(line, markup=False, style="bold red" if "regression" in line or "only on" in line else None)
    for line in gate_failures(result):
        console.print(line, markup=False, style="bold red")
    style = "bold red" if result["failing"] else "green"
    console.print(f"ab {result['verdict']}" + (": " + "; ".join(result["problems"]) if result["problems"] else ""),
                  style=style, markup=False)


@app.command()
def ab(
    control: Annotated[str, typer.Argument(metavar="CONTROL", help="The control's profile (file or stack name).")],
    candidate: Annotated[str, typer.Argument(metavar="CANDIDATE", help="The candidate's profile.")],
    plan: Annotated[Path | None, typer.Option("--plan", metavar="FILE", help="The validation plan (default: "
                                              "validation/plan.toml beside the candidate's profile).")] = None,
    trial: Annotated[list[str] | None, typer.Option("--trial", metavar="NAME", help="Run only this trial "
                                                    "(repeatable).")] = None,
    repeat: Annotated[int | None, typer.Option("--repeat", metavar="N", help="Runs of the candidate for every "
                                               "trial (the control runs one more around a benchmark).")] = None,
    max_repeat: Annotated[int | None, typer.Option("--max-repeat", metavar="N", help="Brackets a benchmark may "
                                                   "reach while a metric is undecided (default: the plan's "
                                                   "max_repeat, else three times repeat).")] = None,
    allow_undecided: Annotated[bool, typer.Option("--allow-undecided", help="Report an undecided benchmark "
                                                  "without failing (exit 0).")] = False,
    image: Annotated[list[str] | None, typer.Option("--image", metavar="REF", help="The legs' images, the "
                                                    "control's then the candidate's (default: each stack's "
                                                    "latest build record).")] = None,
    python: Annotated[list[str] | None, typer.Option("--python", metavar="PY", help="Run the legs under these "
                                                     "host interpreters instead, the control's then the "
                                                     "candidate's (a GPU host without an engine).")] = None,
    target: Annotated[str | None, typer.Option("--target", metavar="LABEL", help="The target whose gate runs "
                                               "in the legs.")] = None,
    record_dir: Annotated[Path, typer.Option("--record-dir", metavar="DIR", help="Where the build records are "
                                             "read and this run is recorded.")] = Path("build"),
    record: Annotated[Path | None, typer.Option("--record", metavar="PATH", help="Record here instead "
                                                "(default: DIR/CANDIDATE.ab.json, where report reads it).")] = None,
    no_record: NoRecordOpt = False,
    cluster: ClusterOpt = None,
    markdown: MarkdownOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """A/B the stacks on the validation plan; exit 1 on a regression.

    The legs are the stacks' images (their build records, or --image twice) on one engine with the devices
    each profile declares, or host interpreters (--python twice). The stacks' gate runs in each leg first
    (its device phase too where the profile declares devices). A benchmark alternates the legs with the control
    bracketing the candidate and brackets are added while a metric is undecided; every run is recorded raw.
    Exit 1 on a regression, an undecided benchmark (unless allowed), a changed test inventory, differing exact
    outputs, a broken run or a failed gate. With --cluster each trial (each sweep cell) is a task on the
    cluster holding its devices as GPUs for its whole schedule, on one node; the trials run side by side.
    """
    from stackctl.base import to_jsonable
    from stackctl.usecases import AbAsk, ab_compare

    fmt = one_format(as_json, markdown)
    ask = AbAsk(control, candidate, plan=plan, trials=tuple(trial or ()), repeat=repeat, max_repeat=max_repeat,
                allow_undecided=allow_undecided, images=tuple(image or ()), pythons=tuple(python or ()),
                target=target, record_dir=record_dir, record=record, no_record=no_record, command=invoked(),
                cluster=cluster)
    done = ab_compare(ask, say=_progress)
    rep: AbReport = done.report
    result = to_jsonable(rep) | {"verdict": rep.verdict, "pictures": list(done.pictures)}
    emit_result(result, fmt, lambda: _human(result), markdown=lambda: render_markdown(result), failure=done.failure())
