"""`run_bisect` in rounds, on a loopback index: each stack between is prepared here (its profile written, resolved by
uv against the index, ABI-checked from the index's wheels) and its build and A/B handed to a runner, a round at
once. The runner here is a bench that judges a stack by whether it holds the culprit's move (what an A/B of a test
the move breaks says) and hands the steps back in reverse, as a cluster's tasks may finish; the build and A/B of
`run_step` itself are covered on the engine by tests/services/test_bisect*.py.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from stackctl.ab.plan import load_plan
from stackctl.bisect.run import BisectOptions, BisectReport, Step, StepJob, run_bisect
from stackctl.image.order import BuildOrder
from stackctl.profile.loader import load_stack
from stackctl.resolve import read_lock
from tests.support.index_server import IndexServer
from tests.support.resolve_fixtures import isolated  # noqa: F401
from tests.support.wheels import build_wheel

K = 6
CULPRIT = "p5"

PLAN = '''\
[plan]
name = "six"
files = ["suite"]
gate = false

[[trial]]
name = "unit"
kind = "tests"
command = ["{python}", "suite/check.py", "{out}"]
timeout = 60
'''


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    wheels = tmp_path_factory.mktemp("wheels")
    server = IndexServer()
    for i in range(K):
        for version, day in (("1.0", 2), ("1.1", 20)):
            wheel = build_wheel(wheels, f"p{i + 1}", version, files={f"p{i + 1}.py": f"VERSION = {version!r}\n"})
            server.add(wheel, upload_time=datetime(2026, 11, day, tzinfo=timezone.utc))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def repo(tmp_path: Path, index: IndexServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = tmp_path / "repo"
    (repo / "stacks" / "validation" / "suite").mkdir(parents=True)
    for name, version in (("control", "1.0"), ("candidate", "1.1")):
        text = f'[stack]\nname = "{name}"\n'
        if name == "candidate":
            text += 'extends = "control"\n'
        else:
            text += (f'description = "six"\n\n[targets]\npython = ["3.11"]\nplatforms = ["linux_x86_64"]\n\n'
                     f'[indexes.public]\nurl = "{index.url}"\n\n[image]\nbase = "stackctl-base:bookworm"\n'
                     'repository = "stackctl-rounds"\npython = "3.11"\ntag = "t-{pins[p1]}"\n')
        for i in range(K):
            text += f'\n[pins.p{i + 1}]\nversion = "{version}"\n'
            if name == "control":
                text += f'index = "public"\ngate = {{ order = {i + 1} }}\n'
        (repo / "stacks" / f"{name}.toml").write_text(text)
    (repo / "stacks" / "validation" / "plan.toml").write_text(PLAN)
    (repo / "stacks" / "validation" / "suite" / "check.py").write_text("")
    monkeypatch.chdir(repo)
    return repo


class Bench:
    """A runner: bad where the stack holds the culprit's move (none where the candidate does not regress). A stack
    between whose job has no candidate's image yet (a step of the round that builds the candidate) comes back
    undecided when `undecided`, as a noisy host leaves it, and is decided when its job comes back to look from the
    candidate's side."""

    def __init__(self, undecided: bool = False, regresses: bool = True) -> None:
        self.undecided, self.regresses = undecided, regresses
        self.rounds: list[list[StepJob]] = []

    def __call__(self, jobs: Sequence[StepJob]) -> Iterator[tuple[int, Step]]:
        self.rounds.append(list(jobs))
        for i in reversed(range(len(jobs))):
            job = jobs[i]
            bad = self.regresses and CULPRIT in job.units
            name = job.stack.stack.name
            step = Step(job.units, job.role, name, str(job.stack.file), "bad" if bad else "good",
                        "regressed" if bad else "pass", "", lock_digest=job.lock_digest,
                        image=f"stackctl-rounds:{name}", built=True, compared=True, key=job.key, seconds=1.0)
            if job.undecided is not None:
                step = replace(job.undecided, outcome=step.outcome, why=f"the candidate against it: {step.verdict}")
            elif self.undecided and not job.whole and job.candidate_image is None:
                step = replace(step, outcome="skip", verdict="undecided")
            yield i, step


def _bisect(repo: Path, bench: Bench, slots: int, said: list[str]) -> BisectReport:
    built: list[str] = []

    def build(order: BuildOrder, say: object) -> str:
        built.append(order.profiles[0])
        return "stackctl-rounds:control"

    plan = load_plan(repo / "stacks" / "validation" / "plan.toml")
    opts = BisectOptions("stacks/control.toml", "stacks/candidate.toml", plan, "unit",
                         work_dir=repo / "build" / "bisect", record_dir=repo / "build")
    rep = run_bisect(opts, build, say=said.append, slots=slots, run_steps=bench)
    assert built in ([], ["stacks/control.toml"])  # the control, here, once; every other stack by the runner
    return rep


