"""resolve, lock, outdated, fetch: what the indexes say about a stack."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from stackctl.cli.app import (
    JsonOpt,
    MarkdownOpt,
    VerboseOpt,
    app,
    console,
    console_err,
    emit,
    markdown_table,
    one_format,
    progress_bar,
    table,
)
from stackctl.cli.options import IndexOpt, LockOpt, overrides
from stackctl.errors import CheckFailed
from stackctl.profile.locate import load_profile

if TYPE_CHECKING:
    from stackctl.resolve.lock import Lock

OfflineOpt = Annotated[bool, typer.Option("--offline", help="Use the HTTP cache only; never the network.")]
CacheDirOpt = Annotated[Path | None, typer.Option(
    "--cache-dir", metavar="DIR",
    help="HTTP cache directory (default: $STACKCTL_CACHE_DIR or ~/.cache/stackctl/http).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the HTTP cache.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds one index request may take, retries included.")]
RetriesOpt = Annotated[int, typer.Option("--retries", help="Retries after a 5xx answer or a connection error.")]
JobsOpt = Annotated[int, typer.Option("--jobs", help="Concurrent requests.")]


def lock_json(lock: Lock, path: Path | None) -> dict[str, Any]:
    files = [{"name": p.name, "version": p.version, "index": p.index, "target": f.target,
              "filename": f.filename, "url": f.url, "sha256": f.sha256, "size": f.size,
              "upload_time": f.upload_time, "upload_time_source": f.upload_time_source, "yanked": f.yanked,
              "yanked_reason": f.yanked_reason, "requires_python": f.requires_python,
              "requires_dist": f.requires_dist, "sha256_verified": f.sha256_verified,
              "newest_in_line": p.newest_in_line,
              "newest_upload_time": p.newest_upload_time, "other_lines": p.other_lines}
             for p in lock.pins for f in p.files]
    return {"stack": lock.stack, "lock": str(path) if path else None, "profile_digest": lock.profile_digest,
            "files": files, "trains": lock.trains, "warnings": lock.warnings,
            "closure": [{"target": c.target, "name": c.name, "version": c.version,
                         "filename": c.file.filename if c.file else None, "hashes": c.hashes}
                        for c in lock.closure]}


def _short_time(t: str | None) -> str:
    return t[:16].replace("T", " ") if t else "—"


def _print_lock(lock: Lock, path: Path | None) -> None:
    # File names run to 70 characters: on a narrow terminal keep the columns a person scans, and
    # leave file names and hashes to --json and the lock itself.
    wide = console.width >= 150
    yanked = any(f.yanked for p in lock.pins for f in p.files)
    columns = ["package", "version", "index", "target", *(["file", "sha256"] if wide else []), "uploaded",
               *(["yanked"] if yanked else []), "newest in line"]
    rows = []
    for p in lock.pins:
        for f in p.files:
            rows.append([p.name, p.version, p.index, f.target, *([f.filename, f.sha256[:12]] if wide else []),
                         _short_time(f.upload_time) + ("" if f.upload_time_source == "index" else
                                                       f" ({f.upload_time_source})"),
                         *(["yanked" if f.yanked else ""] if yanked else []), p.newest_in_line or "—"])
    console.print(table(f"{lock.stack}: {len(lock.pins)} pins", columns, rows))
    for t in lock.trains:
        spread = f"{t.spread_seconds / 60:.0f} min" if t.spread_seconds is not None else "unknown"
        trail = f", trailing: {', '.join(t.trailing)}" if t.trailing else ""
        console.print(f"train {t.train}: {', '.join(t.members)}; spread {spread}{trail}")
    if lock.closure:
        by_target: dict[str, int] = {}
        for c in lock.closure:
            by_target[c.target] = by_target.get(c.target, 0) + 1
        console.print("closure: " + ", ".join(f"{n} more distributions for {t}" for t, n in by_target.items()))
    files = {f.url: f for p in lock.pins for f in p.files} | {c.file.url: c.file for c in lock.closure if c.file}
    checked = sum(f.sha256_verified for f in files.values())
    console.print(f"sha256: {checked} of {len(files)} files downloaded whole and checked by stackctl"
                  + ("" if checked == len(files) else "; the others' are the index's word (--verify checks all)"))
    for w in lock.warnings:
        console_err.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
    if path is not None:
        console.print(f"wrote {path}")


@app.command("resolve")
def resolve_cmd(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")],
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
    verbose: VerboseOpt = False,
) -> None:
    """Prove every pin on its own index; write the lock.

    For every target: the file pip would pick, its sha256, size and upload time, the newest in line, the
    release trains and the dependency closure. The lock is written atomically.
    """
    from stackctl.resolve.lock import lock_path, write_lock
    from stackctl.resolve.run import make_client, resolve_stack

    stack = load_profile(profile)
    path = lock_path(profile, lock)
    client = make_client(offline, cache_dir, no_cache, timeout, retries, jobs)
    with progress_bar(not as_json, "resolve") as progress:
        result = resolve_stack(stack, client, overrides(index), closure=not no_closure, train_window=train_window,
                               progress=progress, verify=verify)
    write_lock(path, result)
    emit(lock_json(result, path), as_json, lambda: _print_lock(result, path))


@app.command("lock")
def lock_cmd(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file or stack name.")],
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when the lock was made from another profile.")]
    = False,
    lock: LockOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Say whether the lock was made from the current profile.

    With --check, exit 1 when the profile changed and the lock did not.
    """
    from stackctl.resolve.lock import lock_path, read_lock

    stack = load_profile(profile)
    path = lock_path(profile, lock)
    lk = read_lock(path)
    current = lk.made_from(stack)
    if check and not current:
        raise CheckFailed(f"{path} was made from another version of {stack.name} "
                          f"(lock {lk.profile_digest[:19]}, profile {stack.digest()[:19]})",
                          hint=f"run `stackctl resolve {profile}` and commit the lock")
    emit({"lock": str(path), "stack": lk.stack, "current": current, "profile_digest": lk.profile_digest,
          "lock_digest": lk.digest(), "pins": len(lk.pins), "closure": len(lk.closure)}, as_json,
         lambda: console.print(f"[green]ok[/] {path} matches {stack.name}" if current else
                               f"{path}: made from another version of {stack.name}; run resolve"))


