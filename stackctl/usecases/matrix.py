"""`stackctl build --all`: every cell (stack x target) built here, on DOCKER_HOST's engine, or, with `--cluster`,
each cell a task on a Ray cluster's build node (one that declares `stackctl-engine`), built with that node's own
engine and pushed by digest to the registry.

What travels to a node is the cell prepared here (the profile as loaded, its lock, the rendered gate and
Dockerfile: kilobytes) and the options; never a wheel (the node fetches each from the lock's URL into its own
cache, and the build checks every sha256 as a local build does), never a credential (the node uses its own
docker and pip configuration; index URLs travel without user info), never a key. The node pushes the image, its
SBOM and its provenance by digest and moves no tag; it returns its build record and its publication, which go
into RECORD_DIR here, where `publish --all` finishes them (checks the digest in the registry, signs, moves the
tag). A node that dies mid-build: the cell runs again on another node (`BUILD_RETRIES`), and the record keeps
every attempt.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackctl.errors import CheckFailed, InputError, ServiceError
from stackctl.image.order import BuildOrder

if TYPE_CHECKING:
    from stackctl.cluster import ClusterAddress, TaskOutcome
    from stackctl.image.matrix import CellInput, CellProgress, CellResult, Event, Matrix
    from stackctl.resolve.lock import Lock

HERE = "default"  # the engine of a build --all without a cluster: DOCKER_HOST's
NODE = "node"  # the engine of a cluster node, on that node
BUILD_RETRIES = 2  # how often a cell whose node died runs again on another node


@dataclass(frozen=True)
class AllBuild:
    """`build --all`: the matrix built, and the cluster it was built on (None: here)."""

    matrix: Matrix
    cluster: str | None = None

    def failure(self) -> CheckFailed | ServiceError | None:
        """Every cell that failed, in one error: an engine's, a node's or a registry's failure (exit 3) when the
        matrix's exit code says one was, else a failed check (exit 1)."""
        failed = [c for c in self.matrix.cells if c.exit_code]
        if not failed:
            return None
        what = "; ".join(f"{c.stack} {c.target} on {c.host or c.engine or 'no engine'}: {c.result}" for c in failed)
        message = f"{len(failed)} of {len(self.matrix.cells)} cells failed: {what}"
        return ServiceError(message) if self.matrix.exit_code == 3 else CheckFailed(message)


def build_all(order: BuildOrder, env: Mapping[str, str], on_event: Event,
              progress: CellProgress | None = None) -> AllBuild:
    """`build --all` as one call: the cells prepared (bad input fails before any engine or node is asked), then
    built on DOCKER_HOST's engine with the builder chosen as for a single build (a BuildKit engine bakes them),
    or on the cluster the order names."""
    from stackctl.cluster import cluster_address
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.context import check_wheelhouse_arg
    from stackctl.image.matrix import MatrixRequest, build_matrix, matrix_cells
    from stackctl.usecases.build import chosen_builder, with_builder

    check_wheelhouse_arg(order.wheelhouse, order.fetch)
    builder = chosen_builder(order.builder, env)
    address = cluster_address(order.cluster, env)
    cells = matrix_cells(order, env)
    if address is not None:
        return _on_cluster(order, address, cells, builder, on_event)
    docker = DockerEngine()
    engine = with_builder(docker, builder, say=lambda line: on_event(HERE, "engine", line))
    on_event(HERE, "engine", f"builder: {engine.builder}")
    req = MatrixRequest(cells, docker.machine(), docker.address, order)
    return AllBuild(build_matrix(req, HERE, engine, on_event, progress))


@dataclass(frozen=True)
class CellJob:
    """One cell as it travels to a node: prepared here, with its lock's text and the order's options."""

    cell: CellInput
    lock_text: str
    order: BuildOrder
    builder: str  # chosen_builder's answer


@dataclass(frozen=True)
class CellDone:
    cell: CellResult
    record: str | None  # the build record as the node wrote it (JSON)
    published: Mapping[str, Any] | None  # the node's publication by digest


