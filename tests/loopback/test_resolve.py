"""resolve, lock, outdated, fetch, export and lock diff against real loopback indexes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from stackctl.base.files import sha256_file
from tests.support.cli import Cli
from tests.support.index_server import DEEP_EP, TORCH, IndexServer, musa_profile, populate_musa, populate_public
from tests.support.resolve_fixtures import isolated, musa_index, profile_path, public_index  # noqa: F401


def idx(musa: IndexServer, public: IndexServer) -> list[str]:
    return ["--index", f"musa={musa.url}", "--index", f"public={public.url}"]


def resolve_json(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer, *extra: str) -> dict:  # type: ignore[type-arg]
    r = cli("resolve", str(profile), *idx(musa, public), "--json", *extra)
    assert r.code == 0, r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


def by(data: dict, name: str, target: str) -> dict:  # type: ignore[type-arg]
    return next(f for f in data["files"] if f["name"] == name and f["target"] == target)


def test_resolve_json_index(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    data = resolve_json(cli, profile, musa, public)
    assert len(data["files"]) == 6 * 2
    t310, t312 = by(data, "torch", "cp310-linux_x86_64"), by(data, "torch", "cp312-linux_x86_64")
    assert t310["filename"] == f"torch-{TORCH}-cp310-cp310-linux_x86_64.whl"
    assert t312["filename"] == f"torch-{TORCH}-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert t310["sha256"] == musa.files[t310["filename"]].sha256
    assert t310["size"] == musa.files[t310["filename"]].size
    assert t310["upload_time"] == "2026-03-01T12:00:00Z" and t310["upload_time_source"] == "index"
    assert t310["url"].startswith(musa.base) and "#" not in t310["url"]
    assert t310["requires_dist"] == ["numpy", "filelock; python_version >= '3.10'"]
    assert t310["newest_in_line"] == TORCH  # post4 is yanked, post3 is another line
    assert any(o.startswith("2.11.0.post3+musa5.2.1mp22 ") for o in t310["other_lines"])
    assert by(data, "torch_musa", "cp310-linux_x86_64")["newest_in_line"] == "2.11.0.post3+musa5.2.0"
    ep = by(data, "deep_ep", "cp310-linux_x86_64")
    assert ep["requires_dist"] == [] and ep["newest_in_line"] == DEEP_EP
    assert any("torch2.11.0.post3" in o for o in ep["other_lines"])
    # torchaudio has no metadata file: Requires-Dist read from the wheel with range requests
    assert by(data, "torchaudio", "cp312-linux_x86_64")["requires_dist"] == [f"torch=={TORCH}"]
    assert any(h.get("Range") for _, p, h in musa.requests_to(r"/files/torchaudio"))
    [train] = data["trains"]
    assert train["train"] == "musa-torch" and train["spread_seconds"] == 180 * 60
    assert train["trailing"] == ["torchaudio"]
    warnings = "\n".join(data["warnings"])
    # a package that declares no Requires-Dist is warned about by `abi` (its ELF needs another pin's
    # libraries), never here for merely declaring none
    assert "no Requires-Dist" not in warnings and "torchaudio was published" in warnings
    assert by(data, "deep_ep", "cp310-linux_x86_64")["requires_dist"] == []
    # the closure came from uv: filelock from the public index, the private torch never from there
    closure = {(c["target"], c["name"]): c for c in data["closure"]}
    assert closure[("cp310-linux_x86_64", "filelock")]["version"] == "3.13.1"
    assert all(c["name"] != "torch" for c in data["closure"])
    assert not public.requests_to(r"/simple/torch/")
    lock = json.loads((profile.with_suffix(".lock")).read_text())
    assert lock["closure"][0]["file"]["url"].startswith(public.base)
    assert lock["closure"][0]["hashes"][0].startswith("sha256:")


def test_resolve_html_only_index(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer) -> None:
    server = IndexServer(html_only=True)
    populate_musa(server, tmp_path / "html-wheels")
    with server:
        data = resolve_json(cli, profile, server, public)
    t = by(data, "torch", "cp310-linux_x86_64")
    assert t["upload_time"] == "2026-03-01T12:00:00Z" and t["upload_time_source"] == "last-modified"
    assert t["sha256"] == server.files[t["filename"]].sha256
    assert any(m == "HEAD" for m, p, _ in server.requests_to(r"/files/torch-"))
    assert by(data, "torchaudio", "cp310-linux_x86_64")["requires_dist"] == [f"torch=={TORCH}"]
    assert data["trains"][0]["trailing"] == ["torchaudio"]
    # uv reads the HTML-only vendor index too: the closure still takes the pins from it
    assert {c["name"] for c in data["closure"]} == {"filelock"}


def test_wheel_metadata_without_ranges(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer) -> None:
    server = IndexServer(ranges=False)
    populate_musa(server, tmp_path / "nr-wheels")
    with server:
        data = resolve_json(cli, profile, server, public, "--no-closure")
    assert by(data, "torchaudio", "cp310-linux_x86_64")["requires_dist"] == [f"torch=={TORCH}"]
    audio = [m for m, p, _ in server.log if p.startswith("/files/torchaudio-") and not p.endswith(".metadata")]
    assert audio and all(m == "GET" for m in audio)  # each wheel came whole in one answer to a range request
    assert len(audio) == len({p for m, p, _ in server.log if p.startswith("/files/torchaudio-")})


def test_cache_revalidates_and_offline(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    resolve_json(cli, profile, musa, public, "--no-closure")
    musa.log.clear()
    resolve_json(cli, profile, musa, public, "--no-closure")
    pages = musa.requests_to(r"^/simple/torch/$")
    assert pages and all("If-None-Match" in h for _, _, h in pages)
    assert not musa.requests_to(r"\.metadata$")  # verified metadata files are reused without asking
    musa.stop()
    public.stop()
    r = cli("resolve", str(profile), "--offline", "--no-closure", "--json",
            "--index", "musa=http://127.0.0.1:9/simple/", "--index", "public=http://127.0.0.1:9/simple/")
    assert r.code == 3  # other URLs: nothing cached for them, and the network is not asked
    assert json.loads(r.out)["error"].startswith("index musa, project ")
    assert "not in the cache, and --offline forbids the network" in r.err


def test_offline_uses_cache(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    first = resolve_json(cli, profile, musa, public, "--no-closure")
    args = idx(musa, public)
    musa.stop()
    public.stop()
    r = cli("resolve", str(profile), *args, "--offline", "--no-closure", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["files"] == first["files"]


def test_lock_check(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    resolve_json(cli, profile, musa, public, "--no-closure")
    ok = cli("lock", str(profile), "--check", "--json")
    assert ok.code == 0 and json.loads(ok.out)["current"] is True
    profile.write_text(profile.read_text().replace('version = "1.26.4"', 'version = "2.0.0"'))
    bad = cli("lock", str(profile), "--check")
    assert bad.code == 1
    assert "made from another version of musa-stack" in bad.err


def test_outdated(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    r = cli("outdated", str(profile), *idx(musa, public), "--markdown")
    assert r.code == 0, r.err
    assert r.out.startswith("| artifact | pinned | published | newest in line | newest published | other lines |")
    # "published" is when the pinned version was uploaded; the newest's upload has its own column
    assert f"| torch_musa | {TORCH} | 2026-03-01 12:10 | 2.11.0.post3+musa5.2.0 ⬆ | 2026-03-04 12:00 |" in r.out
    j = cli("outdated", str(profile), *idx(musa, public), "--json")
    pins = {p["artifact"]: p for p in json.loads(j.out)["pins"]}
    assert pins["torch"]["is_newest"] is True and pins["torch_musa"]["is_newest"] is False
    assert pins["torch_musa"]["published"] == "2026-03-01T12:10:00Z"
    assert pins["torch_musa"]["newest_published"] == "2026-03-04T12:00:00Z"
    assert pins["numpy"]["newest_in_line"] == "1.26.4"  # 2.0.0 is another series
    assert pins["numpy"]["other_lines"] == ["2.0.0 (series 2.0)"]
    # the same table from the lock, without asking the indexes; a lock of another profile is refused
    lock = profile.with_suffix(".lock")
    assert cli("resolve", str(profile), *idx(musa, public), "--no-closure").code == 0
    musa.log.clear()
    offline = cli("outdated", str(profile), "--from-lock", str(lock), "--json")
    assert offline.code == 0, offline.err
    assert json.loads(offline.out) == json.loads(j.out) and not musa.log
    profile.write_text(profile.read_text().replace('version = "1.26.4"', 'version = "2.0.0"'))
    stale = cli("outdated", str(profile), "--from-lock", str(lock))
    assert stale.code == 1 and f"{lock} was made from another version of musa-stack" in stale.err


def test_export_with_hashes_and_closure(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer,
                                        public: IndexServer) -> None:
    resolve_json(cli, profile, musa, public)
    out = tmp_path / "req"
    r = cli("export", str(profile), "--lock", str(profile.with_suffix(".lock")), "--out", str(out))
    assert r.code == 0, r.err
    text = (out / "musa.txt").read_text()
    for name in (f"torch-{TORCH}-cp310-cp310-linux_x86_64.whl", f"torch-{TORCH}-cp312-cp312-manylinux_2_28_x86_64.whl"):
        assert f"--hash=sha256:{musa.files[name].sha256}" in text
    closure = (out / "stack-closure.txt").read_text()
    fl = next(f for f in public.files.values() if f.project == "filelock")
    assert f"filelock==3.13.1 \\\n    --hash=sha256:{fl.sha256}" in closure


def test_fetch_wheelhouse(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    resolve_json(cli, profile, musa, public)
    dest = tmp_path / "wh"
    r = cli("fetch", str(profile), "--target", "cp312-linux_x86_64", "--dest", str(dest), *idx(musa, public),
            "--json")
    assert r.code == 0, r.err
    paths = [Path(p) for p in json.loads(r.out)["wheels"]]
    names = {p.name for p in paths}
    assert f"torch-{TORCH}-cp312-cp312-manylinux_2_28_x86_64.whl" in names
    assert "filelock-3.13.1-py3-none-any.whl" in names
    for p in paths:
        served = musa.files.get(p.name) or public.files[p.name]
        assert sha256_file(p) == served.sha256
    musa.log.clear()
    again = cli("fetch", str(profile), "--target", "cp312-linux_x86_64", "--dest", str(dest), *idx(musa, public))
    assert again.code == 0 and not musa.requests_to(r"/files/")  # reused, hash-checked on disk
    bad = cli("fetch", str(profile), "--target", "cp311-linux_x86_64", "--dest", str(dest))
    assert bad.code == 2 and "not one of musa-stack's targets" in bad.err


def test_fetch_wrong_sha256(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    """The lock's sha256 is not what the index serves: the lock's word is wrong, whoever made it so, and only
    resolving again mends it; an input problem (exit 2), not a failing index."""
    name = f"deep_ep-{DEEP_EP}-cp310-cp310-linux_x86_64.whl"
    real = musa.files[name].sha256
    musa.files[name].sha256 = "0" * 64  # the index lied about the file when the lock was made
    resolve_json(cli, profile, musa, public, "--no-closure")
    dest = tmp_path / "wh"
    r = cli("fetch", str(profile), "--target", "cp310-linux_x86_64", "--dest", str(dest), *idx(musa, public))
    assert r.code == 2, r.err
    [line] = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert line == (f"error: index musa, file {name}: the lock's sha256 {'0' * 64} differs from what the index "
                    f"serves (sha256 {real}); the lock no longer names this file's bytes and must be resolved again: "
                    f"`stackctl resolve {profile} --verify` (which also checks the bytes against the index's "
                    "sha256), then review what changed")
    assert "does not match the index's" not in r.err
    assert not (dest / name).exists()
    assert not [p for p in dest.iterdir() if p.name.endswith(".part")]


def test_lock_diff(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    from datetime import timedelta

    from tests.support.wheels import build_wheel

    a = tmp_path / "a.lock"
    resolve_json(cli, profile, musa, public, "--no-closure", "--lock", str(a))
    # the vendor re-uploads torchaudio for cp310: new bytes, new time
    w = build_wheel(tmp_path / "rebuilt", "torchaudio", TORCH, tag="cp310-cp310-linux_x86_64",
                    requires_dist=[f"torch=={TORCH}"], files={"torchaudio/__init__.py": "# rebuilt\n"})
    old = musa.files[w.name]
    assert old.sha256 != hashlib.sha256(w.read_bytes()).hexdigest()
    assert old.upload_time is not None
    musa.add(w, upload_time=old.upload_time + timedelta(days=1))
    b = tmp_path / "b.lock"
    resolve_json(cli, profile, musa, public, "--no-closure", "--lock", str(b))
    r = cli("diff", str(a), str(b), "--json")
    assert r.code == 0, r.err
    new = musa.files[w.name]
    expected = [("sha256", old.sha256, new.sha256),
                ("size", str(old.size), str(new.size)),
                ("upload_time", "2026-03-01T15:00:00Z", "2026-03-02T15:00:00Z")]
    if old.size == new.size:
        expected.remove(("size", str(old.size), str(new.size)))
    changes = json.loads(r.out)["changes"]
    assert [(c["package"], c["target"]) for c in changes] == [("torchaudio", "cp310-linux_x86_64")] * len(expected)
    assert [(c["field"], c["before"], c["after"]) for c in changes] == expected
    md = cli("diff", str(a), str(b), "--markdown")
    assert md.out.startswith("| package | target | field | before | after |")
    assert hashlib.sha256(w.read_bytes()).hexdigest() in md.out


def test_fetch_wheelhouse_api(tmp_path: Path, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    """The interface `build` uses: the lock's wheels for one target (resolve() without a closure function
    locks the pins only), hash-checked, in lock order."""
    from stackctl.index.client import ClientOptions, IndexClient
    from stackctl.index.config import endpoints
    from stackctl.profile.loader import load_stack
    from stackctl.resolve.resolver import resolve
    from stackctl.resolve.wheelhouse import fetch_wheelhouse

    stack = load_stack(profile)
    overrides = {"musa": musa.url, "public": public.url}
    lock = resolve(stack, IndexClient(ClientOptions()), endpoints(stack, overrides))
    paths = fetch_wheelhouse(lock, stack, "cp310-linux_x86_64", tmp_path / "wh", overrides=overrides)
    assert [p.name for p in paths] == [f.filename for f in lock.wheels_for("cp310-linux_x86_64")]
    assert len(paths) == 6 and f"torch-{TORCH}-cp310-cp310-linux_x86_64.whl" in {p.name for p in paths}
    for p in paths:  # the bytes the indexes serve, not merely files of the right names
        assert sha256_file(p) == (musa.files.get(p.name) or public.files[p.name]).sha256, p.name


def test_private_index_with_credentials_and_closure(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSA_TEST_USER", "builder")
    monkeypatch.setenv("MUSA_TEST_PASSWORD", "tok-123-secret")
    private = IndexServer(auth=("builder", "tok-123-secret"))
    populate_musa(private, tmp_path / "pw")
    with private:
        r = cli("resolve", str(profile), *idx(private, public), "--json")
        assert r.code == 0, r.err
        data = json.loads(r.out)
        # uv found the pins on the private index (with the credentials from the environment)
        assert private.requests_to(r"^/simple/torch/$")
        assert {c["name"] for c in data["closure"]} == {"filelock"}
        monkeypatch.delenv("MUSA_TEST_PASSWORD")
        denied = cli("resolve", str(profile), *idx(private, public), "--no-cache")
    assert denied.code == 3 and "HTTP 401" in denied.err
    lock = profile.with_suffix(".lock").read_text()
    for text in (r.out, r.err, lock, denied.err):
        assert "tok-123-secret" not in text


def test_public_index_with_credentials_in_pip_index_url(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A mirror of the public index behind a login, given as PIP_INDEX_URL=https://user:token@host/...: the
    pins and uv's closure both log in, and the token shows up nowhere."""
    mirror = IndexServer(auth=("mirror-user", "mirror/tok:9"))
    populate_public(mirror, tmp_path / "mw")
    with mirror:
        monkeypatch.setenv("PIP_INDEX_URL", mirror.url.replace("http://", "http://mirror-user:mirror%2Ftok%3A9@"))
        r = cli("resolve", str(profile), "--index", f"musa={musa.url}", "--json")
        base = mirror.base
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert by(data, "numpy", "cp310-linux_x86_64")["url"].startswith(base)
    assert {(c["target"], c["name"]) for c in data["closure"]} == {
        ("cp310-linux_x86_64", "filelock"), ("cp312-linux_x86_64", "filelock")}
    lock = profile.with_suffix(".lock").read_text()
    for text in (r.out, r.err, lock):
        assert "mirror/tok:9" not in text and "mirror%2Ftok%3A9" not in text and "mirror-user" not in text


