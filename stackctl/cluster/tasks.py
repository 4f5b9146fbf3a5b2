"""Tasks on a Ray cluster: each a module-level function of small values, run on a node that offers what the task
asks for (GPUs, the `stackctl-engine` resource), with one line when it starts and one when it ends, naming the
node; a node that dies runs the task again elsewhere (bounded retries), and every attempt is kept.

A task's function runs on the node with the node's own environment (its DOCKER_HOST, its docker and pip
configuration): nothing but the arguments travels, and they are values (profiles, locks, plans: kilobytes).
An error a task raises for the user (a `StackctlError`) comes back as the task's error, with its words and
exit code; anything else that kills the task is the cluster's failure (exit 3).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stackctl.base.times import now_iso
from stackctl.errors import CheckFailed, InputError, ServiceError, StackctlError

ENGINE_RESOURCE = "stackctl-engine"  # a node that builds declares it: how many builds it takes at once
CANCEL_GRACE = 20.0  # seconds cancelled tasks get to remove their containers before they are killed


@dataclass(frozen=True)
class Task:
    key: str  # what the progress lines and the records call it: "s1 cp311-linux_x86_64", "bench[bs=4]"
    fn: Callable[..., Any]  # a module-level function, run on the node
    args: tuple[Any, ...]
    gpus: int = 0
    resources: Mapping[str, float] = field(default_factory=dict)
    retries: int = 0  # how often it runs again on another node when its node or worker dies


@dataclass(frozen=True)
class Placed:
    """Where a task ran, as the node itself said: its Ray node id and host, the cards Ray gave it, and the
    versions that ran it."""

    node: str
    host: str
    devices: tuple[str, ...]
    stackctl: str
    ray: str


@dataclass(frozen=True)
class Attempt:
    node: str
    host: str
    started: str
    outcome: str  # done | failed | lost (its node or worker died)


@dataclass(frozen=True)
class TaskOutcome:
    key: str
    value: Any
    error: StackctlError | None
    placed: Placed | None
    attempts: tuple[Attempt, ...]
    seconds: float


@dataclass(frozen=True)
class NodeOffer:
    node: str
    host: str
    gpus: int
    engines: int  # the stackctl-engine resource it declares


Event = Callable[[str, str, str], None]  # (where: the node's host and short id, task key, what happened)


def node_name(node: str, host: str) -> str:
    return f"{host}/{node[:8]}"


# what a node's error is here: a user's input, a failed check or a service (its own subclasses need not unpickle)
_KINDS: dict[str, type[StackctlError]] = {k.__name__: k for k in (InputError, CheckFailed, ServiceError)}


def _error_of(exc: StackctlError) -> tuple[str, str, int, str | None]:
    kind = next((k.__name__ for k in type(exc).__mro__ if k.__name__ in _KINDS), StackctlError.__name__)
    return kind, str(exc), exc.exit_code, exc.hint


def _rebuilt(kind: str, message: str, code: int, hint: str | None) -> StackctlError:
    """The node's error as one of stackctl's here: its kind, its words, its hint and its exit code."""
    error = _KINDS.get(kind, StackctlError)(message, hint=hint)
    error.exit_code = code
    return error


def _in_words(exc: BaseException) -> str:
    """One line for a task the cluster could not run: the exception a task raised (a bug of stackctl's, said as
    such), or Ray's own words for a worker or node that died, without its terminal colours."""
    import re

    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"[:300]
    lines = [ln for ln in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines() if ln.strip()]
    return (lines[-1] if lines else type(exc).__name__).strip()[:300]


