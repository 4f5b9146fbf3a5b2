"""resolve where a newcomer and a hostile world meet it: uv's lookup from threads, overrides, HEAD refused."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.index_server import IndexServer
from tests.support.resolve_fixtures import isolated, musa_index, profile_path, public_index  # noqa: F401


def idx(musa: IndexServer, public: IndexServer) -> list[str]:
    return ["--index", f"musa={musa.url}", "--index", f"public={public.url}"]


def test_uv_is_found_once_before_the_closure_threads(cli: Cli, profile: Path, musa: IndexServer,
                                                      public: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import uv

    real = uv.find_uv_bin
    callers: list[threading.Thread] = []

    def racy() -> str:
        # what concurrent first calls into sysconfig do on CPython 3.11, every time instead of sometimes
        callers.append(threading.current_thread())
        if threading.current_thread() is not threading.main_thread():
            raise TypeError('can only concatenate str (not "NoneType") to str')
        return str(real())

    monkeypatch.setattr(uv, "find_uv_bin", racy)
    r = cli("resolve", str(profile), *idx(musa, public), "--json")
    assert r.code == 0, r.err
    assert len(json.loads(r.out)["closure"]) > 0
    assert callers == [threading.main_thread()]


def test_an_override_is_said_on_every_run_recorded_in_the_lock_and_warned_about(
        cli: Cli, profile: Path, musa: IndexServer, public: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_INDEX_PUBLIC_URL", public.url)
    r = cli("resolve", str(profile), "--index", f"musa={musa.url}", "--no-closure")
    assert r.code == 0, r.err
    said = " ".join(r.out.split())  # lines wrap between words at 80 columns
    assert f"index musa: {musa.url} (override from --index musa, not the profile's)" in said
    assert f"index public: {public.url} (override from STACKCTL_INDEX_PUBLIC_URL, not the profile's)" in said
    lock = json.loads(profile.with_suffix(".lock").read_text())
    assert lock["overrides"] == [{"index": "musa", "url": musa.url, "source": "--index musa"},
                                 {"index": "public", "url": public.url, "source": "STACKCTL_INDEX_PUBLIC_URL"}]
    r = cli("check", str(profile))
    assert r.code == 0, r.err
    assert ("warning: the lock for musa-stack was resolved through an index override: musa at "
            f"{musa.url} (--index musa); public at {public.url} (STACKCTL_INDEX_PUBLIC_URL)") in " ".join(r.err.split())
    said = " ".join(cli("show", str(profile)).out.split())
    assert f"index public: {public.url} (override from STACKCTL_INDEX_PUBLIC_URL" in said
    assert "index musa: http://127.0.0.1:9/simple/ (from the profile)" in said
    data = json.loads(cli("show", str(profile), "--json").out)
    assert {"name": "public", "url": public.url, "source": "STACKCTL_INDEX_PUBLIC_URL", "override": True} \
        in data["indexes_in_force"]


def test_resolve_says_when_it_left_the_lock_as_it_was(cli: Cli, profile: Path, musa: IndexServer,
                                                      public: IndexServer) -> None:
    first = cli("resolve", str(profile), *idx(musa, public), "--no-closure")
    assert f"wrote {profile.with_suffix('.lock')}" in " ".join(first.out.split())
    again = cli("resolve", str(profile), *idx(musa, public), "--no-closure")
    assert again.code == 0, again.err
    said = " ".join(again.out.split())
    assert "wrote" not in said and f"{profile.with_suffix('.lock')} left as it was: the same lock" in said
    data = json.loads(cli("resolve", str(profile), *idx(musa, public), "--no-closure", "--json").out)
    assert data["written"] is False


def test_cache_dir_holds_uvs_cache_too(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer,
                                       public: IndexServer) -> None:
    """--cache-dir DIR: nothing is written outside DIR, uv's cache included."""
    outer = tmp_path / "outer"
    outer.mkdir()
    r = cli("resolve", str(profile), *idx(musa, public), "--cache-dir", str(outer / "mine"), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["closure"]
    assert [p.name for p in outer.iterdir()] == ["mine"]
    assert (outer / "mine" / "uv").is_dir() and any((outer / "mine" / "uv").iterdir())


def test_fetch_progress_never_goes_backwards(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer,
                                             public: IndexServer) -> None:
    """Four workers count bytes into one total: what reaches the display only ever grows."""
    import random
    import time

    from stackctl.profile.loader import load_stack
    from stackctl.resolve.lock import read_lock
    from stackctl.resolve.run import make_client
    from stackctl.resolve.wheelhouse import fetch_wheelhouse

    assert cli("resolve", str(profile), *idx(musa, public), "--no-closure").code == 0
    seen: list[int] = []

    def slow_display(label: str, done: int, total: int) -> None:
        if label == "bytes":
            time.sleep(random.random() / 100)  # a display that takes its time: an earlier count could overtake
            seen.append(done)

    fetch_wheelhouse(read_lock(profile.with_suffix(".lock")), load_stack(profile), "cp310-linux_x86_64",
                     tmp_path / "wh", client=make_client(no_cache=True),
                     overrides={"musa": musa.url, "public": public.url}, progress=slow_display)
    assert len(seen) > 4 and seen == sorted(seen)


@pytest.mark.parametrize("code", [405, 501])
def test_a_server_that_refuses_head_resolves_with_its_closure(cli: Cli, tmp_path: Path, profile: Path,
                                                             public: IndexServer, code: int) -> None:
    """resolve survives an index that refuses HEAD; so must the closure, which uv computes."""
    from tests.support.index_server import populate_musa

    server = IndexServer(html_only=True, head=False, head_status=code)
    populate_musa(server, tmp_path / "nohead")
    with server:
        r = cli("resolve", str(profile), "--index", f"musa={server.url}", "--index", f"public={public.url}",
                "--json")
    assert r.code == 0, r.err
    closure = {(c["target"], c["name"]) for c in json.loads(r.out)["closure"]}
    assert ("cp310-linux_x86_64", "filelock") in closure


def test_a_closure_on_a_lone_index_that_refuses_head_is_read_through_the_mirror(cli: Cli, tmp_path: Path) -> None:
    """A stack with one index (no public one): that index is uv's default index, and uv, given it directly,
    met its 501 on the HEAD of a file and gave up. uv reads it through stackctl's mirror, never the server
    itself, and the lock names the files where the index has them."""
    from tests.support.wheels import build_wheel

    server = IndexServer(html_only=True, head=False, head_status=501)
    server.add(build_wheel(tmp_path / "w", "hpkg", "1.0", requires_dist=["hdep>=1"]), metadata=False)
    server.add(build_wheel(tmp_path / "w", "hdep", "1.2"), metadata=False)
    profile = tmp_path / "s" / "lone.toml"
    profile.parent.mkdir()
    profile.write_text('[stack]\nname = "lone"\n\n[targets]\npython = ["3.11"]\nplatforms = ["linux_x86_64"]\n\n'
                       '[indexes.ok]\nurl = "http://127.0.0.1:9/simple/"\n\n'
                       '[pins.hpkg]\nversion = "1.0"\nindex = "ok"\n')
    with server:
        r = cli("resolve", str(profile), "--index", f"ok={server.url}", "--json")
        uv_asked = [p for _, p, h in server.log if not h.get("User-Agent", "").startswith("stackctl")]
        base = server.base
    assert r.code == 0, r.err
    [dep] = [c for c in json.loads(r.out)["closure"] if c["name"] == "hdep"]
    assert dep["version"] == "1.2" and dep["filename"] == "hdep-1.2-py3-none-any.whl"
    from stackctl.resolve.lock import read_lock

    [locked] = read_lock(profile.with_suffix(".lock")).closure
    assert locked.file is not None and locked.file.url == f"{base}files/hdep-1.2-py3-none-any.whl"
    assert uv_asked == []