def test_yanked_pin_resolves_with_a_warning(cli: Cli, tmp_path: Path, musa: IndexServer, public: IndexServer) -> None:
    profile = musa_profile(tmp_path / "y")
    profile.write_text(profile.read_text().replace(f'[pins.torch]\nversion = "{TORCH}"',
                                                   '[pins.torch]\nversion = "2.11.0.post4+musa5.2.0"'))
    data = resolve_json(cli, profile, musa, public, "--no-closure")
    t = by(data, "torch", "cp310-linux_x86_64")
    assert t["yanked"] is True and t["yanked_reason"] == "broken build"
    assert any("is yanked on index musa" in w for w in data["warnings"])


def test_human_output(cli: Cli, profile: Path, musa: IndexServer, public: IndexServer) -> None:
    r = cli("resolve", str(profile), *idx(musa, public), "--no-closure")
    assert r.code == 0, r.err
    assert "musa-stack: 6 pins" in r.out and f"wrote {profile.with_suffix('.lock')}" in r.out
    said = " ".join(r.out.split())  # prose wraps between words at 80 columns
    assert "train musa-torch: torch, torch_musa, torchaudio, torchvision; spread 180 min, trailing: torchaudio" in said
    assert "no Requires-Dist" not in r.err  # said by `abi`, where the ELF shows what a wheel needs


