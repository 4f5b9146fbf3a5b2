"""abi, inventory, wheel-diff: what the libraries in the stack's wheels need, and where they find it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from stackctl.base import count
from stackctl.cli.annotate import AnnotationsOpt, annotate, group
from stackctl.cli.app import (
    app,
    console,
    console_err,
    emit,
    invoked,
    markdown_table,
    markdown_text,
    progress_bar,
    say,
    table,
)
from stackctl.cli.options import IndexOpt, JsonOpt, LockOpt, MarkdownOpt, NoRecordOpt, one_format, overrides

if TYPE_CHECKING:
    from stackctl.abi import AbiReport
    from stackctl.wheels import WheelOrigin

_RESOLUTION_COLUMNS = ["file", "needed", "resolved", "where"]


MaxSizeOpt = Annotated[int | None, typer.Option("--max-size", metavar="BYTES",
                                                help="Largest member size in bytes read from a "
                                              "wheel (zip bomb cap).")]


def _print_sources(sources: tuple[WheelOrigin, ...] | list[WheelOrigin]) -> None:
    """What reading each remote wheel cost, and how far it was verified."""
    from stackctl.base import human_size

    cached = [s for s in sources if s.cached]
    if cached:
        checked = sum(1 for s in cached if s.sha256_checked)
        console.print(f"{len(cached)} wheel{'s' if len(cached) > 1 else ''}: no bytes read, ELF facts kept by "
                      f"sha256 from an earlier run ({checked} sha256-checked when read, {len(cached) - checked} "
                      "size-checked)", markup=False)
    for s in sources:
        if s.cached:
            continue
        if s.fetched is not None:
            how = "range requests" if s.ranged else "full download (server ignores ranges)"
            how += "" if s.libraries_read else ", libraries listed by name"
            verified = ("sha256 checked: the whole file was read" if s.sha256_checked else
                        "NOT hash-checked (range reads did not see the whole file)" if s.hash_known else
                        "not verified (no sha256 to compare with)")
            if s.verified == "size":
                verified += "; its size matches the lock"
            console.print(f"{s.wheel}: read {human_size(s.fetched)} of {human_size(s.size)} "
                          f"({100 * s.fetched / max(s.size, 1):.2f}%) in {count(s.requests or 0, 'request')}, {how}; "
                          f"{verified}",
                          markup=False)


def _ceiling_rows(rep: AbiReport) -> list[list[str]]:
    return [[c.family, c.required or "—", c.required_by or "", c.provided or "—"] for c in rep.ceilings
            if c.required or c.provided]


_CEILING_COLUMNS = ["family", "highest required", "by", "image provides"]


def _print_report_markdown(label: str, rep: AbiReport) -> None:
    problems = [[f.severity.value, f.kind, f.message] for f in rep.others()]
    ceil = _ceiling_rows(rep)
    print(f"### ABI: {label}\n")
    print(markdown_table(_RESOLUTION_COLUMNS, _resolution_rows(rep)))
    if ceil:
        print()
        print(markdown_table(_CEILING_COLUMNS, ceil))
    if problems:
        print()
        print(markdown_table(["severity", "kind", "problem"], problems))
    print()


def _print_report(label: str, rep: AbiReport) -> None:
    title = f"ABI {label}" + (f" against {rep.inventory}" if rep.inventory else " (no image inventory)")
    if rows := _resolution_rows(rep):
        console.print(table(title, _RESOLUTION_COLUMNS, rows))
    else:  # an empty boxed table says nothing; a target of pure-Python wheels is the usual reason
        say(f"{title}: no ELF file here needs a shared library (no DT_NEEDED entry to resolve)")
    if ceil := _ceiling_rows(rep):
        console.print(table("symbol-version ceilings", _CEILING_COLUMNS, ceil))
    if rep.inventory is None and rep.baselines:
        say(f"note: no image inventory: system libraries and symbol versions held to "
            f"{', '.join(rep.baselines)} (auditwheel's policy)")
    elif rep.inventory is None:
        say("note: no image inventory (--inventory or the profile's [abi] inventory): symbol versions were not "
            "compared with the image's", style="yellow")
    if rep.providers:
        say(f"run-time providers: {', '.join(rep.providers)}")
    for f in rep.others():
        colour = "red" if f.severity.value == "error" else "yellow"
        console.print(f"[{colour}]{f.severity.value}:[/] ", end="")
        console.print(f.message, markup=False, highlight=False)
    for lib, files in rep.unresolved():
        console.print("[red]unresolved:[/] ", end="")
        console.print(f"{lib}, needed by {count(len(files), 'file')}: {', '.join(files)}",
                      markup=False, highlight=False)
    counts: dict[str, int] = {}
    for r in rep.resolutions:
        counts[r.where.value] = counts.get(r.where.value, 0) + 1
    said = ", ".join(f"{n} {w}" for w, n in counts.items())
    say(f"{label}: {count(rep.checked_files, 'file')} checked in {count(len(rep.wheels), 'wheel')}, "
        f"{count(len(rep.resolutions), 'needed entry', 'needed entries')} ({said or 'none'})")


def _resolution_rows(report: AbiReport) -> list[list[str]]:
    rows = []
    for r in report.resolutions:
        rows.append([f"{r.wheel}:{r.file}" if len(report.wheels) > 1 else r.file, r.needed,
                     r.detail, r.where.value.upper() if r.where.value == "unresolved" else r.where.value])
    return rows


@app.command()
def abi(
    targets: Annotated[list[str], typer.Argument(metavar="PROFILE | WHEEL...",
                                                 help="A profile (file, PATH@GITREV or stack name), or wheel "
                                                      "files / URLs to check together.")],
    lock: LockOpt = None,
    target: Annotated[str | None, typer.Option("--target", metavar="LABEL",
                                               help="Check one target (cp310-linux_x86_64); "
                                               "default: every target of the stack.")] = None,
    inventory: Annotated[str | None, typer.Option("--inventory", metavar="FILE", help="Base image inventory (JSON from "
                                                  "`stackctl inventory`); overrides the profile's.")] = None,
    allow: Annotated[list[str] | None, typer.Option("--allow", metavar="GLOB",
                                                    help="Glob of libraries taken as found; adds to the "
                                                    "profile's. Prefer --provider for the driver's.")] = None,
    provider: Annotated[list[str] | None, typer.Option("--provider", metavar="VENDOR",
                                                       help="Run-time provider set the device driver brings "
                                                       "(nvidia, musa); adds to the profile's.")] = None,
    arch: Annotated[str | None, typer.Option("--arch", metavar="MACHINE",
                                             help="Expected machine (x86_64, aarch64); default from "
                                             "the target or the wheels' tags.")] = None,
    max_size: MaxSizeOpt = None,
    index: IndexOpt = None,
    record: Annotated[Path | None, typer.Option("--record", metavar="FILE",
                                                help="Where the result goes, with the lock's digest and the time, "
                                                "for `stackctl report` (default: build/STACK.abi.json).")] = None,
    no_record: NoRecordOpt = False,
    reread: Annotated[bool, typer.Option("--reread", help="Read the wheels again even where their ELF facts "
                                         "are kept (per sha256) from an earlier run.")] = False,
    markdown: MarkdownOpt = False,
    annotations: AnnotationsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Find every DT_NEEDED of the wheels as the loader does.

    Where each library the checked wheels need is found, in ld.so's order (already loaded by an earlier
    import, RPATH, LD_LIBRARY_PATH, RUNPATH, the image or the manylinux policy), or a run-time provider,
    an optional member, the allow list; exit 1 naming each unresolved library and each exceeded symbol
    version.
    """
    from stackctl.abi import check_targets
    from stackctl.wheels import Limits

    one_format(as_json, markdown)
    with group("abi: read the wheels' ELF files"), progress_bar(not as_json, "abi") as progress:
        outcome = check_targets(targets, lock=lock, target=target, inventory=inventory, allow=tuple(allow or ()),
                                arch=arch, providers=tuple(provider or ()), limits=Limits.capped(max_size),
                                overrides=overrides(index),
                                record=record, no_record=no_record, command=invoked(), progress=progress,
                                use_facts=not reread)
    for w in outcome.warnings:
        console_err.print(f"[yellow]warning:[/] {w}")

    at = outcome.recorded

    def human() -> None:
        for label, rep in outcome.reports:
            (_print_report_markdown if markdown else _print_report)(label, rep)
        _print_sources(outcome.origins)
        if at is not None and not markdown:
            say(f"recorded in {at} (what `stackctl report` reads)")

    emit(outcome.as_json(), as_json, human)
    annotate(outcome.annotations)
    if (failure := outcome.failure()) is not None:
        raise failure


