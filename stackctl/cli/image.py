"""gate, render, tag, build, publish, inspect: from a locked stack to a published, verified image."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from stackctl.cli.annotate import AnnotationsOpt, annotate, group
from stackctl.cli.app import (
    app,
    console,
    console_err,
    emit,
    invoked,
    progress_display,
    progress_lines,
    say,
    step_lines,
    table,
)
from stackctl.cli.options import BuilderOpt, ClusterOpt, IndexOpt, JsonOpt, LockOpt, ProfileArg, overrides

if TYPE_CHECKING:
    from stackctl.base import Level, Steps
    from stackctl.image import ImageRef
    from stackctl.profile import Stack
    from stackctl.usecases import BuildProgress, BuildReport

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


@app.command()
def tag(
    profile: ProfileArg,
    repository: RepoOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the image tag the profile's template gives."""
    from stackctl.usecases import image_tag

    ref = image_tag(profile, repository)
    emit({"repository": ref.repository, "tag": ref.tag, "ref": str(ref)}, as_json, lambda: print(ref.tag))


@app.command()
def gate(
    profile: ProfileArg,
    python: Annotated[str | None, typer.Option("--python", metavar="PY",
                                               help="Interpreter whose environment is gated (default: the one "
                                               "running stackctl; with --image: python3 in the image).")] = None,
    image: Annotated[str | None, typer.Option("--image", metavar="REF", help="Gate an image on the engine instead: "
                                              "the gate runs in a container of it, with no network.")] = None,
    phase: Annotated[str, typer.Option("--phase", metavar="PHASE", help="stack, app, device or all (stack and "
                                       "app): which entries of the gate run; device imports the spec entries "
                                       "for real and runs the device probes.")] = "all",
    lock: LockOpt = None,
    target: TargetOpt = None,
    spec_out: Annotated[Path | None, typer.Option("--spec-out", metavar="FILE",
                                                  help="Also write the gate spec here.")] = None,
    spec_only: Annotated[bool, typer.Option("--spec-only", help="Render the spec (to --spec-out, else stdout) "
                                            "and run nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the stack's import/version gate; exit 1 on any FAIL.

    The gate runs under --python (default: this interpreter), or with --image in a container of any image
    on the engine (CI's gate on an image built another way); --spec-only renders its spec and runs nothing.
    """
    from stackctl.usecases import gate_profile

    spinner = _gating(not as_json and console_err.is_terminal)
    gated = gate_profile(profile, python=python, image=image, phase=phase, lock=lock, target=target,
                         spec_out=spec_out, spec_only=spec_only, around=spinner)
    run = gated.run
    if run is None:  # --spec-only
        if not spec_out:
            sys.stdout.write(gated.spec)
        return

    def human() -> None:
        from stackctl.image import LineKind

        styles = {LineKind.PASS: "green", LineKind.FAIL: "bold red", LineKind.NOTE: "dim"}
        for ln in run.shown:
            console.print(ln.text, style=styles[ln.kind], markup=False)
        if run.crashed and run.stderr.strip():
            console_err.print(run.stderr.rstrip(), style="dim", markup=False, soft_wrap=True)

    emit({"stack": gated.stack, "python": run.python, "image": image, "phase": phase, "passed": run.passed,
          "failed": run.failed,
          "finished": run.finished, "exit_status": run.returncode,
          "results": [{"ok": ok, "line": ln} for ok, ln in run.results]}, as_json, human)
    if gated.problem is not None:
        raise gated.problem


def _gating(show: bool) -> Callable[[str, str], AbstractContextManager[object]] | None:
    """A terminal's spinner while the gate runs (its imports can take a minute); nothing in a CI log."""
    if not show:
        return None
    return lambda stack, where: console_err.status(f"gating {stack} in {where}")


@app.command()
def render(
    profile: ProfileArg,
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Directory for the build context.")],
    lock: LockOpt = None,
    target: TargetOpt = None,
    wheelhouse: WheelhouseOpt = None,
    revision: RevisionOpt = None,
    ref: RefOpt = None,
    created: CreatedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the build context into --out.

    The Dockerfile, the requirement files from the lock, the gate and its spec, and with --wheelhouse the
    wheels.
    """
    from stackctl.usecases import render_profile

    with _context_bar(not as_json and console_err.is_terminal) as on_wheel:
        written = render_profile(profile, out, lock, target=target, wheelhouse=wheelhouse, revision=revision,
                                 ref=ref, created=created, env=os.environ, on_wheel=on_wheel)
    digests, wheels = written.files, written.wheels
    emit(written, as_json, lambda: console.print(f"wrote {out}/Dockerfile and {len(digests) - 1} other files"
                                                 + ("" if wheelhouse else f"; {len(wheels)} wheels expected under "
                                                    f"{out}/groups/ (pass --wheelhouse to copy them)"), markup=False))


@contextmanager
def _context_bar(show: bool) -> Iterator[Steps | None]:
    """A bar over the wheels as each is hashed and linked into the context (gigabytes for torch); a line per
    wheel in a CI log."""
    if not console_err.is_terminal:
        yield step_lines("context", "wheel")
        return
    if not show:
        yield None
        return
    with progress_display("context") as bar:
        task = bar.add_task("", total=None)

        def each(n: int, of: int, name: str) -> None:
            bar.update(task, completed=n, total=of, description=name[:60])

        yield each


@contextmanager
def _build_bars(show: bool) -> Iterator[BuildProgress]:
    """One display for the three phases of a build (wheels fetched, context written, build steps): a
    terminal holds one live display at a time. A CI log gets timestamped lines instead, one per build step
    as the engine starts it (not silence until the end)."""
    from stackctl.base import is_phase
    from stackctl.usecases import BuildProgress

    if not console_err.is_terminal:
        yield BuildProgress(fetch=progress_lines("fetch"), step=step_lines("build"))
        return
    if not show:
        yield BuildProgress()
        return
    with progress_display("build") as bar:
        tasks: dict[str, Any] = {}

        def task(label: str) -> Any:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=None)
            return tasks[label]

        def fetch(label: str, done: int, total: int) -> None:
            bar.update(task(f"fetch {label}"), completed=done, total=total)

        def wheel(name: str) -> None:
            bar.update(task("context"), advance=1, description=f"context {name[:60]}")

        def step(n: int, of: int, what: str) -> None:  # after the last step, each phase: every step done
            bar.update(task("steps"), completed=of if is_phase(n) else n - 1, total=of, description=what[:70])

        yield BuildProgress(fetch, wheel, step)


def _say(text: str, level: Level | None) -> None:
    """The build's notes and warnings, on stderr: the result alone goes to stdout."""
    from stackctl.base import Level

    if level is Level.WARNING:
        console_err.print(f"[yellow]warning:[/] {text}", highlight=False, soft_wrap=not console_err.is_terminal)
    else:
        console_err.print(text if level is None else f"note: {text}", highlight=False, markup=False)


def _watch_build(show: bool, as_json: bool) -> Callable[[Stack, ImageRef], AbstractContextManager[BuildProgress]]:
    """Around the build itself: a CI log's group and the progress display, and a failed step or gate shown
    (or, with --json, carried in the error itself)."""

    @contextmanager
    def watch(stack: Stack, ref: ImageRef) -> Iterator[BuildProgress]:
        from stackctl.image import BuildFailed

        try:
            with group(f"build {ref}"), _build_bars(show) as bars:
                yield bars
        except BuildFailed as exc:
            annotate(exc.annotations(stack.sources[0] if stack.sources else None))
            if as_json:  # stdout carries one JSON document: the lines go into the error itself
                raise exc.in_one_line() from exc
            console_err.print(f"[bold red]build of {ref} failed[/]")
            for line in exc.lines:
                print(line)  # plainly, on stdout: these are the result, not log noise
            raise

    return watch


@app.command()
def build(
    profiles: Annotated[list[str] | None, typer.Argument(
        metavar="PROFILE...", help="Profile file, PATH@GITREV, or stack name (with --all: any number; none: every "
        "profile in stacks/).")] = None,
    build_all: Annotated[bool, typer.Option("--all", help="Build every named stack for each --target (default: "
                                            "its image's target): here in one `docker buildx bake` (BuildKit), or "
                                            "each cell on a build node of --cluster.")] = False,
    cluster: ClusterOpt = None,
    cache_repository: Annotated[str | None, typer.Option(
        "--cache-repository", metavar="REPO", help="With --all: the registry repository of the cache the engines "
        "share, BuildKit's (REPO:buildcache-STACK-TARGET) or the classic builder's layer-group stages (default: "
        "the image's repository, on its registry host).")] = None,
    lock: LockOpt = None,
    target: Annotated[list[str] | None, typer.Option("--target", metavar="LABEL", help="Target label, e.g. "
                                                     "cp311-linux_x86_64 (default: the image's python on "
                                                     "linux_x86_64); with --all repeatable.")] = None,
    wheelhouse: WheelhouseOpt = None,
    fetch: Annotated[bool, typer.Option("--fetch", help="Download the lock's wheels into --wheelhouse DIR, "
                                        "creating it (without --fetch a missing DIR is an error).")] = False,
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
                                             help="Where the records go: DIR/STACK.build.json, and the context "
                                             "and fetched wheels under DIR/STACK/.")] = Path("build"),
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Build every step afresh (release builds).")] = False,
    send_wheels: Annotated[bool, typer.Option(
        "--send-wheels", help="Send the wheels to the engine in the build context instead of serving them to the "
        "install stages (for an engine whose containers cannot reach this machine; automatic for a remote "
        "engine).")] = False,
    builder: BuilderOpt = None,
    annotations: AnnotationsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Build and gate the stack's image on the Docker engine.

    Renders the context, builds it on the engine (DOCKER_HOST), runs the gate as the last build step and
    writes build/STACK.build.json with a fingerprint. With --all: stacks by targets (a BuildKit engine bakes
    its cells in one `docker buildx bake`), the registry as the engines' shared cache, one summary and
    build/matrix.json; with --cluster each cell is built on a node of a Ray cluster that declares the
    stackctl-engine resource, and pushed by digest for `publish --all`.
    """
    from stackctl.usecases import BuildOrder

    order = BuildOrder(tuple(profiles or ()), tuple(target or ()), every=build_all, lock=lock, wheelhouse=wheelhouse,
                       fetch=fetch, overrides=overrides(index), context=context, repository=repository,
                       cache_repository=cache_repository, allow_dirty=allow_dirty, revision=revision, ref=ref,
                       created=created, record_dir=record_dir, no_cache=no_cache, send_wheels=send_wheels,
                       command=invoked(), builder=builder, cluster=cluster)
    if build_all:
        from stackctl.cli.matrix import build_all as build_every

        return build_every(order, as_json=as_json)
    from stackctl.usecases import build_stack

    built = build_stack(order, say=_say, watch=_watch_build(not as_json and console_err.is_terminal, as_json))
    emit(built.record, as_json, lambda: _show_built(built))


def _show_built(built: BuildReport) -> None:
    """A single build: the stack image beneath (under [image.app]), the gate's lines, what the gate left to the
    app phase, where the wheels came from, and the image built."""
    if built.stack_image is not None:
        below = built.stack_image
        say(f"stack image {below.image} ({below.image_id[:19]}), its stack-phase "
            f"gate {'cached' if below.gate_cached else 'passed'}")
    from stackctl.image import LineKind

    for ln in built.gate:  # the gate passed: its lines are checks that passed, and notes
        console.print(ln.text, style="green" if ln.kind is LineKind.PASS else "dim", markup=False)
    if built.gate_left:
        say(f"gate: {', '.join(built.gate_left)} left to the app phase: `stackctl gate {built.profile} "
            "--image REF` checks them in the image your project builds", style="yellow")
    if built.gate_cached:
        said = ("the lines above are those its run kept in the image" if built.gate
                else "the image keeps no lines of that run")
        say(f"gate: step taken from the cache (the same layers passed it before; {said}; "
            "--no-cache runs it again)", style="dim")
    say(f"wheels: {built.wheels_how}")
    say(f"built {built.image} ({built.image_id[:19]}), {built.cached_steps} of {built.steps} steps cached; "
        f"record {built.record_path}")
    if built.ran and built.cached_steps:  # which steps a rebuild ran, each as the progress named it
        for name in built.ran[:RAN_SHOWN]:
            say(f"ran {name}", style="dim")
        if len(built.ran) > RAN_SHOWN:
            say(f"ran {len(built.ran) - RAN_SHOWN} more steps (the record's ran_steps names each)", style="dim")


RAN_SHOWN = 3  # the steps a rebuild ran, each on a line of its own after the summary: a few, not every one


@app.command()
def publish(
    profile: Annotated[str | None, typer.Argument(metavar="PROFILE", help="Profile file, PATH@GITREV, or stack "
                                                  "name (none with --all).")] = None,
    publish_all: Annotated[bool, typer.Option("--all", help="Publish every cell the last `build --all` built "
                                              "(RECORD_DIR/matrix.json); a cluster's cells are tagged where its "
                                              "nodes pushed them.")] = False,
    repository: RepoOpt = None,
    lock: LockOpt = None,
    record_dir: Annotated[Path, typer.Option("--record-dir", metavar="DIR",
                                             help="Where the records go, as for build: the publication is "
                                             "appended to DIR/publications.jsonl.")] = Path("build"),
    record_file: Annotated[Path | None, typer.Option("--record", metavar="FILE", hidden=True,
                                                     help="The publication record file itself (older spelling).")]
    = None,
    sign_key: Annotated[Path | None, typer.Option(
        "--sign-key", metavar="PATH", envvar="STACKCTL_SIGN_KEY", show_envvar=True,
        help="PEM private key (ECDSA P-256 or Ed25519) to sign the provenance and SBOM statements with.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy the build's image layout to the registry; check the copy.

    Refuses a stale build. Copies the OCI image layout the build record names to the registry by digest
    (skopeo; blobs the registry has are skipped), compares the registry's manifest, config and every
    layer with the layout, pushes the SBOM and a provenance statement beside the image, and only then
    moves the tag. No engine is asked anything. Then appends the publication record.
    """
    if publish_all:
        from stackctl.cli.matrix import publish_all as publish_pool

        return publish_pool(repository=repository, record_dir=record_dir, as_json=as_json, sign_key=sign_key,
                            profile=profile, lock=lock, record_file=record_file)
    from stackctl.usecases import publish_built

    done = publish_built(profile, lock=lock, record_dir=record_dir, record=record_file, repository=repository,
                         sign_key=sign_key, command=invoked())
    below, pub, record = done.below, done.publication, done.record

    def human() -> None:
        if below is not None:
            console.print(f"published {below.tag} (the stack image)\n  digest   {below.digest}", markup=False)
        console.print(f"published {pub.tag}\n  digest   {pub.digest}" + (" (reproducible)" if pub.reproducible else "")
                      # two ids, named apart: the engine's id of the build (the manifest digest on a containerd
                      # store) is not the config digest a pull of the published image gives (`inspect`'s)
                      + f"\n  config   {pub.config_digest or '-'} (what a pull of the digest gives)"
                      + f"\n  built as {pub.image_id} (the build's id in its engine)"
                      + f"\n  revision {pub.revision}", markup=False)
        # what `stackctl verify` (and a pull that must not move with the tag) takes, ready to copy
        console.print(f"  ref      {pub.pinned_ref}", markup=False)
        if pub.sbom:
            console.print(f"  sbom     {pub.sbom}\n  provenance {pub.provenance_ref}", markup=False)
            signed = f"by key {pub.signed_by[:16]}" if pub.signed_by else "no (unsigned envelopes)"
            console.print(f"  signed   {signed}", markup=False)
        if pub.layers_pushed is not None:
            from stackctl.base import human_size

            console.print(f"  layers   {pub.layers_pushed} sent ({human_size(pub.pushed_bytes or 0)}), "
                          f"{pub.layers_present} already there; from the layout {pub.layout}", markup=False)
        for line in pub.verified:
            console.print(f"  checked  {line}", markup=False)
        console.print(f"  record   {record}", markup=False)
        console.print(pub.pinned_ref, markup=False)  # the last line: what `stackctl verify` takes

    emit(pub if below is None else {**asdict(pub), "stack_image": below}, as_json, human)


@app.command()
def inspect(
    ref: Annotated[str, typer.Argument(metavar="REF", help="host[:port]/name[:tag|@digest], or a local image.")],
    as_json: JsonOpt = False,
) -> None:
    """Show an image's labels and installed pins.

    Read from the registry without pulling layers when REF names a registry host, else from the engine.
    """
    from stackctl.review import inspect_image

    view = inspect_image(ref)
    where, digest, image_id, labels, installed = view.source, view.digest, view.image_id, view.labels, view.installed
    shown = view.other_labels

    def human() -> None:
        def rows(pairs: dict[str, str]) -> list[tuple[str, str]]:
            return sorted(pairs.items())

        # from a registry, the id is the config digest; in an engine, the engine's own id (on a containerd
        # store the manifest digest): said as what it is, never "image id" for both
        said = (f"  config   {image_id} (what a pull of the digest gives)" if where == "registry" else
                f"  engine id {image_id}")
        console.print(f"{ref}  ({where})\n  digest   {digest or '-'}\n{said}", markup=False)
        console.print(table("labels", ["label", "value"], rows(shown)))
        if installed:
            console.print(table("installed", ["package", "version"], rows(installed)))
        extra = view.attached
        if extra is not None:
            console.print(f"  sbom       {extra.sbom_tag or '(none beside the image)'}"
                          + (f": {len(extra.sbom_components)} components" if extra.sbom_tag else "")
                          + f"\n  provenance {extra.provenance_tag or '(none beside the image)'}"
                          + (f": {extra.predicate}, {len(extra.materials)} materials" if extra.provenance_tag
                             else ""), markup=False)

    emit({"ref": ref, "source": where, "digest": digest, "image_id": image_id, "labels": labels,
          "installed": installed, "attached": view.attached}, as_json, human)
