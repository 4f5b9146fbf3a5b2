"""A regular (not editable) install carries Dockerfile.in, templates/ and gates/ inside the wheel: built,
installed into a fresh venv outside the source tree, it renders a build context and a gate spec there."""

from __future__ import annotations

import os
import site
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
    # The dependencies come from this environment; stackctl itself only from the wheel. Inside a venv,
    # `python -m venv --system-site-packages` would see the base interpreter's packages, not this venv's:
    # the new venv names this environment's site directories instead (a path in a .pth file, read after
    # its own site-packages, and without running their .pth files: an editable stackctl stays out).
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    own = subprocess.run([str(py), "-c", "import sysconfig, sys; sys.stdout.write(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout
    outer = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    Path(own, "outer-environment.pth").write_text("".join(f"{d}\n" for d in outer))
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    where = subprocess.run([str(py), "-c", "import stackctl, sys; sys.stdout.write(stackctl.__file__)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert where.startswith(str(venv)), where
    # its dependencies are this environment's own (a venv's, when the tests run in one), not its base's
    import typer

    theirs = subprocess.run([str(py), "-c", "import typer, sys; sys.stdout.write(typer.__file__)"],
                            check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert theirs == typer.__file__

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
