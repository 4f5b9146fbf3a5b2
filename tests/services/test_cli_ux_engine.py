"""Bad output paths on commands that talk to the engine first: one error line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Cli

pytestmark = pytest.mark.integration


def test_inventory_into_a_directory_is_one_line(cli: Cli, docker_client: Any, base_image: Any,
                                                tmp_path: Path) -> None:
    image = base_image if isinstance(base_image, str) else str(base_image.tags[0] if base_image.tags else base_image.id)
    (tmp_path / "inv").mkdir()
    r = cli("inventory", image, "--out", str(tmp_path / "inv"))
    assert r.code == 2
    # refused before the image is run: the output rule every --out follows
    assert r.err.strip().splitlines() == [f"error: --out {tmp_path / 'inv'}: a directory; name the file to write"]
    assert list((tmp_path / "inv").iterdir()) == []


@pytest.mark.parametrize("command", [["inventory", "stackctl-base:bookworm", "--out", "inv.json"],
                                     ["inspect", "stackctl-base:bookworm"]])
def test_an_unreachable_engine_reads_the_same_everywhere(cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "public-example.toml").write_text(
        (Path(__file__).resolve().parents[2] / "stacks" / "public-example.toml").read_text())
    lock = tmp_path / "stacks" / "public-example.lock"
    from stackctl.profile.locate import load_profile
    from stackctl.resolve.lock import Lock, write_lock

    stack = load_profile(str(tmp_path / "stacks" / "public-example.toml"))
    write_lock(lock, Lock(stack.name, stack.digest(), ()))
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")  # nothing listens on port 1
    r = cli(*command, cwd=tmp_path)
    assert r.code == 3
    lines = r.err.strip().splitlines()
    assert len(lines) == 2
    assert lines[0] == ("error: cannot reach the Docker engine at tcp://127.0.0.1:1 (DOCKER_HOST): "
                        "connection refused: nothing listens there")
    assert lines[1] == "hint: start the engine (`bash .ci/services.sh`) or point DOCKER_HOST at it"
    assert not (tmp_path / "inv.json").exists()


def test_version_verbose_names_the_engine_api_and_uv(cli: Cli, docker_client: Any) -> None:
    import re

    r = cli("--version", "--verbose")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert re.fullmatch(r"stackctl \S+", lines[0])
    assert lines[1] == f"engine API {docker_client.api.api_version}"
    assert re.match(r"uv \d+\.\d+\.\d+", lines[2])


def test_inspect_and_inventory_fit_80_columns_piped(cli: Cli, docker_client: Any, base_image: Any,
                                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.support.fit import check_fits

    check_fits(cli, monkeypatch, ["inventory", base_image, "--out", str(tmp_path / "inv.json")],
               ["image", "glibc", "glibcxx", "cxxabi"])
    check_fits(cli, monkeypatch, ["inspect", base_image], ["image_id"])