def node_dir() -> Path:
    """Where a node keeps its wheels between builds and builds each cell in a scratch directory."""
    from stackctl.index.cache import default_cache_dir

    return default_cache_dir().parent / "node"


def drop_stale_wheels(cache: Path, lock: Lock) -> None:
    """The node's wheel cache is shared by every stack it builds and holds a wheel by its file name: a file there
    that is not this lock's bytes (another index's build of that name, a lying mirror) goes, and is fetched again
    from the lock's URL, rather than failing the build's hash check."""
    from stackctl.base.files import sha256_file

    files = [f for p in lock.pins for f in p.files] + [c.file for c in lock.closure if c.file is not None]
    for wheel in files:
        path = cache / wheel.filename
        if path.is_file() and sha256_file(path) != wheel.sha256:
            path.unlink(missing_ok=True)


def cell_on_node(job: CellJob) -> CellDone:
    """On a build node: the cell built with the engine of this node's environment (DOCKER_HOST, else the
    default socket), its wheels fetched from the lock's URLs into the node's cache, then pushed by digest with
    its SBOM and provenance, no tag moved. The scratch (context, layout) goes when the task ends."""
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.matrix import MatrixRequest, build_matrix
    from stackctl.usecases.build import with_builder
    from stackctl.usecases.publish import publish_image

    prep = job.cell.prepared
    base = node_dir()
    (base / "wheels").mkdir(parents=True, exist_ok=True)
    drop_stale_wheels(base / "wheels", prep.lock)
    work = Path(tempfile.mkdtemp(prefix=f"{prep.stack.name}-{prep.target}-", dir=base))
    try:
        lock = work / job.cell.lock.name
        lock.write_text(job.lock_text, encoding="utf-8")
        order = replace(job.order, record_dir=work, wheelhouse=base / "wheels", fetch=True, cluster=None)
        cell = replace(job.cell, lock=lock, record_dir=work, context=None)
        docker = DockerEngine()
        engine = with_builder(docker, job.builder)  # the builder it runs is in the build record
        req = MatrixRequest((cell,), docker.machine(), docker.address, order)
        (outcome,) = build_matrix(req, NODE, engine, lambda _e, _c, _w: None).outcomes
        if outcome.built is None:
            return CellDone(outcome.cell, None, None)
        record = outcome.built.record_path
        pub = publish_image(prep.stack, lock, work / "publications.jsonl", order.repository, build_record=record,
                            move_tag=False)
        return CellDone(replace(outcome.cell, digest=pub.digest), record.read_text(encoding="utf-8"),
                        dataclasses.asdict(pub))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _for_the_wire(order: BuildOrder) -> BuildOrder:
    """The order as it travels: nothing of this machine's (its wheelhouse, its record directory) and no user
    info in an index URL (a node uses its own credentials)."""
    from stackctl.base.urls import strip_userinfo

    return replace(order, wheelhouse=None, fetch=True, context=None,
                   overrides={k: strip_userinfo(v) for k, v in order.overrides.items()})


def _check_cluster_cells(order: BuildOrder, cells: tuple[CellInput, ...]) -> None:
    from stackctl.base.imageref import names_registry
    from stackctl.image.labels import image_ref

    if order.wheelhouse is not None:
        raise InputError("--wheelhouse: a cluster's nodes fetch each wheel from the lock's URL into their own "
                         "cache; a wheelhouse stays on this machine", hint="leave --wheelhouse out with --cluster")
    for c in cells:
        stack = c.prepared.stack
        if stack.app is not None:
            raise InputError(f"{stack.name}: [image.app] builds the project's own Dockerfile and files, which a "
                             "cluster build does not send to its nodes", hint="build it without --cluster")
        repo = image_ref(stack, order.repository).repository
        if not names_registry(repo):
            raise InputError(f"{stack.name}: {repo} names no registry; a cluster's nodes push each image to it by "
                             "digest", hint="pass --repository HOST[:PORT]/NAME")


