"""A regular (not editable) install carries Dockerfile.in, templates/ and gates/ inside the wheel: built,
installed into a fresh venv outside the source tree, it renders a build context and a gate spec there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.support.imagestack import make_stack_repo


def test_installed_wheel_renders_a_context_outside_the_source_tree(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(REPO)], check=True, cwd=tmp_path)
    wheel = next(dist.glob("stackctl-*.whl"))
    venv = tmp_path / "venv"
    # The dependencies come from this environment; stackctl itself only from the wheel.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    where = subprocess.run([str(py), "-c", "import stackctl, sys; sys.stdout.write(stackctl.__file__)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert where.startswith(str(venv)), where

    repo = make_stack_repo(tmp_path / "work", "w", "127.0.0.1:5000/t/w")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    stackctl = str(venv / "bin" / "stackctl")
    out = tmp_path / "context"
    r = subprocess.run([stackctl, "render", str(repo.profile), "--out", str(out), "--wheelhouse", str(repo.wheelhouse)],
                       capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "FROM " in (out / "Dockerfile").read_text()
    assert (out / "rootfs/venv/opt/stackctl/gate/gate.py").read_bytes() == (REPO / "gates" / "gate.py").read_bytes()

    spec = subprocess.run([stackctl, "gate", str(REPO / "stacks" / "torch-2.11-post2.toml"), "--spec-only"],
                          capture_output=True, text=True, cwd=tmp_path, env=env)
    assert spec.returncode == 0 and '"torchada"' in spec.stdout, spec.stderr
