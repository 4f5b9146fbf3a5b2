"""`stackctl bisect` steps over stacks between that fail their ABI check or their gate, on the real engine, on CPU.

Four packages the test builds move 1.0 → 1.1 at once on a loopback index, each its own unit, in the order p, q, r,
s. The candidate and the control are sound; the mixes between are not all:

- q's extension needs r's library, by RPATH into r's directory (as deep_ep needs torch's, declaring nothing):
  q 1.0 needs `libr.so.1`, q 1.1 `libr.so.2`, which only r 1.1 ships. A stack with q 1.1 and r 1.0 fails its ABI
  check (the resolver cannot know: q declares no Requires-Dist on r);
- p 1.1 needs r's API 2 at import, which only r 1.1 has: a stack with p 1.1 and r 1.0 fails its gate;
- s 1.1 breaks one test.

The search asks for p + q (ABI failure) and steps over it to p alone (gate failure), then over that to p + q + r
(good): each skip recorded and said, as `git bisect skip` does, and s named alone.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Cli
from tests.support.elf_fixtures import _cc
from tests.support.engine import unique_tag
from tests.support.gitrepo import git
from tests.support.index_server import IndexServer
from tests.support.wheels import build_wheel

pytestmark = pytest.mark.integration
T0 = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc)
TAG = "cp311-cp311-linux_x86_64"
ORDER = ("p", "q", "r", "s")

CHECK = '''\
import sys
import traceback
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import p, q, r, s


def test_square_zero():
    assert s.square(0) == 0, s.square(0)


def test_square_three():
    assert s.square(3) == 9


cases = []
for t in (test_square_zero, test_square_three):
    try:
        t()
        cases.append(f'<testcase classname="check" name="{t.__name__}"/>')
    except Exception as exc:
        cases.append(f'<testcase classname="check" name="{t.__name__}"><failure message={quoteattr(repr(exc))}>'
                     f'{escape(traceback.format_exc())}</failure></testcase>')
Path(sys.argv[1], "junit.xml").write_text('<testsuite name="check">' + "".join(cases) + "</testsuite>")
'''

PLAN = '''\
[plan]
name = "skips"
files = ["suite"]
gate = false   # each image's build ran the gate already

[[trial]]
name = "unit"
kind = "tests"
command = ["{python}", "suite/check.py", "{out}"]
timeout = 120
'''


def _files(root: Path, name: str, version: str) -> dict[str, bytes | str]:
    """Each package's files at each version; the libraries built with gcc."""
    major = version.split(".")[1]  # 1.0 → libr.so.1 (API 1), 1.1 → libr.so.2 (API 2)
    api = int(major) + 1
    for d in (root / f"r{api}", root / f"q{api}"):
        d.mkdir(parents=True, exist_ok=True)
    if name == "r":
        lib = _cc(root / f"r{api}" / f"libr.so.{api}", f"int r_api(void) {{ return {api}; }}\n",
                  soname=f"libr.so.{api}")
        return {"r/__init__.py": f"API = {api}\n", f"r/lib/libr.so.{api}": lib.read_bytes()}
    if name == "q":
        ext = _cc(root / f"q{api}" / "_q.cpython-311-x86_64-linux-gnu.so",
                  "extern int r_api(void);\nint q_call(void) { return r_api(); }\n",
                  libs=(f"libr.so.{api}",), libdirs=(root / f"r{api}",), rpath="$ORIGIN/../r/lib")
        return {"q/__init__.py": "VALUE = 1\n", "q/_q.cpython-311-x86_64-linux-gnu.so": ext.read_bytes()}
    if name == "p":
        needs = "" if version == "1.0" else (
            "import r\n\nif r.API < 2:\n    raise ImportError(f'p 1.1 needs the API 2 of r, which r {r.API} lacks')\n")
        return {"p/__init__.py": needs + "VALUE = 1\n"}
    wrong = " + (1 if n == 0 else 0)" if version == "1.1" else ""
    return {"s/__init__.py": f"def square(n):\n    return n * n{wrong}\n"}


