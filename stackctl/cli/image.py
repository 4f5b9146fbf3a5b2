"""gate, render, tag, build, publish, inspect: from a locked stack to a published, verified image."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from stackctl.cli.app import JsonOpt, VerboseOpt, app, console, console_err, emit, progress_display, table
from stackctl.cli.profiles import load_profile
from stackctl.errors import CheckFailed, InputError
from stackctl.image.prepare import Prepared, lock_path, pick_target, prepare, read_stack_lock

if TYPE_CHECKING:
    from stackctl.image.buildlog import BuildResult, Engine
    from stackctl.image.render import Rendered

LockOpt = Annotated[Path | None, typer.Option("--lock", metavar="PATH",
                                              help="Lock file (default: the .lock beside the profile).")]
TargetOpt = Annotated[str | None, typer.Option("--target", metavar="LABEL",
                                               help="Target label, e.g. cp311-linux_x86_64 "
                                               "(default: the image's python on linux_x86_64).")]
RepoOpt = Annotated[str | None, typer.Option("--repository", metavar="REPO",
                                             help="Image repository instead of the profile's.")]
RevisionOpt = Annotated[str | None, typer.Option("--revision", metavar="REV",
                                                 help="Source revision for a build from an archive.")]
RefOpt = Annotated[str | None, typer.Option("--ref", metavar="REF",
                                            help="Source tag or branch for the .version label.")]
CreatedOpt = Annotated[str | None, typer.Option("--created", metavar="TIME",
                                                help="Set org.opencontainers.image.created "
                                                "(ISO 8601, or `now`); absent by default for reproducibility.")]
WheelhouseOpt = Annotated[Path | None, typer.Option("--wheelhouse", metavar="DIR",
                                                    help="Directory holding the lock's wheels.")]
IndexOpt = Annotated[list[str] | None, typer.Option(
    "--index", metavar="NAME=URL",
    help="NAME=URL: fetch missing wheels of index NAME from URL (also STACKCTL_INDEX_<NAME>_URL).")]


def _wheelhouse(prep: Prepared, wheelhouse: Path | None, default: Path, index: list[str] | None) -> Path:
    """The lock's wheels: the given wheelhouse when it holds them all, else fetched from the indexes."""
    from stackctl.index.config import parse_overrides
    from stackctl.resolve.wheelhouse import fetch_wheelhouse

    needed = [f.wheel for f in prep.rendered.files if f.wheel]
    where = wheelhouse or default
    if all((where / w).is_file() for w in needed if w):
        return where  # buildctx checks every sha256 against the lock as it copies
    fetch_wheelhouse(prep.lock, prep.stack, prep.target, where, overrides=parse_overrides(index or []))
    return where


def check_local_ref(ref: str) -> None:
    """An engine reference must be NAME[:TAG][@DIGEST] (or an image id): the engine's 400 for a malformed one
    is the user's input, not a failing service."""
    import re

    from stackctl.profile.tag import REPOSITORY_RE, TAG_RE

    name, _, digest = ref.partition("@")
    last = name.rpartition("/")[2]
    repository, tag = (name.rpartition(":")[0], name.rpartition(":")[2]) if ":" in last else (name, None)
    first = repository.partition("/")[0]
    # Only a host (a dot, a port or localhost) may hold capitals; Docker reads `Upper/x` as a path.
    host = "/" in repository and ("." in first or ":" in first or first == "localhost")
    if (REPOSITORY_RE.fullmatch(repository) and (host or first == first.lower())
            and (tag is None or TAG_RE.fullmatch(tag))
            and (not digest or re.fullmatch(r"[a-z0-9]+:[0-9a-f]{32,}", digest))):
        return
    raise InputError(f"{ref!r} is not an image reference (NAME[:TAG][@DIGEST], names in lowercase)")


def _write(path: Path, text: str, what: str) -> None:
    from stackctl.base.files import write_atomic

    try:
        write_atomic(path, text)
    except OSError as exc:
        raise InputError(f"{path}: cannot write {what}: {exc.strerror or exc}") from None


