"""bisect against the by-hand way: k units of moves, one of them breaking a test; how many builds and comparisons
and how long `stackctl bisect` takes, against moving one unit at a time (one build and one A/B per unit).

    python benchmarks/bisect_search.py [--units 5 9] [--culprit middle|last|first] [--count-only]

First the comparisons the search makes (pure: every culprit position, one culprit and two; and the rounds it takes
with 1-4 stacks compared side by side), then real runs: k
packages (p1 … pk) move from 1.0 to 1.1 on a loopback index, the culprit's new version makes one test of a
stdlib suite fail; `stackctl bisect` (a process, start-up included) builds and A/Bs the stacks between on the
engine (DOCKER_HOST, with the builder it picks) from the base image `stackctl-base:bookworm`. The by-hand figure is
k builds and k A/Bs, its time estimated as k times the mean time of one of bisect's own steps (a build from the
cache and an A/B), which is what each by-hand step costs. Needs what `.ci/services.sh` starts.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stackctl.bisect import Outcome, one_by_one, search_units  # noqa: E402
from tests.support.gitrepo import git  # noqa: E402
from tests.support.index_server import IndexServer  # noqa: E402
from tests.support.wheels import build_wheel  # noqa: E402

STACKCTL = [sys.executable, "-m", "stackctl"]

CHECK = '''\
import importlib
import sys
from pathlib import Path

cases = []
for name in sys.argv[2].split(","):
    ok = importlib.import_module(name).value() == 1
    body = "" if ok else '<failure message="value changed">value changed</failure>'
    cases.append(f'<testcase classname="check" name="test_{name}">{body}</testcase>')
Path(sys.argv[1], "junit.xml").write_text('<testsuite name="check">' + "".join(cases) + "</testsuite>")
'''


def _holds(culprit: int, units: tuple[int, ...], role: str) -> Outcome:
    return Outcome.BAD if culprit in units else Outcome.GOOD


def counts() -> None:
    """Comparisons the search makes, over every culprit position (and every pair), against k by hand."""
    for k in (5, 9):
        for n in (1, 2):
            made = []
            for bad in itertools.combinations(range(k), n):
                asked: list[tuple[int, ...]] = []

                def compare(units: tuple[int, ...], role: str, bad: tuple[int, ...] = bad,
                            asked: list[tuple[int, ...]] = asked) -> Outcome:
                    asked.append(units)
                    return Outcome.BAD if set(bad) & set(units) else Outcome.GOOD

                search_units(k, one_by_one(compare))
                made.append(len(asked))
            print(f"k={k}, {n} culprit{'s' if n > 1 else ''}: comparisons mean {statistics.mean(made):.1f}, "
                  f"max {max(made)} (1 + ceil(log2 k) = {1 + math.ceil(math.log2(k))}); by hand {k} builds, "
                  f"{k} A/Bs, no verification")
    for k in (8, 9, 27):  # rounds with several stacks built and compared side by side
        said = []
        for slots in (1, 2, 3, 4):
            rounds = [search_units(k, one_by_one(functools.partial(_holds, c)), slots).rounds for c in range(k)]
            name = f"{slots} slot{'s' if slots > 1 else ''}"
            said.append(f"{name}: max {max(rounds)}, mean {statistics.mean(rounds):.1f}")
        print(f"k={k}, 1 culprit, rounds (search and verification): " + "; ".join(said))


def project(root: Path, k: int, url: str, repository: str) -> Path:
    repo = root / "repo"
    (repo / "stacks" / "validation" / "suite").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text("build/\n")
    names = [f"p{i + 1}" for i in range(k)]
    for new in (False, True):
        name = "candidate" if new else "control"
        text = f'[stack]\nname = "{name}"\n'
        if new:
            text += 'extends = "control"\n'
        else:
            text += (f'description = "bench"\n\n[targets]\npython = ["3.11"]\nplatforms = ["linux_x86_64"]\n\n'
                     f'[indexes.public]\nurl = "{url}"\n\n[image]\nbase = "stackctl-base:bookworm"\n'
                     f'repository = "{repository}"\npython = "3.11"\ntag = "k{k}-{{pins[p1]}}"\n')
        for i, pin in enumerate(names):
            text += f'\n[pins.{pin}]\nversion = "{"1.1" if new else "1.0"}"\n'
            if not new:
                text += f'index = "public"\ngate = {{ order = {i + 1} }}\n'
        (repo / "stacks" / f"{name}.toml").write_text(text)
    (repo / "stacks" / "validation" / "suite" / "check.py").write_text(CHECK)
    (repo / "stacks" / "validation" / "plan.toml").write_text(
        '[plan]\nname = "bench"\nfiles = ["suite"]\ngate = false\n\n[[trial]]\nname = "unit"\nkind = "tests"\n'
        f'command = ["{{python}}", "suite/check.py", "{{out}}", "{",".join(names)}"]\ntimeout = 120\n')
    return repo


def run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STACKCTL, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


def real(k: int, where: str) -> None:
    culprit = {"first": 0, "middle": k // 2, "last": k - 1}[where]
    with tempfile.TemporaryDirectory(prefix="bench-bisect-") as tmp:
        root = Path(tmp)
        index = IndexServer().start()
        repository = f"stackctl-bench-bisect-{uuid.uuid4().hex[:8]}"
        try:
            for i in range(k):
                for version in ("1.0", "1.1"):
                    value = 2 if (i == culprit and version == "1.1") else 1
                    wheel = build_wheel(root / "wheels", f"p{i + 1}", version,
                                        files={f"p{i + 1}.py": f"def value():\n    return {value}\n"})
                    index.add(wheel, upload_time=datetime(2026, 11, 2 if version == "1.0" else 20,
                                                          tzinfo=timezone.utc))
            repo = project(root, k, index.url, repository)
            env = {**os.environ, "PYTHONPATH": str(ROOT), "STACKCTL_CACHE_DIR": str(root / "cache")}
            for stack in ("control", "candidate"):
                done = run("resolve", f"stacks/{stack}.toml", cwd=repo, env=env)
                assert done.returncode == 0, done.stderr
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", "stacks")
            start = time.monotonic()
            done = run("bisect", "stacks/control.toml", "stacks/candidate.toml", "--trial", "unit", "--json",
                       cwd=repo, env=env)
            wall = time.monotonic() - start
            assert done.returncode == 0, done.stderr[-2000:]
            result = json.loads(done.stdout)
            named = [c["pins"] for c in result["culprits"]]
            assert named == [[f"p{culprit + 1}"]], named
            steps = [s["seconds"] for s in result["steps"] if s["compared"]]
            step = statistics.mean(steps)
            print(f"k={k}, culprit p{culprit + 1} ({where}): bisect {result['builds']} builds, "
                  f"{result['comparisons']} comparisons, {wall:.0f} s wall (a step: {step:.1f} s mean); "
                  f"by hand {k} builds, {k} A/Bs, ≈ {k * step:.0f} s (+ the control's build, as bisect's)")
        finally:
            index.stop()
            import docker

            from tests.support.imagetest import remove_images

            remove_images(docker.from_env(), repository)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, nargs="+", default=[5, 9])
    parser.add_argument("--culprit", choices=("first", "middle", "last"), default="middle")
    parser.add_argument("--count-only", action="store_true")
    args = parser.parse_args()
    counts()
    if args.count_only:
        return
    for k in args.units:
        real(k, args.culprit)


if __name__ == "__main__":
    main()
