"""The engine's build stream folded into a result: the gate's FAIL lines surface, not the whole log; an
engine that drops the stream is a service error, not a traceback."""

from __future__ import annotations

from typing import Any

import pytest

from stackctl.errors import ServiceError
from stackctl.image.buildlog import BuildFailed, parse_build_stream


def stream(*chunks: str, end: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [{"stream": c} for c in chunks] + ([end] if end else [])


def test_success_counts_steps_and_cache() -> None:
    steps: list[tuple[int, int, str]] = []
    result = parse_build_stream(iter(stream(
        "Step 1/3 : FROM base\n", " ---> 1a2b\n", "Step 2/3 : COPY x /x\n", " ---> Using cache\n",
        "Step 3/3 : RUN gate\n", "PASS import a ver", "sion=1\n", "gate ok: 1 passed, 0 failed\n",
        end={"aux": {"ID": "sha256:abc"}})), lambda n, of, what: steps.append((n, of, what)))
    assert result.image_id == "sha256:abc"
    assert (result.steps, result.cached_steps) == (3, 1)
    assert result.ran == ("FROM base", "RUN gate")  # "2 of 3 cached" names the steps that ran
    assert result.gate_lines == ("PASS import a version=1", "gate ok: 1 passed, 0 failed")
    assert steps == [(1, 3, "FROM base"), (2, 3, "COPY x /x"), (3, 3, "RUN gate")]
    assert result.gate_cached is False
    cached = parse_build_stream(iter(stream("Step 1/2 : FROM base\n", " ---> 1a2b\n", "Step 2/2 : RUN gate\n",
                                            " ---> Using cache\n", end={"aux": {"ID": "sha256:abc"}})))
    assert cached.gate_lines == () and cached.gate_cached is True and cached.ran == ("FROM base",)


def test_gate_failure_raises_with_only_the_fail_lines() -> None:
    with pytest.raises(BuildFailed) as info:
        parse_build_stream(iter(stream(
            "Step 9/9 : RUN gate\n", "PASS import a version=1\n", "FAIL import b version=2 expected=3\n",
            "gate FAILED: 1 passed, 1 failed\n",
            end={"error": "The command ... returned a non-zero code: 1",
                 "errorDetail": {"code": 1, "message": "The command ... returned a non-zero code: 1"}})))
    assert info.value.lines == ("FAIL import b version=2 expected=3",)
    assert str(info.value) == "the gate failed: 1 check did not pass"
    assert info.value.exit_code == 1


def test_other_step_failure_shows_the_tail_of_the_log() -> None:
    with pytest.raises(BuildFailed) as info:
        parse_build_stream(iter(stream("Step 4/9 : RUN pip install\n",
                                       "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES\n",
                                       end={"error": "returned a non-zero code: 1"})))
    assert "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES" in info.value.lines
    assert str(info.value) == "the build failed: returned a non-zero code: 1"


def test_no_image_id_is_a_service_error() -> None:
    with pytest.raises(ServiceError, match=r"^the engine finished the build without naming an image id$"):
        parse_build_stream(iter(stream("Step 1/1 : FROM base\n")))
    assert parse_build_stream(iter(stream("Successfully built 0123abcd\n"))).image_id == "0123abcd"




def result_line(*lines: str) -> str:
    import json

    failed = sum(1 for ln in lines if ln.startswith("FAIL "))
    doc = {"format": 1, "passed": len(lines) - failed, "failed": failed, "lines": list(lines)}
    return "STACKCTL-GATE-RESULT " + json.dumps(doc) + "\n"


def test_a_fail_after_an_escape_on_stderr_still_fails_the_build_with_its_line() -> None:
    # An import wrote a colour escape (and no newline) to stderr: the gate's next line arrives behind it.
    fail = "FAIL import b version=2 expected=3"
    with pytest.raises(BuildFailed) as info:
        parse_build_stream(iter(stream(
            "Step 9/9 : RUN gate\n", "PASS import a version=1\n", "\x1b[33mwarning: no GPU\x1b[0m",
            f"{fail}\n", result_line("PASS import a version=1", fail), "gate FAILED: 1 passed, 1 failed\n",
            end={"error": "The command returned a non-zero code: 1"})))
    assert info.value.lines == (fail,)
    assert str(info.value) == "the gate failed: 1 check did not pass"
    assert not any("\x1b" in line for line in info.value.log)


def test_escapes_and_carriage_returns_never_reach_the_log_or_the_gate_lines() -> None:
    ok = "PASS import torch version=2.11.0"
    result = parse_build_stream(iter(stream(
        "Step 1/1 : RUN gate\n", "\x1b[2K\rDownloading 50%\r\x1b[1m", f"{ok}\n", "\x1b]0;title\x07gate x: python 3\n",
        result_line(ok), "gate ok: 1 passed, 0 failed\n", end={"aux": {"ID": "sha256:abc"}})))
    assert result.gate_lines == ("gate x: python 3", ok, "gate ok: 1 passed, 0 failed")
    assert all("\x1b" not in line and "\r" not in line for line in result.log)


def test_printed_lines_that_disagree_with_the_result_fail_loudly() -> None:
    with pytest.raises(BuildFailed, match="disagree with its result"):
        parse_build_stream(iter(stream(
            "PASS import a version=1\n", "PASS import b version=2\n", result_line("PASS import a version=1"),
            "gate ok: 1 passed, 0 failed\n", end={"aux": {"ID": "sha256:abc"}})))
    # a result that says FAIL while the step succeeded is never a pass
    with pytest.raises(BuildFailed, match="yet the build step succeeded") as info:
        parse_build_stream(iter(stream(
            "FAIL import a: gone\n", result_line("FAIL import a: gone"), end={"aux": {"ID": "sha256:abc"}})))
    assert info.value.lines == ("FAIL import a: gone",)
    # FAIL lines and no result at all: the verdict is unknown, and that fails too
    with pytest.raises(BuildFailed, match="no result"):
        parse_build_stream(iter(stream("FAIL import a: gone\n", end={"aux": {"ID": "sha256:abc"}})))


def test_an_unreadable_result_line_is_a_service_error() -> None:
    with pytest.raises(ServiceError, match="result line is unreadable"):
        parse_build_stream(iter(stream("STACKCTL-GATE-RESULT {not json\n", end={"aux": {"ID": "sha256:abc"}})))
