"""`build --all` and `publish --all` fail as their worst cell did, and refuse a single publish's options: the exit
code a CI script branches on (1 a check failed, 2 bad input, 3 an engine or registry)."""

from __future__ import annotations

from pathlib import Path

from stackctl.errors import CheckFailed, Problems, ServiceError
from stackctl.image.matrix import CellResult, Matrix, Outcome
from stackctl.usecases.matrix import AllBuild
from stackctl.usecases.publish import PublishedCell, PublishedCells
from tests.support.cli import Cli


def _built(*cells: CellResult) -> AllBuild:
    return AllBuild(Matrix(tuple(Outcome(c) for c in cells), Path("build/matrix.json")))


def test_build_all_fails_as_its_worst_cell() -> None:
    ok = CellResult("s1", "cp311-linux_x86_64", "default", "built", "r:t1")
    gate = CellResult("s2", "cp311-linux_x86_64", "default", "gate failed", "r:t2", exit_code=1)
    engine = CellResult("s3", "cp311-linux_x86_64", None, "engine failed", "r:t3", exit_code=3)
    assert _built(ok).failure() is None
    failed = _built(ok, gate).failure()
    assert isinstance(failed, CheckFailed) and failed.exit_code == 1
    assert str(failed) == "1 of 2 cells failed: s2 cp311-linux_x86_64 on default: gate failed"
    worse = _built(ok, gate, engine).failure()
    assert isinstance(worse, ServiceError) and worse.exit_code == 3
    assert str(worse) == ("2 of 3 cells failed: s2 cp311-linux_x86_64 on default: gate failed; s3 cp311-linux_x86_64 "
                          "on no engine: engine failed")


def test_publish_all_fails_with_every_failed_cell() -> None:
    ok = PublishedCell("s1", "t", "default", "r:t1", "published", "sha256:1")
    bad = PublishedCell("s2", "t", "default", "r:t2", "failed", error="no such layout", exit_code=2)
    down = PublishedCell("s3", "t", "other", "r:t3", "failed", error="engine other does not answer", exit_code=3)
    assert PublishedCells((ok,)).failure() is None
    one = PublishedCells((ok, bad)).failure()
    assert one is not None and one.exit_code == 2 and str(one) == "s2 t: no such layout"
    both = PublishedCells((ok, bad, down)).failure()
    assert isinstance(both, Problems) and both.exit_code == 3
    assert [str(e) for e in both.errors] == ["s3 t: engine other does not answer", "s2 t: no such layout"]


def test_publish_takes_a_profile_or_all_never_both(cli: Cli, tmp_path: Path) -> None:
    r = cli("publish", cwd=tmp_path)
    assert r.code == 2 and "error: publish: give a PROFILE, or --all" in r.err
    for extra in (["public-example"], ["--lock", "x.lock"], ["--record", "p.jsonl"]):
        r = cli("publish", "--all", *extra, cwd=tmp_path)
        assert r.code == 2, r.err
        assert "error: publish --all takes the cells of RECORD_DIR/matrix.json: no PROFILE, --lock or --record" in r.err
        assert not (tmp_path / "build").exists()
