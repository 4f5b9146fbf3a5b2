"""Build through the real engine: the gate inside the build, labels, layer reuse, no wheelhouse, no secrets."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result
from tests.support.cli import Cli
from tests.support.engine import Cleanup, unique_tag
from tests.support.fit import check_fits
from tests.support.gitrepo import git
from tests.support.imagestack import StackRepo, make_stack_repo

pytestmark = pytest.mark.integration


SECRET = "vendor-s3cr3t-never-in-an-image"


def stack(tmp_path: Path, registry: str, **kw: Any) -> StackRepo:
    repository = f"{registry}/stackctl-test/{unique_tag('build')}"
    return make_stack_repo(tmp_path, "e2e", repository, nonce=unique_tag("n"), **kw)


def build(cli: Cli, repo: StackRepo, tmp_path: Path, *args: str) -> Result:
    return cli("build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(tmp_path / "build"),
               "--context", str(tmp_path / "ctx"), *args, cwd=repo.root)


def test_build_passes_gate_and_labels_carry_the_revision(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_TEST_VENDOR_USER", "robot")
    monkeypatch.setenv("STACKCTL_TEST_VENDOR_PASSWORD", SECRET)
    repo = stack(tmp_path, registry)
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    cleanup.images(repository)
    r = build(cli, repo, tmp_path, "--json")
    assert r.code == 0, r.out + r.err
    record = json.loads(r.out)
    # a CI log gets a timestamped line per build step, in order, without escapes or carriage returns; then the
    # phases after the last step (the image's facts, the record), each said as a phase with the time before it
    lines = [ln for ln in r.err.splitlines() if " build step " in ln or " build phase: " in ln]
    n = record["steps"]
    assert [int(re.search(r" build step (\d+)/", ln).group(1)) for ln in lines[:n]  # type: ignore[union-attr]
            ] == list(range(1, n + 1))
    assert all(re.fullmatch(rf"\d\d:\d\d:\d\d build step \d+/{n}: \S.*", ln) for ln in lines[:n])
    phases = lines[n:]
    assert phases and all(re.fullmatch(r"\d\d:\d\d:\d\d build phase: \S.* \((.* took|[\d.]+ s since)"
                                       r" .*\)", ln) for ln in phases), phases
    assert "the build record" in phases[-1]
    assert "\r" not in r.err and "\x1b" not in r.err
    # the human report at 80 columns through a pipe keeps the image, its id and the gate lines whole
    check_fits(cli, monkeypatch, ["build", "e2e", "--wheelhouse", str(repo.wheelhouse), "--record-dir",
                                  str(tmp_path / "build"), "--context", str(tmp_path / "ctx")],
               ["image", "image_id", "gate"], cwd=repo.root)
    assert "PASS import patcher version=1.0.0" in record["gate"]
    assert "PASS import corelib version=2.0.0+vendor1" in record["gate"]
    assert "PASS probe corelib data files: 3 files corelib/data/*.json expected=3" in record["gate"]
    image = docker_client.images.get(record["image"])
    assert image.id == record["image_id"]
    labels = image.labels
    head = git(repo.root, "rev-parse", "HEAD").strip()
    assert labels["org.opencontainers.image.revision"] == head
    assert labels["org.opencontainers.image.version"] == "main"
    assert labels["org.opencontainers.image.source"] == "https://example.invalid/stackctl-e2e"
    assert labels["com.example.note"] == 'a "quoted" $value'
    assert labels["io.stackctl.stack"] == "e2e"
    assert json.loads(labels["io.stackctl.installed"])["helperdep"] == "1.4"
    assert "org.opencontainers.image.created" not in labels
    fp = record["fingerprint"]
    assert fp["head"] == head and fp["branch"] == "main" and fp["dirty"] is False
    assert fp["base_image_id"] == docker_client.images.get(base_image).id
    inputs = dict(fp["inputs"])
    assert {"lock", "context:Dockerfile", "context:rootfs/venv/opt/stackctl/gate/gate.py",
            "context:rootfs/stack/opt/stackctl/gate/gate.json"} <= set(inputs)
    assert any(k.startswith("profile:") for k in inputs)
    assert json.loads((tmp_path / "build" / "e2e.build.json").read_text())["image_id"] == image.id

    # The stack works in the image, joined across layers by the .pth file, in a fresh interpreter.
    out = docker_client.containers.run(
        image.id, ["python", "-c", "import patcher, corelib, toplib; "
                   "print(corelib.__version__, toplib.__version__)"],
        remove=True, network_disabled=True).decode()
    assert out.strip() == "2.0.0+vendor1 0.3.0"
    # The wheelhouse never reached the final image (the base's own ensurepip wheels aside).
    found = docker_client.containers.run(image.id, ["sh", "-c", "find / -xdev -name '*.whl' "
                                                    "-not -path '/usr/share/python-wheels/*' | wc -l"],
                                         remove=True, network_disabled=True).decode()
    assert found.strip() == "0"
    # No credential in any layer, label, build argument or history entry.
    assert SECRET not in json.dumps(image.attrs) and SECRET not in json.dumps(image.history())
    blob = b"".join(image.save(named=False))
    assert SECRET.encode() not in blob and b"STACKCTL_TEST_VENDOR_PASSWORD" not in blob


def test_wrong_pin_and_wrong_order_fail_the_build_with_fail_lines(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    # corelib gated before patcher (its import fails unless patcher came first), and a gate pin the
    # resolved closure does not satisfy.
    extra = '\n[gate.extra.helperdep]\norder = 5\nmodule = "helperdep"\ncheck = "exact"\nexpect = "1.5"\n'
    repo = stack(tmp_path, registry, orders={"patcher": 2, "corelib": 1}, extra_toml=extra)
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    cleanup.images(repository)
    r = build(cli, repo, tmp_path)
    assert r.code == 1, r.out + r.err
    lines = r.out.splitlines()
    assert "FAIL import corelib: ImportError: corelib needs patcher imported first" in lines
    assert "FAIL import helperdep version=1.4 expected=1.5" in lines
    assert all(line.startswith("FAIL ") for line in lines), "only the FAIL lines, plainly"
    assert "error: the gate failed: 2 checks did not pass" in r.err
    assert not (tmp_path / "build" / "e2e.build.json").exists()
    assert not docker_client.images.list(name=repository)
    r = build(cli, repo, tmp_path, "--json")
    error = json.loads(r.out)
    assert r.code == 1 and error["exit_code"] == 1
    assert "FAIL import corelib: ImportError: corelib needs patcher imported first" in error["error"]
    # For CI: the build folded in a group, and the gate's verdict at the profile, one annotation per FAIL.
    report = tmp_path / "codequality.json"
    r = build(cli, repo, tmp_path, "--annotations", "github", "--annotations", f"gitlab={report}")
    assert r.code == 1
    commands = [ln for ln in r.out.splitlines() if ln.startswith("::")]
    assert commands[0].startswith(f"::group::build {repository}:") and commands[1] == "::endgroup::"
    assert commands[2:] == [
        "::error file=stacks/e2e.toml,title=stackctl build::FAIL import corelib: ImportError: corelib needs "
        "patcher imported first",
        "::error file=stacks/e2e.toml,title=stackctl build::FAIL import helperdep version=1.4 expected=1.5"]
    issues = json.loads(report.read_text())
    assert [(i["location"]["path"], i["check_name"]) for i in issues] == [("stacks/e2e.toml", "stackctl build")] * 2


def test_a_fail_after_an_import_wrote_escapes_to_stderr_fails_the_build_with_that_line(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    # As torch does: a warning on stderr during import, here in colour and without a newline at its end,
    # so the gate's next line reaches the build stream behind a terminal escape.
    noisy = "\nimport sys\nsys.stderr.write('\\x1b[33mUserWarning: no device\\x1b[0m')\nsys.stderr.flush()\n"
    extra = '\n[gate.extra.helperdep]\norder = 5\nmodule = "helperdep"\ncheck = "exact"\nexpect = "1.5"\n'
    repo = stack(tmp_path, registry, extra_toml=extra, patcher_import=noisy)
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    cleanup.images(repository)
    r = build(cli, repo, tmp_path, "--no-cache")
    assert r.code == 1, r.out + r.err
    assert r.out.splitlines() == ["FAIL import helperdep version=1.4 expected=1.5"]
    assert "error: the gate failed: 1 check did not pass" in r.err
    assert "\x1b" not in r.out
    assert not docker_client.images.list(name=repository)


def test_dirty_tree_is_refused_unless_allowed(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    repo = stack(tmp_path, registry)
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    repo.profile.write_text(repo.profile.read_text() + "\n# edited\n")
    cleanup.images(repository)
    r = build(cli, repo, tmp_path)
    assert r.code == 2 and "uncommitted changes" in r.err
    r = build(cli, repo, tmp_path, "--allow-dirty", "--created", "2026-01-02T03:04:05Z", "--json")
    assert r.code == 0, r.out + r.err
    labels = docker_client.images.get(json.loads(r.out)["image"]).labels
    assert labels["org.opencontainers.image.revision"] == git(repo.root, "rev-parse", "HEAD").strip() + "-dirty"
    assert labels["org.opencontainers.image.created"] == "2026-01-02T03:04:05Z"


def test_top_pin_change_reuses_the_layers_below(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    repository, nonce = f"{registry}/stackctl-test/{unique_tag('reuse')}", unique_tag("n")
    a = make_stack_repo(tmp_path / "a", "e2e", repository, nonce=nonce)
    b = make_stack_repo(tmp_path / "b", "e2e", repository, {"toplib": "0.4.0"}, nonce=nonce)  # only toplib moves
    cleanup.images(repository)
    ra = build(cli, a, tmp_path / "a", "--json", "--revision", "r1", "--ref", "t")
    rb = build(cli, b, tmp_path / "b", "--json", "--revision", "r1", "--ref", "t")
    assert ra.code == 0 and rb.code == 0, ra.err + rb.err
    la = docker_client.images.get(json.loads(ra.out)["image"]).attrs["RootFS"]["Layers"]
    lb = docker_client.images.get(json.loads(rb.out)["image"]).attrs["RootFS"]["Layers"]
    base = len(docker_client.images.get(base_image).attrs["RootFS"]["Layers"])
    # base, the venv (its files, then the venv), then train-core, deps, patcher: identical; toplib and
    # above (the stack's own files, the gate's record) differ.
    same = next(i for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y)
    assert same == base + 2 + 3
    # each build served the wheels on a port of its own (classic), or mounted them (BuildKit): neither the
    # port nor the mount is part of any step's cache key
    records = json.loads(ra.out), json.loads(rb.out)
    # the steps that ran are named, toplib's install among them; every other one came from the cache
    assert len(records[1]["ran_steps"]) == records[1]["steps"] - records[1]["cached_steps"] > 0
    assert any("toplib" in s for s in records[1]["ran_steps"]), records[1]["ran_steps"]
    if records[0]["builder"] == "classic":
        assert records[0]["wheels"] == records[1]["wheels"] == "served"
        assert records[1]["cached_steps"] >= 12
    else:
        assert all(r["wheels_how"].startswith("mounted into the install stages") for r in records)
        # all but toplib's install and copy, the stack's own files and the gate
        assert records[1]["cached_steps"] == records[1]["steps"] - 4


def test_base_image_with_another_python_fails_plainly(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    repo = stack(tmp_path, registry, python="3.10")
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    cleanup.images(repository)
    r = build(cli, repo, tmp_path, "--no-cache")
    assert r.code == 1, r.out + r.err
    assert "the base image has python 3.11, the stack targets 3.10" in r.out
    assert "error: the build failed:" in r.err


def test_uv_from_the_lock_installs_the_stack_and_stays_out_of_the_image(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    repo = stack(tmp_path, registry, installer="uv")
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    cleanup.images(repository)
    r = build(cli, repo, tmp_path, "--json", "--revision", "r1", "--ref", "t")
    assert r.code == 0, r.out + r.err
    record = json.loads(r.out)
    assert "PASS import corelib version=2.0.0+vendor1" in record["gate"]
    image = docker_client.images.get(record["image"])
    out = docker_client.containers.run(
        image.id, ["sh", "-c", "find /opt/stack/train-core -path '*corelib_ext*' -name '*.pyc' | wc -l && "
                   "find /opt/stack/deps -name '*.pyc' | wc -l && "
                   "python -c 'import patcher, corelib, toplib; print(toplib.__version__)' && ls /opt/venv/bin"],
        remove=True, network_disabled=True).decode().split()
    assert out[2] == "0.3.0" and "uv" not in out[3:], out  # uv installed the stack, then stayed behind
    # byte-code by default for the pins (corelib_ext too, though the gate never imports it), not the closure
    assert int(out[0]) > 0 and out[1] == "0", out
    assert "uv" not in json.loads(image.labels["io.stackctl.installed"])
    # a tampered installer wheel is refused before the engine sees it
    wheel = next(repo.wheelhouse.glob("uv-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    bad = build(cli, repo, tmp_path, "--revision", "r1", "--ref", "t")
    assert bad.code == 1 and "uv-" in bad.err and "sha256" in bad.err


def test_served_and_sent_wheels_build_the_same_layers_and_the_server_leaves_no_trace(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    repo = stack(tmp_path, registry, installer="uv")
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    cleanup.images(repository)
    # the wheel server is the classic builder's (BuildKit mounts the wheels)
    served = build(cli, repo, tmp_path / "s", "--json", "--revision", "r1", "--ref", "t", "--no-cache",
                   "--builder", "classic")
    sent = build(cli, repo, tmp_path / "c", "--json", "--revision", "r1", "--ref", "t", "--no-cache",
                 "--send-wheels", "--builder", "classic")
    assert served.code == 0 and sent.code == 0, served.err + sent.err
    a, b = json.loads(served.out), json.loads(sent.out)
    assert (a["wheels"], b["wheels"]) == ("served", "context")
    # which way the wheels went and why, in the record (this machine's engine lists no bridge gateway:
    # the address comes from the bridge interface then)
    assert a["wheels_how"].startswith("served to the install stages at http://"), a["wheels_how"]
    assert "bridge" in a["wheels_how"] and "stackctl:" not in a["wheels_how"]
    assert b["wheels_how"] == "sent in the build context: --send-wheels"
    # the served context holds the wheels (hash-checked, in the record) but tells the engine to skip them
    assert (tmp_path / "s" / "ctx" / ".dockerignore").read_text() == "groups/*/*.whl\n"
    assert not (tmp_path / "c" / "ctx" / ".dockerignore").exists()
    assert any(name.endswith(".whl") for name, _ in a["fingerprint"]["inputs"])
    # the same layers either way: only where the stages read their wheels from differs
    image_a, image_b = docker_client.images.get(a["image_id"]), docker_client.images.get(b["image_id"])
    assert image_a.attrs["RootFS"]["Layers"] == image_b.attrs["RootFS"]["Layers"]
    # the server's address reaches neither the image's config nor its history
    env = image_a.attrs["Config"].get("Env") or []
    assert not [e for e in env if e.lower().startswith(("http_proxy", "https_proxy"))]
    history = json.dumps(docker_client.api.history(image_a.id))
    assert "stackctl-wheelhouse" not in history and "http_proxy" not in history
    # nor does the build's proxy password reach its output or its record
    assert not re.search(r"http://stackctl:[^@\s]*@", served.out + served.err + json.dumps(a) + history)


def test_a_served_wheel_that_is_not_the_locks_fails_the_build_naming_it(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    repo = stack(tmp_path, registry)
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    wheel = next(repo.wheelhouse.glob("toplib-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"\0")  # the wheelhouse changed after the lock was made
    cleanup.images(repository)
    r = build(cli, repo, tmp_path, "--revision", "r1", "--ref", "t", "--no-cache", "--builder", "classic")
    assert r.code == 1, r.out + r.err
    assert f"pin-toplib/{wheel.name}: sha256 " in r.err and "does not match the lock's" in r.err
    assert "hint: fetch the wheel again" in r.err
    # BuildKit mounts the wheels from the context, which checks each one as it is written: refused before any build
    r = build(cli, repo, tmp_path, "--revision", "r1", "--ref", "t", "--no-cache", "--builder", "buildkit")
    assert r.code == 1, r.out + r.err
    assert f"{wheel}: sha256 " in r.err and "does not match the lock's" in r.err


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_a_module_in_a_newer_pythons_syntax_gets_no_byte_code_and_the_build_goes_on(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str,
        installer: str) -> None:
    # torch's cp311 wheel ships torch/testing/_internal/py312_intrinsics.py (`def f[T](...)`) on purpose;
    # pip and uv leave such a file without byte-code, and the default [image] (byte-code "pins") must too
    repo = stack(tmp_path, registry, installer=installer,
                 toplib_files={"toplib/_py312.py": "def f[T](x: T) -> T:\n    return x\n"})
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    cleanup.images(repository)
    r = build(cli, repo, tmp_path, "--json", "--revision", "r1", "--ref", "t")
    assert r.code == 0, r.out + r.err
    image = json.loads(r.out)["image"]
    listing = docker_client.containers.run(image, ["sh", "-c", "ls /opt/stack/pin-toplib/toplib/__pycache__"],
                                           remove=True).decode().split()
    assert listing == ["__init__.cpython-311.pyc"], listing


def test_a_gate_step_from_the_cache_still_shows_the_verdict_the_image_passed_with(
        tmp_path: Path, cli: Cli, docker_client: Any, cleanup: Cleanup, base_image: str, registry: str) -> None:
    repo = stack(tmp_path, registry)
    repository = repo.stack.image.repository  # type: ignore[union-attr]
    cleanup.images(repository)
    first = build(cli, repo, tmp_path, "--json", "--revision", "r1", "--ref", "t")
    again = build(cli, repo, tmp_path, "--json", "--revision", "r1", "--ref", "t")
    assert first.code == 0 and again.code == 0, first.err + again.err
    ran, cached = json.loads(first.out), json.loads(again.out)
    assert not ran["gate_cached"] and cached["gate_cached"]
    assert "PASS import patcher version=1.0.0" in ran["gate"]
    assert cached["gate"] == ran["gate"]  # the lines of the run that passed these very layers
    human = build(cli, repo, tmp_path, "--revision", "r1", "--ref", "t")
    assert human.code == 0 and "PASS import patcher version=1.0.0" in human.out, human.out
    assert "gate: step taken from the cache" in " ".join(human.out.split())
