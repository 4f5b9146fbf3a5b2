"""The pure parts of an [image.app] build: the stack image's tag, the SBOM with what the app installed, the
final image's Dockerfile and labels, the phase option."""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import pytest

from stackctl.errors import InputError
from stackctl.image.app import (
    FROM_APP,
    AppSources,
    app_installed,
    app_labels,
    app_sbom,
    final_dockerfile,
    gate_phase,
    stack_image_ref,
)
from stackctl.image.labels import ImageRef, image_ref
from stackctl.profile.loader import load_stack
from stackctl.profile.model import GatePhase
from tests.conftest import STACKS

STACK_SBOM = json.dumps({"bomFormat": "CycloneDX", "components": [
    {"name": "cffi", "version": "1.17.1", "properties": [{"name": "stackctl:file", "value": "cffi.whl"}]},
    {"name": "pycparser", "version": "2.22"}]})


def test_the_stack_image_is_tagged_apart_only_under_image_app(tmp_path: Path) -> None:
    plain = load_stack(STACKS / "public-example.toml")
    assert stack_image_ref(plain) == image_ref(plain) == ImageRef("stackctl/public-example", "py3.11_cffi_1.17.1")
    app = load_stack(STACKS / "public-example-app.toml")
    assert image_ref(app) == ImageRef("stackctl/public-example-app", "py3.11_cffi_1.17.1")
    assert stack_image_ref(app, "r/x") == ImageRef("r/x", "py3.11_cffi_1.17.1-stack")
    (tmp_path / "stacks").mkdir()
    text = (STACKS / "public-example-app.toml").read_text() + textwrap.dedent("""
        [image.vars]
        long = "%s"
        """ % ("a" * 107))
    (tmp_path / "stacks" / "public-example.toml").write_text((STACKS / "public-example.toml").read_text().replace(
        'tag = "py{python}_cffi_{pins[cffi]}"', 'tag = "py{python}_cffi_{pins[cffi]}_{long}"'))
    (tmp_path / "stacks" / "public-example-app.toml").write_text(text)
    (tmp_path / "examples" / "app").mkdir(parents=True)
    (tmp_path / "examples" / "app" / "Dockerfile").write_text("ARG STACK_IMAGE\nFROM ${STACK_IMAGE}\n")
    long = stack_image_ref(load_stack(tmp_path / "stacks" / "public-example-app.toml"))
    assert len(long.tag) == 128 and long.tag.endswith("-stack")


def test_the_sbom_keeps_the_locked_pins_and_marks_what_the_app_installed() -> None:
    sbom = app_sbom(STACK_SBOM, {"cffi": "1.17.1", "pycparser": "2.22", "greeter": "0.1.0"}, {"cffi", "pycparser"})
    doc = json.loads(sbom)
    assert [c["name"] for c in doc["components"]] == ["cffi", "pycparser", "greeter"]
    greeter = doc["components"][-1]
    assert greeter["purl"] == "pkg:pypi/greeter@0.1.0"
    assert greeter["properties"] == [{"name": "stackctl:source", "value": FROM_APP}]
    assert app_installed(sbom) == {"greeter": "0.1.0"}
    assert app_installed(STACK_SBOM) == {} and app_installed(None) == {} and app_installed("not json") == {}


def test_final_labels_name_the_stack_image_and_the_projects_dockerfile(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "Dockerfile").write_text("ARG STACK_IMAGE\nFROM ${STACK_IMAGE}\n")
    sources = AppSources(tmp_path, tmp_path / "app" / "Dockerfile", tmp_path / "app")
    sbom = app_sbom(STACK_SBOM, {"greeter": "0.1.0"}, set())
    labels = dict(app_labels(stack_ref=ImageRef("r/x", "t-stack"), stack_id="sha256:" + "a" * 64, sources=sources,
                             revision="abc123", sbom=sbom, freeze={"greeter": "0.1.0"}))
    assert labels["org.opencontainers.image.base.name"] == "r/x:t-stack"
    assert labels["org.opencontainers.image.base.digest"] == "sha256:" + "a" * 64
    assert labels["io.stackctl.app.dockerfile"] == "app/Dockerfile"
    digest = hashlib.sha256(b"ARG STACK_IMAGE\nFROM ${STACK_IMAGE}\n").hexdigest()
    assert labels["io.stackctl.app.dockerfile-digest"] == f"sha256:{digest}"
    assert labels["io.stackctl.app.context"] == "app@abc123"
    assert labels["io.stackctl.sbom-digest"] == "sha256:" + hashlib.sha256(sbom.encode()).hexdigest()
    text = final_dockerfile("sha256:" + "b" * 64, tuple(sorted(labels.items())), 1725482643)
    lines = text.splitlines()
    assert lines[1] == "FROM sha256:" + "b" * 64
    # the whole gate is the last step that runs; only its labels follow
    assert lines[3].startswith('RUN ["python3", "-B", "/opt/stackctl/app-gate/gate.py"')
    assert '"--epoch", "1725482643"]' in lines[3] and lines[4].startswith("LABEL ")


def test_phase_option() -> None:
    assert gate_phase("all") is None and gate_phase("app") is GatePhase.APP and gate_phase("stack") is GatePhase.STACK
    with pytest.raises(InputError, match="--phase 'apps': give stack, app, device or all"):
        gate_phase("apps")
