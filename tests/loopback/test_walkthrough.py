"""The README's upgrade walkthrough, word for word, against the example vendor index it tells a newcomer
to serve; and the three reference stacks resolved, ABI-checked and exported against it for every target
they declare."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.vendor_index import ExampleIndexes, build_indexes, write_inventory
from tests.conftest import REPO, Result
from tests.support.cli import Cli
from tests.support.elf_fixtures import have_gcc
from tests.support.engine import in_ci
from tests.support.gitrepo import git

NEEDS_ENGINE = {"build", "publish", "verify"}  # the vendor's base image, an engine, a registry
# The report's sections of steps that need the vendor's base image: the only ones a run here leaves "not run".
ENGINE_SECTIONS = {"Build: gate log, tag, labels", "Publication", "Installed distributions, old image → new image",
                   "Validation summary"}



@pytest.fixture(autouse=True)
def gcc_and_uv() -> None:
    """uv is found as stackctl finds it (the `uv` distribution's binary, wherever pip put it: a venv's bin/
    need not be on PATH), and a missing one fails under CI as a missing service does."""
    from stackctl.errors import InputError
    from stackctl.resolve.closure import uv_binary

    missing = [] if have_gcc() else ["gcc"]
    try:
        uv_binary()
    except InputError:
        missing.append("uv (`pip install -e '.[test]'` installs it)")
    if missing and in_ci():
        pytest.fail(f"the walkthrough needs {' and '.join(missing)} (CI is set, so this is an error)", pytrace=False)
    if missing:
        pytest.skip(f"the walkthrough needs {' and '.join(missing)}")


def walkthrough_commands() -> list[str]:
    """Every command of the README's walkthrough (its `sh` blocks), in order, as written; a line ending in a
    backslash goes on on the next."""
    text = (REPO / "README.md").read_text()
    section = text.split("## An upgrade, command by command", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [c.strip() for b in blocks for c in re.sub(r"\\\n\s*", "", b).splitlines() if c.strip()]


def on_example(command: str, example: ExampleIndexes) -> str:
    """The README serves on 8650 (musa) and 8651 (public); this test's servers are on free ports."""
    return (command.replace("http://127.0.0.1:8650/", example.musa.base)
            .replace("http://127.0.0.1:8651/", example.public.base))


def index_args(example: ExampleIndexes) -> tuple[str, ...]:
    return ("--index", f"musa={example.musa.url}", "--index", f"public={example.public.url}")


@pytest.fixture
def example(tmp_path: Path) -> Iterator[ExampleIndexes]:
    with build_indexes(tmp_path / "indexes") as ex:
        yield ex


def fresh_clone(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh checkout of the repository's tracked files (as the work tree has them), committed; git commits
    made in it have an author."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src = REPO / name
        if src.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / name)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "clone")
    for var in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(var, "t")
    for var in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(var, "t@example.invalid")
    return repo


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: ExampleIndexes) -> Path:
    repo = fresh_clone(tmp_path / "clone", monkeypatch)
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache" / "http"))
    # the walkthrough names its indexes on each command: nothing in the environment points at the example
    for name in ("STACKCTL_INDEX_MUSA_URL", "STACKCTL_INDEX_PUBLIC_URL"):
        monkeypatch.delenv(name, raising=False)
    write_inventory(repo / "example-base.json")  # what `serve --inventory example-base.json` writes
    return repo