def gpu_uuids(ids: Sequence[str]) -> tuple[str, ...]:
    """The cards Ray gave this worker, by UUID where the node's nvidia-smi names them, else by Ray's ids."""
    import shutil
    import subprocess

    tool = shutil.which("nvidia-smi")
    if tool is None or not ids:
        return tuple(ids)
    try:
        out = subprocess.run([tool, "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return tuple(ids)
    by_index = {a.strip(): b.strip() for a, _, b in (ln.partition(",") for ln in out.splitlines()) if b}
    return tuple(by_index.get(i, i) for i in ids)


def on_node(board: Any, key: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any, Placed]:
    """The wrapper every task runs in on its node: say where it started, run it, return its value or its error."""
    import ray

    import stackctl

    ctx = ray.get_runtime_context()
    node, host = ctx.get_node_id(), socket.gethostname()
    placed = Placed(node, host, gpu_uuids([str(i) for i in ray.get_gpu_ids()]),
                    getattr(stackctl, "__version__", ""), ray.__version__)
    board.started.remote(key, node, host, now_iso())
    try:
        return "ok", fn(*args), placed
    except StackctlError as exc:
        return "error", _error_of(exc), placed


class _Board:
    """Where the tasks say they started: the caller drains it while it waits for them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def started(self, key: str, node: str, host: str, when: str) -> None:
        self.events.append((key, node, host, when))

    def drain(self) -> list[tuple[str, str, str, str]]:
        out, self.events = self.events, []
        return out


class RayCluster:
    """A connected cluster (`address.connect`): what its nodes offer, and tasks run on them."""

    def __init__(self, address: str, ray_version: str, restore: Callable[[], None] = lambda: None) -> None:
        self.address, self.ray_version, self._restore = address, ray_version, restore

    def close(self) -> None:
        import ray

        try:
            ray.shutdown()
        finally:
            self._restore()

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def offers(self) -> tuple[NodeOffer, ...]:
        import ray

        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        return tuple(NodeOffer(n["NodeID"], str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress")),
                               int(n["Resources"].get("GPU", 0)), int(n["Resources"].get(ENGINE_RESOURCE, 0)))
                     for n in nodes if n.get("Alive"))

    def run(self, tasks: Sequence[Task], on_event: Event,
            on_done: Callable[[TaskOutcome], None] | None = None) -> list[TaskOutcome]:
        """Every task run, in parallel as far as the nodes' resources allow; outcomes in the tasks' order. On
        Ctrl-C the tasks not finished are cancelled (their own clean-up runs first) and KeyboardInterrupt goes
        on: what finished was handed to `on_done` already."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # the board lives on the driver's own node: a build node that dies must not take the start lines with it
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        board: Any = ray.remote(num_cpus=0, max_restarts=-1)(_Board).options(scheduling_strategy=here).remote()
        wrapper = ray.remote(on_node)
        by_ref: dict[Any, Task] = {}
        for t in tasks:
            # a task that asks for cards or an engine slot is bounded by those; any other takes one CPU
            cpus = 0 if (t.gpus or t.resources) else 1
            ref = wrapper.options(num_cpus=cpus, num_gpus=t.gpus, resources=dict(t.resources),
                                  max_retries=t.retries, retry_exceptions=False,
                                  name=f"stackctl {t.key}"[:120]).remote(board, t.key, t.fn, t.args)
            by_ref[ref] = t
        attempts: dict[str, list[Attempt]] = {t.key: [] for t in tasks}
        began = {t.key: time.monotonic() for t in tasks}
        done: dict[str, TaskOutcome] = {}

        def drain() -> None:
            try:
                events = ray.get(board.drain.remote(), timeout=30)
            except Exception:  # the board's node went away: start lines are lost, the tasks are not
                return
            for key, node, host, when in events:
                if attempts[key]:
                    on_event(node_name(attempts[key][-1].node, attempts[key][-1].host), key,
                             "lost: its node or worker died; running it again")
                attempts[key].append(Attempt(node, host, when, "running"))
                on_event(node_name(node, host), key, "started" + (f" (attempt {len(attempts[key])})"
                                                                  if len(attempts[key]) > 1 else ""))

        pending = list(by_ref)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=0.5)
                drain()
                for ref in ready:
                    outcome = self._outcome(ref, by_ref[ref], attempts, began)
                    done[outcome.key] = outcome
                    where = node_name(outcome.placed.node, outcome.placed.host) if outcome.placed else "cluster"
                    said = f"failed: {outcome.error}" if outcome.error else "done"
                    on_event(where, outcome.key, f"{said} in {outcome.seconds:.1f} s")
                    if on_done is not None:
                        on_done(outcome)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref)  # KeyboardInterrupt in the task: its containers and builds are removed
            ray.wait(pending, num_returns=len(pending), timeout=CANCEL_GRACE)
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return [done[t.key] for t in tasks]

    @staticmethod
    def _outcome(ref: Any, task: Task, attempts: dict[str, list[Attempt]], began: dict[str, float]) -> TaskOutcome:
        import ray

        seconds = time.monotonic() - began[task.key]
        tried = attempts[task.key]
        lost = tuple(Attempt(a.node, a.host, a.started, "lost") for a in tried[:-1])
        try:
            status, value, placed = ray.get(ref)
        except ray.exceptions.RayError as exc:  # the worker or node died past its retries, or the task broke
            words = _in_words(exc)
            last = (Attempt(tried[-1].node, tried[-1].host, tried[-1].started, "lost"),) if tried else ()
            return TaskOutcome(task.key, None, ServiceError(f"{task.key}: the cluster could not run it: {words}"),
                               None, lost + last, seconds)
        mine = tried[-1] if tried and tried[-1].node == placed.node else Attempt(placed.node, placed.host, "", "")
        final = Attempt(mine.node, mine.host, mine.started, "done" if status == "ok" else "failed")
        if status == "ok":
            return TaskOutcome(task.key, value, None, placed, (*lost, final), seconds)
        return TaskOutcome(task.key, None, _rebuilt(*value), placed, (*lost, final), seconds)
