"""What an engine declares it can do decides the build: the classic builder's stages fetch their wheels from a
wheel server; BuildKit's mount them, get SOURCE_DATE_EPOCH, and say so when --send-wheels asks for nothing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import pytest

from stackctl.engine.buildx import BuildxEngine
from stackctl.engine.docker import DockerEngine
from stackctl.image.build import SEND_WHEELS_UNDER_BUILDKIT, BuildRequest, Staged, stage_build
from stackctl.image.buildlog import ImageFacts
from stackctl.image.order import BuildOrder
from stackctl.image.prepare import prepare_build
from stackctl.image.protocols import Engine
from tests.support.imagestack import make_stack_repo


class _Engine:
    """The engine's side up to the build: the base image is there; a classic one says why it serves no wheels."""

    def __init__(self, builder: Literal["classic", "buildkit"]) -> None:
        self.builder = builder
        self.mounts: Literal["", "named", "context"] = "named" if builder == "buildkit" else ""
        self.writes_layout = builder == "buildkit"
        self.asked: list[Mapping[str, str]] = []

    @property
    def wheel_serving(self) -> _Engine | None:
        return self if self.builder == "classic" else None

    def wheel_server(self, root: Path, sha256: Mapping[str, str]) -> str:
        self.asked.append(sha256)
        return "this test serves none"

    def facts(self, ref: str) -> ImageFacts | None:
        return ImageFacts("sha256:" + "1" * 64, (), (), 1)


def _staged(tmp_path: Path, engine: _Engine, send_wheels: bool) -> Staged:
    repo = make_stack_repo(tmp_path, "r", "stackctl-test/caps", commit=False, installer="uv")
    prep = prepare_build(repo.stack, repo.lock, None, "r1", "t", None, None, {"SOURCE_DATE_EPOCH": "1700000000"})
    order = BuildOrder(wheelhouse=repo.wheelhouse, record_dir=tmp_path / "records", send_wheels=send_wheels)
    req = BuildRequest(prep, repo.lock, order, tmp_path / "records", tmp_path / "ctx")
    fake: Engine = engine  # type: ignore[assignment]  # the part of the protocol a build's staging uses
    return stage_build(req, fake)


@pytest.mark.parametrize("send_wheels", [False, True])
def test_buildkit_mounts_the_wheels_and_says_send_wheels_does_nothing(tmp_path: Path, send_wheels: bool) -> None:
    engine = _Engine("buildkit")
    staged = _staged(tmp_path, engine, send_wheels)
    assert engine.asked == [] and staged.server is None  # no wheel server for a builder that mounts
    assert staged.prepared.plan is not None and staged.prepared.plan.mounts == "named"
    assert staged.buildargs == {"SOURCE_DATE_EPOCH": "1700000000"}
    said = SEND_WHEELS_UNDER_BUILDKIT in staged.wheels_how
    assert staged.notes == ((SEND_WHEELS_UNDER_BUILDKIT,) if send_wheels else ()) and said == send_wheels
    assert "--send-wheels" in SEND_WHEELS_UNDER_BUILDKIT and "classic builder" in SEND_WHEELS_UNDER_BUILDKIT


@pytest.mark.parametrize("send_wheels", [False, True])
def test_the_classic_builder_asks_for_a_wheel_server_unless_sent_the_wheels(tmp_path: Path,
                                                                            send_wheels: bool) -> None:
    engine = _Engine("classic")
    staged = _staged(tmp_path, engine, send_wheels)
    assert len(engine.asked) == (0 if send_wheels else 1)
    assert staged.prepared.plan is not None and staged.prepared.plan.mounts == ""
    assert staged.buildargs is None and staged.notes == ()  # no argument that no step uses
    assert staged.wheels_how == ("sent in the build context: --send-wheels" if send_wheels else
                                 "sent in the build context: this test serves none")


def test_the_adapters_declare_their_builder_mounts_layout_and_wheel_server() -> None:
    """Read without an engine: the declarations are the adapters' own, not answers from a daemon."""
    classic = object.__new__(DockerEngine)
    assert (classic.builder, classic.mounts, classic.writes_layout) == ("classic", "", False)
    assert classic.wheel_serving is classic
    for store, mounts in ((True, "named"), (False, "context")):
        kit = object.__new__(BuildxEngine)
        kit.containerd_store, kit.mounts = store, mounts  # type: ignore[assignment]
        assert (kit.builder, kit.mounts, kit.writes_layout, kit.wheel_serving) == ("buildkit", mounts, store, None)
