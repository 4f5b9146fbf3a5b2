"""validate / show / diff / export / scan through the command line, on real files and a real git repo."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import DATA, STACKS
from tests.support.cli import Cli
from tests.support.gitrepo import git

POST1 = str(STACKS / "torch-2.11-post1.toml")
POST2 = str(STACKS / "torch-2.11-post2.toml")
MOVED = {"torch", "torch_musa", "torchvision", "torchaudio", "torchada", "deep_ep"}


def test_validate_ok(cli: Cli) -> None:
    r = cli("validate", POST1, POST2, str(STACKS / "torch-2.9-control.toml"), str(STACKS / "public-example.toml"))
    assert r.code == 0, r.err
    assert "ok torch-2.11-post2: 20 pins, 2 targets" in r.out


def test_validate_reports_every_problem_and_exits_2(cli: Cli) -> None:
    r = cli("validate", str(DATA / "bad-everything" / "stack.toml"), str(DATA / "cycle" / "a.toml"))
    assert r.code == 2
    lines = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(lines) == 17  # 16 in the first file (an unknown key hides none of them), the cycle in the other
    assert any("stack.extend: unknown key; did you mean 'extends'?" in line for line in lines)
    assert any("extends cycle" in line for line in lines)
    assert "Traceback" not in r.err


def test_validate_json_error(cli: Cli) -> None:
    r = cli("validate", str(DATA / "cycle" / "a.toml"), "--json")
    assert r.code == 2
    payload = json.loads(r.out)
    assert payload["exit_code"] == 2
    assert "extends cycle" in payload["problems"][0]


def test_missing_file_and_unknown_stack_exit_2(cli: Cli, tmp_path: Path) -> None:
    r = cli("show", str(tmp_path / "nope.toml"))
    assert (r.code, r.err.strip()) == (2, f"error: {tmp_path / 'nope.toml'}: no such file")
    r = cli("show", "no-such-stack", cwd=tmp_path)
    assert r.code == 2 and "unknown stack 'no-such-stack'" in r.err


def test_invalid_version_is_one_line_exit_2(cli: Cli, tmp_path: Path) -> None:
    text = (STACKS / "public-example.toml").read_text().replace('version = "1.17.1"', 'version = "2.2.x"')
    (tmp_path / "p.toml").write_text(text)
    line = text.splitlines().index('version = "2.2.x"') + 1
    r = cli("validate", str(tmp_path / "p.toml"))
    assert r.code == 2
    assert r.err.strip().splitlines() == [
        f"error: {tmp_path / 'p.toml'}:{line} pins.cffi.version: '2.2.x' is not a PEP 440 version "
        "(pins are exact: 2.11.0.post2+musa5.2.0)"]


def test_malformed_toml_is_one_line_exit_2(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[stack]\nname = "x"\nversion = = 2\n')
    for extra in ((), ("--json",)):
        r = cli("validate", str(path), *extra)
        assert r.code == 2, r.out + r.err
        assert [line for line in r.err.splitlines() if line.strip()] == [
            f"error: {path}:3: malformed TOML: Invalid value (at line 3, column 11)"]
    assert json.loads(r.out)["problems"] == [f"{path}:3: malformed TOML: Invalid value (at line 3, column 11)"]


def test_validate_and_export_json(cli: Cli, tmp_path: Path) -> None:
    r = cli("validate", POST2, "--json")
    assert r.code == 0, r.err
    [ok] = json.loads(r.out)["stacks"]
    assert (ok["stack"], ok["pins"]) == ("torch-2.11-post2", 20)
    assert ok["sources"] == [POST2, POST1] and ok["digest"].startswith("sha256:")
    r = cli("export", POST2, "--out", str(tmp_path), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out) == {"stack": "torch-2.11-post2",
                                 "written": [str(tmp_path / "common.txt"), str(tmp_path / "musa_private.txt")]}


def test_show_effective_profile(cli: Cli) -> None:
    r = cli("show", POST2)
    assert r.code == 0, r.err
    assert "torch-2.11-post2" in r.out and "torch-2.11-post1.toml" in r.out
    # repository and tag each whole on its line (together they are wider than 80 columns)
    lines = [line.strip() for line in r.out.splitlines()]
    assert "image: vllm-musa" in lines
    assert "ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post2_musa5.2.0" in lines
    j = json.loads(cli("show", POST2, "--json").out)
    assert j["tag"] == "ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post2_musa5.2.0"
    assert [e["dist"] for e in j["gate"]][:3] == ["torchada", "numpy", "torch"]
    mate = next(p for p in j["stack"]["pins"] if p["name"] == "mate")
    assert mate["version"] == "0.2.7" and mate["index"] == "musa"


def test_show_by_stack_name(cli: Cli) -> None:
    r = cli("show", "torch-2.9-control", "--json", cwd=STACKS.parent)
    assert r.code == 0 and json.loads(r.out)["stack"]["name"] == "torch-2.9-control"


def test_diff_post1_post2_table(cli: Cli) -> None:
    j = json.loads(cli("diff", POST1, POST2, "--json").out)
    moved = {p["package"] for p in j["pins"] if p["change"] != "unchanged"}
    assert moved == MOVED
    rows = {p["package"]: p for p in j["pins"]}
    assert rows["torch"]["move"] == "post-release (post1 → post2)"
    assert rows["torchaudio"]["move"] == "post-release (no post → post2)"
    assert rows["torchada"]["move"] == "patch"
    assert rows["deep_ep"]["move"].startswith("local label (musa5.2.0torch2.11.0.post1 → ")
    assert {p for p, r in rows.items() if r["change"] == "unchanged"} == {
        "mate", "mate-mubin", "flash_attn_3", "flash_mla", "deep-gemm", "flashinfer-python", "sageattention",
        "tilelang_musa", "triton", "apache-tvm-ffi", "torch-c-dlpack-ext", "numpy", "transformers", "click"}
    fields = {(f["section"], f["key"]): f for f in j["fields"]}
    assert fields[("image", "tag")]["after"].endswith("2.11.0.post2_musa5.2.0")
    assert ("gate", "probe torchada fused-MoE configs") in fields


def test_diff_markdown(cli: Cli) -> None:
    r = cli("diff", POST1, POST2, "--markdown", "--changed-only")
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0] == "| package | before | after | note |"
    assert lines[1] == "| --- | --- | --- | --- |"
    assert "| torch | 2.11.0.post1+musa5.2.0 | 2.11.0.post2+musa5.2.0 | post-release (post1 → post2) |" in lines
    assert not any(line.startswith("| mate |") for line in lines)


def test_diff_control_vs_candidate_notes_added_and_removed(cli: Cli) -> None:
    j = json.loads(cli("diff", str(STACKS / "torch-2.9-control.toml"), POST1, "--json").out)
    rows = {p["package"]: p for p in j["pins"]}
    assert rows["torch"]["move"] == "minor"
    assert rows["flashinfer-python"]["change"] == "added" and rows["flashinfer-python"]["before"] is None
    assert (rows["tilelang_musa"]["before"], rows["tilelang_musa"]["after"]) == ("0.1.8+musa.3", "0.1.12+musa.2")
    assert any(f["section"] == "gate" and f["key"] == "order" for f in j["fields"])


def test_diff_against_git_revision(cli: Cli, git_repo: Path) -> None:
    stacks = git_repo / "stacks"
    stacks.mkdir()
    shutil.copy(POST1, stacks)
    shutil.copy(POST2, stacks)
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "post2")
    text = (stacks / "torch-2.11-post1.toml").read_text()
    # Edit the parent only: the child's effective pins change through inheritance.
    mate = '[pins.mate]\nversion = "0.2.7"\n'
    assert mate in text
    (stacks / "torch-2.11-post1.toml").write_text(text.replace(mate, mate.replace("0.2.7", "0.2.8")))
    r = cli("diff", "stacks/torch-2.11-post2.toml@HEAD", "stacks/torch-2.11-post2.toml", "--json", cwd=git_repo)
    assert r.code == 0, r.err
    j = json.loads(r.out)
    moved = [(p["package"], p["before"], p["after"], p["move"]) for p in j["pins"] if p["change"] != "unchanged"]
    assert moved == [("mate", "0.2.7", "0.2.8", "patch")]
    assert j["before"] == "stacks/torch-2.11-post2.toml@HEAD"


def test_diff_unknown_revision_exit_2(cli: Cli, git_repo: Path) -> None:
    (git_repo / "a.toml").write_text("")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "x")
    r = cli("diff", "a.toml@no-such-branch", "a.toml", cwd=git_repo)
    assert r.code == 2 and "unknown git revision 'no-such-branch'" in r.err


def test_export_writes_requirement_files(cli: Cli, tmp_path: Path) -> None:
    r = cli("export", POST2, "--out", str(tmp_path))
    assert r.code == 0, r.err
    private = (tmp_path / "musa_private.txt").read_text().splitlines()
    pins = [line for line in private if not line.startswith("#")]
    assert pins == ["torch==2.11.0.post2+musa5.2.0", "torch_musa==2.11.0.post2+musa5.2.0",
                    "torchvision==0.26.0.post2+musa5.2.0", "torchaudio==2.11.0.post2+musa5.2.0", "mate==0.2.7",
                    "mate-mubin==0.2.7", "flash_attn_3==0.2.7+musa", "flash_mla==0.2.7+musa", "deep-gemm==0.2.7+musa",
                    "flashinfer-python==0.2.7+musa", "sageattention==0.2.7+musa",
                    'deep_ep==1.1.0+musa5.2.0torch2.11.0.post2 ; python_version == "3.10"',
                    "tilelang_musa==0.1.12+musa.2", "triton==3.2.0",
                    "apache-tvm-ffi==0.1.11.post1+musa.1", "torch-c-dlpack-ext==0.1.5"]
    assert not any("--index-url" in line for line in private)
    common = [line for line in (tmp_path / "common.txt").read_text().splitlines() if not line.startswith("#")]
    assert common == ["torchada==0.1.90", "numpy==1.26", "transformers==5.5.3", "click==8.2.0"]
    assert cli("export", POST2, "--out", str(tmp_path), "--check").code == 0


def test_export_check_reports_drift(cli: Cli, tmp_path: Path) -> None:
    assert cli("export", POST2, "--out", str(tmp_path)).code == 0
    path = tmp_path / "common.txt"
    path.write_text(path.read_text().replace("0.1.90", "0.1.89"))
    (tmp_path / "musa_private.txt").unlink()
    r = cli("export", POST2, "--out", str(tmp_path), "--check")
    assert r.code == 1
    assert "-torchada==0.1.89" in r.out and "+torchada==0.1.90" in r.out
    assert "musa_private.txt (missing)" in r.out
    assert "2 requirement files" in r.err
    # --check never writes.
    assert "0.1.89" in path.read_text()
    j = json.loads(cli("export", POST2, "--out", str(tmp_path), "--check", "--json").out)
    assert sorted(d["file"] for d in j["drift"]) == ["common.txt", "musa_private.txt"]


def _tree(repo: Path) -> None:
    (repo / "requirements").mkdir()
    (repo / "requirements" / "musa_private.txt").write_text(
        "torch==2.11.0.post1+musa5.2.0\ndeep_ep==1.1.0+musa5.2.0torch2.11.0.post1\nmate==0.2.7\n")
    (repo / "requirements" / "common.txt").write_text("torchada==0.1.83\nnumpy==0.1.83\n")
    (repo / "docker").mkdir()
    (repo / "docker" / "README.md").write_text(
        "Image tag: ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post1_musa5.2.0\n"
        "Measured on torch 2.11.0.post1.\n"
        "Not stale: torch 2.11.0.post10 and 12.11.0.post1.\n")
    (repo / "router.py").write_text("# on the torchada 0.1.83 stack out_dtype returned zeros\n")
    (repo / "blob.bin").write_bytes(b"\0\x012.11.0.post1+musa5.2.0")
    (repo / "untracked.txt").write_text("2.11.0.post1+musa5.2.0\n")
    git(repo, "add", "requirements", "docker", "router.py", "blob.bin")
    git(repo, "commit", "-qm", "tree")


def test_scan_finds_stale_references(cli: Cli, git_repo: Path) -> None:
    _tree(git_repo)
    r = cli("scan", str(git_repo), "--stack", POST2, "--since", POST1, "--no-record")
    assert r.code == 1
    found = [line for line in r.out.splitlines() if "stale reference" not in line and "recorded in" not in line]
    assert found == [
        "docker/README.md:1: Image tag: ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post1_musa5.2.0",
        "docker/README.md:2: Measured on torch 2.11.0.post1.",
        "requirements/common.txt:1: torchada==0.1.83",
        "requirements/musa_private.txt:1: torch==2.11.0.post1+musa5.2.0",
        "requirements/musa_private.txt:2: deep_ep==1.1.0+musa5.2.0torch2.11.0.post1",
        "router.py:1: # on the torchada 0.1.83 stack out_dtype returned zeros",
    ]
    assert "6 stale references in 4 text files" in r.out  # blob.bin is binary, untracked.txt untracked
    assert "stale reference" in r.err


def test_scan_annotates_each_stale_line_for_ci(cli: Cli, git_repo: Path, tmp_path: Path) -> None:
    _tree(git_repo)
    report = tmp_path / "codequality.json"
    r = cli("scan", str(git_repo / "requirements"), "--stack", POST2, "--since", POST1, "--annotations", "github",
            "--annotations", f"gitlab={report}", cwd=git_repo)
    assert r.code == 1
    assert [ln for ln in r.out.splitlines() if ln.startswith("::")] == [
        "::error file=requirements/common.txt,line=1,title=stackctl scan::names superseded 0.1.83 (torchada): "
        "torchada==0.1.83",
        "::error file=requirements/musa_private.txt,line=1,title=stackctl scan::names superseded "
        "2.11.0.post1+musa5.2.0 (torch, torch_musa): torch==2.11.0.post1+musa5.2.0",
        "::error file=requirements/musa_private.txt,line=2,title=stackctl scan::names superseded "
        "1.1.0+musa5.2.0torch2.11.0.post1 (deep_ep): deep_ep==1.1.0+musa5.2.0torch2.11.0.post1"]
    issues = json.loads(report.read_text())
    assert [(i["location"]["path"], i["location"]["lines"]["begin"]) for i in issues] == [
        ("requirements/common.txt", 1), ("requirements/musa_private.txt", 1), ("requirements/musa_private.txt", 2)]


def test_scan_allow_file_and_json(cli: Cli, git_repo: Path) -> None:
    _tree(git_repo)
    (git_repo / ".stackctl-scan-allow").write_text("# intentional\ndocker/*\nrequirements/*.txt:2\n")
    r = cli("scan", str(git_repo), "--stack", POST2, "--since", POST1, "--json", "--no-record")
    assert r.code == 1
    j = json.loads(r.out)
    assert [(x["path"], x["line"], x["packages"]) for x in j["references"]] == [
        ("requirements/common.txt", 1, ["torchada"]),
        ("requirements/musa_private.txt", 1, ["torch", "torch_musa"]),
        ("router.py", 1, ["torchada"]),
    ]


def test_scan_clean_tree_exits_0(cli: Cli, git_repo: Path) -> None:
    (git_repo / "requirements.txt").write_text("torch==2.11.0.post2+musa5.2.0\ntorchada==0.1.90\n")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "clean")
    r = cli("scan", str(git_repo), "--stack", POST2, "--since", POST1, "--record", str(git_repo / "scan.json"))
    assert r.code == 0, r.out
    assert "0 stale references in 1 text file" in r.out
    assert f"recorded in {git_repo / 'scan.json'} (what `stackctl report` reads)" in r.out.splitlines()
    r = cli("scan", str(git_repo), "--stack", POST2, "--since", POST1, "--no-record")
    assert r.code == 0 and "recorded in" not in r.out


def test_scan_skips_the_old_profile_itself(cli: Cli, tmp_path: Path) -> None:
    shutil.copy(POST1, tmp_path)
    shutil.copy(POST2, tmp_path)
    r = cli("scan", str(tmp_path), "--stack", str(tmp_path / "torch-2.11-post2.toml"),
            "--since", str(tmp_path / "torch-2.11-post1.toml"), "--no-record")
    assert r.code == 0, r.out


def test_every_command_is_in_the_lazy_registry() -> None:
    import typer

    from stackctl.cli import COMMAND_MODULES, app, register

    register([])  # all modules
    registered = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert registered == {c for commands in COMMAND_MODULES.values() for c in commands}


def test_usage_errors_are_one_message_and_exit_2(cli: Cli) -> None:
    for args in (["resolve"], ["diff", "--bogus", "a", "b"], ["abi"]):
        r = cli(*args)
        assert r.code == 2, (args, r.err)
        lines = r.err.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: see `stackctl ")


def test_diff_refuses_to_mix_kinds(cli: Cli) -> None:
    lock = str(STACKS / "torch-2.11-post2.lock")  # the kind is told by the name: the file need not exist
    r = cli("diff", lock, POST2)
    assert r.code == 2
    assert r.err.strip() == (f"error: cannot compare a lock ({lock}) with a profile ({POST2}): "
                             "give two profiles, two locks or two images")
    assert cli("diff", POST1, "127.0.0.1:5000/x:1").code == 2


def test_report_dates_a_lock_by_its_resolve_not_a_later_commit_or_checkout(cli: Cli, tmp_path: Path) -> None:
    """A checkout or a clone moves the lock's mtime; the resolve that wrote it is no later than its commit, and
    in the tree it ran in the mtime is the resolve's own time, earlier than the commit."""
    import os
    import subprocess

    from stackctl.profile.loader import load_stack
    from stackctl.resolve.lock import Lock, write_lock

    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    profile = repo / "stacks" / "public-example.toml"
    shutil.copy(STACKS / "public-example.toml", profile)
    stack = load_stack(profile)
    write_lock(profile.with_suffix(".lock"), Lock(stack.name, stack.digest(), ()))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "lock"], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                        "GIT_COMMITTER_DATE": "2026-03-04T05:06:07Z", "GIT_AUTHOR_DATE": "2026-03-04T05:06:07Z"})
    os.utime(profile.with_suffix(".lock"), (1_900_000_000, 1_900_000_000))  # as a later checkout leaves it
    rep = json.loads(cli("report", "public-example", "--json", cwd=repo).out)
    files = next(s for s in rep["sections"] if s["key"] == "files")
    assert files["time"] == "2026-03-04T05:06:07Z"
    # resolved at 04:00:00, committed later: the resolve's time, not the commit's
    os.utime(profile.with_suffix(".lock"), (1_772_596_800, 1_772_596_800))  # 2026-03-04T04:00:00Z
    rep = json.loads(cli("report", "public-example", "--json", cwd=repo).out)
    assert next(s for s in rep["sections"] if s["key"] == "files")["time"] == "2026-03-04T04:00:00Z"
    # changed since its commit: the file's own time is the better word
    profile.with_suffix(".lock").write_text(profile.with_suffix(".lock").read_text() + "\n")
    os.utime(profile.with_suffix(".lock"), (1_900_000_000, 1_900_000_000))
    rep = json.loads(cli("report", "public-example", "--json", cwd=repo).out)
    assert next(s for s in rep["sections"] if s["key"] == "files")["time"].startswith("2030-03-17")
