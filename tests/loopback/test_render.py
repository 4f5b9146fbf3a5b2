"""The rendered Dockerfile and build context: layer order, hermetic installs, no pins or credentials inline."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stackctl.errors import CheckFailed
from stackctl.image.render import plan_layers
from stackctl.resolve.lock import read_lock
from tests.conftest import Result
from tests.support.cli import Cli
from tests.support.gitrepo import git
from tests.support.imagestack import TARGET, make_stack_repo, refresh_lock

REPO_NAME = "127.0.0.1:5000/t/r"


def render(cli: Cli, repo: Path, out: Path, *args: str) -> Result:
    r = cli("render", "r", "--out", str(out), *args, cwd=repo)
    assert r.code == 0, r.out + r.err
    return r


def final_stage(dockerfile: str) -> str:
    return dockerfile.split("\nFROM stackctl-base:bookworm\n", 1)[1]


def test_layer_groups_most_stable_first(tmp_path: Path) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME, commit=False)
    groups = plan_layers(repo.stack, read_lock(repo.lock), TARGET)
    assert [(g.name, g.kind, [i.name for i in g.items]) for g in groups] == [
        ("train-core", "vendor", ["corelib", "corelib-ext"]),
        ("deps", "closure", ["helperdep"]),
        ("pin-patcher", "public", ["patcher"]),
        ("pin-toplib", "public", ["toplib"]),
    ]


def test_dockerfile_is_hermetic_and_carries_no_pins(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME)
    out = tmp_path / "ctx"
    render(cli, repo.root, out, "--wheelhouse", str(repo.wheelhouse))
    text = (out / "Dockerfile").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("LABEL", '"')))
    assert not re.search(r"[A-Za-z0-9_.-]+==\S", body), "versions come only from groups/*/requirements.txt"
    for version in repo.versions.values():
        assert version not in body
    installs = [line for line in text.splitlines() if "pip install" in line]
    assert len(installs) == 4
    assert all("--no-index" in i and "--require-hashes" in i and "--no-deps" in i for i in installs)
    final = final_stage(text)
    assert "groups/" not in final and "/tmp/group" not in final  # wheels never copied into the final image
    assert [m.group(1) for m in re.finditer(r"COPY --from=(\S+)", final)] == [
        "layer01-train-core", "layer02-deps", "layer03-pin-patcher", "layer04-pin-toplib"]
    assert final.index("gate.py") > final.rindex("COPY --from")
    assert "BuildKit" not in text.replace("no BuildKit", "") and "--mount" not in text
    req = (out / "groups" / "train-core" / "requirements.txt").read_text()
    assert re.search(r"^corelib==2\.0\.0\+vendor1 --hash=sha256:[0-9a-f]{64}$", req, re.M)
    pth = (out / "rootfs/venv/opt/stackctl/layers.pth").read_text()
    assert pth.startswith("import site;") and pth.index("/opt/stack/train-core") < pth.index("/opt/stack/pin-toplib")
    assert sorted(p.name for p in (out / "groups").rglob("*.whl")) == sorted(
        p.name for p in repo.wheelhouse.glob("*.whl"))
    spec = json.loads((out / "rootfs/stack/opt/stackctl/gate/gate.json").read_text())
    assert [e["dist"] for e in spec["entries"]] == ["patcher", "corelib", "corelib-ext", "toplib"]


def test_labels_name_the_revision_and_escape(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME)
    head = git(repo.root, "rev-parse", "HEAD").strip()
    render(cli, repo.root, tmp_path / "ctx")
    text = (tmp_path / "ctx" / "Dockerfile").read_text()
    assert f'"org.opencontainers.image.revision"="{head}"' in text
    assert '"org.opencontainers.image.version"="main"' in text
    assert '"com.example.note"="a \\"quoted\\" \\$value"' in text
    assert "org.opencontainers.image.created" not in text
    assert '"io.stackctl.lock-digest"="sha256:' in text
    assert '"org.opencontainers.image.title"="r"' in text and '"io.stackctl.stack"="r"' in text
    git(repo.root, "tag", "v1.2")
    (repo.root / "stacks" / "r.toml").write_text((repo.root / "stacks" / "r.toml").read_text() + "\n")
    render(cli, repo.root, tmp_path / "ctx2", "--created", "2026-01-02T03:04:05Z")
    text = (tmp_path / "ctx2" / "Dockerfile").read_text()
    assert f'"org.opencontainers.image.revision"="{head}-dirty"' in text
    assert '"org.opencontainers.image.version"="v1.2"' in text
    assert '"org.opencontainers.image.created"="2026-01-02T03:04:05Z"' in text
    for bad in ("yesterday", "2026-01-02T03:04:05"):  # a time without its zone says no single moment
        r = cli("render", "r", "--out", str(tmp_path / "bad"), "--created", bad, cwd=repo.root)
        assert r.code == 2 and "give `now` or an ISO 8601 time with its zone" in r.err
    # An explicit revision replaces git's, but the tree is still dirty and the label still says so.
    render(cli, repo.root, tmp_path / "ctx3", "--revision", "abc123", "--ref", "release/9")
    text = (tmp_path / "ctx3" / "Dockerfile").read_text()
    assert '"org.opencontainers.image.revision"="abc123-dirty"' in text and '"release/9"' in text
    git(repo.root, "commit", "-qam", "edit")
    render(cli, repo.root, tmp_path / "ctx4", "--revision", "abc123", "--ref", "release/9")
    assert '"org.opencontainers.image.revision"="abc123"' in (tmp_path / "ctx4" / "Dockerfile").read_text()


def test_untracked_profile_and_lock_make_the_tree_dirty(tmp_path: Path, cli: Cli) -> None:
    # git status without untracked files is clean, but HEAD holds neither the profile nor the lock: a
    # label naming HEAD would claim a revision that cannot rebuild this image.
    repo = make_stack_repo(tmp_path, "r", REPO_NAME, commit=False)
    (repo.root / "README").write_text("x\n")
    git(repo.root, "add", "README")
    git(repo.root, "commit", "-qm", "readme")
    head = git(repo.root, "rev-parse", "HEAD").strip()
    r = cli("build", "r", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(tmp_path / "b"), cwd=repo.root)
    assert r.code == 2
    assert "r.toml" in r.err and "r.lock not committed: the revision label would lie" in r.err
    assert not (tmp_path / "b").exists()
    render(cli, repo.root, tmp_path / "ctx")
    assert f'"org.opencontainers.image.revision"="{head}-dirty"' in (tmp_path / "ctx" / "Dockerfile").read_text()
    git(repo.root, "add", "stacks/r.toml")
    git(repo.root, "commit", "-qm", "profile")
    r = cli("build", "r", "--wheelhouse", str(repo.wheelhouse), "--record-dir", str(tmp_path / "b"), cwd=repo.root)
    assert r.code == 2 and "r.lock not committed" in r.err and "r.toml" not in r.err


def test_top_pin_change_touches_only_its_own_group(tmp_path: Path, cli: Cli) -> None:
    a = make_stack_repo(tmp_path / "a", "r", REPO_NAME)
    b = make_stack_repo(tmp_path / "b", "r", REPO_NAME, {"toplib": "0.4.0"})
    render(cli, a.root, tmp_path / "ca", "--wheelhouse", str(a.wheelhouse), "--revision", "x", "--ref", "y")
    render(cli, b.root, tmp_path / "cb", "--wheelhouse", str(b.wheelhouse), "--revision", "x", "--ref", "y")

    def files(d: Path) -> dict[str, bytes]:
        return {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*") if p.is_file()}

    fa, fb = files(tmp_path / "ca"), files(tmp_path / "cb")
    changed = sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))
    assert changed == ["Dockerfile", "groups/pin-toplib/requirements.txt",
                       "groups/pin-toplib/toplib-0.3.0-py3-none-any.whl",
                       "groups/pin-toplib/toplib-0.4.0-py3-none-any.whl", "rootfs/stack/opt/stackctl/gate/gate.json",
                       "rootfs/stack/opt/stackctl/sbom.cdx.json"]
    strip = re.compile(r"^LABEL.*?(?=\Z)", re.S | re.M)
    assert strip.sub("", fa["Dockerfile"].decode()) == strip.sub("", fb["Dockerfile"].decode())


def test_no_credential_reaches_the_context(tmp_path: Path, cli: Cli,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-token-value"
    monkeypatch.setenv("STACKCTL_TEST_VENDOR_USER", "robot")
    monkeypatch.setenv("STACKCTL_TEST_VENDOR_PASSWORD", secret)
    repo = make_stack_repo(tmp_path, "r", REPO_NAME)
    render(cli, repo.root, tmp_path / "ctx", "--wheelhouse", str(repo.wheelhouse))
    files = [p for p in (tmp_path / "ctx").rglob("*") if p.is_file()]
    assert len([p for p in files if p.suffix == ".whl"]) == len(repo.versions)  # the wheels were looked at too
    for p in files:
        assert secret.encode() not in p.read_bytes(), p
        assert b"STACKCTL_TEST_VENDOR_PASSWORD" not in p.read_bytes(), p


def test_missing_wheel_and_stale_lock_are_refused(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME)
    r = cli("render", "r", "--out", str(tmp_path / "c"), "--target", "cp310-linux_x86_64", cwd=repo.root)
    assert r.code == 2 and "target cp310-linux_x86_64 is not one of cp311-linux_x86_64" in r.err
    render(cli, repo.root, tmp_path / "c", "--wheelhouse", str(repo.wheelhouse))
    before = {p: p.read_bytes() for p in (tmp_path / "c").rglob("*") if p.is_file()}
    toplib = next(repo.wheelhouse.glob("toplib-*"))
    toplib.unlink()  # the context holds a hard link to it: write a new file, not through the link
    toplib.write_bytes(b"tampered")
    r = cli("render", "r", "--out", str(tmp_path / "c"), "--wheelhouse", str(repo.wheelhouse), cwd=repo.root)
    assert r.code == 1 and "does not match the lock's" in r.err
    # Nothing half-written: the previous context stands as it was, and no partial one is left beside it.
    assert {p: p.read_bytes() for p in (tmp_path / "c").rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".c.")) == []
    r = cli("render", "r", "--out", str(tmp_path / "d"), "--wheelhouse", str(repo.wheelhouse), cwd=repo.root)
    assert r.code == 1 and not (tmp_path / "d").exists()
    (tmp_path / "file").write_text("x")
    r = cli("render", "r", "--out", str(tmp_path / "file"), cwd=repo.root)
    assert r.code == 2 and r.err.strip() == f"error: --out {tmp_path / 'file'}: not a directory"
    (repo.root / "stacks" / "r.toml").write_text(
        (repo.root / "stacks" / "r.toml").read_text().replace('version = "0.3.0"', 'version = "0.3.9"'))
    r = cli("render", "r", "--out", str(tmp_path / "c"), cwd=repo.root)
    assert r.code == 1 and "made from another version of the profile" in r.err


def test_lock_without_a_wheel_for_the_target(tmp_path: Path) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME, commit=False)
    with pytest.raises(CheckFailed, match="the lock has no wheel for target cp312-linux_x86_64"):
        plan_layers(repo.stack, read_lock(repo.lock), "cp312-linux_x86_64")


def test_render_refuses_a_foreign_directory(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    r = cli("render", "r", "--out", str(tmp_path / "mine"), cwd=repo.root)
    assert r.code == 2 and "is not a stackctl build context" in r.err
    assert (tmp_path / "mine" / "keep.txt").exists()
    r = cli("render", "r", "--out", str(tmp_path / "c"), "--json", cwd=repo.root)
    data = json.loads(r.out)
    assert data["wheels_copied"] is False and "Dockerfile" in data["files"]


def test_remote_url_loses_its_credentials() -> None:
    from stackctl.base.urls import strip_userinfo

    assert strip_userinfo("https://bot:ghp_token@git.example.invalid/org/repo.git") == \
        "https://git.example.invalid/org/repo.git"
    assert strip_userinfo("git@git.example.invalid:org/repo.git") == "git@git.example.invalid:org/repo.git"


def test_source_label_from_origin_without_credentials(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME)
    repo.profile.write_text(repo.profile.read_text().replace(
        '"org.opencontainers.image.source" = "https://example.invalid/stackctl-e2e"\n', ""))
    refresh_lock(repo)
    git(repo.root, "commit", "-qam", "no source label")
    git(repo.root, "remote", "add", "origin", "https://bot:tok3n@git.example.invalid/org/repo.git")
    render(cli, repo.root, tmp_path / "ctx")
    text = (tmp_path / "ctx" / "Dockerfile").read_text()
    assert '"org.opencontainers.image.source"="https://git.example.invalid/org/repo.git"' in text
    assert "tok3n" not in text


def test_a_label_carrying_a_credential_is_refused(tmp_path: Path, cli: Cli,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-in-a-label"
    monkeypatch.setenv("STACKCTL_TEST_VENDOR_PASSWORD", secret)
    repo = make_stack_repo(tmp_path, "r", REPO_NAME, extra_toml="")
    for value, why in ((f"https://ci.example.invalid/run?token={secret}", "holds the value of "
                        "$STACKCTL_TEST_VENDOR_PASSWORD"),
                       ("https://bot:ghp_tok@git.example.invalid/org/repo", "holds a URL with user:password")):
        repo.profile.write_text(repo.profile.read_text().split('"com.example.note"')[0]
                                + f'"com.example.note" = "{value}"\n')
        refresh_lock(repo)
        r = cli("render", "r", "--out", str(tmp_path / "ctx"), cwd=repo.root)
        assert r.code == 2, r.out + r.err
        assert f"label com.example.note {why}" in r.err
        assert secret not in r.out + r.err and "ghp_tok" not in r.err
        assert not (tmp_path / "ctx").exists()


def test_uv_installs_every_group_and_never_reaches_the_image(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME, installer="uv")
    out = tmp_path / "ctx"
    render(cli, repo.root, out, "--wheelhouse", str(repo.wheelhouse))
    text = (out / "Dockerfile").read_text()
    tools, rest = text.split("\n# layer group ", 1)
    # uv comes from the context, hash-checked against the lock, into the tools stage only
    assert "COPY tools/ /tmp/tools/" in tools and "sha256sum --check --strict" in tools
    assert "ensurepip" not in tools and "venv --without-pip /opt/venv" in tools  # no pip needed
    lock = read_lock(repo.lock)
    uv = lock.pin("uv")
    assert uv is not None
    sums = (out / "tools" / "SHA256SUMS").read_text()
    assert sums == f"{uv.files[0].sha256}  {uv.files[0].filename}\n"
    assert (out / "tools" / uv.files[0].filename).is_file()
    installs = [i for i in rest.replace("\\\n", " ").splitlines()
                if re.match(r"RUN SOURCE_DATE_EPOCH=\d+ /opt/venv/bin/uv pip install", i)]
    assert len(installs) == 4
    for i in installs:
        assert all(flag in i for flag in ("--offline", "--no-index", "--require-hashes", "--no-deps", "--no-config")), i
        # byte-code by default for the pins (what the gate imports), not for the resolver's closure
        assert ("--no-compile-bytecode" if "/opt/stack/deps " in i else "--compile-bytecode ") in i, i
    assert "pip install" not in rest.replace("uv pip install", "")
    final = final_stage(text)
    assert "tools" not in final and "/opt/venv/bin/uv" not in final
    assert not any("uv" in (out / "groups" / g.name / "requirements.txt").read_text().split("\n# ")[-1]
                   for g in plan_layers(repo.stack, lock, TARGET))
    spec = json.loads((out / "rootfs/stack/opt/stackctl/gate/gate.json").read_text())
    assert "uv" not in {p["dist"] for p in spec["preserve"]}  # the image does not ship it: nothing to preserve


def test_bytecode_is_an_explicit_choice(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME, commit=False)
    text = repo.profile.read_text()

    def stages(name: str) -> dict[str, str]:
        render(cli, repo.root, tmp_path / name, "--wheelhouse", str(repo.wheelhouse), "--revision", "r", "--ref", "r")
        rendered = (tmp_path / name / "Dockerfile").read_text()
        found = dict(re.findall(r"FROM tools AS layer\d+-(\S+)\n(.*?)(?=\n(?:# layer group|FROM ))", rendered, re.S))
        assert sorted(found) == ["deps", "pin-patcher", "pin-toplib", "train-core"]
        return found

    # the default ("pins"): every group but the resolver's closure (deps) carries byte-code, compiled where
    # the files stay (pip --target would compile in a temporary directory and stamp its name in each .pyc)
    for group, stage in stages("default").items():
        compiled = group != "deps"
        assert "--no-compile " in stage and ("-name __pycache__" in stage) != compiled, group
        # compileall's call, which leaves a file that does not compile without byte-code (as pip and uv do)
        assert ("compileall.compile_dir(t, quiet=2, workers=0, invalidation_mode=py_compile.PycInvalidationMode."
                "CHECKED_HASH); " in stage and stage.count(f"' /opt/stack/{group} \\\n") == 1) == compiled, stage
    for choice, compiled_groups in (("false", set()), ("true", {"deps", "pin-patcher", "pin-toplib", "train-core"})):
        repo.profile.write_text(text.replace('vars = {}\n', f'vars = {{}}\nbytecode = {choice}\n'))
        refresh_lock(repo)
        for group, stage in stages(choice).items():
            compiled = group in compiled_groups
            assert ("compileall.compile_dir" in stage) == compiled and ("-name __pycache__" in stage) != compiled, group
            # byte-code kept in the layers is compiled under SOURCE_DATE_EPOCH (hash-checked .pyc, no build time)
            assert stage.count("RUN SOURCE_DATE_EPOCH=") == 1
    text = text.replace('vars = {}\n', 'vars = {}\nbytecode = true\n')
    # anything else is refused with the key and the choices
    repo.profile.write_text(text.replace("bytecode = true", 'bytecode = "all"'))
    r = cli("validate", str(repo.profile))
    assert r.code == 2 and "image.bytecode" in r.err
    assert '\'all\' is no byte-code choice; use true, false or "pins"' in r.err
    repo.profile.write_text(text.replace("bytecode = true", "bytecode = 1"))
    r = cli("validate", str(repo.profile))
    assert r.code == 2 and 'image.bytecode: must be true, false or "pins", not int 1' in r.err


def test_installer_must_be_pinned(tmp_path: Path, cli: Cli) -> None:
    repo = make_stack_repo(tmp_path, "r", REPO_NAME, commit=False)
    repo.profile.write_text(repo.profile.read_text().replace('vars = {}\n', 'vars = {}\ninstaller = "uv"\n'))
    r = cli("validate", str(repo.profile))
    assert r.code == 2 and "image.installer" in r.out + r.err and "[pins.uv]" in r.out + r.err
    text = repo.profile.read_text() + '\n[pins.uv]\nversion = "0.13.9"\nindex = "public"\ngate = { order = 5 }\n'
    repo.profile.write_text(text)
    r = cli("validate", str(repo.profile))
    assert r.code == 2 and "pins.uv.gate" in r.out + r.err and "not in it" in r.out + r.err
    repo.profile.write_text(repo.profile.read_text().replace('installer = "uv"', 'installer = "poetry"'))
    r = cli("validate", str(repo.profile))
    assert r.code == 2 and "'poetry' is not an installer" in r.out + r.err


@pytest.mark.parametrize(("origin", "label"), [
    ("/work/src/stackctl", None),  # a clone of a clone: its origin is a path on the machine that built it
    ("file:///work/src/stackctl", None),
    ("https://robot:t0ken@git.example.invalid/team/stack.git", "https://git.example.invalid/team/stack.git"),
    ("git@git.example.invalid:team/stack.git", "ssh://git.example.invalid/team/stack.git"),
])
def test_the_source_label_is_the_remote_url_or_left_out_and_said(tmp_path: Path, cli: Cli, origin: str,
                                                                  label: str | None) -> None:
    import os

    from stackctl.image.prepare import prepare_build
    from stackctl.profile.loader import load_stack

    repo = make_stack_repo(tmp_path, "r", REPO_NAME, commit=False)
    text = repo.profile.read_text()
    repo.profile.write_text(text.replace('"org.opencontainers.image.source" = "https://example.invalid/stackctl-e2e"\n',
                                         ""))
    refresh_lock(repo)
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-q", "-m", "stack")
    git(repo.root, "remote", "add", "origin", origin)
    prep = prepare_build(load_stack(repo.profile), repo.lock, None, None, None, None, False, os.environ)
    labels = dict(prep.plan.labels)  # type: ignore[union-attr]
    assert labels.get("org.opencontainers.image.source") == label
    assert "t0ken" not in json.dumps(labels) and "robot" not in json.dumps(labels)
    if label is None:
        assert prep.notes == (f"the origin remote is a path on this machine ({origin}), so the image has no "
                              "org.opencontainers.image.source label; give the repository a remote URL or set "
                              "the label in [image.labels]",)
    else:
        assert prep.notes == ()
    rendered = render(cli, repo.root, tmp_path / "out").out
    dockerfile = (tmp_path / "out" / "Dockerfile").read_text()
    assert ('"org.opencontainers.image.source"' in dockerfile) == (label is not None), rendered
