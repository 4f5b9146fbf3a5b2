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
    doc, out = check_fits(cli, monkeypatch, ["resolve", str(profile), *idx],
                          ["name", "version", "index", "target", "newest_in_line"])
    assert any("+musa5.2.0torch2.11.0.post2" in f["version"] for f in doc["files"])
    assert "\x1b" not in out
    check_fits(cli, monkeypatch, ["outdated", str(profile), *idx[:4]],
               ["artifact", "pinned", "newest_in_line", "other_lines"])


def test_abi_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, stack_wheels: Wheels, tmp_path: Path) -> None:
    inv = tmp_path / "inv.json"
    write_inventory(inv, image_inventory())
    args = [str(stack_wheels.core), str(stack_wheels.kern), str(stack_wheels.ext_v2), "--inventory", str(inv)]
    r = cli("abi", *args, "--json")
    doc = json.JSONDecoder().raw_decode(r.out)[0]
    wanted = ["needed", "detail", "required", "provided"]
    assert any(x.get("detail") for x in doc["reports"][0]["resolutions"])
    check_fits(cli, monkeypatch, ["abi", *args], wanted)


def test_gate_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.support.imagestack import make_stack_repo

    repo = make_stack_repo(tmp_path, "g", "127.0.0.1:5000/t/g", commit=False)
    check_fits(cli, monkeypatch, ["gate", str(repo.profile), "--python", sys.executable], ["line"], code=1)