def test_three_slots_build_and_compare_a_round_at_once_and_a_second_run_reuses_every_step(repo: Path) -> None:
    bench, said = Bench(), list[str]()
    rep = _bisect(repo, bench, 3, said)
    assert [(c.kind, c.pins, c.alone, c.without) for c in rep.culprits] == [("culprit", ("p5",), "bad", "good")]
    assert rep.slots == 3 and rep.rounds == len(bench.rounds) <= 3 and rep.complete
    assert all(len(r) <= 3 for r in bench.rounds)
    # the candidate's round holds the first two split points; the steps are kept in their order, whatever the
    # order the runner gave them back in
    assert [s.role for s in rep.steps[:3]] == ["candidate", "search", "search"]
    assert [s.round for s in rep.steps] == sorted(s.round for s in rep.steps) and rep.steps[0].round == 1
    assert "round 1: steps 1-3 side by side" in said and "step 1 (candidate): the control with the candidate" in said
    assert "step 1: bad (regressed)" in said
    ledger = json.loads((repo / "build" / "bisect" / "steps.json").read_text())["steps"]
    assert len(ledger) == len(rep.steps) == rep.comparisons

    again = Bench()
    second = _bisect(repo, again, 3, [])
    assert again.rounds == [] and second.comparisons == 0 and second.reused == len(second.steps)
    assert [c.pins for c in second.culprits] == [("p5",)] and second.rounds == rep.rounds


def test_one_slot_asks_one_stack_a_round_and_says_it_as_before(repo: Path) -> None:
    bench, said = Bench(), list[str]()
    rep = _bisect(repo, bench, 1, said)
    assert [c.pins for c in rep.culprits] == [("p5",)] and rep.slots == 1
    assert [len(r) for r in bench.rounds] == [1] * len(rep.steps) == [1] * rep.rounds
    assert [s.role for s in rep.steps] == ["candidate", "search", "search", "search", "alone", "without"]
    assert [s.round for s in rep.steps] == [1, 2, 3, 4, 5, 6]
    assert not any(line.startswith("round ") for line in said)
    assert [line for line in said if line.startswith("step ")][:2] == [
        "step 1 (candidate): the control with the candidate", "step 1: bad (regressed)"]


def test_a_stack_between_undecided_beside_the_candidate_is_looked_at_from_it_once_it_is_built(repo: Path) -> None:
    bench, said = Bench(undecided=True), list[str]()
    rep = _bisect(repo, bench, 3, said)
    assert [c.pins for c in rep.culprits] == [("p5",)]
    first, looks = bench.rounds[0], bench.rounds[1]
    assert [j.role for j in first] == ["candidate", "search", "search"]
    candidate = next(s for s in rep.steps if s.role == "candidate")
    assert [(j.n, j.candidate_image) for j in looks] == [(2, candidate.image), (3, candidate.image)]
    assert all(j.undecided is not None and j.undecided.verdict == "undecided" for j in looks)
    # decided from the candidate's side; the ledger keeps the decided step, never the undecided one
    assert [s.outcome for s in rep.steps[1:3]] == ["good", "good"]
    ledger = json.loads((repo / "build" / "bisect" / "steps.json").read_text())["steps"]
    assert not any(s["outcome"] == "skip" for s in ledger)


def test_beside_a_candidate_that_does_not_regress_an_undecided_stack_is_kept_out_of_the_ledger(repo: Path) -> None:
    bench = Bench(undecided=True, regresses=False)
    rep = _bisect(repo, bench, 3, [])
    assert rep.candidate_outcome == "good" and rep.culprits == () and not rep.failing
    assert [(s.role, s.verdict) for s in rep.steps] == [("candidate", "pass"), ("search", "undecided"),
                                                        ("search", "undecided")]
    assert len(bench.rounds) == 1  # nothing to look at from the candidate's side: the search has ended
    ledger = json.loads((repo / "build" / "bisect" / "steps.json").read_text())["steps"]
    assert [s["role"] for s in ledger] == ["candidate"]


def test_a_job_can_be_shipped_and_placed_in_another_directory(repo: Path, tmp_path: Path) -> None:
    bench = Bench()
    _bisect(repo, bench, 3, [])
    for job in (bench.rounds[0][0], bench.rounds[0][1]):  # the candidate's, and a stack between's
        shipped = pickle.loads(pickle.dumps(job))
        assert shipped == job
        where = tmp_path / "elsewhere" / str(job.n)
        where.mkdir(parents=True)
        placed = shipped.placed(where)
        assert Path(placed.stack.arg).parent == where and placed.work_dir == str(where)
        assert load_stack(placed.stack.file).digest() == job.stack.stack.digest()
        assert read_lock(Path(placed.lock)).digest() == job.lock_digest


def test_no_slot_is_bad_input(repo: Path) -> None:
    from stackctl.errors import InputError

    with pytest.raises(InputError, match="0 slots: a round of the search needs at least one"):
        _bisect(repo, Bench(), 0, [])