def test_lock_diff_against_git_revision(cli: Cli, tmp_path: Path, git_repo: Path, musa: IndexServer,
                                        public: IndexServer) -> None:
    from tests.support.gitrepo import git

    profile = musa_profile(git_repo / "stacks")
    lock = profile.with_suffix(".lock")
    resolve_json(cli, profile, musa, public, "--no-closure")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "lock")
    profile.write_text(profile.read_text().replace('version = "1.26.4"', 'version = "2.0.0"'))
    resolve_json(cli, profile, musa, public, "--no-closure")
    r = cli("diff", f"{lock}@HEAD", str(lock), "--json")
    assert r.code == 0, r.err
    changes = json.loads(r.out)["changes"]
    assert {"package": "numpy", "target": "", "field": "version", "before": "1.26.4", "after": "2.0.0"} in changes
    assert cli("diff", f"{lock}@nosuchrev", str(lock)).code == 2


def test_exported_hashes_satisfy_pip_require_hashes(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer,
                                                    public: IndexServer) -> None:
    """pip itself takes the exported files with --require-hashes, dependencies included."""
    import subprocess
    import sys

    resolve_json(cli, profile, musa, public)
    out = tmp_path / "req"
    assert cli("export", str(profile), "--lock", str(profile.with_suffix(".lock")), "--out", str(out)).code == 0
    cmd = [sys.executable, "-m", "pip", "--isolated", "download", "--quiet", "--disable-pip-version-check",
           "--require-hashes", "--only-binary=:all:", "--python-version", "3.12",
           "--platform", "manylinux_2_28_x86_64", "--platform", "linux_x86_64",
           "--index-url", musa.url, "--extra-index-url", public.url, "-d", str(tmp_path / "dl"),
           "-r", str(out / "musa.txt"), "-r", str(out / "requirements.txt"), "-r", str(out / "stack-closure.txt")]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = sorted(p.name for p in (tmp_path / "dl").iterdir())
    assert f"torch-{TORCH}-cp312-cp312-manylinux_2_28_x86_64.whl" in got and "filelock-3.13.1-py3-none-any.whl" in got


