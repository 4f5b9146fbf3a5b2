"""`stackctl check`: lock freshness and requirement-file drift, one line per failure."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from stackctl.profile.loader import load_stack
from stackctl.resolve.lock import Lock, LockedFile, LockedPin, write_lock
from tests.conftest import STACKS, Result

Cli = Callable[..., Result]


def _setup(tmp_path: Path) -> Path:
    for name in ("torch-2.11-post1.toml", "torch-2.11-post2.toml"):
        shutil.copy(STACKS / name, tmp_path)
    profile = tmp_path / "torch-2.11-post2.toml"
    stack = load_stack(profile)
    pins = tuple(LockedPin(p.name, p.version, p.index, (LockedFile(
        "cp310-linux_x86_64", f"{p.name}-{p.version}-cp310-cp310-linux_x86_64.whl",
        f"http://127.0.0.1:9/files/{p.name}.whl", f"{i:064x}"),)) for i, p in enumerate(stack.pins))
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
    assert "2 check(s) failed" in r.err


def test_check_without_a_lock(cli: Cli, tmp_path: Path) -> None:
    profile = _setup(tmp_path)
    profile.with_suffix(".lock").unlink()
    r = cli("check", str(profile))
    assert r.code == 1
    assert "FAIL" in r.out and "no such lock; run `stackctl resolve` first" in r.out


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