def _profile(name: str, url: str, repository: str, base_image: str, version: str, extends: str | None) -> str:
    head = f'[stack]\nname = "{name}"\n'
    if extends:
        return head + f'extends = "{extends}"\n' + "".join(
            f'\n[pins.{pin}]\nversion = "{version}"\n' for pin in ORDER)
    head += textwrap.dedent(f"""\
        description = "four packages, two of them with native code"

        [targets]
        python = ["3.11"]
        platforms = ["linux_x86_64"]

        [indexes.public]
        url = "{url}"

        [image]
        base = "{base_image}"
        repository = "{repository}"
        python = "3.11"
        tag = "s{{pins[s]}}"
        """)
    pins = ""
    for i, pin in enumerate(ORDER):
        check = 'abi = "check"\n' if pin == "q" else ""
        pins += f'\n[pins.{pin}]\nversion = "{version}"\nindex = "public"\n{check}gate = {{ order = {i + 1} }}\n'
    return head + pins


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, docker_client: Any, base_image: str) -> Iterator[Path]:
    """Both stacks resolved and committed, the plan beside them, the index serving both, the base image's
    inventory in build/."""
    from tests.support.imagetest import remove_images

    root = tmp_path_factory.mktemp("bisect-skips")
    index = IndexServer().start()
    repository = unique_tag("stackctl-bisect-skips")
    try:
        for name in ("r", "q", "p", "s"):  # q's extension links against r's library
            for version in ("1.0", "1.1"):
                tag = TAG if name in ("q", "r") else "py3-none-any"
                wheel = build_wheel(root / "wheels", name, version, tag=tag, files=_files(root / "elf", name, version))
                index.add(wheel, upload_time=T0.replace(day=2 if version == "1.0" else 20))
        repo = root / "repo"
        (repo / "stacks" / "validation" / "suite").mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        (repo / ".gitignore").write_text("build/\n")
        (repo / "stacks" / "control.toml").write_text(
            _profile("control", index.url, repository, base_image, "1.0", None))
        (repo / "stacks" / "candidate.toml").write_text(
            _profile("candidate", index.url, repository, base_image, "1.1", "control"))
        (repo / "stacks" / "validation" / "plan.toml").write_text(PLAN)
        (repo / "stacks" / "validation" / "suite" / "check.py").write_text(CHECK)
        yield repo
    finally:
        index.stop()
        remove_images(docker_client, repository)


def test_stacks_that_fail_their_abi_check_or_gate_are_skipped_and_said_and_the_culprit_still_named(
        cli: Cli, repo: Path, base_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(repo.parent / "cache"))
    for stack in ("control", "candidate"):
        res = cli("resolve", f"stacks/{stack}.toml", cwd=repo)
        assert res.code == 0, res.err
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two stacks")
    res = cli("inventory", base_image, "--out", "build/base.json", cwd=repo)
    assert res.code == 0, res.err
    args = ("bisect", "stacks/control.toml", "stacks/candidate.toml", "--trial", "unit", "--inventory",
            "build/base.json")

    res = cli(*args, "--json", cwd=repo)
    assert res.code == 0, res.err
    result = json.loads(res.out)
    assert [c["pins"] for c in result["culprits"]] == [["s"]], result["steps"]
    assert (result["culprits"][0]["alone"], result["culprits"][0]["without"]) == ("bad", "good")
    steps = [(s["units"], s["outcome"], s["verdict"]) for s in result["steps"]]
    assert steps == [(["p", "q", "r", "s"], "bad", "regressed"), (["p", "q"], "skip", "ABI"),
                     (["p"], "skip", "gate"), (["p", "q", "r"], "good", "pass"), (["s"], "bad", "regressed")]
    abi, gate = result["steps"][1], result["steps"][2]
    assert "libr.so.2" in abi["why"] and "q" in abi["why"], abi
    assert "import p" in gate["why"] and "API 2 of r" in gate["why"], gate
    # the skips were compared with nothing; only p + q + r and s alone were A/B'd after the candidate
    assert result["comparisons"] == 3 and result["complete"] is True
    assert "step 2: skip (ABI)" in res.err and "step 3: skip (gate)" in res.err

    # the tables, from a second run that compares nothing again, say each skip and why
    table = cli(*args, cwd=repo)
    assert table.code == 0, table.err
    assert "0 comparisons" in table.out
    said = " ".join(table.out.split())  # a table or, where a row is too wide, a list: the words, not the layout
    assert said.count("skip") >= 2, table.out
    assert "ABI: unresolved: libr.so.2 (needed by q-1.1" in said, table.out
    assert "gate: the gate failed: 1 check did not pass: FAIL import p" in said, table.out
    assert "bisect: culprit: s (s 1.0 → 1.1)" in said
