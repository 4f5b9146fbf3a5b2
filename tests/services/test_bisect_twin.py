"""docs/bisect.md's twin of the MUSA upgrade, word for word: `stackctl bisect` on examples/musa-twin/, served by
examples/musa_twin.py, on the real engine, on CPU.

The twins are stacks/torch-2.11-post1.toml and stacks/torch-2.11-post2.toml with the same pins, trains and gate,
adjusted to the base image here (examples/musa_twin.py says how). torchada is the twin's own: 0.1.90 does about
40 % more work in the call the plan's benchmark times. post1 → post2 moves two units: the musa-torch train with
deep_ep (whose local label names its torch) and torchada. Bisect names torchada alone, never the train.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.musa_twin import BASE_IMAGE, REPOSITORY, TWIN, twin_indexes
from examples.vendor_index import ExampleIndexes
from tests.conftest import REPO
from tests.support.cli import Cli
from tests.support.engine import unique_tag

pytestmark = pytest.mark.integration


def twin_commands() -> tuple[str, list[str]]:
    """The section's two `sh` blocks as written: the serve command, and the commands run beside it (a line
    ending in a backslash goes on on the next)."""
    text = (REPO / "docs" / "bisect.md").read_text(encoding="utf-8")
    section = text.split("## The MUSA upgrade, on a twin", 1)[1].split("\n## ", 1)[0]
    serve, commands = (re.sub(r"\\\n\s*", "", b) for b in re.findall(r"```sh\n(.*?)```", section, re.S))
    return serve.strip(), [c.strip() for c in commands.splitlines() if c.strip()]


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory, docker_client: Any, base_image: str
         ) -> Iterator[tuple[Path, ExampleIndexes, str]]:
    """A checkout's examples/musa-twin/ (its image repository one of this run's own, its base image the one
    here), and the example indexes built from it as `musa_twin.py serve` builds them, on free ports."""
    from tests.support.imagetest import remove_images

    root = tmp_path_factory.mktemp("twin")
    repository = unique_tag(REPOSITORY)
    checkout = root / "checkout"
    shutil.copytree(TWIN, checkout / "examples" / "musa-twin")
    post1 = checkout / "examples" / "musa-twin" / "stacks" / "torch-2.11-post1.toml"
    text = post1.read_text()
    assert text.count(f'repository = "{REPOSITORY}"') == 1 and text.count(f'base = "{BASE_IMAGE}"') == 1
    post1.write_text(text.replace(f'repository = "{REPOSITORY}"', f'repository = "{repository}"')
                     .replace(f'base = "{BASE_IMAGE}"', f'base = "{base_image}"'))
    try:
        with twin_indexes(root / "served", checkout / "examples" / "musa-twin" / "stacks") as ex:
            yield checkout, ex, repository
    finally:
        remove_images(docker_client, repository)


def test_the_docs_twin_commands_run_and_bisect_names_torchada_not_the_torch_train(
        cli: Cli, twin: tuple[Path, ExampleIndexes, str], base_image: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    checkout, ex, _ = twin
    serve, commands = twin_commands()
    assert serve == "python examples/musa_twin.py serve --port 8650"  # this test's servers: `twin`
    assert [shlex.split(c)[:2] for c in commands if c.startswith("stackctl ")] == [
        ["stackctl", "resolve"], ["stackctl", "resolve"], ["stackctl", "inventory"], ["stackctl", "bisect"]]
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(checkout.parent / "cache"))
    for var, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_COMMITTER_NAME", "t"),
                       ("GIT_AUTHOR_EMAIL", "t@example.invalid"), ("GIT_COMMITTER_EMAIL", "t@example.invalid")):
        monkeypatch.setenv(var, value)
    cwd, took = checkout, 0.0
    bisect = None
    for command in commands:
        command = (command.replace("http://127.0.0.1:8650/", ex.musa.base)
                   .replace("http://127.0.0.1:8651/", ex.public.base).replace(BASE_IMAGE, base_image))
        words = shlex.split(command)
        if words[0] == "cd":
            cwd = (cwd / words[1]).resolve()
        elif words[0] == "stackctl":
            started = time.monotonic()
            res = cli(*words[1:], cwd=cwd)
            if words[1] == "bisect":
                bisect, took = res, time.monotonic() - started
            else:
                assert res.code == 0, f"{command}\n{res.out}\n{res.err}"
        else:
            done = subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, check=False)
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    assert bisect is not None and cwd == checkout.parent / "musa-twin"
    lock = json.loads((cwd / "stacks" / "torch-2.11-post2.lock").read_text())
    assert "cp311" in json.dumps(lock) and "cp310" not in json.dumps(lock)

    result = json.loads((cwd / "build" / "torch-2.11-post2.bisect.json").read_text())["result"]
    with capsys.disabled():  # what the host could tell, in the CI log
        print(f"\nbisect of the MUSA twin: exit {bisect.code}; {result['conclusion']}; {result['comparisons']} "
              f"comparisons, {result['builds']} builds, {took:.0f} s")
        for s in result["steps"]:
            delta = "" if s["delta_pct"] is None else f", {s['delta_pct']:+.1f} %"
            print(f"  {s['role']}: {' + '.join(s['units'])}: {s['outcome']} ({s['verdict']}{delta}), "
                  f"{s['seconds']:.0f} s")
    assert bisect.code == 0, (bisect.err[-3000:], result["steps"])
    # two units: the train, with deep_ep coupled to it by its local label, and torchada
    assert [u["pins"] for u in result["units"]] == [
        ["torch", "torch_musa", "torchvision", "torchaudio", "deep_ep"], ["torchada"]]
    assert any("musa-torch" in why for why in result["units"][0]["why"])
    assert any("deep_ep" in why and "torch" in why for why in result["units"][0]["why"]), result["units"][0]
    culprits = [(c["kind"], c["pins"], c["alone"], c["without"]) for c in result["culprits"]]
    assert culprits == [("culprit", ["torchada"], "bad", "good")], result["steps"]
    assert result["culprits"][0]["moves"] == [{"pin": "torchada", "before": "0.1.83", "after": "0.1.90"}]
    slowed = [s["delta_pct"] for s in result["steps"] if s["verdict"] == "regressed"]
    assert slowed and all(d > 10 for d in slowed), result["steps"]
    train = [s for s in result["steps"] if s["units"] == [result["units"][0]["name"]]]
    assert [s["outcome"] for s in train] == ["good"], result["steps"]
    # the last line the docs show
    assert "bisect: culprit: torchada (torchada 0.1.83 → 0.1.90)" in bisect.out
