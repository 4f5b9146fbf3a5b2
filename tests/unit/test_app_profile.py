"""[image.app] and gate phases in a profile: what loads, what is refused with file:line, what a child changes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from stackctl.errors import ProfileError
from stackctl.profile.loader import load_stack
from stackctl.profile.model import GatePhase
from tests.conftest import STACKS

PROFILE = """
[stack]
name = "s"

[targets]
python = ["3.11"]
platforms = ["linux_x86_64"]

[indexes.public]
from_pip = true

[pins.cffi]
version = "1.17.1"
index = "public"
gate = { order = 1 }

[gate.extra.myapp]
order = 2
phase = "app"

[image]
base = "stackctl-base:bookworm"
repository = "example/app"
tag = "py{python}"

[image.app]
dockerfile = "app/Dockerfile"
context = "app"
args = { GREETING = "hello" }
"""

DOCKERFILE = """\
# syntax is the classic builder's
ARG STACK_IMAGE
FROM ${STACK_IMAGE} AS runtime
COPY . /src
RUN pip install --no-deps --no-index /src
"""


def repo(tmp_path: Path, profile: str = PROFILE, dockerfile: str | None = DOCKERFILE) -> Path:
    (tmp_path / "stacks").mkdir()
    path = tmp_path / "stacks" / "s.toml"
    path.write_text(textwrap.dedent(profile))
    if dockerfile is not None:
        (tmp_path / "app").mkdir()
        (tmp_path / "app" / "Dockerfile").write_text(dockerfile)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ProfileError) as info:
        load_stack(path)
    return [str(p) for p in info.value.problems]


def test_app_table_loads_with_its_defaults_and_phases(tmp_path: Path) -> None:
    stack = load_stack(repo(tmp_path))
    app = stack.app
    assert app is not None
    assert (app.dockerfile, app.context, app.target, app.args, app.stack_arg) == (
        "app/Dockerfile", "app", None, (("GREETING", "hello"),), "STACK_IMAGE")
    assert [e.dist for e in stack.gate_entries(phase=GatePhase.STACK)] == ["cffi"]
    assert [e.dist for e in stack.gate_entries(phase=GatePhase.APP)] == ["myapp"]
    assert [e.dist for e in stack.gate_entries()] == ["cffi", "myapp"]  # the whole gate, declared order


def test_missing_dockerfile_names_the_profile_line(tmp_path: Path) -> None:
    path = repo(tmp_path, dockerfile=None)
    [found] = problems(path)
    line = PROFILE.splitlines().index('dockerfile = "app/Dockerfile"') + 1
    assert found == f"{path}:{line} image.app.dockerfile: app/Dockerfile: no such file in the repository"


def test_dockerfile_that_never_takes_the_stack_argument_is_refused_at_its_from(tmp_path: Path) -> None:
    path = repo(tmp_path, dockerfile="FROM python:3.11 \\\n  AS runtime\nRUN true\n")
    [found] = problems(path)
    assert found.startswith(f"{tmp_path / 'app' / 'Dockerfile'}:1: no FROM uses ${{STACK_IMAGE}}")


def test_the_argument_must_be_declared_before_the_first_from(tmp_path: Path) -> None:
    path = repo(tmp_path, dockerfile="FROM scratch AS x\nARG STACK_IMAGE\nFROM $STACK_IMAGE\n")
    [found] = problems(path)
    assert found.startswith(f"{tmp_path / 'app' / 'Dockerfile'}:3: FROM ${{STACK_IMAGE}} needs `ARG STACK_IMAGE`")


def test_a_named_stack_argument_and_target(tmp_path: Path) -> None:
    text = PROFILE.replace('context = "app"', 'context = "app"\nstack_arg = "BASE"\ntarget = "runtime"')
    path = repo(tmp_path, text, "ARG BASE=none\nFROM ${BASE} AS runtime\n")
    stack = load_stack(path)
    assert stack.app is not None and (stack.app.stack_arg, stack.app.target) == ("BASE", "runtime")
    path.write_text(textwrap.dedent(text.replace('target = "runtime"', 'target = "final"')))
    [found] = problems(path)
    assert "no stage named 'final'" in found


@pytest.mark.parametrize(("args", "why"), [
    ('{ HF_TOKEN = "x" }', "image.app.args.HF_TOKEN: looks like a credential"),
    ('{ INDEX = "https://user:pw@mirror.example/simple" }', "image.app.args.INDEX: looks like a credential"),
    ('{ STACK_IMAGE = "x" }', "image.app.args.STACK_IMAGE: is the stack argument"),
    ('{ "A-B" = "x" }', "is not a build argument name"),
])
def test_build_arguments_that_would_leak_or_clash_are_refused(tmp_path: Path, args: str, why: str) -> None:
    path = repo(tmp_path, PROFILE.replace('{ GREETING = "hello" }', args))
    assert any(why in p for p in problems(path)), problems(path)


def test_paths_stay_inside_the_repository(tmp_path: Path) -> None:
    path = repo(tmp_path, PROFILE.replace('context = "app"', 'context = "../elsewhere"'))
    assert any("image.app.context" in p and "inside the repository" in p for p in problems(path))


def test_a_phase_is_stack_or_app(tmp_path: Path) -> None:
    path = repo(tmp_path, PROFILE.replace('phase = "app"', 'phase = "ap"'))
    assert any("gate.extra.myapp.phase: 'ap' is not one of stack, app; did you mean 'app'?" in p
               for p in problems(path))


def test_a_child_inherits_the_app_and_overrides_one_key(tmp_path: Path) -> None:
    path = repo(tmp_path)
    (tmp_path / "app" / "Dockerfile.slim").write_text(DOCKERFILE)
    child = path.parent / "child.toml"
    child.write_text('[stack]\nname = "c"\nextends = "s"\n\n[image.app]\ndockerfile = "app/Dockerfile.slim"\n')
    stack = load_stack(child)
    assert stack.app is not None
    assert (stack.app.dockerfile, stack.app.context, stack.app.args) == (
        "app/Dockerfile.slim", "app", (("GREETING", "hello"),))


def test_reference_stacks_leave_the_projects_own_installs_to_the_app_phase() -> None:
    app_phase = {"torch-2.11-post1": ["uvloop", "pycountry", "pytest", "vllm", "vllm_musa"],
                 "torch-2.11-post2": ["uvloop", "pycountry", "pytest", "vllm", "vllm_musa"],
                 "torch-2.9-control": ["numpy", "vllm", "vllm_musa"]}
    for name, expected in app_phase.items():
        stack = load_stack(STACKS / f"{name}.toml")
        assert [e.dist for e in stack.gate_entries(phase=GatePhase.APP)] == expected
        # every stack-phase entry is a pin of the stack: what the lock installs
        assert all(e.pinned for e in stack.gate_entries(phase=GatePhase.STACK))