def test_private_index_with_credentials_from_netrc(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """No credential variables set: the login comes from netrc, for pins and closure alike; `netrc = false`
    on the index turns that off."""
    private = IndexServer(auth=("builder", "netrc-s3cret"))
    populate_musa(private, tmp_path / "pw")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login builder password netrc-s3cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    with private:
        r = cli("resolve", str(profile), *idx(private, public), "--json")
        assert r.code == 0, r.err
        assert {c["name"] for c in json.loads(r.out)["closure"]} == {"filelock"}
        pages = private.requests_to(r"^/simple/torch/$")
        assert pages and all(h.get("Authorization", "").startswith("Basic ") for _, _, h in pages)
        lock = profile.with_suffix(".lock").read_text()
        profile.write_text(profile.read_text().replace('password_env = "MUSA_TEST_PASSWORD"\n',
                                                       'password_env = "MUSA_TEST_PASSWORD"\nnetrc = false\n'))
        denied = cli("resolve", str(profile), *idx(private, public), "--no-cache")
    assert denied.code == 3 and "HTTP 401" in denied.err
    for text in (r.out, r.err, lock, denied.err):
        assert "netrc-s3cret" not in text


def test_lock_is_byte_for_byte_reproducible_and_train_window_applies(cli: Cli, profile: Path, musa: IndexServer,
                                                                     public: IndexServer) -> None:
    lock = profile.with_suffix(".lock")
    resolve_json(cli, profile, musa, public, "--no-closure")
    first = lock.read_bytes()
    resolve_json(cli, profile, musa, public, "--no-closure", "--no-cache")
    assert lock.read_bytes() == first  # a re-resolve of unchanged indexes leaves no diff to review
    # torchaudio trails its train by 180 minutes: flagged under the default hour, not under a 4-hour window.
    wide = resolve_json(cli, profile, musa, public, "--no-closure", "--train-window", str(4 * 3600))
    [train] = wide["trains"]
    assert train["spread_seconds"] == 180 * 60 and train["trailing"] == []
    assert not any("torchaudio was published" in w for w in wide["warnings"])


def test_pages_are_asked_for_concurrently(cli: Cli, tmp_path: Path, profile: Path, public: IndexServer) -> None:
    """Issue 3: ~20 pins must not cost 20 round trips in sequence. With 20 ms per answer the index sees
    requests overlap under the default --jobs, and never more than one at a time under --jobs 1."""
    server = IndexServer(latency=0.02)
    populate_musa(server, tmp_path / "slow")
    with server:
        resolve_json(cli, profile, server, public, "--no-closure", "--no-cache")
        assert server.most_at_once > 1
        server.most_at_once = 0
        resolve_json(cli, profile, server, public, "--no-closure", "--no-cache", "--jobs", "1")
        assert server.most_at_once == 1


def test_no_cache_leaves_no_cache_behind(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer,
                                         public: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """--no-cache holds for the closure too: uv neither reads nor fills a cache of its own (a stale one
    could give a closure the fresh pins do not match)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # where uv's own default cache would go
    data = resolve_json(cli, profile, musa, public, "--no-cache")
    assert {c["name"] for c in data["closure"]} == {"filelock"}
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "cache").exists()


def test_warm_resolve_reads_parsed_pages_and_reparses_a_changed_one(
        cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer, public: IndexServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import timedelta

    import stackctl.index.client
    from tests.support.index_server import PLATFORMS, T0
    from tests.support.wheels import build_wheel

    cold = resolve_json(cli, profile, musa, public, "--no-closure")
    assert list((tmp_path / "cache" / "http").rglob("*.parsed"))  # kept beside the HTTP cache

    def no_parser(*args: object) -> None:
        raise AssertionError("a page the cache already parsed was parsed again")

    def no_metadata_parser(*args: object) -> None:
        raise AssertionError("Requires-Dist the cache already parsed was parsed again")

    lock = profile.with_suffix(".lock")
    written = lock.stat()
    with monkeypatch.context() as m:
        m.setattr(stackctl.index.client, "listing", no_parser)
        m.setattr(stackctl.index.client, "requires_dist", no_metadata_parser)
        musa.log.clear()
        warm = resolve_json(cli, profile, musa, public, "--no-closure")
        assert all("If-None-Match" in h for _, _, h in musa.requests_to(r"^/simple/torch/$"))  # still revalidated
        assert not musa.requests_to(r"\.metadata$") and not musa.requests_to(r"^/files/")  # facts from the cache
    assert warm["files"] == cold["files"]
    # the same lock again: the file is left as it was, not replaced by an equal copy
    assert (lock.stat().st_ino, lock.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    # a new upload changes the page and its ETag: the old parse is not used for the new answer
    for tag in PLATFORMS:
        musa.add(build_wheel(tmp_path / "more", "torch_musa", "2.11.0.post5+musa5.2.0", tag=tag),
                 upload_time=T0 + timedelta(days=5))
    musa.log.clear()
    after = resolve_json(cli, profile, musa, public, "--no-closure")
    assert by(after, "torch_musa", "cp310-linux_x86_64")["newest_in_line"] == "2.11.0.post5+musa5.2.0"
    assert by(after, "torch", "cp310-linux_x86_64")["newest_in_line"] == by(cold, "torch", "cp310-linux_x86_64")[
        "newest_in_line"]  # the pages that answered 304 still come from their stored parse
    # the new newest in line is in the lock, written anew (atomically: no temporary file left beside it)
    locked = {p["name"]: p for p in json.loads(lock.read_text())["pins"]}
    assert locked["torch_musa"]["newest_in_line"] == "2.11.0.post5+musa5.2.0"
    assert lock.stat().st_ino != written.st_ino and not list(lock.parent.glob(".*.tmp"))


def test_warm_revalidation_reconnects_and_leaves_odd_answers_to_requests(
        cli: Cli, profile: Path, musa: IndexServer, public: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard library's conditional GET takes a clean 304 only. A kept connection the server closed is
    opened again; a malformed answer is asked again through requests; the lock is the same either way."""
    import stackctl.index.client
    from tests.support.index_server import Handler

    cold = resolve_json(cli, profile, musa, public, "--no-closure")

    def closes_after(h: Handler) -> bool:  # answers as usual, then closes the connection without a word
        h.close_connection = True
        return False

    def folded(h: Handler) -> bool:
        h.wfile.write(b'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n folded: y\r\n\r\n')
        h.close_connection = True
        return True

    through_requests: list[str] = []
    send = stackctl.index.client.IndexClient._send

    def counted(self: stackctl.index.client.IndexClient, ep: object, method: str, url: str,
                *args: object, **kwargs: object) -> object:
        through_requests.append(url)
        return send(self, ep, method, url, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(stackctl.index.client.IndexClient, "_send", counted)
    musa.fault("/simple/torch/", closes_after)
    musa.fault("/simple/torchvision/", folded, folded)  # on the kept connection, then on a fresh one
    musa.log.clear()
    # one worker: every page on one kept connection, so the closed one is met by the next page
    warm = resolve_json(cli, profile, musa, public, "--no-closure", "--jobs", "1")
    assert warm["files"] == cold["files"]
    pages = [p for _, p, _ in musa.requests_to(r"^/simple/[^/]+/$")]
    assert pages.count("/simple/torchvision/") == 3  # two malformed answers, then requests' own request
    assert all(pages.count(p) == 1 for p in set(pages) - {"/simple/torchvision/"})
    assert through_requests == [f"{musa.url}torchvision/"]  # torch-musa, after the closed connection: reconnected
    assert all("If-None-Match" in h for _, _, h in musa.requests_to(r"^/simple/[^/]+/$"))


def test_a_warm_resolve_imports_no_parser_no_requests_and_no_rich(cli: Cli, profile: Path, musa: IndexServer,
                                                                 public: IndexServer) -> None:
    """A warm run is start-up and one round of 304s: what it imports is what such a run needs. Run as a
    process of its own, since this one has imported everything already."""
    import os
    import subprocess
    import sys
    from importlib.util import find_spec

    cold = resolve_json(cli, profile, musa, public, "--no-closure")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "stackctl", "resolve", str(profile),
                          *idx(musa, public), "--no-closure", "--json"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["files"] == cold["files"]
    imported = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "stackctl.index.revalidate" in imported  # the pages were revalidated, not taken as they were
    heavy = {"pypi_simple", "pydantic", "bs4", "requests", "urllib3", "rich", "packaging.metadata",
             "packaging.markers", "encodings.idna", "stackctl.wheels.archive"}
    if find_spec("typer._click") is not None:  # typer's own copy of click: click itself is not needed
        heavy.add("click")
    assert not heavy & imported


def test_warm_revalidation_sends_credentials_once_and_only_to_the_index(
        cli: Cli, tmp_path: Path, profile: Path, public: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSA_TEST_USER", "builder")
    monkeypatch.setenv("MUSA_TEST_PASSWORD", "tok-123-secret")
    private = IndexServer(auth=("builder", "tok-123-secret"))
    populate_musa(private, tmp_path / "pw")
    with private:
        cold = resolve_json(cli, profile, private, public, "--no-closure")
        private.log.clear()
        public.log.clear()
        warm = resolve_json(cli, profile, private, public, "--no-closure")
        pages = private.requests_to(r"^/simple/[^/]+/$")
    assert warm["files"] == cold["files"]
    # one conditional request per page, credentials on the first try (no 401 and retry)
    assert len(pages) == len({p for _, p, _ in pages}) and pages
    assert all("If-None-Match" in h and h.get("Authorization", "").startswith("Basic ") for _, _, h in pages)
    assert public.log and not any("Authorization" in h for _, _, h in public.log)  # another origin


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_written_files_take_the_umask(cli: Cli, tmp_path: Path, profile: Path, musa: IndexServer,
                                      public: IndexServer, umask: int) -> None:
    """The lock, requirement files, a proposal and fetched wheels are the user's files: the mode a new
    file gets under their umask (temporary files are 0600, and renaming one kept that)."""
    import os
    import stat

    import stackctl.base.files

    old = os.umask(umask)
    saved = stackctl.base.files._UMASK
    stackctl.base.files._UMASK = stackctl.base.files._umask()  # as a process started under this umask reads it
    try:
        resolve_json(cli, profile, musa, public, "--no-closure")
        assert cli("export", str(profile), "--out", str(tmp_path / "req")).code == 0
        assert cli("fetch", str(profile), "--target", "cp312-linux_x86_64", "--dest", str(tmp_path / "wh"),
                   *idx(musa, public)).code == 0
        r = cli("propose", str(profile), "--name", "proposed", *idx(musa, public), "--allow-series")
        assert r.code in (0, 1), r.err
    finally:
        os.umask(old)
        stackctl.base.files._UMASK = saved
    written = [profile.with_suffix(".lock"), *(tmp_path / "req").iterdir(), *(tmp_path / "wh").glob("*.whl"),
               *profile.parent.glob("proposed.toml")]
    assert len(written) > 4 and profile.parent.joinpath("proposed.toml") in written
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {
        p.name: oct(0o666 & ~umask) for p in written}