@app.command()
def tag(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")],
    repository: RepoOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Print the image tag the profile's template gives."""
    from stackctl.image.labels import image_ref

    ref = image_ref(load_profile(profile), repository)
    emit({"repository": ref.repository, "tag": ref.tag, "ref": str(ref)}, as_json, lambda: print(ref.tag))


@app.command()
def gate(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")],
    python: Annotated[str, typer.Option("--python", metavar="PY",
                                        help="Interpreter whose environment is gated.")] = sys.executable,
    lock: LockOpt = None,
    target: TargetOpt = None,
    spec_out: Annotated[Path | None, typer.Option("--spec-out", metavar="FILE",
                                                  help="Also write the gate spec here.")] = None,
    spec_only: Annotated[bool, typer.Option("--spec-only", help="Render the spec (to --spec-out, else stdout) "
                                            "and run nothing.")] = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run the stack's import/version gate; exit 1 on any FAIL.

    The gate runs under --python (default: this interpreter); --spec-only renders its spec and runs nothing.
    """
    from stackctl.base.assets import asset_root
    from stackctl.image import gatespec
    from stackctl.image.gaterun import GateRun, verdict

    stack = load_profile(profile)
    preserve = None
    if lock is not None:
        locked = read_stack_lock(stack, lock)
        preserve = gatespec.installed_pins(stack, locked, pick_target(stack, target))
    spec = gatespec.dumps(gatespec.gate_spec(stack, preserve))
    if spec_out:
        _write(spec_out, spec, "the gate spec")
    if spec_only:
        if not spec_out:
            sys.stdout.write(spec)
        return
    script = asset_root() / "gates" / "gate.py"
    with tempfile.TemporaryDirectory(prefix="stackctl-gate-") as tmp:
        (Path(tmp) / "gate.json").write_text(spec, encoding="utf-8")
        command = [python, "-I", str(script), str(Path(tmp) / "gate.json")]
        try:
            if not as_json and console_err.is_terminal:
                with console_err.status(f"gating {stack.name} under {python}"):
                    proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
            else:
                proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"the gate of {stack.name} under {python} did not finish in 600 s") from None
        except FileNotFoundError:
            raise InputError(f"{python}: no such interpreter") from None
        except OSError as exc:
            raise InputError(f"{python}: cannot run: {exc}") from None
    run = GateRun(python, proc.returncode, tuple(proc.stdout.splitlines()), proc.stderr)
    problem = verdict(stack.name, run)

    def human() -> None:
        for ln in run.lines:
            style = "green" if ln.startswith("PASS ") else "bold red" if ln.startswith("FAIL ") else "dim"
            console.print(ln, style=style, markup=False)
        if run.crashed and run.stderr.strip():
            console_err.print(run.stderr.rstrip(), style="dim", markup=False, soft_wrap=True)

    emit({"stack": stack.name, "python": python, "passed": run.passed, "failed": run.failed,
          "finished": run.finished, "exit_status": run.returncode,
          "results": [{"ok": ok, "line": ln} for ok, ln in run.results]}, as_json, human)
    if problem is not None:
        raise problem


@app.command()
def render(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")],
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Directory for the build context.")],
    lock: LockOpt = None,
    target: TargetOpt = None,
    wheelhouse: WheelhouseOpt = None,
    revision: RevisionOpt = None,
    ref: RefOpt = None,
    created: CreatedOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Write the build context into --out.

    The Dockerfile, the requirement files from the lock, the gate and its spec, and with --wheelhouse the
    wheels.
    """
    from stackctl.image.render import Rendered

    prep = prepare(load_profile(profile), lock, target, revision, ref, created, None, os.environ)
    rendered = prep.rendered
    if wheelhouse is None:
        rendered = Rendered(rendered.dockerfile, tuple(f for f in rendered.files if f.wheel is None))
    digests = _write_context(rendered, wheelhouse or Path("."), out, not as_json and console_err.is_terminal)
    wheels = [f.path for f in prep.rendered.files if f.wheel]
    emit({"context": str(out), "files": digests, "wheels": wheels, "wheels_copied": wheelhouse is not None},
         as_json, lambda: console.print(f"wrote {out}/Dockerfile and {len(digests) - 1} other files"
                                        + ("" if wheelhouse else f"; {len(wheels)} wheels expected under "
                                           f"{out}/groups/ (pass --wheelhouse to copy them)"), markup=False))


def _write_context(rendered: Rendered, wheelhouse: Path, out: Path, show: bool) -> dict[str, str]:
    """The context on disk, with a bar over the wheels as each is hashed and linked in."""
    from stackctl.image.context import write_context

    wheels = sum(1 for f in rendered.files if f.wheel)
    if not show or not wheels:
        return write_context(rendered, wheelhouse, out)
    with progress_display("context") as bar:
        task = bar.add_task("", total=wheels)
        return write_context(rendered, wheelhouse, out,
                             lambda name: bar.update(task, advance=1, description=name[:60]))


def _run_build(engine: Engine, context: Path, image: str, show: bool, nocache: bool) -> BuildResult:
    if not show:
        return engine.build(context, image, nocache=nocache)
    with progress_display("build") as bar:
        task = bar.add_task("", total=None)

        def step(n: int, of: int, what: str) -> None:
            bar.update(task, completed=n - 1, total=of, description=what[:70])

        return engine.build(context, image, step, nocache=nocache)


@app.command()
def build(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")],
    lock: LockOpt = None,
    target: TargetOpt = None,
    wheelhouse: WheelhouseOpt = None,
    index: IndexOpt = None,
    context: Annotated[Path | None, typer.Option("--context", metavar="DIR", help="Build context dir (default: "
                                                 "build/STACK/context).")] = None,
    repository: RepoOpt = None,
    allow_dirty: Annotated[bool, typer.Option("--allow-dirty", help="Build from a dirty tree; the revision "
                                              "label then ends in -dirty.")] = False,
    revision: RevisionOpt = None,
    ref: RefOpt = None,
    created: CreatedOpt = None,
    record_dir: Annotated[Path, typer.Option("--record-dir", metavar="DIR",
                                             help="Where the build record goes.")] = Path("build"),
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Build every step afresh (release builds).")] = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Build and gate the stack's image on the Docker engine.

    Renders the context, builds it on the engine (DOCKER_HOST), runs the gate as the last build step and
    writes build/STACK.build.json with a fingerprint.
    """
    from stackctl.base.jsonout import dumps
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.buildlog import BuildFailed
    from stackctl.image.fingerprint import Fingerprint, file_inputs
    from stackctl.image.labels import image_ref

    prep = prepare(load_profile(profile), lock, target, revision, ref, created, allow_dirty, os.environ)
    image = image_ref(prep.stack, repository)
    base = record_dir / prep.stack.name
    ctx = context or base / "context"
    show = not as_json and console_err.is_terminal
    digests = _write_context(prep.rendered, _wheelhouse(prep, wheelhouse, base / "wheelhouse", index), ctx, show)
    engine = DockerEngine()
    base_facts = engine.facts(prep.stack.image.base) if prep.stack.image else None
    if base_facts is None:
        raise InputError(f"base image {prep.stack.image.base if prep.stack.image else '?'} is not in the engine",
                         hint="build or pull it first (CI: bash .ci/services.sh)")
    try:
        result = _run_build(engine, ctx, str(image), show, no_cache)
    except BuildFailed as exc:
        if as_json:  # stdout carries one JSON document: the lines go into the error itself
            raise CheckFailed(f"{exc}: " + " | ".join(exc.lines)) from exc
        console_err.print(f"[bold red]build of {image} failed[/]")
        for line in exc.lines:
            print(line)  # plainly, on stdout: these are the result, not log noise
        raise
    inputs = {f"profile:{s}": p for s in prep.stack.sources if "@" not in s for p in [Path(s)]}
    inputs["lock"] = lock_path(prep.stack, lock)
    all_inputs = {**file_inputs(inputs), **{f"context:{k}": v for k, v in digests.items()}}
    fp = Fingerprint(prep.stack.name, str(image), result.image_id, prep.revision, prep.ref,
                     prep.git.branch if prep.git else None, prep.git.revision if prep.git else None,
                     bool(prep.git and prep.git.dirty), prep.stack.image.base if prep.stack.image else "",
                     base_facts.id, base_facts.repo_digests, tuple(sorted(all_inputs.items())))
    record = {"image": str(image), "image_id": result.image_id, "target": prep.target,
              "steps": result.steps, "cached_steps": result.cached_steps, "gate": list(result.gate_lines),
              "gate_cached": result.gate_cached,
              "fingerprint": fp, "fingerprint_digest": fp.digest()}
    record_path = record_dir / f"{prep.stack.name}.build.json"
    _write(record_path, dumps(record) + "\n", f"the build record of {image}")

    def human() -> None:
        for ln in result.gate_lines:
            console.print(ln, style="green" if ln.startswith("PASS ") else "dim", markup=False)
        if result.gate_cached:
            console.print("gate: step taken from the cache (the same layers passed it before; --no-cache "
                          "runs it again)", style="dim")
        console.print(f"built {image} ({result.image_id[:19]}), {result.cached_steps} of {result.steps} steps "
                      f"cached; record {record_path}", markup=False)

    emit(record, as_json, human)


@app.command()
def publish(
    profile: Annotated[str, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack name.")],
    repository: RepoOpt = None,
    lock: LockOpt = None,
    record: Annotated[Path, typer.Option("--record", metavar="FILE",
                                         help="Publication record (JSON lines) to append to.")] = Path(
        "build/publications.jsonl"),
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Push the built image and verify it by digest.

    Refuses a stale image, pushes, pulls it back by digest, checks its id and labels, then appends the
    publication record.
    """
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.labels import LABEL_LOCK, LABEL_PROFILE, image_ref
    from stackctl.image.publish import append_record, check_record_writable, stale
    from stackctl.image.publish import publish as do_publish

    stack = load_profile(profile)
    expect = {LABEL_PROFILE: stack.digest(), LABEL_LOCK: read_stack_lock(stack, lock).digest()}
    check_record_writable(record)
    built, ref = image_ref(stack), image_ref(stack, repository)
    engine = DockerEngine()
    if ref != built:
        # The other name follows the current build: an older image left under it must not be pushed.
        there, source = engine.facts(str(ref)), engine.facts(str(built))
        if (there is None or stale(there, expect)) and source is not None and there != source:
            engine.tag(str(built), ref.repository, ref.tag)
    if not as_json and console_err.is_terminal:
        with console_err.status(f"pushing {ref}, then pulling it back by digest"):
            pub = do_publish(engine, ref, expect=expect)
    else:
        pub = do_publish(engine, ref, expect=expect)
    append_record(record, pub)
    emit(pub, as_json, lambda: console.print(
        f"published {pub.tag}\n  digest   {pub.digest}\n  image id {pub.image_id}\n  revision {pub.revision}\n"
        f"  record   {record}", markup=False))


@app.command()
def inspect(
    ref: Annotated[str, typer.Argument(metavar="REF", help="host[:port]/name[:tag|@digest], or a local image.")],
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Show an image's labels and installed pins.

    Read from the registry without pulling layers when REF names a registry host, else from the engine.
    """
    from stackctl.engine.registry import parse_ref, read_remote
    from stackctl.image.labels import installed_from_labels

    if parse_ref(ref) is not None:
        remote = read_remote(ref)
        where, digest, image_id, labels = "registry", remote.digest, remote.image_id, dict(remote.labels)
    else:
        from stackctl.engine.docker import DockerEngine

        check_local_ref(ref)
        facts = DockerEngine().facts(ref)
        if facts is None:
            raise InputError(f"{ref}: no such image in the engine (name a registry host to read it remotely)")
        where, digest, image_id, labels = "engine", None, facts.id, dict(facts.labels)
    installed = installed_from_labels(labels)
    shown = {k: v for k, v in labels.items() if k != "io.stackctl.installed"}

    def human() -> None:
        def rows(pairs: dict[str, str]) -> list[tuple[str, str]]:
            return sorted(pairs.items())

        console.print(f"{ref}  ({where})\n  digest   {digest or '-'}\n  image id {image_id}", markup=False)
        console.print(table("labels", ["label", "value"], rows(shown)))
        if installed:
            console.print(table("installed", ["package", "version"], rows(installed)))

    emit({"ref": ref, "source": where, "digest": digest, "image_id": image_id, "labels": labels,
          "installed": installed}, as_json, human)


def image_pins(ref: str) -> dict[str, str]:
    """Installed distributions of an image, from its registry, else the local engine.

    For `stackctl diff IMAGE IMAGE`: rows come from `diff_installed(image_pins(a), image_pins(b))` (image.labels).
    """
    from stackctl.engine.registry import parse_ref, read_remote
    from stackctl.image.labels import installed_from_labels

    if parse_ref(ref) is not None:
        try:
            return installed_from_labels(dict(read_remote(ref).labels))
        except InputError:  # not pushed (yet): the engine may hold it
            pass
    from stackctl.engine.docker import DockerEngine

    check_local_ref(ref)
    facts = DockerEngine().facts(ref)
    if facts is None:
        raise InputError(f"{ref}: no such image in the registry or the engine")
    return installed_from_labels(dict(facts.labels))