def test_the_first_blocks_commit_takes_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`build` refuses a lock that is not committed: the README's commit step must take the one `resolve`
    wrote (the rest of the block runs on the engine, in tests/services)."""
    text = (REPO / "README.md").read_text()
    block = re.findall(r"```sh\n(.*?)```", text.split("## The public example", 1)[1], re.S)[0]
    [step] = [c for c in block.splitlines() if c.startswith("git ")]
    repo = fresh_clone(tmp_path / "clone", monkeypatch)
    (repo / "stacks" / "public-example.lock").write_text("{}\n")  # where the first command writes it
    done = subprocess.run(step, shell=True, cwd=repo, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    tracked = subprocess.run(["git", "ls-files", "stacks"], cwd=repo, capture_output=True, text=True, check=True)
    assert "stacks/public-example.lock" in tracked.stdout.split()


def test_every_walkthrough_command_runs_as_written(cli: Cli, clone: Path, example: ExampleIndexes) -> None:
    serve, *commands = walkthrough_commands()
    # the example's servers (this test's run on free ports) and the inventory `clone` writes as serve does
    assert serve == "python examples/vendor_index.py serve --port 8650 --inventory example-base.json"
    assert [c.split()[1] for c in commands] == [
        "propose", "validate", "diff", "resolve", "resolve", "outdated", "abi", "wheel-diff", "wheel-diff",
        "wheel-diff", "export", "check", "add", "build", "publish", "verify", "scan", "report"]
    out: dict[str, Result] = {}
    for command in commands:
        words = shlex.split(on_example(command, example))
        if words[0] == "git":
            done = subprocess.run(on_example(command, example), shell=True, cwd=clone, capture_output=True,
                                  text=True, check=False)
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            continue
        if words[1] in NEEDS_ENGINE:
            continue
        r = cli(*words[1:], cwd=clone)
        assert r.code == 0, f"{command}\n{r.out}\n{r.err}"
        out.setdefault(words[1], r)  # the first of each: deep_ep's wheel-diff

    # propose from post1 on the example index: exactly the six pins post2 moves, each to post2's version
    assert "torch-2.11-post1 → torch-2.11-post1-next: 6 pins move" in out["propose"].out
    for version in ("2.11.0.post2+musa5.2.0", "0.26.0.post2+musa5.2.0", "1.1.0+musa5.2.0torch2.11.0.post2",
                    "0.1.90"):
        assert version in out["propose"].out
    assert not (clone / "stacks" / "torch-2.11-post1-next.toml").exists()  # a dry run writes nothing
    # the report shows every step that ran: only the sections of the steps that need the vendor's base
    # image are "not run", and each of those names the command to run
    report = out["report"].out
    sections = dict(re.findall(r"^### (.+?) (✅|❌|⚪ not run|⚠️ stale)$", report, re.M))
    assert {"Profile diff", "Files per pin and target", "ABI closure and unguarded pins",
            "Wheel diffs of moved wheels that carry ELF", "Stale references"} <= set(sections), report
    assert {t for t, status in sections.items() if status != "✅"} == ENGINE_SECTIONS, report
    assert "not recorded" not in report.split("### Wheel diffs", 1)[1].split("\n### ", 1)[0], report
    for title in ENGINE_SECTIONS:
        body = report.split(f"### {title} ", 1)[1].split("\n### ", 1)[0]
        assert "`stackctl " in body, f"{title}: no command to run\n{body}"
    assert "| deep_ep | 1.1.0+musa5.2.0torch2.11.0.post1 | 1.1.0+musa5.2.0torch2.11.0.post2 |" in out["diff"].out
    lock = json.loads((clone / "stacks" / "torch-2.11-post2.lock").read_text())
    files = {(p["name"], f["target"]): f for p in lock["pins"] for f in p["files"]}
    assert ("deep_ep", "cp310-linux_x86_64") in files and ("deep_ep", "cp312-linux_x86_64") not in files
    index_of = {p["name"]: p["index"] for p in lock["pins"]}
    # HTML-only vendor index: sizes from Content-Length, upload times from Last-Modified; the public
    # index says both in its JSON
    assert all(f["size"] and f["upload_time_source"] == ("last-modified" if index_of[name] == "musa" else "index")
               for (name, _), f in files.items())
    trains = {t["train"]: t for t in lock["trains"]}
    assert "musa-torch" in trains  # every train of the profile published together, within minutes
    assert all(t["spread_seconds"] < 3600 and not t["trailing"] for t in trains.values())
    torch = next(line for line in out["outdated"].out.splitlines() if line.startswith("| torch |"))
    assert "2.11.0.post2+musa5.2.1mp22 (local label +musa5.2.1mp22; platform linux_aarch64)" in torch
    assert "⬆" not in out["outdated"].out
    assert ("deep_ep: deep_ep-1.1.0+musa5.2.0torch2.11.0.post2-cp310-cp310-linux_x86_64.whl needs "
            "libmusa_kernels.so, libmusa_python.so.2 from torch_musa, and declares no Requires-Dist")\
        in out["abi"].out
    assert "needs libtorch_python.so from torch, and declares no Requires-Dist" in out["abi"].out
    assert "+libmusa_kernels.so" in out["wheel-diff"].out
    musa_private = (clone / "requirements" / "musa_private.txt").read_text()
    assert 'deep_ep==1.1.0+musa5.2.0torch2.11.0.post2 ; python_version == "3.10" \\\n    --hash=sha256:' \
        in musa_private


@pytest.mark.parametrize("stack", ["torch-2.9-control", "torch-2.11-post1", "torch-2.11-post2"])
def test_reference_stacks_resolve_check_and_export_for_every_target(cli: Cli, clone: Path, example: ExampleIndexes,
                                                                    stack: str) -> None:
    r = cli("resolve", stack, "--json", *index_args(example), cwd=clone)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    targets = {(f["name"], f["target"]) for f in doc["files"]}
    for name in ("torch", "torch_musa", "torchvision", "torchaudio", "mate"):
        assert {(name, "cp310-linux_x86_64"), (name, "cp312-linux_x86_64")} <= targets
    assert {t for n, t in targets if n == "deep_ep"} == {"cp310-linux_x86_64"}
    assert {c["target"] for c in doc["closure"]} == {"cp310-linux_x86_64", "cp312-linux_x86_64"}
    abi = cli("abi", stack, "--inventory", "example-base.json", "--json", *index_args(example), cwd=clone)
    assert abi.code == 0, abi.err
    reports = {rep["target"]: rep for rep in json.loads(abi.out)["reports"]}
    assert reports["cp310-linux_x86_64"]["ok"] and reports["cp310-linux_x86_64"]["checked_files"] == 1
    # deep_ep's extension finds torch's and torch_musa's libraries because the gate imports them first
    where = {r["needed"]: r for r in reports["cp310-linux_x86_64"]["resolutions"]}
    assert where["libtorch_python.so"]["where"] == "loaded"
    assert where["libtorch_python.so"]["detail"].startswith("loaded by `import torch`: torch-")
    assert where["libtorch_python.so"]["provider_path"] == "torch/lib/libtorch_python.so"
    assert where["libmusa_python.so.2"]["detail"].startswith("loaded by `import torch_musa`: torch_musa-")
    assert where["libmusart.so.5"]["where"] == "image"
    coupling = [f for f in reports["cp310-linux_x86_64"]["findings"] if f["kind"] == "coupling"]
    assert sorted(f["message"].split(" from ")[1].split(",")[0] for f in coupling) == ["torch", "torch_musa"]
    # nothing is checked on cp312 (deep_ep is not there), and no pure package is warned about
    assert reports["cp312-linux_x86_64"]["checked_files"] == 0
    assert not any(f["kind"] == "coupling" for rep in reports.values() for f in rep["findings"]
                   if "deep_ep" not in f["message"])
    export = cli("export", stack, "--out", "req", "--lock", f"stacks/{stack}.lock", cwd=clone)
    assert export.code == 0, export.err
    check = cli("check", stack, "--requirements", "req", "--hashes", cwd=clone)
    assert check.code == 0, check.out + check.err


def test_serve_prints_the_urls_and_serves_until_stopped(tmp_path: Path) -> None:
    """The newcomer's command: both indexes answer, the vendor one in HTML only, until SIGTERM."""
    import signal
    import sys
    import urllib.request

    proc = subprocess.Popen([sys.executable, str(REPO / "examples" / "vendor_index.py"), "serve", "--port", "0",
                             "--inventory", str(tmp_path / "base.json")], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        musa, public = lines[0].split()[1], lines[1].split()[1]
        assert lines[2].strip() == f"--index musa={musa} --index public={public}"
        with urllib.request.urlopen(musa + "deep-ep/", timeout=10) as page:
            html = page.read().decode()
            assert page.headers["Content-Type"] == "text/html"
        assert "deep_ep-1.1.0+musa5.2.0torch2.11.0.post2-cp310-cp310-linux_x86_64.whl" in html
        assert "cp312" not in html  # the vendor builds deep_ep for cp310 only
        with urllib.request.urlopen(public + "pycparser/", timeout=10) as page:
            assert "pycparser-2.22-py3-none-any.whl" in page.read().decode()
        assert json.loads((tmp_path / "base.json").read_text())["image"] == "musa-runtime:5.2.0-ubuntu22.04"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_abi_checks_every_target_when_one_cannot_be_read(cli: Cli, clone: Path, example: ExampleIndexes) -> None:
    """A wheel the index no longer serves stops its own target (exit 3), not the others' report."""
    assert cli("resolve", "torch-2.11-post2", "--no-closure", *index_args(example), cwd=clone).code == 0
    gone = next(n for n in example.musa.files if n.startswith("torch-2.11.0.post2+musa5.2.0-cp312"))
    del example.musa.files[gone]
    r = cli("abi", "torch-2.11-post2", "--inventory", "example-base.json", "--json", *index_args(example), cwd=clone)
    assert r.code == 3
    doc = json.loads(r.out)
    assert [rep["target"] for rep in doc["reports"]] == ["cp310-linux_x86_64"] and doc["reports"][0]["ok"]
    [problem] = doc["problems"]
    assert problem["exit_code"] == 3 and problem["error"].startswith("cp312-linux_x86_64: ")
    assert gone in problem["error"]
    assert [ln for ln in r.err.splitlines() if ln.startswith("error:")] == ["error: " + problem["error"]]


def test_serve_never_overwrites_another_images_inventory(tmp_path: Path) -> None:
    """`inventory IMAGE --out base.json` then `serve --inventory base.json`: the real one stays."""
    import sys

    real = tmp_path / "base.json"
    real.write_text('{"format": 1, "image": "stackctl-base:bookworm", "arch": "x86_64"}\n')
    before = real.read_text()
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "vendor_index.py"), "serve", "--port", "0",
                           "--inventory", str(real)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and real.read_text() == before
    assert proc.stderr.strip() == (f"error: {real} already holds the inventory of stackctl-base:bookworm, not the "
                                   "example's made-up musa-runtime:5.2.0-ubuntu22.04; give --inventory a file of "
                                   "its own (e.g. example-base.json)")


