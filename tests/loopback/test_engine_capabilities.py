"""What an engine declares it can do decides the build: the classic builder's stages fetch their wheels from a
wheel server; BuildKit's mount them, get SOURCE_DATE_EPOCH, and say so when --send-wheels asks for nothing;
`build --all` bakes a queue on an engine that declares `baking`, and on no other."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import pytest

from stackctl.engine.buildx import BuildxEngine
from stackctl.engine.docker import DockerEngine
from stackctl.errors import ServiceError
from stackctl.image.bakefile import Baked, BakeTarget
from stackctl.image.build import SEND_WHEELS_UNDER_BUILDKIT, BuildRequest, Staged, stage_build
from stackctl.image.buildlog import BuildFailed, BuildResult, ImageFacts
from stackctl.image.labels import image_ref
from stackctl.image.matrix import CellInput, MatrixRequest, PoolEngine, build_matrix
from stackctl.image.order import BuildOrder
from stackctl.image.prepare import prepare_build
from stackctl.image.protocols import Bakes, Engine
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
    assert classic.wheel_serving is classic and classic.baking is None
    for store, mounts in ((True, "named"), (False, "context")):
        kit = object.__new__(BuildxEngine)
        kit.containerd_store, kit.mounts = store, mounts  # type: ignore[assignment]
        assert (kit.builder, kit.mounts, kit.writes_layout, kit.wheel_serving) == ("buildkit", mounts, store, None)
        assert kit.baking is kit


class _Baker:
    """A bake that takes its targets and builds none of them."""

    registry_cache = False

    def __init__(self) -> None:
        self.baked: list[str] = []

    def named_contexts(self, context: Path, given: Mapping[str, Path] | None = None) -> dict[str, Path]:
        return dict(given or {})

    def bake(self, targets: Sequence[BakeTarget], on_step: Callable[[str], object],
             on_event: Callable[[str, str], None]) -> dict[str, Baked]:
        self.baked += [t.name for t in targets]
        return {t.name: Baked(None, ServiceError("this test bakes nothing")) for t in targets}


class _Builds(_Engine):
    """An engine for `build --all` whose bake is whatever it declares (`baking`); each build it is asked for is
    kept with the images it was given as its cache, and fails."""

    def __init__(self, builder: Literal["classic", "buildkit"], baking: Bakes | None) -> None:
        super().__init__(builder)
        self._baking = baking
        self.built: list[tuple[str, ...]] = []

    @property
    def baking(self) -> Bakes | None:
        return self._baking

    def build(self, context: Path, tag: str | None, on_step: object = None, *, cache_from: Sequence[str] = (),
              **options: object) -> BuildResult:
        self.built.append(tuple(cache_from))
        raise BuildFailed("the build failed: step 1 exited 1", (), ())

    # the rest of the protocol, and a bake engine's members on the engine itself: only `baking` may make it bake
    url = None
    registry_cache = False
    named_contexts = _Baker.named_contexts
    bake = _Baker.bake

    def versions(self) -> dict[str, str]:
        return {"engine": "fake"}

    def layout(self, image: str, dest: Path) -> object:
        raise ServiceError(f"this test copies no image: {image}")

    def run_with_files(self, image: str, files: Mapping[str, bytes], argv: list[str], *, fetch: str | None = None,
                       timeout: float = 600.0) -> tuple[int, str, str, bytes | None]:
        raise ServiceError(f"this test runs no container: {image}")

    def pull_cache(self, ref: str) -> int | None:
        return None

    def push(self, repository: str, tag: str) -> str:
        raise ServiceError(f"this test pushes nothing: {repository}:{tag}")

    def remove(self, ref: str) -> None:
        pass

    def tag(self, source: str, repository: str, tag: str) -> None:
        pass


def _build_all(tmp_path: Path, engine: _Builds, cache_repository: str | None = None) -> tuple[str, str]:
    """`build --all` of one stack on `engine`: the cell's bake target name and image."""
    repo = make_stack_repo(tmp_path, "r", "stackctl-test/baking", commit=False, installer="uv")
    prep = prepare_build(repo.stack, repo.lock, None, "r1", "t", None, None, {"SOURCE_DATE_EPOCH": "1700000000"})
    order = BuildOrder(every=True, wheelhouse=repo.wheelhouse, record_dir=tmp_path / "records",
                       cache_repository=cache_repository)
    req = MatrixRequest((CellInput(prep, repo.lock, tmp_path / "records"),), "x86_64", order=order)
    fake: PoolEngine = engine  # type: ignore[assignment]  # the part of the protocol a matrix's build uses
    (outcome,) = build_matrix(req, "e", fake, lambda *_: None).outcomes
    assert outcome.error is not None  # neither fake builds
    return f"{prep.stack.name}-{prep.target}", str(image_ref(prep.stack, None))


def test_build_all_bakes_on_the_engine_that_declares_baking(tmp_path: Path) -> None:
    baker = _Baker()
    engine = _Builds("buildkit", baker)
    name, _ = _build_all(tmp_path, engine)
    assert baker.baked == [name] and engine.built == []


def test_build_all_builds_cell_by_cell_on_an_engine_that_declares_no_baking_whatever_members_it_has(
        tmp_path: Path) -> None:
    """The classic path: each cell built with the registry's stage images (and its own earlier image) as cache."""
    engine = _Builds("classic", None)
    repository = "127.0.0.1:5000/stackctl-test/cache"
    _, image = _build_all(tmp_path, engine, repository)
    assert len(engine.built) == 1
    *stages, own = engine.built[0]
    assert own == image and stages and all(s.startswith(f"{repository}:") for s in stages)