OUTDATED_COLUMNS = ["artifact", "pinned", "published", "newest in line", "newest published", "other lines"]


@app.command()
def outdated(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")],
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
    verbose: VerboseOpt = False,
) -> None:
    """Is each pin the newest of its line?

    Artifact, pinned, newest in line, when that was published, and newer builds of other lines.
    """
    from stackctl.resolve.lock import read_lock
    from stackctl.resolve.run import make_client, resolve_stack

    one_format(as_json, markdown)
    stack = load_profile(profile)
    if from_lock is not None:
        lk = read_lock(from_lock)
        if not lk.made_from(stack):
            raise CheckFailed(f"{from_lock} was made from another version of {stack.name}",
                              hint=f"run `stackctl resolve {profile}`, or drop --from-lock to ask the indexes")
    else:
        client = make_client(offline, cache_dir, no_cache, timeout, retries, jobs)
        with progress_bar(not as_json and not markdown) as progress:
            lk = resolve_stack(stack, client, overrides(index), closure=False, progress=progress)
    rows = []
    data = []
    for p in lk.pins:
        newest = p.newest_in_line or "—"
        mark = "" if p.newest_in_line in (None, p.version) else " ⬆"
        # "published" is the pinned version's own upload (its first file): the newest's has its own column.
        published = min((f.upload_time for f in p.files if f.upload_time), default=None)
        rows.append([p.name, p.version, _short_time(published), newest + mark, _short_time(p.newest_upload_time),
                     "; ".join(p.other_lines)])
        data.append({"artifact": p.name, "pinned": p.version, "published": published,
                     "newest_in_line": p.newest_in_line, "newest_published": p.newest_upload_time,
                     "is_newest": p.newest_in_line in (None, p.version),
                     "other_lines": p.other_lines})

    def human() -> None:
        if markdown:
            print(markdown_table(OUTDATED_COLUMNS, rows))
        else:
            console.print(table(f"{stack.name}: is this the newest?", OUTDATED_COLUMNS, rows))

    emit({"stack": stack.name, "pins": data}, as_json, human)


@app.command()
def fetch(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file or stack name.")],
    target: Annotated[str, typer.Option("--target", metavar="LABEL", help="Target label, e.g. cp310-linux_x86_64.")],
    dest: Annotated[Path, typer.Option("--dest", metavar="DIR", help="Wheelhouse directory.")],
    lock: LockOpt = None,
    index: IndexOpt = None,
    timeout: TimeoutOpt = 30.0,
    retries: RetriesOpt = 3,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Download the lock's wheels for one target, sha256-checked.

    Every wheel the lock lists for --target goes into --dest; a matching file already there is kept.
    """
    from stackctl.resolve.lock import lock_path, read_lock
    from stackctl.resolve.run import make_client
    from stackctl.resolve.wheelhouse import fetch_wheelhouse

    stack = load_profile(profile)
    lk = read_lock(lock_path(profile, lock))
    client = make_client(no_cache=True, timeout=timeout, retries=retries)
    with progress_bar(not as_json, "fetch") as progress:
        paths = fetch_wheelhouse(lk, stack, target, dest, client=client, overrides=overrides(index),
                                 progress=progress)
    emit({"target": target, "dest": str(dest), "wheels": [str(p) for p in paths]}, as_json,
         lambda: console.print(f"{len(paths)} wheels for {target} in {dest}"))