def test_abi_says_when_the_inventory_is_not_of_the_profiles_base(cli: Cli, clone: Path,
                                                                   example: ExampleIndexes) -> None:
    public = ("--index", f"public={example.public.url}")
    assert cli("resolve", "public-example", "--no-closure", *public, cwd=clone).code == 0
    r = cli("abi", "public-example", "--inventory", "example-base.json", "--json", *public, cwd=clone)
    warning = ("example-base.json: is the inventory of musa-runtime:5.2.0-ubuntu22.04, not of the profile's base "
               "image stackctl-base:bookworm")
    assert any(w.startswith(warning) for w in json.loads(r.out)["warnings"]), r.out
    assert warning in " ".join(r.err.split())
    assert cli("resolve", "torch-2.11-post2", "--no-closure", *index_args(example), cwd=clone).code == 0
    same = cli("abi", "torch-2.11-post2", "--inventory", "example-base.json", "--json", *index_args(example),
               cwd=clone)
    assert not [w for w in json.loads(same.out)["warnings"] if "is the inventory of" in w]


def test_without_uv_the_walkthrough_fails_under_ci_and_skips_elsewhere(tmp_path: Path) -> None:
    import os
    import sys

    hidden = tmp_path / "hide"  # the `uv` distribution made unimportable, and no `uv` on PATH
    (hidden / "uv").mkdir(parents=True)
    (hidden / "uv" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    # PATH: where gcc and git are, less any directory that holds a uv
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "uv").exists())
    node = f"{Path(__file__).relative_to(REPO)}::test_the_first_blocks_commit_takes_the_lock"
    for ci, outcome in (("true", "1 error"), ("", "1 skipped")):
        env = {**os.environ, "PATH": path, "PYTHONPATH": str(hidden), "CI": ci}
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", node], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=120)
        assert outcome in r.stdout and "uv (`pip install -e '.[test]'` installs it)" in r.stdout, r.stdout + r.stderr
