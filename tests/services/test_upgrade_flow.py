"""An upgrade from a new release train to the pull request body, on real parts: loopback indexes serving
both releases → propose → resolve → abi → build (engine, gate) → publish (registry, pulled back by digest)
→ scan → report. Prints the wall time of each step and the engine's share."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from stackctl.profile.loader import load_stack
from stackctl.resolve.lock import read_lock
from tests.conftest import Result
from tests.support.cli import Cli
from tests.support.engine import Cleanup, unique_tag
from tests.support.gitrepo import git
from tests.support.imagestack import VERSIONS, build_wheels, make_stack_repo
from tests.support.index_server import IndexServer

pytestmark = pytest.mark.integration
T0 = datetime(2026, 9, 1, 8, 0, tzinfo=timezone.utc)
NEW = {**VERSIONS, "corelib": "2.0.1+vendor1", "corelib-ext": "2.0.1+vendor1", "toplib": "0.3.1"}


def test_propose_resolve_abi_build_publish_report(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STACKCTL_TEST_VENDOR_USER", "robot")
    monkeypatch.setenv("STACKCTL_TEST_VENDOR_PASSWORD", "e2e-flow-secret")
    repository = f"{registry}/stackctl-test/{unique_tag('flow')}"
    repo = make_stack_repo(tmp_path, "flow-old", repository, nonce=unique_tag("n"), commit=False)
    repo.lock.unlink()
    (repo.root / ".stackctl-scan-allow").write_text("stacks/flow-old.*\n")
    (repo.root / ".gitignore").write_text("build/\n")
    # toplib's attribute stays: the profile's probe names the value, and a proposal moves pins, not probes
    new_wheels = build_wheels(tmp_path / "wheelhouse-new", NEW, nonce=unique_tag("n"), toplib_attr="0.3.0")
    vendor = IndexServer(html_only=True, auth=("robot", "e2e-flow-secret")).start()
    public = IndexServer().start()
    digests: list[str] = []
    steps: dict[str, float] = {}

    def step(name: str, *args: str, ok: tuple[int, ...] = (0,)) -> Result:
        start = time.monotonic()
        r = cli(*args, cwd=repo.root)
        steps[name] = steps.get(name, 0.0) + time.monotonic() - start
        assert r.code in ok, f"{name}: {r.out}{r.err}"
        return r

    cleanup.images(repository)
    try:
        # two releases: the core train (corelib, corelib-ext) a month apart, minutes between members
        for month, (versions, wheelhouse) in enumerate(((VERSIONS, repo.wheelhouse),
                                                        (NEW, tmp_path / "wheelhouse-new"))):
            for i, name in enumerate(VERSIONS):
                if month and versions[name] == VERSIONS[name]:
                    continue
                wheel = next(wheelhouse.glob(f"{name.replace('-', '_')}-{versions[name]}-*.whl"))
                (vendor if name.startswith("corelib") else public).add(
                    wheel, upload_time=T0 + timedelta(days=30 * month, minutes=i))
        assert new_wheels
        indexes = ("--index", f"vendor={vendor.url}", "--index", f"public={public.url}")
        build_dir = "build"

        # the old stack, as it is on main: resolved, built (for the image diff), committed
        step("resolve old", "resolve", "flow-old", *indexes)
        git(repo.root, "add", "-A")
        git(repo.root, "commit", "-q", "-m", "old stack")
        step("build old", "build", "flow-old", *indexes)

        flow = time.monotonic()
        r = step("propose", "propose", "flow-old", "--name", "flow-new", *indexes, "--json")
        moves = {m["pin"]: m for m in json.loads(r.out)["moves"]}
        assert set(moves) == {"corelib", "corelib-ext", "toplib"}
        assert "release train core moves whole" in moves["corelib-ext"]["why"]
        new_stack = load_stack(repo.root / "stacks" / "flow-new.toml")
        assert new_stack.extends == "flow-old" and new_stack.pin("corelib").version == "2.0.1+vendor1"  # type: ignore[union-attr]

        step("resolve", "resolve", "flow-new", *indexes)
        git(repo.root, "add", "-A")
        git(repo.root, "commit", "-q", "-m", "flow-new: the core train and toplib move")
        step("abi", "abi", "flow-new", *indexes, "--record", f"{build_dir}/flow-new.abi.json")
        r = step("build", "build", "flow-new", *indexes, "--json")
        image = json.loads(r.out)["image"]
        r = step("publish", "publish", "flow-new", "--json")
        digests.append(json.loads(r.out)["digest"])
        cleanup.manifest(registry, repository, digests[-1])
        step("scan", "scan", ".", "--stack", "flow-new", "--since", "flow-old", "--record",
             f"{build_dir}/flow-new.scan.json")
        r = step("report", "report", "flow-new", "--json")
        wall = time.monotonic() - flow
        rep = json.loads(r.out)
        sections = {s["key"]: s for s in rep["sections"]}
        assert {k: s["status"] for k, s in sections.items()} == {
            "profile": "ok", "files": "ok", "newest": "ok", "abi": "ok", "wheel-diff": "ok", "build": "ok",
            "publication": "ok", "image-diff": "ok", "scan": "ok", "validation": "not run"}, rep
        lock = read_lock(repo.root / "stacks" / "flow-new.lock")
        assert f"image {image} @ {digests[0]}" in rep["summary"]
        assert "3 pins move from flow-old" in rep["summary"]
        profile_rows = sections["profile"]["tables"][0]["rows"]
        toplib = next(row for row in profile_rows if row[0] == "toplib")
        assert toplib[1:3] == ["0.3.0", "0.3.1"]
        assert toplib[3].startswith("patch; published 2026-10-01T08:03:00Z; newest in its line")
        files = sections["files"]["tables"][0]["rows"]
        assert all(row[-1] == "verified" for row in files)  # the build copied each after checking its sha256
        corelib = lock.pin("corelib")
        assert corelib is not None
        assert next(row for row in files if row[0] == "corelib")[3] == corelib.files[0].sha256[:12]
        assert any(line.startswith("PASS import corelib version=2.0.1+vendor1") for line in sections["build"]["lines"])
        labels = dict(map(tuple, sections["build"]["tables"][1]["rows"]))
        assert labels["io.stackctl.lock-digest"] == lock.digest()
        pub = dict(map(tuple, sections["publication"]["tables"][0]["rows"]))
        assert pub["digest"] == digests[0]
        image_rows = sections["image-diff"]["tables"][0]["rows"]
        assert ["toplib", "0.3.0", "0.3.1", "changed"] in image_rows
        assert ["corelib", "2.0.0+vendor1", "2.0.1+vendor1", "changed"] in image_rows
        assert sections["abi"]["source"].startswith("stackctl abi flow-new")

        md = step("report markdown", "report", "flow-new", "--markdown").out
        for title in ("Profile diff", "Files per pin and target", "Is this the newest?", "ABI closure",
                      "Build: gate log", "Publication", "Installed distributions", "Stale references"):
            assert f"### {title}" in md
        assert "PASS import corelib version=2.0.1+vendor1" in md

        for path in (repo.root / "build").rglob("*"):
            if path.is_file():
                assert b"e2e-flow-secret" not in path.read_bytes(), path
        engine = steps["build"] + steps["publish"]
        print(f"\nupgrade flow wall time {wall:.1f} s; engine (build + publish) {engine:.1f} s "
              f"({100 * engine / wall:.0f}%); " + ", ".join(f"{k} {v:.2f} s" for k, v in steps.items()))
    finally:
        vendor.stop()
        public.stop()
