"""propose and report against the example vendor index, which holds the reference stacks' releases (and a
test vendor index with a trailing train member, other lines and yanked files)."""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.vendor_index import build_indexes, write_inventory
from stackctl.profile.loader import load_stack
from stackctl.review.diff import diff_stacks
from tests.conftest import STACKS
from tests.support.cli import Cli
from tests.support.index_server import IndexServer, musa_profile, populate_musa, populate_public

POST2_MOVES = {"torch", "torch_musa", "torchvision", "torchaudio", "deep_ep", "torchada"}


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache" / "http"))
    for var in ("PIP_INDEX_URL", "MUSA_INDEX_USER", "MUSA_INDEX_PASSWORD", "MUSA_TEST_USER", "MUSA_TEST_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexServer, IndexServer]]:
    """The example vendor index (and public one) that ships with the project: every release the reference
    stacks pin, a month apart, each release train's members minutes apart."""
    with build_indexes(tmp_path_factory.mktemp("indexes")) as ex:
        yield ex.musa, ex.public


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    out = tmp_path / "stacks"
    out.mkdir()
    for name in ("torch-2.9-control", "torch-2.11-post1", "torch-2.11-post2"):
        shutil.copy(STACKS / f"{name}.toml", out)
    return out


def idx(musa: IndexServer, public: IndexServer) -> list[str]:
    return ["--index", f"musa={musa.url}", "--index", f"public={public.url}"]


def test_post1_to_post2_moves_exactly_the_reference_six(cli: Cli, reference: tuple[IndexServer, IndexServer],
                                                        stacks: Path) -> None:
    seen = len(reference[0].log)
    r = cli("propose", str(stacks / "torch-2.11-post1.toml"), "--name", "proposed", *idx(*reference), "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    # the HTML-only index gives upload times as Last-Modified: asked only of files that could be a move
    heads = [path for method, path, _ in reference[0].log[seen:] if method == "HEAD"]
    assert any("torch-2.11.0.post2" in h for h in heads)
    assert not [h for h in heads if "2.9.1" in h or "0.24.1" in h]
    assert {m["pin"] for m in data["moves"]} == POST2_MOVES
    moves = {m["pin"]: m for m in data["moves"]}
    assert moves["torch"]["kind"] == "post-release (post1 → post2)"
    assert "release train musa-torch moves whole" in moves["torchaudio"]["why"]
    assert moves["deep_ep"]["after"] == "1.1.0+musa5.2.0torch2.11.0.post2"
    assert moves["deep_ep"]["why"].startswith("built against torch 2.11.0.post2+musa5.2.0")
    assert moves["torch"]["published"] and moves["torchada"]["published"]  # Last-Modified and PEP 700
    written = stacks / "proposed.toml"
    assert data["written"] == str(written)
    new, ref = load_stack(written), load_stack(stacks / "torch-2.11-post2.toml")
    assert new.extends == "torch-2.11-post1"
    # every pin at post2's version, nothing else moved; the rest of the profile is post1's
    assert {p.name: p.version for p in new.pins} == {p.name: p.version for p in ref.pins}
    moved = diff_stacks(load_stack(stacks / "torch-2.11-post1.toml"), new).moved
    assert {c.package for c in moved} == POST2_MOVES
    text = written.read_text()
    assert text.count("[pins.") == 6 and "published 2025-" in text


def test_dry_run_prints_the_table_and_writes_nothing(cli: Cli, reference: tuple[IndexServer, IndexServer],
                                                     stacks: Path) -> None:
    r = cli("propose", str(stacks / "torch-2.11-post1.toml"), "--name", "proposed", *idx(*reference),
            "--dry-run", "--markdown")
    assert r.code == 0, r.err
    assert not (stacks / "proposed.toml").exists()
    assert "| package | before | after | note |" in r.out
    assert "| torch | 2.11.0.post1+musa5.2.0 | 2.11.0.post2+musa5.2.0 | post-release (post1 → post2);" in r.out


def test_series_change_only_when_asked(cli: Cli, reference: tuple[IndexServer, IndexServer], stacks: Path) -> None:
    control = str(stacks / "torch-2.9-control.toml")
    r = cli("propose", control, *idx(*reference), "--dry-run", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    moved = {m["pin"] for m in data["moves"]}
    assert not moved & {"torch", "torch_musa", "torchvision", "torchaudio", "deep_ep"}
    held = [h for h in data["held"] if h["subject"] == "train musa-torch"]
    assert held and "--allow-series" in held[0]["reason"] and "2.11.0.post2+musa5.2.0" in held[0]["reason"]

    r = cli("propose", control, *idx(*reference), "--dry-run", "--json", "--allow-series")
    assert r.code == 0, r.err
    moves = {m["pin"]: m for m in json.loads(r.out)["moves"]}
    assert moves["torch"]["after"] == "2.11.0.post2+musa5.2.0" and moves["torch"]["kind"] == "minor"
    assert moves["torchaudio"]["after"] == "2.11.0.post2+musa5.2.0"
    # deep_ep's label names its torch: it follows, dropping the old build's suffix
    assert moves["deep_ep"]["after"] == "1.1.0+musa5.2.0torch2.11.0.post2"


def test_only_one_pin(cli: Cli, reference: tuple[IndexServer, IndexServer], stacks: Path) -> None:
    r = cli("propose", str(stacks / "torch-2.11-post1.toml"), *idx(*reference), "--dry-run", "--json",
            "--only", "torchada")
    assert r.code == 0, r.err
    assert [m["pin"] for m in json.loads(r.out)["moves"]] == ["torchada"]
    r = cli("propose", str(stacks / "torch-2.11-post1.toml"), *idx(*reference), "--dry-run", "--json",
            "--only", "torchvision")  # a member: its whole train, and the build against its torch
    assert {m["pin"] for m in json.loads(r.out)["moves"]} == POST2_MOVES - {"torchada"}
    r = cli("propose", str(stacks / "torch-2.11-post1.toml"), *idx(*reference), "--only", "nosuch")
    assert r.code == 2 and "no pin or release train of that name" in r.err


def test_an_existing_profile_is_not_replaced(cli: Cli, reference: tuple[IndexServer, IndexServer],
                                             stacks: Path) -> None:
    before = (stacks / "torch-2.11-post2.toml").read_text()
    r = cli("propose", str(stacks / "torch-2.11-post1.toml"), "--name", "torch-2.11-post2", *idx(*reference))
    assert r.code == 2 and "--force" in r.err
    assert (stacks / "torch-2.11-post2.toml").read_text() == before


# --- the test vendor index: a trailing member, other lines, yanked files ---------------------------

@pytest.fixture
def trailing(tmp_path: Path) -> Iterator[tuple[IndexServer, IndexServer, Path]]:
    musa, public = IndexServer(), IndexServer()
    populate_musa(musa, tmp_path / "wheels")
    populate_public(public, tmp_path / "wheels")
    profile = musa_profile(tmp_path / "stacks")
    text = profile.read_text()
    for old, new in (("2.11.0.post2+musa5.2.0", "2.11.0.post1+musa5.2.0"),):
        text = text.replace(old, new, 1)  # torch at post1; the other members as the profile has them
    profile.write_text(text)
    with musa, public:
        yield musa, public, profile


def test_a_trailing_member_holds_the_train_back(cli: Cli, trailing: tuple[IndexServer, IndexServer, Path]) -> None:
    musa, public, profile = trailing
    r = cli("propose", str(profile), *idx(musa, public), "--dry-run", "--json")
    data = json.loads(r.out)
    assert not any(m["pin"] == "torch" for m in data["moves"])  # post3 is aarch64, post4 yanked
    reasons = " ".join(h["reason"] for h in data["held"] if h["subject"] == "train musa-torch")
    assert "torchaudio" in reasons and "2026-03-01T15:00:00Z" in reasons  # who, and when it appeared
    r = cli("propose", str(profile), *idx(musa, public), "--dry-run", "--json", "--train-window", "14400")
    moves = {m["pin"]: m["after"] for m in json.loads(r.out)["moves"]}
    assert moves.get("torch") == "2.11.0.post2+musa5.2.0"


# --- report -------------------------------------------------------------------------------------------

def test_report_quotes_only_evidence_recorded_for_this_lock(cli: Cli, reference: tuple[IndexServer, IndexServer],
                                                           stacks: Path) -> None:
    work = stacks.parent
    for name in ("torch-2.11-post1", "torch-2.11-post2"):
        r = cli("resolve", name, *idx(*reference), "--no-closure", cwd=work)
        assert r.code == 0, r.err
    r = cli("report", "torch-2.11-post2", "--json", cwd=work)
    assert r.code == 0, r.err
    rep = json.loads(r.out)
    status = {s["key"]: s["status"] for s in rep["sections"]}
    assert status == {"profile": "ok", "files": "ok", "newest": "ok", "abi": "not run", "wheel-diff": "not run",
                      "build": "not run", "publication": "not run", "image-diff": "not run", "scan": "not run",
                      "validation": "not run"}
    abi = next(s for s in rep["sections"] if s["key"] == "abi")
    assert "stackctl abi torch-2.11-post2 --record build/torch-2.11-post2.abi.json" in abi["text"]
    files = next(s for s in rep["sections"] if s["key"] == "files")
    rows = files["tables"][0]["rows"]
    torch = next(row for row in rows if row[0] == "torch")
    musa = reference[0]
    assert torch[2] == "torch-2.11.0.post2+musa5.2.0-cp310-cp310-linux_x86_64.whl"
    assert torch[3] == musa.files[torch[2]].sha256[:12] and torch[-1] == "index-claimed"
    assert "(last-modified)" in torch[5]  # an HTML-only index: the time is the file's Last-Modified
    [unguarded] = next(s for s in rep["sections"] if s["key"] == "abi")["tables"]  # before any ABI record
    assert unguarded["title"] == "unguarded pins" and "deep_ep" in {row[0] for row in unguarded["rows"]}

    # record the ABI check and the scan; the report quotes them with their command and time
    write_inventory(work / "base.json")  # the vendor base image's loader view
    r = cli("abi", "torch-2.11-post2", *idx(*reference), "--inventory", "base.json", "--record",
            "build/torch-2.11-post2.abi.json", cwd=work)
    assert r.code == 0, r.out + r.err
    r = cli("scan", "stacks", "--stack", "torch-2.11-post2", "--since", "torch-2.11-post1",
            "--record", "build/torch-2.11-post2.scan.json", cwd=work)
    r = cli("report", "torch-2.11-post2", "--json", cwd=work)
    rep = json.loads(r.out)
    abi = next(s for s in rep["sections"] if s["key"] == "abi")
    assert abi["status"] == "ok" and abi["source"].startswith("stackctl abi torch-2.11-post2") and abi["time"]
    closure = {(row[1], row[3]) for t in abi["tables"] if t["title"] == "target cp310-linux_x86_64"
               for row in t["rows"]}
    assert {("libtorch_python.so", "loaded"), ("libmusa_python.so.2", "loaded")} <= closure  # deep_ep's needs
    # deep_ep moved and carries ELF: its wheel diff was not recorded, and the section names the command
    wd = next(s for s in rep["sections"] if s["key"] == "wheel-diff")
    assert wd["status"] == "not run" and any("deep_ep" in line for line in wd["lines"])
    for line in wd["lines"]:
        assert cli(*shlex.split(line)[1:], cwd=work).code == 0
    rep = json.loads(cli("report", "torch-2.11-post2", "--json", cwd=work).out)
    wd = next(s for s in rep["sections"] if s["key"] == "wheel-diff")
    assert wd["status"] == "ok" and not wd["lines"] and wd["source"].startswith("stackctl wheel-diff http")
    deep_ep = next(row for row in wd["tables"][0]["rows"] if row[0] == "deep_ep")
    assert deep_ep[2].startswith("deep_ep-1.1.0+musa5.2.0torch2.11.0.post1-") and deep_ep[4] != "not run"
    scan = next(s for s in rep["sections"] if s["key"] == "scan")
    assert scan["status"] in ("ok", "failed") and scan["source"].startswith("stackctl scan stacks")

    # the profile moves on and is resolved again: the ABI record is for another lock now
    post2 = stacks / "torch-2.11-post2.toml"
    post2.write_text(post2.read_text().replace('note = "joins the .post2 train this time"', 'note = "joins"'))
    assert cli("resolve", "torch-2.11-post2", *idx(*reference), "--no-closure", cwd=work).code == 0
    r = cli("report", "torch-2.11-post2", "--markdown", cwd=work)
    assert r.code == 0, r.err
    assert "### ABI closure and unguarded pins ⚠️ stale" in r.out
    assert "build/torch-2.11-post2.abi.json was recorded for another lock" in r.out
    assert "### Stale references ⚠️ stale" in r.out
    assert "<details><summary>" in r.out and "| torch | cp310-linux_x86_64 |" in r.out
    assert "### Build: gate log, tag, labels ⚪ not run" in r.out


def test_report_reads_what_the_checks_record_by_default_and_names_every_missing_command(
        cli: Cli, reference: tuple[IndexServer, IndexServer], stacks: Path) -> None:
    """The walkthrough's steps as written (no --record) leave evidence where report reads it; a section that
    cannot be made names the command that makes what it lacks; one wheel diff of several proves nothing yet."""
    work = stacks.parent

    def section(key: str) -> dict:  # type: ignore[type-arg]
        rep = json.loads(cli("report", "torch-2.11-post2", "--json", cwd=work).out)
        return next(s for s in rep["sections"] if s["key"] == key)  # type: ignore[no-any-return]

    assert cli("resolve", "torch-2.11-post2", *idx(*reference), "--no-closure", cwd=work).code == 0
    wd = section("wheel-diff")
    assert wd["status"] == "not run" and wd["source"] == "stackctl resolve torch-2.11-post1"
    assert "run `stackctl resolve torch-2.11-post1`" in wd["text"]
    assert cli("resolve", "torch-2.11-post1", *idx(*reference), "--no-closure", cwd=work).code == 0
    wd = section("wheel-diff")
    assert wd["status"] == "not run" and "run `stackctl abi torch-2.11-post2 --record build/" in wd["text"]

    write_inventory(work / "base.json")
    r = cli("abi", "torch-2.11-post2", *idx(*reference), "--inventory", "base.json", cwd=work)
    assert r.code == 0, r.out + r.err
    assert (work / "build" / "torch-2.11-post2.abi.json").is_file()
    assert section("abi")["status"] == "ok"
    cli("scan", "stacks", "--stack", "torch-2.11-post2", "--since", "torch-2.11-post1", cwd=work)
    assert section("scan")["status"] in ("ok", "failed")

    wd = section("wheel-diff")
    assert len(wd["lines"]) >= 2, wd
    first, *rest = [shlex.split(line)[1:] for line in wd["lines"]]
    assert cli(*first[:3], cwd=work).code == 0  # `wheel-diff OLD NEW`, as a user types it: recorded anyway
    assert (work / "build" / "wheel-diffs.json").is_file()
    wd = section("wheel-diff")
    assert wd["status"] == "not run" and f"{len(rest)} of {len(rest) + 1} not recorded" in wd["text"]
    for words in rest:
        assert cli(*words[:3], cwd=work).code == 0
    assert section("wheel-diff")["status"] == "ok"
    (work / "build" / "torch-2.11-post2.abi.json").unlink()
    assert cli("abi", "torch-2.11-post2", *idx(*reference), "--inventory", "base.json", "--no-record",
               cwd=work).code == 0
    assert not (work / "build" / "torch-2.11-post2.abi.json").exists()
