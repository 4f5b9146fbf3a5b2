"""`export --format pylock`: the lock as PEP 751 lock files, validated by `packaging.pylock` and installed for
real by pip and by uv from a loopback index serving wheels the test builds; `check` holds them to the lock."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from packaging.pylock import Pylock, is_valid_pylock_path

from tests.support.cli import Cli
from tests.support.index_server import IndexServer
from tests.support.profiles import write_profile
from tests.support.wheels import build_wheel

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

PY = f"{sys.version_info.major}.{sys.version_info.minor}"  # a target this interpreter is: pip installs for it
TARGET = f"cp{PY.replace('.', '')}-linux_x86_64"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[IndexServer, Path]]:
    """An index with `toplib` (the pin), which requires `helperdep` (the closure), and a profile of it."""
    wheels = tmp_path / "wheels"
    top = build_wheel(wheels, "toplib", "1.2.0", files={"toplib/__init__.py": "VERSION = '1.2.0'\n"},
                      requires_dist=["helperdep>=1"])
    helper = build_wheel(wheels, "helperdep", "1.0.1", files={"helperdep/__init__.py": "X = 1\n"})
    with IndexServer() as server:
        server.add(top, upload_time=T0)
        server.add(helper, upload_time=T0)
        write_profile(tmp_path / "repo", "pl", {"toplib": {"version": "1.2.0", "file": "requirements.txt"}},
                      index="vendor", index_url=server.url, python=(PY,))
        yield server, tmp_path / "repo"


def test_export_pylock_is_valid_and_installs_with_pip_and_uv(cli: Cli, served: tuple[IndexServer, Path],
                                                              tmp_path: Path) -> None:
    server, repo = served
    assert cli("resolve", "pl", cwd=repo).code == 0
    r = cli("export", "pl", "--format", "pylock", "--out", "locks", cwd=repo)
    assert r.code == 0, r.err
    path = repo / "locks" / f"pylock.{TARGET}.toml"
    assert r.out.splitlines() == [f"wrote locks/pylock.{TARGET}.toml"] and is_valid_pylock_path(path)
    doc = Pylock.from_dict(tomllib.loads(path.read_text()))  # the reference model validates it
    doc.validate()
    assert [str(m) for m in doc.environments or ()] == [
        f'sys_platform == "linux" and platform_machine == "x86_64" and python_version == "{PY}"']
    packages = {p.name: p for p in doc.packages}
    assert set(packages) == {"toplib", "helperdep"}  # the pin and its closure
    for name, version in (("toplib", "1.2.0"), ("helperdep", "1.0.1")):  # the pin, and the closure's entry
        p = packages[name]
        [w] = p.wheels or []
        f = server.files[f"{name}-{version}-py3-none-any.whl"]
        assert str(p.version) == version and p.index == server.url
        assert (w.url, w.size, dict(w.hashes), w.upload_time) == (
            f"{server.base}files/{f.path.name}", f.size, {"sha256": f.sha256}, T0)
    # installed as it is, by pip and by uv, from the loopback index and nowhere else
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "UV_NO_CACHE": "1"}
    pip_into = tmp_path / "pip-site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                           str(pip_into), "-r", str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (pip_into / "toplib" / "__init__.py").is_file() and (pip_into / "helperdep" / "__init__.py").is_file()
    uv = shutil.which("uv")
    if uv is None:
        from stackctl.resolve.closure import uv_binary

        uv = uv_binary()
    uv_into = tmp_path / "uv-site"
    done = subprocess.run([uv, "pip", "install", "--no-config", "--python", sys.executable, "--target", str(uv_into),
                           "-r", str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (uv_into / "toplib" / "__init__.py").is_file() and (uv_into / "helperdep" / "__init__.py").is_file()
    # the file's wheels are what was served: every byte fetched from the loopback index
    assert server.requests_to("toplib-1.2.0-py3-none-any.whl")


def test_check_holds_the_pylock_files_to_the_lock(cli: Cli, served: tuple[IndexServer, Path]) -> None:
    server, repo = served
    assert cli("resolve", "pl", cwd=repo).code == 0
    assert cli("export", "pl", "--format", "pylock", "--out", "locks", cwd=repo).code == 0
    r = cli("check", "pl", "--requirements", "locks", "--format", "pylock", cwd=repo)
    assert r.code == 0, r.out + r.err
    assert f"PASS locks/pylock.{TARGET}.toml matches pl" in r.out.splitlines()
    path = repo / "locks" / f"pylock.{TARGET}.toml"
    good = path.read_text()
    path.write_text(good.replace(server.files["helperdep-1.0.1-py3-none-any.whl"].sha256, "0" * 64))
    r = cli("check", "pl", "--requirements", "locks", "--format", "pylock", cwd=repo)
    assert r.code == 1
    assert (f"FAIL locks/pylock.{TARGET}.toml: differs from pl: the lock's packages; run `stackctl export pl "
            "--out locks --format pylock` and commit it") in r.out.splitlines(), r.out
    # a version its own wheel's name contradicts: packaging.pylock refuses the file, and check says why
    path.write_text(good.replace('version = "1.0.1"', 'version = "1.0.0"'))
    r = cli("check", "pl", "--requirements", "locks", "--format", "pylock", cwd=repo)
    assert r.code == 1 and "differs from pl: not a PEP 751 lock file (Version in 'helperdep-1.0.1" in r.out
    assert cli("export", "pl", "--format", "pylock", "--out", "locks", "--check", cwd=repo).code == 1
    path.unlink()
    r = cli("check", "pl", "--requirements", "locks", "--format", "pylock", cwd=repo)
    assert r.code == 1 and f"FAIL locks/pylock.{TARGET}.toml: missing;" in r.out


def test_pylock_needs_a_lock(cli: Cli, served: tuple[IndexServer, Path]) -> None:
    _, repo = served
    r = cli("export", "pl", "--format", "pylock", "--out", "locks", cwd=repo)
    assert r.code == 2
    assert r.err.strip().splitlines()[0] == "error: stacks/pl.lock: no such lock; run `stackctl resolve " \
                                            "stacks/pl.toml` first"
    r = cli("export", "pl", "--format", "toml", cwd=repo)
    assert r.code == 2 and "--format toml: one of requirements, pylock" in r.err


def test_pylock_index_is_the_index_resolved_from_not_the_host_of_its_files(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pip index whose files live on a host of their own (as the public one's do): each package's `index`
    is the index, as `show` names it, never the file host the lock's URLs point at."""
    wheels = tmp_path / "wheels"
    top = build_wheel(wheels, "toplib", "1.2.0", files={"toplib/__init__.py": "VERSION = '1.2.0'\n"},
                      requires_dist=["helperdep>=1"])
    helper = build_wheel(wheels, "helperdep", "1.0.1", files={"helperdep/__init__.py": "X = 1\n"})
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no pip configuration of this machine's
    with IndexServer() as files, IndexServer(files_at=files.base) as index:
        for w in (top, helper):
            files.add(w, upload_time=T0)
            index.add(w, upload_time=T0)
        profile = write_profile(tmp_path / "repo", "pl", {"toplib": {"version": "1.2.0", "file": "requirements.txt"}},
                                index="public", python=(PY,))
        profile.write_text(profile.read_text().replace('url = "http://127.0.0.1:1/simple/"', "from_pip = true"))
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        assert cli("resolve", "pl", cwd=tmp_path / "repo").code == 0
        for configured in (True, False):  # pip names the index, or pip's own default is the index
            if not configured:
                monkeypatch.delenv("PIP_INDEX_URL")
            shown = cli("show", "pl", "--json", cwd=tmp_path / "repo")
            assert shown.code == 0, shown.err
            [named] = [i["url"] for i in json.loads(shown.out)["indexes_in_force"] if i["name"] == "public"]
            r = cli("export", "pl", "--format", "pylock", "--out", "locks", cwd=tmp_path / "repo")
            assert r.code == 0, r.err
            doc = Pylock.from_dict(tomllib.loads((tmp_path / "repo" / "locks" / f"pylock.{TARGET}.toml").read_text()))
            doc.validate()
            packages = {p.name: p for p in doc.packages}
            assert set(packages) == {"toplib", "helperdep"}
            for p in packages.values():  # the pin, and the closure's entry
                [w] = p.wheels or []
                assert str(w.url).startswith(files.base)  # the files are where the index links them
                assert p.index == named and not str(p.index).startswith(files.base), (configured, p)
            assert (named == index.url) is configured
