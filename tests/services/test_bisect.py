"""`stackctl bisect` on the real engine, on CPU: five packages the test builds as wheels move at once on a loopback
index (alpha and beta one release train, gamma, delta, eps). delta's new version makes the benchmark about 40 %
slower (a stack between that its A/B against the control leaves undecided is A/B'd against the candidate; undecided
both ways it is a skip, never a culprit) and changes one
behaviour a test checks; eps's breaks one test; gamma's new version needs the train's
(Requires-Dist alpha>=1.1), so an intermediate stack with gamma and without the train cannot resolve.

Each intermediate is resolved, built (unchanged layer groups from the cache) and A/B'd against the control by the
command itself: bisect names eps alone for the suite that only eps breaks, delta alone for the benchmark, both for
the suite that both break (stepping over the stack that cannot resolve, and saying so), and a second run reuses
every step recorded. With three slots a round builds and compares up to three stacks: the same culprit, in fewer
rounds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support.cli import Cli
from tests.support.engine import Cleanup, unique_tag
from tests.support.gitrepo import git
from tests.support.index_server import IndexServer
from tests.support.raycluster import LocalCluster, run
from tests.support.wheels import build_wheel

pytestmark = pytest.mark.integration
T0 = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc)

WORK = '''\
def work(n):
    total = sum(i * i for i in range(n + 1))
    if EXTRA:  # the slow build: the same answer, more work (numbers of the loop's own sizes)
        sum(i * i for i in range(n // 2, n // 2 + int(n * EXTRA)))
    return total
'''
MODULES = {
    ("alpha", "1.0"): "VALUE = 1\n", ("alpha", "1.1"): "VALUE = 1\n",
    ("beta", "1.0"): "VALUE = 1\n", ("beta", "1.1"): "VALUE = 1\n",
    ("gamma", "1.0"): "VALUE = 1\n", ("gamma", "1.1"): "VALUE = 1\n",
    ("delta", "1.0"): 'MODE = "exact"\nEXTRA = 0\n' + WORK,
    ("delta", "1.1"): 'MODE = "fast"\nEXTRA = 0.4\n' + WORK,  # 40 % more work, and another mode
    ("eps", "1.0"): "def square(n):\n    return n * n\n",
    ("eps", "1.1"): "def square(n):\n    return n * n + (1 if n == 0 else 0)\n",  # wrong at 0
}
REQUIRES = {("gamma", "1.1"): ["alpha>=1.1"]}

# a stdlib runner that writes JUnit XML: "unit" runs what only eps can break, "all" adds delta's mode
CHECK = '''\
import sys
import traceback
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import alpha, beta, delta, eps, gamma


def test_eps_zero():
    assert eps.square(0) == 0, eps.square(0)


def test_eps_three():
    assert eps.square(3) == 9


def test_values():
    assert alpha.VALUE == beta.VALUE == gamma.VALUE == 1


def test_delta_mode():
    assert delta.MODE == "exact", delta.MODE


tests = [test_eps_zero, test_eps_three, test_values] + ([test_delta_mode] if sys.argv[2] == "all" else [])
cases = []
for t in tests:
    try:
        t()
        cases.append(f'<testcase classname="check" name="{t.__name__}"/>')
    except Exception as exc:
        cases.append(f'<testcase classname="check" name="{t.__name__}"><failure message={quoteattr(repr(exc))}>'
                     f'{escape(traceback.format_exc())}</failure></testcase>')
Path(sys.argv[1], "junit.xml").write_text('<testsuite name="check">' + "".join(cases) + "</testsuite>")
'''

BENCH = '''\
"""delta.work timed: 6 samples, each the best of 5 calls (the thread's CPU time), as JSON lines."""
import json
import time

import delta

for _ in range(6):
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        delta.work(40000)
        best = min(best, time.thread_time() - start)
    print(json.dumps({"work_ms": best * 1000}))
'''

PLAN = '''\
[plan]
name = "five"
files = ["suite"]
gate = false   # each image's build ran the gate already

[[trial]]
name = "unit"
kind = "tests"
command = ["{python}", "suite/check.py", "{out}", "unit"]
timeout = 120

[[trial]]
name = "all"
kind = "tests"
command = ["{python}", "suite/check.py", "{out}", "all"]
timeout = 120

[[trial]]
name = "speed"
kind = "bench"
command = ["{python}", "suite/bench.py"]
repeat = 3
max_repeat = 12
timeout = 120

[[trial.metric]]
name = "work_ms"
unit = "ms"
better = "lower"
band = 10
statistic = "best"
'''


def _profile(name: str, url: str, repository: str, versions: dict[str, str], extends: str | None = None) -> str:
    head = f'[stack]\nname = "{name}"\n' + (f'extends = "{extends}"\n' if extends else "")
    if extends is None:
        head += textwrap.dedent(f"""\
            description = "five packages"

            [targets]
            python = ["3.11"]
            platforms = ["linux_x86_64"]

            [indexes.public]
            url = "{url}"

            [image]
            base = "stackctl-base:bookworm"
            repository = "{repository}"
            python = "3.11"
            tag = "d{{pins[delta]}}-e{{pins[eps]}}"
            """)
    order = ["gamma", "alpha", "beta", "delta", "eps"]
    pins = ""
    for i, pin in enumerate(order):
        train = 'train = "ab"\n' if pin in ("alpha", "beta") else ""
        pins += f'\n[pins.{pin}]\nversion = "{versions[pin]}"\n'
        if extends is None:
            pins += f'index = "public"\n{train}gate = {{ order = {i + 1} }}\n'
    return head + pins


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, docker_client: Any, base_image: str) -> Iterator[Path]:
    """A repository with both stacks resolved and committed, the plan beside them, the index serving both."""
    from tests.support.imagetest import remove_images

    root = tmp_path_factory.mktemp("bisect")
    wheels = root / "wheels"
    index = IndexServer().start()
    repository = unique_tag("stackctl-bisect")
    try:
        for (name, version), code in MODULES.items():
            wheel = build_wheel(wheels, name, version, files={f"{name}.py": code},
                                requires_dist=REQUIRES.get((name, version), ()))
            index.add(wheel, upload_time=T0.replace(day=2 if version == "1.0" else 20))
        repo = root / "repo"
        (repo / "stacks" / "validation" / "suite").mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        (repo / ".gitignore").write_text("build/\n")
        old = dict.fromkeys(("gamma", "alpha", "beta", "delta", "eps"), "1.0")
        new = dict.fromkeys(old, "1.1")
        (repo / "stacks" / "control.toml").write_text(_profile("control", index.url, repository, old))
        (repo / "stacks" / "candidate.toml").write_text(_profile("candidate", index.url, repository, new, "control"))
        (repo / "stacks" / "validation" / "plan.toml").write_text(PLAN)
        (repo / "stacks" / "validation" / "suite" / "check.py").write_text(CHECK)
        (repo / "stacks" / "validation" / "suite" / "bench.py").write_text(BENCH)
        yield repo
    finally:
        index.stop()
        remove_images(docker_client, repository)


@pytest.fixture
def repo(project: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(project.parent / "cache"))
    if not (project / "stacks" / "candidate.lock").exists():
        for stack in ("control", "candidate"):
            res = cli("resolve", f"stacks/{stack}.toml", cwd=project)
            assert res.code == 0, res.err
        git(project, "add", "-A")
        git(project, "commit", "-q", "-m", "two stacks")
    return project


def _bisect(cli: Cli, repo: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    res = cli("bisect", "stacks/control.toml", "stacks/candidate.toml", "--json", *args, cwd=repo)
    return res.code, json.loads(res.out), res.err


def _named(result: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(c["kind"], c["pins"]) for c in result["culprits"]]


def test_the_move_that_breaks_a_test_is_named_alone_and_a_second_run_reuses_every_step(
        cli: Cli, repo: Path, cleanup: Cleanup) -> None:
    code, result, err = _bisect(cli, repo, "--trial", "unit")
    assert code == 0, err
    assert [u["pins"] for u in result["units"]] == [["gamma"], ["alpha", "beta"], ["delta"], ["eps"]]
    assert result["units"][1]["why"] == ["release train ab moves whole"]
    assert _named(result) == [("culprit", ["eps"])]
    culprit = result["culprits"][0]
    assert (culprit["alone"], culprit["without"]) == ("bad", "good")
    assert culprit["moves"] == [{"pin": "eps", "before": "1.0", "after": "1.1"}]
    bad = [s for s in result["steps"] if s["outcome"] == "bad"]
    assert bad and all(s["regressions"] == ["check::test_eps_zero"] for s in bad)
    # the candidate, two prefixes, eps alone (the candidate without eps is a prefix already compared)
    assert result["comparisons"] == 4 and result["builds"] == 5
    assert all(Path(repo, s["record"]).is_file() for s in result["steps"])
    assert "bisect step 1 (candidate)" in err and "A/B against the control on unit" in err
    record = json.loads((repo / "build" / "candidate.bisect.json").read_text())
    assert record["kind"] == "bisect" and record["result"]["culprits"][0]["pins"] == ["eps"]
    # the profiles it wrote are in the working directory, never beside the stacks
    assert sorted(p.name for p in (repo / "stacks").glob("*.toml")) == ["candidate.toml", "control.toml"]
    assert (repo / "build" / "bisect" / "candidate" / "candidate-bisect-1-2.toml").is_file()

    again, second, _ = _bisect(cli, repo, "--trial", "unit")
    assert again == 0 and _named(second) == [("culprit", ["eps"])]
    assert second["comparisons"] == 0 and second["reused"] == 4

    report = cli("report", "stacks/candidate.toml", "--markdown", cwd=repo)
    section = report.out[report.out.index("### Bisect"):]
    assert "culprit" in section and "eps 1.0 → 1.1" in section and "build/candidate.bisect.json" in section
    page = cli("report", "stacks/candidate.toml", "--html", cwd=repo)
    assert page.code == 0 and "Bisect" in page.out and "eps 1.0 → 1.1" in page.out


def test_the_move_that_slows_the_benchmark_is_named_alone_or_the_search_says_it_cannot_tell(
        cli: Cli, repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, result, err = _bisect(cli, repo, "--trial", "speed", "--metric", "work_ms")
    verdicts = {s["verdict"] for s in result["steps"]}
    with capsys.disabled():  # what the host could tell, in the CI log
        print(f"\nbisect on the benchmark: exit {code}; {result['conclusion']}; {result['comparisons']} comparisons, "
              f"{result['seconds']:.0f} s")
    if code == 0:
        assert _named(result) == [("culprit", ["delta"])], result["steps"]
        slowed = [s["delta_pct"] for s in result["steps"] if s["verdict"] == "regressed"]
        assert slowed and all(d > 10 for d in slowed), result["steps"]
    else:
        # a host too noisy for ±10 %: an undecided comparison is a skip, never a culprit, and no other move is
        # ever named; what is named is a range that holds delta, and the exit says the search could not finish
        assert code == 1 and "undecided" in verdicts | {result["candidate_outcome"]}, result["steps"]
        assert all("delta" in c["pins"] for c in result["culprits"] + result["ambiguous"])
        assert "undecided" in err
    # the pull request's table, from a second run that compares nothing again
    md = cli("bisect", "stacks/control.toml", "stacks/candidate.toml", "--trial", "speed", "--metric", "work_ms",
             "--markdown", cwd=repo)
    assert md.code == code, md.err
    assert "0 comparisons" in md.out
    if code == 0:
        assert "| culprit | delta | delta 1.0 → 1.1 | bad | good |" in md.out


def test_two_culprits_are_both_named_and_a_stack_that_cannot_resolve_is_skipped(cli: Cli, repo: Path) -> None:
    # Ctrl-C in the third step: exit 130, the two steps finished recorded, and the next run starts after them
    proc = subprocess.Popen([sys.executable, "-m", "stackctl", "bisect", "stacks/control.toml",
                             "stacks/candidate.toml", "--trial", "all"], cwd=repo, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "step 3 (search)" in line:
                proc.send_signal(signal.SIGINT)
                break
        said = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, said
    assert "error: interrupted" in said and "Traceback" not in said
    interrupted = json.loads((repo / "build" / "candidate.bisect.json").read_text())["result"]
    assert interrupted["status"] == "interrupted" and len(interrupted["steps"]) == 2

    code, result, err = _bisect(cli, repo, "--trial", "all")
    assert code == 0, err
    assert [s["reused"] for s in result["steps"][:3]] == [True, True, False]
    assert _named(result) == [("culprit", ["delta"]), ("culprit", ["eps"])]
    skipped = [s for s in result["steps"] if s["outcome"] == "skip"]
    assert [(s["units"], s["verdict"]) for s in skipped] == [(["gamma"], "cannot resolve")]
    assert "alpha" in skipped[0]["why"]
    assert "step 6: skip (cannot resolve)" in err


def test_three_slots_name_the_same_culprit_in_fewer_rounds_with_the_same_steps(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stackctl.usecases import BisectAsk, bisect_moves

    monkeypatch.chdir(repo)
    said: list[str] = []
    rep = bisect_moves(BisectAsk("stacks/control.toml", "stacks/candidate.toml", "unit", work_dir=Path("build/slots"),
                                 no_record=True, slots=3), say=said.append)
    assert [(c.kind, c.pins, c.alone, c.without) for c in rep.culprits] == [("culprit", ("eps",), "bad", "good")]
    # the candidate beside the prefixes gamma (which cannot resolve) and gamma + the train; then that + delta; then
    # eps alone (the candidate without eps is the prefix before): three rounds where one slot takes four
    assert [(s.round, s.role, s.units, s.outcome) for s in rep.steps] == [
        (1, "candidate", ("gamma", "train ab", "delta", "eps"), "bad"), (1, "search", ("gamma",), "skip"),
        (1, "search", ("gamma", "train ab"), "good"), (2, "search", ("gamma", "train ab", "delta"), "good"),
        (3, "alone", ("eps",), "bad")]
    assert rep.rounds == 3 and rep.slots == 3 and rep.steps[1].verdict == "cannot resolve"
    assert "round 1: steps 1-3 side by side" in said and "round 3: step 5" in said
    assert all(s.record and Path(repo, s.record).is_file() for s in rep.steps if s.compared)


def test_on_a_cluster_three_build_nodes_name_the_same_culprit_in_three_rounds(
        repo: Path, build_cluster: LocalCluster) -> None:
    """`bisect --cluster` on a build node per engine: three slots, the rounds' stacks built and compared side by
    side on the nodes (each node building the control where its engine lacks it), the same steps and culprit as
    three slots here, and every step's A/B record written back into the work directory."""
    r = run(build_cluster, "bisect", "stacks/control.toml", "stacks/candidate.toml", "--trial", "unit",
            "--work-dir", "build/cluster", "--no-record", "--json", cwd=repo)
    assert r.code == 0, r.err[-4000:] + json.dumps([s["why"] for s in json.loads(r.out)["steps"]])
    result = json.loads(r.out)
    assert _named(result) == [("culprit", ["eps"])]
    assert result["slots"] == 3 and result["rounds"] == 3
    assert [(s["round"], s["role"], s["outcome"]) for s in result["steps"]] == [
        (1, "candidate", "bad"), (1, "search", "skip"), (1, "search", "good"), (2, "search", "good"),
        (3, "alone", "bad")]
    assert "round 1: steps 1-3 side by side" in r.err
    nodes = {ln.split("[", 1)[1].split("]")[0] for ln in r.err.splitlines() if "] step " in ln and ": started" in ln}
    assert len(nodes) >= 2, r.err[-3000:]  # a round's steps went to more than one node
    assert all(Path(repo, s["record"]).is_file() for s in result["steps"] if s["compared"])