@app.command()
def inventory(
    image: Annotated[str, typer.Argument(metavar="IMAGE",
                                         help="Image on the Docker engine (DOCKER_HOST or the default socket).")],
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="Inventory file to write (JSON).")],
    as_json: JsonOpt = False,
) -> None:
    """Record an image's libraries for `stackctl abi`.

    What the image's dynamic loader finds, and the libc/libstdc++ symbol versions it defines, as a JSON
    file that `abi --inventory` reads without an engine.
    """
    from stackctl.base import check_output
    from stackctl.engine import image_inventory

    check_output(out, "--out")  # before the image is run
    status = console_err.status(f"reading {image}'s libraries through the engine")
    show = console_err.is_terminal and not as_json
    try:
        if show:
            status.start()
        inv = image_inventory(image, out)
    finally:
        if show:
            status.stop()

    def human() -> None:
        tops = ", ".join(t for t in (inv.ceiling(f) for f in ("GLIBC", "GLIBCXX", "CXXABI")) if t)
        say(f"{image}: {count(len(inv.libraries), 'library', 'libraries')} in "
            f"{count(len(inv.search_dirs), 'directory', 'directories')}, {inv.arch}; {tops or 'no versioned libc'} "
            f"→ {out}")

    emit({"image": image, "image_id": inv.image_id, "out": str(out), "libraries": len(inv.libraries),
          "search_dirs": inv.search_dirs, "glibc": inv.ceiling("GLIBC"), "glibcxx": inv.ceiling("GLIBCXX"),
          "cxxabi": inv.ceiling("CXXABI")}, as_json, human)


