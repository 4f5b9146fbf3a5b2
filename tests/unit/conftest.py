"""Unit tests are pure: no process, no socket, no compiler. A test that needs one belongs in tests/loopback
(local servers, gcc, interpreters, git) or tests/services (the Docker engine and the registry)."""

from __future__ import annotations

import socket
import subprocess

import pytest


@pytest.fixture(autouse=True)
def _pure(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a unit test started a process or opened a connection: move it to tests/loopback")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    # pip's default index is asked of pip, a process (tests/loopback/test_resolve_faults.py asks it): here a
    # stand-in answer, so a command over a `from_pip` index with nothing configured stays pure.
    import stackctl.index.pipconf

    monkeypatch.setattr(stackctl.index.pipconf, "pip_default_index",
                        lambda keep_in=None: "https://pip-default.invalid/simple/")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "bind", refuse)
