"""The worker pool: results in input order, errors as results, and no worker left once it returns."""

from __future__ import annotations

import threading
import time

import pytest

from stackctl.base.concurrency import parallel, workers_alive
from stackctl.errors import ServiceError


def test_results_in_order_and_no_worker_left() -> None:
    def slow_square(n: int) -> int:
        time.sleep(0.001 * (5 - n))
        if n == 3:
            raise ServiceError("index x: HTTP 503")
        return n * n

    out = parallel(4, slow_square, range(5))
    assert out[:3] == [0, 1, 4] and out[4] == 16
    assert isinstance(out[3], ServiceError)
    deadline = time.monotonic() + 5
    while workers_alive() and time.monotonic() < deadline:  # a worker may still be returning
        time.sleep(0.01)
    assert not workers_alive()


def test_a_worker_stuck_in_a_call_is_reported_alive() -> None:
    release = threading.Event()

    def stuck(n: int) -> int:
        if n == 0:
            raise KeyboardInterrupt  # Ctrl-C reaches the main thread; another worker is still in its call
        release.wait(10)
        return n

    with pytest.raises(KeyboardInterrupt):
        parallel(2, stuck, [0, 1])
    assert workers_alive()  # what the CLI checks before leaving without finalizing the interpreter
    release.set()
    deadline = time.monotonic() + 5
    while workers_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not workers_alive()


def test_an_unexpected_exception_in_a_worker_becomes_a_service_error() -> None:
    def fails(n: int) -> int:
        if n == 1:
            raise TypeError('can only concatenate str (not "NoneType") to str')
        return n

    out = parallel(2, fails, range(3), label="closure")
    assert out[0] == 0 and out[2] == 2
    err = out[1]
    assert isinstance(err, ServiceError) and err.exit_code == 3
    assert str(err).startswith("closure failed unexpectedly: TypeError: can only concatenate")
    assert isinstance(err.__cause__, TypeError)  # --verbose prints the chain

