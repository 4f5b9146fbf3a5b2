"""docs/bisect.md's serve command for the twin: both indexes answer, built from examples/musa-twin/ (cp311), with
the twin's own torchada, until SIGTERM."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.elf_fixtures import have_gcc
from tests.support.engine import in_ci


def test_serve_builds_the_twins_wheels_and_its_slow_torchada(tmp_path: Path) -> None:
    if not have_gcc():  # under CI a missing compiler fails, as a missing service does
        (pytest.fail if in_ci() else pytest.skip)("the example index builds its libraries with gcc")
    proc = subprocess.Popen([sys.executable, "examples/musa_twin.py", "serve", "--port", "0", "--dir", str(tmp_path)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        musa, public = lines[0].split()[1], lines[1].split()[1]
        assert lines[2].strip() == f"--index musa={musa} --index public={public}"
        with urllib.request.urlopen(musa + "deep-ep/", timeout=10) as page:
            html = page.read().decode()
        assert "deep_ep-1.1.0+musa5.2.0torch2.11.0.post2-cp311-cp311-linux_x86_64.whl" in html
        assert "cp310" not in html  # the twin's one target
        with urllib.request.urlopen(public + "torchada/", timeout=10) as page:
            assert "torchada-0.1.90-py3-none-any.whl" in page.read().decode()
        with urllib.request.urlopen(public.removesuffix("simple/") + "files/torchada-0.1.90-py3-none-any.whl",
                                    timeout=10) as wheel:
            source = zipfile.ZipFile(io.BytesIO(wheel.read())).read("torchada/__init__.py").decode()
        assert "EXTRA = 0.4" in source and "def dispatch(n)" in source
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