def _on_cluster(order: BuildOrder, address: ClusterAddress, cells: tuple[CellInput, ...], builder: str,
                on_event: Event) -> AllBuild:
    from stackctl.cluster import ENGINE_RESOURCE, Task, connect
    from stackctl.image.matrix import Matrix, MatrixRequest, Outcome, check_tags, write_matrix

    _check_cluster_cells(order, cells)
    check_tags(MatrixRequest(cells, "", order=order))
    wire = _for_the_wire(order)
    tasks = [Task(f"{c.prepared.stack.name} {c.prepared.target}", cell_on_node,
                  (CellJob(c, c.lock.read_text(encoding="utf-8"), wire, builder),),
                  resources={ENGINE_RESOURCE: 1}, retries=BUILD_RETRIES) for c in cells]
    by_key = {t.key: c for t, c in zip(tasks, cells, strict=True)}
    done: dict[str, CellResult] = {}

    def keep(o: TaskOutcome) -> None:  # each as it finishes: a Ctrl-C keeps what finished
        done[o.key] = _cell_result(o, by_key[o.key], order)
        write_matrix(order.record_dir, [done[t.key] for t in tasks if t.key in done])

    with connect(address) as cluster:
        if not any(n.engines for n in cluster.offers()):
            raise ServiceError(f"cluster {address}: no node declares the {ENGINE_RESOURCE} resource",
                               hint=f"start build nodes with `ray start --address ... --resources "
                               f"'{{\"{ENGINE_RESOURCE}\": 1}}'` (docs/cluster.md)")
        on_event("cluster", str(address), f"Ray {cluster.ray_version}, {len(tasks)} cells")
        cluster.run(tasks, on_event, on_done=keep)
    results = [done[t.key] for t in tasks]
    record = write_matrix(order.record_dir, results)
    return AllBuild(Matrix(tuple(Outcome(c) for c in results), record), address.text)


def _cell_result(o: TaskOutcome, cell: CellInput, order: BuildOrder) -> CellResult:
    """A cell's task as the matrix records it here: the node's result with where it ran, and the node's build
    record written to the cell's RECORD_DIR (for `report` and `publish --all`)."""
    from stackctl.base.files import write_atomic
    from stackctl.image.labels import image_ref
    from stackctl.image.matrix import CellResult

    prep = cell.prepared
    attempts = tuple({k: str(v) for k, v in dataclasses.asdict(a).items()} for a in o.attempts)
    ran = CellResult(prep.stack.name, prep.target, None, "not built", str(image_ref(prep.stack, order.repository)),
                     seconds=round(o.seconds, 1), lock=str(cell.lock.absolute()),
                     profile=str(Path(prep.stack.sources[0]).absolute()) if prep.stack.sources else None,
                     node=o.placed.node if o.placed else None, host=o.placed.host if o.placed else None,
                     attempts=attempts,
                     versions={"stackctl": o.placed.stackctl, "ray": o.placed.ray} if o.placed else None)
    if o.error is not None or o.value is None:
        error = o.error or ServiceError(f"{o.key}: no result")
        return replace(ran, result="failed" if error.exit_code != 3 else "engine failed", error=str(error),
                       exit_code=error.exit_code)
    got: CellDone = o.value
    record = None
    if got.record is not None:
        import json

        path = cell.record_dir / f"{prep.stack.name}.build.json"
        # the node's record, saying where the image is: its layout stayed on the node, its digest in the registry
        built = {**json.loads(got.record), "built_on": {"node": ran.node, "host": ran.host,
                                                        "digest": got.cell.digest}}
        write_atomic(path, json.dumps(built, indent=2, sort_keys=True) + "\n")
        record = str(path)
    engine = f"{o.placed.host}/{o.placed.node[:8]}" if o.placed else got.cell.engine
    return replace(got.cell, engine=engine, record=record, published=got.published, seconds=ran.seconds,
                   lock=ran.lock, profile=ran.profile, node=ran.node, host=ran.host, attempts=ran.attempts,
                   versions=ran.versions)
