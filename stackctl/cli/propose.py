"""propose: a new profile that moves release trains and pins to what the indexes now hold."""

from __future__ import annotations

from typing import Annotated

import typer

from stackctl.base import count
from stackctl.cli.app import (
    app,
    console,
    console_err,
    emit,
    markdown_table,
    progress_bar,
    table,
)
from stackctl.cli.options import IndexOpt, JsonOpt, MarkdownOpt, ProfileArg, one_format, overrides

_COLUMNS = ["package", "before", "after", "note"]


@app.command()
def propose(
    profile: ProfileArg,
    name: Annotated[str | None, typer.Option("--name", metavar="NEW",
                                             help="Name of the new stack (default: PROFILE-next); written as "
                                             "NEW.toml beside PROFILE.")] = None,
    only: Annotated[list[str] | None, typer.Option("--only", metavar="PIN|TRAIN",
                                                   help="Move only this pin or release train (repeatable); "
                                                   "a train member moves with its whole train.")] = None,
    allow_series: Annotated[bool, typer.Option("--allow-series",
                                               help="Allow a move to another series (2.9 → 2.11): a decision, "
                                               "not an update.")] = False,
    train_window: Annotated[float, typer.Option("--train-window",
                                                help="Seconds within which a train's members must all have been "
                                                "published.")] = 3600.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the moves; write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing NEW.toml.")] = False,
    index: IndexOpt = None,
    markdown: MarkdownOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the upgrade the indexes allow as a new profile.

    Release trains move whole (every member published within --train-window) or not at all; other pins
    move to the newest of their line (local label, series, every target); builds whose local label names
    a torch follow the torch picked. Exit 1 when a pin cannot follow (nothing is written).
    """
    from stackctl.usecases import propose as propose_upgrade

    one_format(as_json, markdown)
    with progress_bar(not as_json) as progress:
        proposed = propose_upgrade(profile, overrides(index), window=train_window, allow_series=allow_series,
                                   only=only or (), name=name, dry_run=dry_run, force=force, progress=progress)
    proposal, written = proposed.proposal, proposed.written
    rows = [[m.pin, m.before, m.after, m.note] for m in proposal.moves]

    def human() -> None:
        if markdown:
            print(markdown_table(_COLUMNS, rows) if rows else "_nothing moves_")
            for h in proposal.held:
                print(f"\n- **{h.subject}**: {h.reason}")
            return
        if rows:
            console.print(table(f"{proposal.base} → {proposal.name}: {count(len(rows), 'pin')} move", _COLUMNS, rows))
        else:
            console.print(f"{proposal.base}: nothing moves")
        for h in proposal.held:
            colour = "red" if h.blocking else "yellow"
            console_err.print(f"[{colour}]held:[/] ", end="")
            console_err.print(f"{h.subject}: {h.reason}", markup=False, highlight=False)
        if written is not None:
            console.print(f"wrote {written}", markup=False)

    emit({"base": proposal.base, "name": proposal.name, "moves": proposal.moves, "held": proposal.held,
          "window": proposal.window, "allow_series": proposal.allow_series,
          "written": str(written) if written else None}, as_json, human)
    if (failure := proposed.failure()) is not None:
        raise failure
