"""The hooks in .pre-commit-hooks.yaml, run by pre-commit itself in a sample repository whose
.pre-commit-config.yaml names this repository at its HEAD, as a project adopting stackctl would.

pre-commit builds the hooks' environment the way it does for any `language: python` hook: a fresh virtualenv
with stackctl installed from this repository at HEAD (committed work only) and its dependencies from the
public index. The test extra includes pre-commit-uv, so that install runs through uv (which stackctl
already depends on) rather than pip: the same packages in the same isolated environment, in a fraction
of pip's time. The environment is built once per module and reused by every run, as pre-commit reuses it.
Without CI set, an unreachable index skips; in CI it fails like every other missing service.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stackctl.profile.loader import load_stack
from stackctl.resolve.lock import Lock, LockedFile, LockedPin, write_lock
from tests.conftest import REPO, STACKS
from tests.support.gitrepo import git

pytestmark = pytest.mark.network


@dataclass(frozen=True)
class Sample:
    root: Path
    env: dict[str, str]

    def run(self, *hooks: str) -> subprocess.CompletedProcess[str]:
        """`pre-commit run --all-files` of the named hooks (all when none)."""
        done = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never",
                               *hooks[:1]], cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=300, check=False)
        if done.returncode == 3 and not os.environ.get("CI"):  # pre-commit's own failure: the install
            pytest.skip(f"the hooks' environment could not be installed: {done.stdout[-300:]}")
        return done


CONFIG = """\
repos:
  - repo: {repo}
    rev: {rev}
    hooks:
      - id: stackctl-validate
      - id: stackctl-check
        args: [stacks/public-example.toml, --requirements, requirements]
"""


def _lock_for(profile: Path) -> None:
    """A lock made from the profile (what `resolve` writes; its files' hashes do not matter to `check`)."""
    stack = load_stack(profile)
    pins = tuple(LockedPin(p.name, p.version, p.index, tuple(
        LockedFile(t.label, f"{p.key}-{p.version}-py3-none-any.whl", f"http://127.0.0.1:9/{p.key}.whl",
                   f"{i:064x}") for t in p.targets(stack.targets))) for i, p in enumerate(stack.pins))
    write_lock(profile.with_suffix(".lock"), Lock(stack.name, stack.digest(), pins))


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sample]:
    root = tmp_path_factory.mktemp("adopter")
    git(root, "init", "-q", "-b", "main")
    (root / "stacks").mkdir()
    shutil.copy(STACKS / "public-example.toml", root / "stacks")
    _lock_for(root / "stacks" / "public-example.toml")
    rev = git(REPO, "rev-parse", "HEAD").strip()
    (root / ".pre-commit-config.yaml").write_text(CONFIG.format(repo=REPO, rev=rev))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRE_COMMIT", "GIT_"))}
    env.update(PRE_COMMIT_HOME=str(tmp_path_factory.mktemp("pre-commit-home")),
               GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    if os.environ.get("PIP_INDEX_URL"):  # the public index is the one pip is configured with
        env["UV_DEFAULT_INDEX"] = os.environ["PIP_INDEX_URL"]
    git(root, "add", ".")
    git(root, "commit", "-qm", "stack")
    yield Sample(root, env)


def test_the_validate_hook_passes_a_good_profile_and_fails_a_broken_one(sample: Sample) -> None:
    good = sample.run("stackctl-validate")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "stackctl validate" in good.stdout and "Passed" in good.stdout

    profile = sample.root / "stacks" / "public-example.toml"
    text = profile.read_text()
    try:
        profile.write_text(text.replace("[targets]", "[targets]\npythons = [\"3.11\"]", 1))
        bad = sample.run("stackctl-validate")
        assert bad.returncode == 1
        assert "Failed" in bad.stdout
        assert "error: stacks/public-example.toml:11 targets.pythons: unknown key; did you mean 'python'?" in \
            bad.stdout
    finally:
        profile.write_text(text)


def test_the_check_hook_fails_when_the_lock_is_stale(sample: Sample) -> None:
    out = sample.root / "requirements"
    export = subprocess.run([sys.executable, "-m", "stackctl", "export", "stacks/public-example.toml", "--out",
                             str(out)], cwd=sample.root, capture_output=True, text=True, check=False)
    assert export.returncode == 0, export.stderr
    passed = sample.run("stackctl-check")
    assert passed.returncode == 0, passed.stdout
    assert "stackctl check" in passed.stdout and "Passed" in passed.stdout

    profile = sample.root / "stacks" / "public-example.toml"
    text = profile.read_text()
    try:
        profile.write_text(text.replace('version = "2.22"', 'version = "2.23"'))
        failed = sample.run("stackctl-check")
        assert failed.returncode == 1
        assert "FAIL stacks/public-example.lock: made from another version of public-example" in failed.stdout
    finally:
        profile.write_text(text)
