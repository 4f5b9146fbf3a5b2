"""resolve, outdated, abi and gate read at 80 columns through a pipe: each value whole on one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from stackctl.abi.inventory import write_inventory
from tests.support.cli import Cli
from tests.support.elf_fixtures import Wheels, image_inventory
from tests.support.fit import check_fits
from tests.support.index_server import IndexServer
from tests.support.resolve_fixtures import isolated, musa_index, profile_path, public_index  # noqa: F401

pytest_plugins = ("tests.support.elf_plugin",)



def test_resolve_and_outdated_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, profile: Path,
                                          musa: IndexServer, public: IndexServer) -> None:
    idx = ["--index", f"musa={musa.url}", "--index", f"public={public.url}", "--no-closure"]
    # piped, as at any width: every file's name and sha256 are there
    doc, out = check_fits(cli, monkeypatch, ["resolve", str(profile), *idx],
                          ["name", "version", "index", "target", "newest_in_line", "filename", "sha256"])
    assert any("+musa5.2.0torch2.11.0.post2" in f["version"] for f in doc["files"])
    assert "\x1b" not in out
    # other lines are items of free text: wrapped between words, each version whole
    doc, out = check_fits(cli, monkeypatch, ["outdated", str(profile), *idx[:4]],
                          ["artifact", "pinned", "newest_in_line"], prose=["other_lines"])
    assert all(len(line) <= 80 for line in out.splitlines()), out
    versions = [o.split()[0] for p in doc["pins"] for o in p["other_lines"]]
    assert versions and all(any(v in line.split() for line in out.splitlines()) for v in versions)


def test_abi_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, stack_wheels: Wheels, tmp_path: Path) -> None:
    inv = tmp_path / "inv.json"
    write_inventory(inv, image_inventory())
    args = [str(stack_wheels.core), str(stack_wheels.kern), str(stack_wheels.ext_v2), "--inventory", str(inv)]
    r = cli("abi", *args, "--json")
    doc = json.JSONDecoder().raw_decode(r.out)[0]
    wanted = ["needed", "detail", "required", "provided"]
    assert any(x.get("detail") for x in doc["reports"][0]["resolutions"])
    check_fits(cli, monkeypatch, ["abi", *args], wanted)


def test_abi_unresolved_and_providers_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, stack_wheels: Wheels,
                                                 tmp_path: Path) -> None:
    """Unresolved libraries one per line, each file name whole; the reasons wrap between words."""
    inv = tmp_path / "inv.json"
    write_inventory(inv, image_inventory())
    args = [str(stack_wheels.kern), str(stack_wheels.ext_v1), "--inventory", str(inv), "--provider", "nvidia"]
    doc, out = check_fits(cli, monkeypatch, ["abi", *args], ["needed", "library", "needed_by", "file"], code=1,
                          prose=["detail"])
    assert {u["library"] for u in doc["reports"][0]["unresolved"]} == {"libcore.so.1", "libfakepython.so.1.0"}
    assert "run-time providers: NVIDIA driver" in out


def test_gate_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.support.imagestack import make_stack_repo

    repo = make_stack_repo(tmp_path, "g", "127.0.0.1:5000/t/g", commit=False)
    check_fits(cli, monkeypatch, ["gate", str(repo.profile), "--python", sys.executable], ["line"], code=1)


def test_show_diff_and_outdated_in_an_80_column_terminal(cli: Cli, profile: Path, musa: IndexServer,
                                                        public: IndexServer) -> None:
    """In a real 80-column terminal nothing reaches the edge, where the terminal would fold inside a version or
    a tag: tables turn into blocks, long values move below their key, free text wraps between words."""
    from tests.conftest import REPO
    from tests.support.fit import assert_fits_terminal, in_terminal

    tag = "ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post2_musa5.2.0"
    out = in_terminal(["show", "torch-2.11-post2"], REPO)
    assert_fits_terminal(out, 80, [tag, "2.11.0.post2+musa5.2.0", "torchada/triton/autotune/fused_moe/configs/*.json"])
    out = in_terminal(["diff", "torch-2.11-post1", "torch-2.11-post2"], REPO)
    assert_fits_terminal(out, 80, [tag, "1.1.0+musa5.2.0torch2.11.0.post2", "musa5.2.0torch2.11.0.post1"])
    assert cli("resolve", str(profile), *idx_of(musa, public), "--no-closure").code == 0
    lock = str(profile.with_suffix(".lock"))
    out = in_terminal(["outdated", str(profile), "--from-lock", lock], profile.parent)
    assert_fits_terminal(out, 80, ["2.11.0.post3+musa5.2.1mp22", "linux_aarch64"])
    rel = str(profile.relative_to(profile.parent.parent))  # a path as a person types it, not pytest's
    out = in_terminal(["resolve", rel, *idx_of(musa, public), "--no-closure"], profile.parent.parent)
    doc = json.loads(cli("resolve", str(profile), *idx_of(musa, public), "--no-closure", "--json").out)
    assert_fits_terminal(out, 80, [f["filename"] for f in doc["files"]] + [f["sha256"][:12] for f in doc["files"]])


def idx_of(musa: IndexServer, public: IndexServer) -> list[str]:
    return ["--index", f"musa={musa.url}", "--index", f"public={public.url}"]
