"""`stackctl check`: lock freshness and requirement-file drift, one line per failure."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stackctl.profile.loader import load_stack
from stackctl.resolve.lock import Lock, LockedFile, LockedPin, read_lock, write_lock
from tests.conftest import STACKS
from tests.support.cli import Cli


def _setup(tmp_path: Path) -> Path:
    for name in ("torch-2.11-post1.toml", "torch-2.11-post2.toml"):
        shutil.copy(STACKS / name, tmp_path)
    profile = tmp_path / "torch-2.11-post2.toml"
    stack = load_stack(profile)
    pins = tuple(LockedPin(p.name, p.version, p.index, tuple(LockedFile(
        t.label, f"{p.key.replace('-', '_')}-{p.version}-{t.interpreter}-{t.interpreter}-linux_x86_64.whl",
        f"http://127.0.0.1:9/files/{p.name}-{t.interpreter}.whl", f"{i:064x}") for t in p.targets(stack.targets)))
        for i, p in enumerate(stack.pins))
    write_lock(profile.with_suffix(".lock"), Lock(stack.name, stack.digest(), pins))
    return profile


def test_check_passes_when_everything_matches(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    out = tmp_path / "requirements"
    assert cli("export", str(profile), "--out", str(out), "--lock", str(profile.with_suffix(".lock"))).code == 0
    r = cli("check", str(profile), "--requirements", str(out), "--hashes")
    assert r.code == 0, r.out + r.err
    assert [line.split()[0] for line in r.out.splitlines()] == ["PASS", "PASS", "PASS"]


def test_check_fails_with_one_line_per_failure(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    out = tmp_path / "requirements"
    assert cli("export", str(profile), "--out", str(out)).code == 0
    # The profile moves on; neither the lock nor the requirement files follow.
    profile.write_text(profile.read_text().replace('version = "0.1.90"', 'version = "0.1.91"'))
    r = cli("check", str(profile), "--requirements", str(out), "--json")
    assert r.code == 1
    j = json.loads(r.out)
    assert len(j["failed"]) == 2
    assert "made from another version of torch-2.11-post2" in j["failed"][0]
    assert j["failed"][1].startswith(f"{out / 'common.txt'}: differs from torch-2.11-post2")
    assert j["passed"] == [f"{out / 'musa_private.txt'} matches torch-2.11-post2"]
    assert "2 checks failed" in r.err


def test_check_without_a_lock(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    profile.with_suffix(".lock").unlink()
    r = cli("check", str(profile))
    said = f"{profile.with_suffix('.lock')}: no such lock; run `stackctl resolve {profile}` first"
    assert r.code == 1
    assert "FAIL" in r.out and said in r.out
    # `lock` says the same of the same missing lock, with the same exit code
    for args in ((), ("--check",)):
        r = cli("lock", str(profile), *args)
        assert (r.code, [ln for ln in r.err.splitlines() if ln.startswith("error:")]) == (1, [f"error: {said}"])


def test_check_hashes_drift_names_the_export_that_fixes_it(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    lock = profile.with_suffix(".lock")
    out = tmp_path / "requirements"
    assert cli("export", str(profile), "--out", str(out)).code == 0  # no hashes: drift under --hashes
    r = cli("check", str(profile), "--requirements", str(out), "--hashes", "--json")
    assert r.code == 1
    failed = json.loads(r.out)["failed"]
    assert failed and all(f.endswith(f"run `stackctl export {profile} --out {out} --lock {lock}`") for f in failed)
    fixed = cli("export", str(profile), "--out", str(out), "--lock", str(lock))
    assert fixed.code == 0 and cli("check", str(profile), "--requirements", str(out), "--hashes").code == 0


POST2_TORCH = "torch==2.11.0.post2+musa5.2.0"
POST1_TORCH = "torch==2.11.0.post1+musa5.2.0"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


# Each drift the project's hand-written contract test (SUPPORTED_MUSA_STACKS) catches, made on the files
# `export` wrote, and the line `check` fails with.
@pytest.mark.parametrize(("file", "old", "new", "failures"), [
    ("musa_private.txt", POST2_TORCH + "\n", f"{POST2_TORCH}\n{POST1_TORCH}\n",
     ["musa_private.txt: differs from torch-2.11-post2: 2 pins for torch: "
      f"{POST2_TORCH} (musa_private.txt:3), {POST1_TORCH} (musa_private.txt:4); a stack pins each distribution once",
      f"musa_private.txt: differs from torch-2.11-post2: line 4 pins {POST1_TORCH}, torch-2.11-post2 pins "
      f"{POST2_TORCH}"]),
    ("musa_private.txt", POST2_TORCH, POST1_TORCH,  # the files are another stack's
     [f"musa_private.txt: differs from torch-2.11-post2: line 3 pins {POST1_TORCH}, torch-2.11-post2 pins "
      f"{POST2_TORCH}"]),
    ("musa_private.txt", 'deep_ep==1.1.0+musa5.2.0torch2.11.0.post2 ; python_version == "3.10"\n', "",
     ["musa_private.txt: differs from torch-2.11-post2: no pin for deep_ep "
      "(torch-2.11-post2 pins deep_ep==1.1.0+musa5.2.0torch2.11.0.post2)"]),
    ("common.txt", "torchada==0.1.90\n", "",
     ["common.txt: differs from torch-2.11-post2: no pin for torchada (torch-2.11-post2 pins torchada==0.1.90)"]),
    ("common.txt", "click==8.2.0\n", "click==8.2.0\nmthreads-ml-py>=2.4.1\n",
     ["common.txt: differs from torch-2.11-post2: line 7: mthreads-ml-py>=2.4.1 is a requirement "
      "torch-2.11-post2 does not declare"]),
    ("musa_private.txt", ' ; python_version == "3.10"', "",  # deep_ep is built for cp310 only
     ["musa_private.txt: differs from torch-2.11-post2: line 14 pins deep_ep==1.1.0+musa5.2.0torch2.11.0.post2; "
      'torch-2.11-post2 pins deep_ep only where python_version == "3.10"']),
], ids=["two-torch-pins", "unsupported-stack", "private-pin-missing", "torchada-not-in-public-file",
        "unpinned-line", "marker-dropped"])
def test_check_names_each_drift(cli: Cli, tmp_path: Path, file: str, old: str, new: str,
                                failures: list[str]) -> None:
    profile = _setup(tmp_path)
    out = tmp_path / "requirements"
    assert cli("export", str(profile), "--out", str(out)).code == 0
    _edit(out / file, old, new)
    r = cli("check", str(profile), "--requirements", str(out), "--json")
    assert r.code == 1
    fix = f"; run `stackctl export {profile} --out {out}`"
    assert json.loads(r.out)["failed"] == [f"{out}/{f}{fix}" for f in failures]


def test_check_names_a_pin_in_the_wrong_file(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    out = tmp_path / "requirements"
    assert cli("export", str(profile), "--out", str(out)).code == 0
    _edit(out / "common.txt", "torchada==0.1.90\n", "")
    _edit(out / "musa_private.txt", POST2_TORCH, "torchada==0.1.90\n" + POST2_TORCH)
    r = cli("check", str(profile), "--requirements", str(out))
    assert r.code == 1
    assert ("FAIL " + f"{out / 'musa_private.txt'}: differs from torch-2.11-post2: line 3 pins torchada==0.1.90, "
            "which torch-2.11-post2 exports to common.txt") in r.out
    assert "no pin for torchada (torch-2.11-post2 pins torchada==0.1.90)" in r.out


def test_check_refuses_a_gate_that_imports_torch_before_torchada(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    parent = tmp_path / "torch-2.11-post1.toml"
    _edit(parent, "gate = { order = 1, before = [\"torch\"] }", "gate = { order = 3, before = [\"torch\"] }")
    _edit(parent, "train = \"musa-torch\"\ngate = { order = 3 }", "train = \"musa-torch\"\ngate = { order = 1 }")
    for command in (("check", str(profile)), ("validate", str(profile))):
        r = cli(*command)
        assert r.code == 2
        assert "pins.torchada.gate.order: gate order: torchada (order 3) must come before torch (order 1)" in r.err


def test_check_reads_hashed_files_pin_by_pin(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    lock = profile.with_suffix(".lock")
    out = tmp_path / "requirements"
    assert cli("export", str(profile), "--out", str(out), "--lock", str(lock)).code == 0
    _edit(out / "musa_private.txt", "mate==0.2.7 \\\n", "mate==0.2.6 \\\n")
    r = cli("check", str(profile), "--requirements", str(out), "--hashes", "--json")
    assert r.code == 1
    # Each pin takes two lines (its hash on the next), and mate is the fifth.
    assert json.loads(r.out)["failed"] == [
        f"{out / 'musa_private.txt'}: differs from torch-2.11-post2: line 11 pins mate==0.2.6, torch-2.11-post2 pins "
        f"mate==0.2.7; run `stackctl export {profile} --out {out} --lock {lock}`"]


def test_a_hand_edited_lock_fails(cli: Cli, tmp_path: Path) -> None:
    """The profile digest still matches, but someone moved a pin in the lock itself: only build noticed."""
    profile = _setup(tmp_path)
    lock_file = profile.with_suffix(".lock")
    data = json.loads(lock_file.read_text())
    torch = next(p for p in data["pins"] if p["name"] == "torch")
    torch["version"] = "2.11.0.post1+musa5.2.0"
    for f in torch["files"]:
        f["filename"] = f["filename"].replace("post2", "post1")
    data["pins"] = [p for p in data["pins"] if p["name"] != "click"]
    lock_file.write_text(json.dumps(data))
    r = cli("check", str(profile), "--json")
    assert r.code == 1
    failed = json.loads(r.out)["failed"]
    assert any("pin torch is 2.11.0.post1+musa5.2.0 in the lock, 2.11.0.post2+musa5.2.0 in the profile" in f
               for f in failed)
    assert any("the lock's cp312-linux_x86_64 file is torch-2.11.0.post1+musa5.2.0-cp312" in f for f in failed)
    assert any("pin click 8.2.0 is in the profile, not in the lock" in f for f in failed)
    assert all("edited by hand" in f for f in failed)


def test_check_annotates_each_failure_at_its_file_and_line(cli: Cli, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    profile = _setup(tmp_path)
    out = tmp_path / "requirements"
    assert cli("export", str(profile), "--out", str(out)).code == 0
    _edit(out / "common.txt", "click==8.2.0\n", "click==8.2.0\nmthreads-ml-py>=2.4.1\n")
    profile.write_text(profile.read_text().replace('version = "0.1.90"', 'version = "0.1.91"'))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    r = cli("check", str(profile), "--requirements", str(out))
    assert r.code == 1
    commands = [ln for ln in r.out.splitlines() if ln.startswith("::")]
    assert [ln.split("::")[1] for ln in commands] == [
        "error file=torch-2.11-post2.lock,title=stackctl check",
        "error file=requirements/common.txt,line=3,title=stackctl check",  # torchada moved
        "error file=requirements/common.txt,line=7,title=stackctl check"]
    assert commands[2].endswith("::" + f"{out / 'common.txt'}: differs from torch-2.11-post2: line 7: "
                                "mthreads-ml-py>=2.4.1 is a requirement torch-2.11-post2 does not declare; "
                                f"run `stackctl export {profile} --out {out}`")
    # the PASS/FAIL lines a person reads are the same as without annotations
    assert [ln.split()[0] for ln in r.out.splitlines() if not ln.startswith("::")] == ["PASS", "FAIL", "FAIL",
                                                                                       "FAIL"]


def test_lock_check_annotates_the_stale_lock(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    profile.write_text(profile.read_text().replace('version = "0.1.90"', 'version = "0.1.91"'))
    r = cli("lock", str(profile), "--check", "--annotations", "github", cwd=tmp_path)
    assert r.code == 1
    [line] = r.out.splitlines()
    assert line.startswith("::error file=torch-2.11-post2.lock,title=stackctl lock::")
    assert "was made from another version of torch-2.11-post2" in line
    assert line.endswith(f"; run `stackctl resolve {profile}` and commit the lock")
    assert "was made from another version of torch-2.11-post2" in r.err


def test_a_stack_phase_gate_entry_the_lock_does_not_install_is_refused_with_its_fix(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    parent = tmp_path / "torch-2.11-post1.toml"
    # the gate as it was before phases: the project's own installs checked in the stack image
    parent.write_text(parent.read_text().replace('phase = "app"\n', ""))
    stack = load_stack(profile)
    lock = Lock(stack.name, stack.digest(), load_lock_pins(profile))
    write_lock(profile.with_suffix(".lock"), lock)
    r = cli("check", str(profile))
    assert r.code == 2, r.out + r.err
    lines = r.err.splitlines()
    assert len(lines) == 5 and all(ln.startswith("error: torch-2.11-post2: gate entry ") for ln in lines)
    assert lines[0] == (
        "error: torch-2.11-post2: gate entry uvloop (order 17) runs in the stack phase, but the lock installs no "
        "uvloop for cp310-linux_x86_64, cp312-linux_x86_64: pin it ([pins.uvloop]), or mark it phase = \"app\" "
        "when the project's own build installs it")
    assert [ln.split()[4] for ln in lines] == ["uvloop", "pycountry", "pytest", "vllm", "vllm_musa"]


def load_lock_pins(profile: Path) -> tuple[LockedPin, ...]:
    from stackctl.resolve.lock import read_lock

    return read_lock(profile.with_suffix(".lock")).pins


def _first_file(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["pins"][0]["files"][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("edit", [
    lambda f: f.update(sha256="f" * 64),  # the bytes an install accepts
    lambda f: f.update(url=f["url"].replace("127.0.0.1:9", "127.0.0.1:10")),  # where they come from
    lambda f: f.update(size=4096),  # what a range read of them expects
], ids=["sha256", "url", "size"])
def test_a_lock_with_one_file_edited_by_hand_fails_check_and_lock_check(cli: Cli, tmp_path: Path,
                                                                       edit: Callable[[dict[str, Any]], None]) -> None:
    """Nothing the profile names changed (digest, pins, versions, targets, file names), only what a build trusts
    of one file: the lock's own digest no longer covers its content."""
    profile = _setup(tmp_path)
    lock = profile.with_suffix(".lock")
    doc = json.loads(lock.read_text())
    assert doc["lock_digest"] == read_lock(lock).digest()  # what records and image labels name
    edit(_first_file(doc))
    lock.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    r = cli("check", str(profile), "--json")
    assert r.code == 1, r.out + r.err
    [failed] = json.loads(r.out)["failed"]
    assert failed.startswith(f"{lock}: edited by hand since `stackctl resolve` wrote it (its content's digest is "
                             "sha256:")
    assert failed.endswith(f"; resolve it again: `stackctl resolve {profile}`")
    assert json.loads(r.out)["passed"] == []
    for args in ((), ("--check",)):  # `lock` says the same, with check's exit code
        r = cli("lock", str(profile), *args)
        assert (r.code, [ln for ln in r.err.splitlines() if ln.startswith("error:")]) == (1, [f"error: {failed}"])
    # every command that installs or exports from it refuses it as its input, before asking any index
    for args in (("export", str(profile), "--out", str(tmp_path / "req"), "--lock", str(lock)),
                 ("fetch", str(profile), "--target", "cp310-linux_x86_64", "--dest", str(tmp_path / "wh")),
                 ("build", str(profile), "--allow-dirty")):
        r = cli(*args)
        assert (r.code, r.err.splitlines()[0]) == (2, f"error: {failed}"), r.err
    # diff shows what the edit changed
    r = cli("diff", str(lock), str(lock))
    assert r.code == 0, r.err


def test_a_lock_from_before_locks_carried_their_digest_is_resolved_again(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    lock = profile.with_suffix(".lock")
    doc = json.loads(lock.read_text())
    del doc["lock_digest"]
    lock.write_text(json.dumps(doc))
    r = cli("check", str(profile), "--json")
    assert r.code == 1
    assert json.loads(r.out)["failed"] == [
        f"{lock}: states no lock_digest (written by a stackctl from before locks carried one), so an edit by hand "
        f"cannot be told from resolve's work; resolve it again: `stackctl resolve {profile}`"]
