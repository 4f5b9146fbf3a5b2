"""Run blocking calls (HTTP requests, downloads) on a few threads, results in input order.

Daemon threads, not a ThreadPoolExecutor: an executor joins its workers at exit, so Ctrl-C during a
request to a hanging index would wait out the timeout. Here the main thread waits on a queue, which
an interrupt breaks at once.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

from stackctl.base.progress import Progress
from stackctl.errors import ServiceError, StackctlError

T = TypeVar("T")
R = TypeVar("R")

_live: set[threading.Thread] = set()
_live_lock = threading.Lock()


def workers_alive() -> bool:
    """True while a worker is still inside a call: only after an interrupt or a bug left it behind."""
    with _live_lock:
        return any(t.is_alive() for t in _live)


def parallel(jobs: int, fn: Callable[[T], R], items: Iterable[T], progress: Progress | None = None,
             label: str = "") -> list[R | StackctlError]:
    """`fn` over `items` on up to `jobs` threads; a StackctlError becomes that item's result, and so does
    any other exception, as a ServiceError naming it (a library failing on one thread must end the run with
    an `error:` line, not a traceback); an interrupt is raised here."""
    todo = list(items)
    results: list[R | StackctlError | None] = [None] * len(todo)
    pending: queue.SimpleQueue[int] = queue.SimpleQueue()
    finished: queue.SimpleQueue[tuple[int, R | BaseException]] = queue.SimpleQueue()
    for i in range(len(todo)):
        pending.put(i)

    def worker() -> None:
        try:
            while True:
                try:
                    i = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    finished.put((i, fn(todo[i])))
                except BaseException as exc:  # handed to the main thread, which decides
                    finished.put((i, exc))
        finally:
            with _live_lock:
                _live.discard(threading.current_thread())

    for _ in range(max(1, min(jobs, len(todo)))):
        t = threading.Thread(target=worker, daemon=True)
        with _live_lock:
            _live.add(t)
        t.start()
    for n in range(1, len(todo) + 1):
        i, r = finished.get()
        if isinstance(r, BaseException) and not isinstance(r, StackctlError):
            if not isinstance(r, Exception):
                raise r
            wrapped = ServiceError(f"{label or 'a worker'} failed unexpectedly: {type(r).__name__}: {r}",
                                   hint="a fault inside stackctl or a library it uses; --verbose shows where")
            wrapped.__cause__ = r
            r = wrapped
        results[i] = r
        if progress:
            progress(label, n, len(todo))
    return results  # type: ignore[return-value]


_children: set[subprocess.Popen[str]] = set()
_children_lock = threading.Lock()


def run_child(cmd: Sequence[str], *, input: str | None = None, env: Mapping[str, str] | None = None,
              timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(cmd, capture_output=True, text=True)` for a long-running child (uv, the gate's
    interpreter), from any thread, that `end_children` can end.

    The child leads its own process group, so ending it ends what it started too; a timeout or an
    exception in the caller ends it at once.
    """
    proc = _started(cmd, input is not None, env)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except BaseException:
        _kill(proc)
        proc.communicate()
        raise
    finally:
        with _children_lock:
            _children.discard(proc)
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


@contextlib.contextmanager
def streaming_child(cmd: Sequence[str], env: Mapping[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    """A long-running child whose stderr the caller reads as it comes (buildx's progress), from any thread, that
    `end_children` can end: no stdin, stdout discarded. Leaving the block early (an exception, an interrupt)
    ends it at once."""
    proc = _started(cmd, False, env, stdout=subprocess.DEVNULL)
    try:
        yield proc
    except BaseException:
        _kill(proc)
        proc.wait()
        raise
    finally:
        with _children_lock:
            _children.discard(proc)


def _started(cmd: Sequence[str], stdin: bool, env: Mapping[str, str] | None,
             stdout: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """The child, already known to `end_children`. A Ctrl-C between the child's start and that would leave
    it running after stackctl is gone (a child runs the moment it is started, and Popen's own exit on an
    interrupt waits for it instead of ending it), so on the main thread, where Python runs signal handlers,
    an interrupt waits until the child is registered, then ends it."""
    deferred: list[int] = []
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: deferred.append(signum)) if main else None
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                stdout=stdout, stderr=subprocess.PIPE, text=True,
                                env=dict(env) if env is not None else None, start_new_session=True)
        with _children_lock:
            _children.add(proc)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
    if deferred:
        _kill(proc)
        proc.communicate()
        with _children_lock:
            _children.discard(proc)
        raise KeyboardInterrupt
    return proc


def _kill(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def end_children() -> int:
    """Kill every child `run_child` or `streaming_child` started that is still running (on Ctrl-C), and wait
    until each is gone, so nothing writes into what the interrupt then removes; return how many."""
    with _children_lock:
        alive = [p for p in _children if p.poll() is None]
    for proc in alive:
        _kill(proc)
    for proc in alive:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    return len(alive)
