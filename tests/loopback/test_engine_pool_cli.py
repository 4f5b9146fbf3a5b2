"""`build --all` and `publish --all` refusing bad input and an empty pool before any engine builds."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import Cli
from tests.support.imagestack import make_stack_repo


def test_a_pool_where_no_engine_answers_names_each_and_exits_3(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "s1", "127.0.0.1:9/stackctl-test/pool")
    r = cli("build", "--all", "--engine", "x=unix:///nonexistent/x.sock", "--engine", "y=unix:///nonexistent/y.sock",
            "--wheelhouse", str(repo.wheelhouse), "--json", cwd=repo.root)
    assert r.code == 3 and json.loads(r.out)["exit_code"] == 3  # --json: the error as the one document
    assert "engine x (unix:///nonexistent/x.sock) left out" in r.err and "engine y (" in r.err
    assert "error: no engine of the pool answers: x (unix:///nonexistent/x.sock); y (" in r.err
    assert "Traceback" not in r.err


def test_bad_pool_input_is_one_line_and_exit_2(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "s1", "127.0.0.1:9/stackctl-test/pool")
    cases = [
        (("build", "--all", "--engine", "nourl"), "--engine 'nourl': give NAME=URL"),
        (("build", "--all", "--engine", "a=/var/run/docker.sock"), "is not an engine address"),
        (("build", "--all", "--engines", "missing.toml"), "missing.toml: cannot read the engine list"),
        (("build", "--all", "--target", "cp399-linux_x86_64"), "--target cp399-linux_x86_64: no named stack has it"),
        (("build", "--all", "nosuch"), "unknown stack 'nosuch'"),
        (("build", "s1", "--engine", "a=unix:///x"), "--engine, --engines and --cache-repository go with --all"),
        (("build", "s1", "s1"), "give one PROFILE"),
        (("publish", "--all"), "matrix.json: no matrix record"),
        (("publish", "--all", "s1"), "publish --all takes the cells of RECORD_DIR/matrix.json"),
    ]
    for args, message in cases:
        r = cli(*args, cwd=repo.root)
        assert r.code == 2, (args, r.err)
        errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and message in errors[0], (args, r.err)
