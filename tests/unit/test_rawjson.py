"""The fold of buildx's `--progress=rawjson` stream, over real captures (tests/data/rawjson/: a passing build of
the image test stack on Docker 26.1 with buildx 0.13.1, and a step that fails)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from stackctl.image.buildlog import BuildFailed
from stackctl.image.rawjson import documents, parse_rawjson

DATA = Path(__file__).parent.parent / "data" / "rawjson"


def test_a_passing_build_gives_its_steps_and_the_gates_lines_in_order() -> None:
    seen: list[tuple[int, int, str]] = []
    result = parse_rawjson((DATA / "build-pass-d26.txt").read_text(), "sha256:x", True,
                           lambda n, of, what: seen.append((n, of, what)))
    assert result.image_id == "sha256:x"
    assert result.steps == 18 and result.cached_steps == 0
    assert [n for n, _, _ in seen] == list(range(1, 19))
    # each step by its stage and first words: the gate's exec-form RUN as the command it runs
    assert seen[-1][2].startswith("stage-"), seen[-1]
    assert seen[-1][2].split(": ", 1)[1].startswith("RUN python -B /opt/stackctl/gate/gate.py"), seen[-1]
    assert result.gate_lines[0] == "gate e2e: python 3.11.2"
    assert result.gate_lines[1] == "PASS import patcher version=1.0.0"
    assert result.gate_lines[-1] == "gate ok: 11 passed, 0 failed"
    assert not result.gate_cached


def test_a_failing_step_names_buildxs_error_and_shows_that_steps_own_lines() -> None:
    with pytest.raises(BuildFailed) as caught:
        parse_rawjson((DATA / "build-fail-step.txt").read_text(), "", False)
    assert str(caught.value).startswith('the build failed: failed to solve: process "/bin/sh -c echo hello')
    assert caught.value.lines == ("hello", "FAIL-ish")


def _doc(vertex: str, name: str, *, logs: tuple[str, ...] = (), error: str | None = None,
         cached: bool = False) -> str:
    v: dict[str, object] = {"digest": vertex, "name": name, "started": "t", "cached": cached}
    if error:
        v["error"] = error
    doc = {"vertexes": [v], "logs": [{"vertex": vertex, "stream": 1, "data": base64.b64encode(x.encode()).decode()}
                                     for x in logs]}
    return json.dumps(doc, indent=2) + "\n"


GATE = '[stage-1 2/2] RUN ["/opt/venv/bin/python", "gate.py"]'


def test_a_failing_step_carries_its_whole_output_not_only_the_last_lines_shown() -> None:
    """An installer says what went wrong well above its last words: the failure keeps every line of the step
    that failed (none of the steps beside it), for the build to write down."""
    said = (*(f"Processing wheel {n}\n" for n in range(40)), "ERROR: the reason, said early\n",
            *(f"  cleanup {n}\n" for n in range(20)))
    step = "[install-top 2/2] RUN pip install --no-index -r /req/top.txt"
    text = (_doc("sha256:a", "[install-core 2/2] RUN pip install core", logs=("core ok\n",))
            + _doc("sha256:b", step, logs=said, error="process did not complete successfully: exit code: 1")
            + "ERROR: failed to solve: process did not complete successfully: exit code: 1\n")
    with pytest.raises(BuildFailed) as caught:
        parse_rawjson(text, "", False)
    assert caught.value.step == step
    assert caught.value.output == tuple(x.rstrip("\n") for x in said)
    assert len(caught.value.lines) == 15 and caught.value.lines == caught.value.output[-15:]
    assert "core ok" in caught.value.log and "core ok" not in caught.value.output


def test_the_classic_builders_failing_step_carries_its_whole_output() -> None:
    from stackctl.image.buildlog import parse_build_stream

    events = [{"stream": "Step 1/2 : FROM base\n"}, {"stream": " ---> abc\n"},
              {"stream": "Step 2/2 : RUN pip install top\n"}, *({"stream": f"line {n}\n"} for n in range(30)),
              {"error": "The command returned a non-zero code: 1"}]
    with pytest.raises(BuildFailed) as caught:
        parse_build_stream(iter(events))
    assert caught.value.step == "Step 2/2 : RUN pip install top"
    assert caught.value.output == tuple(f"line {n}" for n in range(30))


def test_a_failing_gate_fails_with_its_fail_lines_not_the_step_error() -> None:
    result = json.dumps({"format": 1, "passed": 1, "failed": 1,
                         "lines": ["PASS import a version=1", "FAIL import b version=1 expected=2"]})
    text = (_doc("sha256:a", "[stage-1 1/2] FROM base", cached=True)
            + _doc("sha256:g", GATE, logs=("gate s: python 3.11\nPASS import a version=1\n",
                                          "FAIL import b version=1 expected=2\n",
                                          f"STACKCTL-GATE-RESULT {result}\n", "gate FAILED: 1 passed, 1 failed\n"),
                   error="process did not complete successfully: exit code: 1")
            + "ERROR: failed to solve: process did not complete successfully: exit code: 1\n")
    with pytest.raises(BuildFailed) as caught:
        parse_rawjson(text, "", False)
    assert str(caught.value) == "the gate failed: 1 check did not pass"
    assert caught.value.lines == ("FAIL import b version=1 expected=2",)


def test_a_gate_step_from_the_cache_prints_nothing_and_counts_as_cached() -> None:
    text = _doc("sha256:a", "[stage-1 1/2] FROM base", cached=True) + _doc("sha256:g", GATE, cached=True)
    result = parse_rawjson(text, "sha256:x", True)
    assert result.gate_cached and result.cached_steps == 2 == result.steps and result.ran == ()
    # a rebuild names the step that ran, not only how many did not
    text = _doc("sha256:a", "[stage-1 1/2] FROM base", cached=True) + _doc("sha256:g", GATE, cached=False)
    assert parse_rawjson(text, "sha256:x", True).ran == ("stage-1: RUN python gate.py",)


def test_a_line_split_across_log_records_is_one_line_and_escapes_go() -> None:
    text = _doc("sha256:g", GATE, logs=("PASS imp", "ort a version=1\x1b[0m\r\n"))
    docs, rest = documents(text + "trailing words\n")
    assert len(docs) == 1 and rest == "trailing words\n"
    result = parse_rawjson(text, "sha256:x", True)
    assert "PASS import a version=1" in result.log


def test_a_build_that_names_no_image_is_the_services_fault() -> None:
    from stackctl.errors import ServiceError

    with pytest.raises(ServiceError):
        parse_rawjson(_doc("sha256:a", "[1/1] FROM base"), "", True)


def test_after_the_last_step_each_exporter_and_its_parts_is_a_timed_phase() -> None:
    """What a CI log shows between the gate's step and the result: each exporter vertex and each of its statuses
    as it starts, said as a phase (not numbered on as step 3/3, 4/4, ... which never says what remains), each
    line saying how long the one before it took."""
    from stackctl.base.progress import PHASE, Phases
    from stackctl.image.rawjson import Folder

    clock = iter([0.0, 1.0, 9.0, 30.5, 31.0, 40.0, 40.25])
    lines: list[tuple[int, int, str]] = []
    phases = Phases(lambda n, of, what: lines.append((n, of, what)), clock=lambda: next(clock))
    folder = Folder(phases, phases.phase)
    t = "2026-12-04T00:00:00Z"
    folder.feed({"vertexes": [{"digest": "a", "name": "[internal] load build context", "started": t},
                              {"digest": "b", "name": "[1/2] FROM base", "started": t},
                              {"digest": "c", "name": "[2/2] RUN gate", "started": t}]})
    digest = "sha256:" + "e" * 64
    folder.feed({"vertexes": [{"digest": "x", "name": "exporting to oci image format", "started": t}],
                 "statuses": [{"id": "exporting layers", "vertex": "x", "started": t},
                              {"id": "exporting layers", "vertex": "x", "started": t, "completed": t},
                              {"id": f"exporting manifest {digest}", "vertex": "x", "started": t},
                              {"id": "unrelated", "vertex": "c", "started": t}]})
    phases.phase("the build record", "the record")
    phases.done()
    assert lines == [
        (1, 1, "FROM base"), (2, 2, "RUN gate"),
        (PHASE, 2, "exporting to oci image format (8.0 s since step 2 began)"),
        (PHASE, 2, "exporting layers (exporting to oci image format took 21.5 s)"),
        (PHASE, 2, "exporting manifest sha256:eeeeeeeeeeee (exporting layers took 0.5 s)"),
        (PHASE, 2, "the build record (exporting manifest sha256:eeeeeeeeeeee took 9.0 s)")]
    assert phases.took[-1] == ("the record", 0.25)
    assert Phases.over(phases) is phases  # one build, one sequence: the engine's phases and the build's own
