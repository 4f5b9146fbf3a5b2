"""resolve, lock, outdated, fetch: what the indexes say about a stack."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from stackctl.base import count, short_time
from stackctl.cli.annotate import AnnotationsOpt, annotate
from stackctl.cli.app import (
    app,
    console,
    console_err,
    emit,
    markdown_table,
    progress_bar,
    say,
    table,
)
from stackctl.cli.options import IndexOpt, JsonOpt, LockOpt, MarkdownOpt, ProfileArg, one_format, overrides

if TYPE_CHECKING:
    from stackctl.index import IndexEndpoint
    from stackctl.resolve import Lock

OfflineOpt = Annotated[bool, typer.Option("--offline", help="Use the HTTP cache only; never the network.")]
CacheDirOpt = Annotated[Path | None, typer.Option(
    "--cache-dir", metavar="DIR",
    help="HTTP cache directory (default: $STACKCTL_CACHE_DIR or ~/.cache/stackctl/http).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the HTTP cache.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds one index request may take, retries included.")]
RetriesOpt = Annotated[int, typer.Option("--retries", help="Retries after a 5xx answer or a connection error.")]
JobsOpt = Annotated[int, typer.Option("--jobs", help="Concurrent requests.")]


def _print_lock(lock: Lock, path: Path | None, indexes: tuple[IndexEndpoint, ...] = (), written: bool = True) -> None:

    # Every fact at every width: the table when it fits, else a block per file (file names run to 70
    # characters), never a column left out
    yanked = any(f.yanked for p in lock.pins for f in p.files)
    columns = ["package", "version", "index", "target", "file", "sha256", "uploaded",
               *(["yanked"] if yanked else []), "newest in line"]
    rows = []
    for p in lock.pins:
        for f in p.files:
            rows.append([p.name, p.version, p.index, f.target, f.filename, f.sha256[:12],
                         short_time(f.upload_time) + ("" if f.upload_time_source == "index" else
                                                       f" ({f.upload_time_source})"),
                         *(["yanked" if f.yanked else ""] if yanked else []), p.newest_in_line or "—"])
    console.print(table(f"{lock.stack}: {len(lock.pins)} pins", columns, rows))
    for t in lock.trains:
        spread = f"{t.spread_seconds / 60:.0f} min" if t.spread_seconds is not None else "unknown"
        trail = f", trailing: {', '.join(t.trailing)}" if t.trailing else ""
        say(f"train {t.train}: {', '.join(t.members)}; spread {spread}{trail}")
    if lock.closure:
        by_target: dict[str, int] = {}
        for c in lock.closure:
            by_target[c.target] = by_target.get(c.target, 0) + 1
        say("closure: " + ", ".join(f"{n} more distributions for {t}" for t, n in by_target.items()))
    files = {f.url: f for p in lock.pins for f in p.files} | {c.file.url: c.file for c in lock.closure if c.file}
    checked = sum(f.sha256_verified for f in files.values())
    say(f"sha256: {checked} of {count(len(files), 'file')} downloaded whole and checked by stackctl"
        + ("" if checked == len(files) else "; the others' are the index's word (--verify checks all)"))
    for ep in indexes:
        say(ep.described, style="yellow" if ep.overridden else None)
    for w in lock.warnings:  # wrapped between words by the console, never folded inside one by the terminal
        console_err.print(f"[yellow]warning:[/] {w}", highlight=False)
    if path is not None:
        say(f"wrote {path}" if written else f"{path} left as it was: the same lock")


@app.command("resolve")
def resolve_cmd(
    profile: ProfileArg,
    lock: LockOpt = None,
    index: IndexOpt = None,
    no_closure: Annotated[bool, typer.Option("--no-closure", help="Skip the dependency closure (uv).")] = False,
    train_window: Annotated[float, typer.Option("--train-window", help="Seconds a train member may trail.")] = 3600.0,
    verify: Annotated[bool, typer.Option("--verify", help="Download every locked file and check its sha256 "
                                         "before writing the lock.")] = False,
    offline: OfflineOpt = False,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    timeout: TimeoutOpt = 30.0,
    retries: RetriesOpt = 3,
    jobs: JobsOpt = 16,
    as_json: JsonOpt = False,
) -> None:
    """Prove every pin on its own index; write the lock.

    For every target: the file pip would pick, its sha256, size and upload time, the newest in line, the
    release trains and the dependency closure. The lock is written atomically.
    """
    from stackctl.resolve import lock_summary
    from stackctl.usecases import ClientOptions, resolve_profile

    client = ClientOptions(offline, cache_dir, no_cache, timeout, retries, jobs)
    with progress_bar(not as_json, "resolve") as progress:
        done = resolve_profile(profile, lock, overrides(index), client, closure=not no_closure,
                               train_window=train_window, verify=verify, progress=progress)
    run, path = done.run, done.path
    emit({**lock_summary(run.lock, path), "written": run.written,
          "indexes": [{"name": e.name, "url": e.url, "source": e.source_label, "override": e.overridden}
                      for e in run.indexes]}, as_json,
         lambda: _print_lock(run.lock, path, run.indexes, run.written))


@app.command("lock")
def lock_cmd(
    profile: ProfileArg,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when the lock was made from another profile.")]
    = False,
    lock: LockOpt = None,
    annotations: AnnotationsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Say whether the lock was made from the current profile.

    With --check, exit 1 when the profile changed and the lock did not.
    """
    from stackctl.usecases import lock_of_profile

    checked = lock_of_profile(profile, lock, check=check)
    path, name, status = checked.path, checked.stack, checked.status
    annotate(checked.annotations())
    if checked.failure is not None:
        raise checked.failure
    assert status is not None  # a lock that was checked has a status, or a failure
    emit(status, as_json, lambda: console.print(f"[green]ok[/] {path} matches {name}" if status.current else
                                                f"{path}: made from another version of {name}; run resolve"))