@app.command("wheel-diff")
def wheel_diff(
    old: Annotated[str, typer.Argument(metavar="OLD", help="The old wheel: a file or an http(s) URL.")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="The new wheel: a file or an http(s) URL.")],
    max_size: MaxSizeOpt = None,
    record: Annotated[Path | None, typer.Option("--record", metavar="FILE",
                                                help="Where this diff is added (one entry per new wheel) for "
                                                "`stackctl report` (default: build/wheel-diffs.json).")] = None,
    no_record: NoRecordOpt = False,
    markdown: MarkdownOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Compare two builds of a wheel.

    Members added, removed and changed; DT_NEEDED gained and dropped; SONAME, RUNPATH, symbol-version and
    metadata changes; one summary line.
    """
    from stackctl.abi import diff_wheel_files
    from stackctl.base import to_jsonable
    from stackctl.wheels import Limits

    one_format(as_json, markdown)
    limits = Limits.capped(max_size)
    with progress_bar(not as_json, "wheel-diff") as progress:
        run = diff_wheel_files(old, new, limits, record=record, no_record=no_record, command=invoked(),
                               progress=progress)
    d, sources = run.diff, run.origins
    for w in run.warnings:
        console_err.print(f"[yellow]warning:[/] {w}", highlight=False)
    rows, erows = [list(r) for r in run.rows], [list(r) for r in run.elf_rows]

    def human() -> None:
        if markdown:
            print(f"**{markdown_text(d.old)} → {markdown_text(d.new)}**: {markdown_text(d.summary)}\n")
            print(markdown_table(["member", "size before", "size after", "crc before", "crc after"], rows))
            if erows:
                print()
                print(markdown_table(["library", "dynamic section changes"], erows))
            return
        console.print(table(f"{d.old} → {d.new}", ["member", "size before", "size after", "crc before",
                                                   "crc after"], rows))
        if erows:
            console.print(table("libraries", ["library", "dynamic section changes"], erows))
        console.print(f"{len(d.added)} added, {len(d.removed)} removed, {len(d.changed)} changed, "
                      f"{d.unchanged} unchanged")
        console.print(d.summary, markup=False)
        if run.recorded is not None:
            say(f"recorded in {run.recorded} (what `stackctl report` reads)")
        _print_sources(sources)

    emit({**to_jsonable(d), "sources": sources}, as_json, human)