OUTDATED_COLUMNS = ["artifact", "pinned", "published", "newest in line", "newest published", "other lines"]


@app.command()
def outdated(
    profile: ProfileArg,
    from_lock: Annotated[Path | None, typer.Option("--from-lock", metavar="LOCK",
                                                   help="Read the lock instead of the indexes.")]
    = None,
    index: IndexOpt = None,
    offline: OfflineOpt = False,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    timeout: TimeoutOpt = 30.0,
    retries: RetriesOpt = 3,
    jobs: JobsOpt = 16,
    markdown: MarkdownOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Is each pin the newest of its line?

    Artifact, pinned, newest in line, when that was published, and newer builds of other lines.
    """
    from stackctl.usecases import ClientOptions, outdated_pins

    one_format(as_json, markdown)
    client = ClientOptions(offline, cache_dir, no_cache, timeout, retries, jobs)
    with progress_bar(from_lock is None and not as_json and not markdown) as progress:
        found = outdated_pins(profile, overrides(index), client, from_lock=from_lock, progress=progress)
    stack_name, pins = found.stack, found.pins
    rows = [[p.artifact, p.pinned, short_time(p.published),
             (p.newest_in_line or "—") + ("" if p.is_newest else f" (held by {p.held_by})" if p.held_by else " ⬆"),
             short_time(p.newest_published), "; ".join(p.other_lines)] for p in pins]

    def human() -> None:
        if markdown:
            print(markdown_table(OUTDATED_COLUMNS, rows))
        else:
            console.print(table(f"{stack_name}: is this the newest?", OUTDATED_COLUMNS, rows))

    emit({"stack": stack_name, "pins": pins}, as_json, human)


@app.command()
def fetch(
    profile: ProfileArg,
    target: Annotated[str, typer.Option("--target", metavar="LABEL", help="Target label, e.g. cp310-linux_x86_64.")],
    dest: Annotated[Path, typer.Option("--dest", metavar="DIR", help="Wheelhouse directory.")],
    lock: LockOpt = None,
    index: IndexOpt = None,
    timeout: TimeoutOpt = 30.0,
    retries: RetriesOpt = 3,
    as_json: JsonOpt = False,
) -> None:
    """Download the lock's wheels for one target, sha256-checked.

    Every wheel the lock lists for --target goes into --dest; a matching file already there is kept.
    """
    from stackctl.usecases import fetch_profile

    with progress_bar(not as_json, "fetch") as progress:
        paths = fetch_profile(profile, target, dest, lock, overrides(index), timeout=timeout, retries=retries,
                              progress=progress)
    emit({"target": target, "dest": str(dest), "wheels": [str(p) for p in paths]}, as_json,
         lambda: console.print(f"{len(paths)} wheels for {target} in {dest}"))
