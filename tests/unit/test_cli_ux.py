"""What a person or a CI script sees at the command line: help, usage errors, bad paths, JSON shapes."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from stackctl.errors import InputError
from stackctl.resolve.lock import Lock, LockedFile, LockedPin, write_lock
from tests.conftest import REPO, STACKS
from tests.support.cli import Cli

PUBLIC = STACKS / "public-example.toml"


def _stack_dir(tmp_path: Path) -> Path:
    (tmp_path / "stacks").mkdir()
    shutil.copy(PUBLIC, tmp_path / "stacks" / "public-example.toml")
    return tmp_path


def _lock_for(cli: Cli, stacks: Path) -> Path:
    """A lock of the current profile with one wheel per target, written as resolve would."""
    from stackctl.profile.locate import load_profile

    stack = load_profile(str(stacks / "stacks" / "public-example.toml"))
    pins = tuple(LockedPin(p.name, p.version, p.index, tuple(
        LockedFile(t.label, f"{p.name}-{p.version}-py3-none-any.whl", f"https://index.invalid/{p.name}.whl",
                   "0" * 64, 10) for t in stack.targets)) for p in stack.pins)
    path = stacks / "stacks" / "public-example.lock"
    write_lock(path, Lock(stack.name, stack.digest(), pins))
    return path


def test_every_summary_in_the_command_list_is_whole(cli: Cli) -> None:
    r = cli("--help")
    assert r.code == 0
    commands = r.out.split("Commands:", 1)[1].strip().splitlines()
    from stackctl.cli import COMMAND_MODULES

    assert len(commands) == sum(len(names) for names in COMMAND_MODULES.values())
    for line in commands:
        _name, summary = line.split(None, 1)
        assert not summary.endswith("..."), line
        assert summary[-1] in ".?", line


@pytest.mark.parametrize("command", ["validate", "diff", "scan", "resolve", "outdated", "fetch", "abi", "gate",
                                     "build", "inspect"])
def test_help_names_arguments_and_values(cli: Cli, command: str) -> None:
    r = cli(command, "--help")
    assert r.code == 0
    usage = r.out.splitlines()[0]
    assert usage.startswith(f"Usage: stackctl {command} [OPTIONS] ")
    assert usage == usage.replace("{profile}", "").replace("{targets}", "")  # never a lowercase parameter name
    assert "<str>" not in r.out and "<path>" not in r.out  # every value says what it is
    if "--index" in r.out:
        assert "--index NAME=URL" in r.out
    if "--target" in r.out:
        assert "--target LABEL" in r.out
    if "--lock" in r.out:
        assert "--lock PATH" in r.out


@pytest.mark.parametrize(("args", "message", "help_of"), [
    (["resolve"], "Missing argument 'PROFILE'.", "stackctl resolve"),
    (["diff", "--bogus", "a", "b"], "No such option: --bogus", "stackctl diff"),
    (["validate"], "Missing argument 'PROFILE...'.", "stackctl validate"),
    (["resolve", "x", "--jobs", "many"], "Invalid value for '--jobs': 'many' is not a valid int.", "stackctl resolve"),
    (["no-such-command"], "No such command 'no-such-command'.", "stackctl"),
])
def test_usage_errors_are_one_error_line_and_a_hint(cli: Cli, args: list[str], message: str, help_of: str) -> None:
    r = cli(*args)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 2, r.err
    assert lines[0].startswith(f"error: {message}")
    assert lines[1] == f"hint: see `{help_of} --help`"
    assert r.out == ""


def test_usage_error_with_json_prints_the_error_document(cli: Cli) -> None:
    r = cli("resolve", "--json")
    assert r.code == 2
    assert json.loads(r.out) == {"error": "Missing argument 'PROFILE'.", "exit_code": 2}


def test_validate_json_is_an_object(cli: Cli) -> None:
    r = cli("validate", str(PUBLIC), "--json")
    assert r.code == 0, r.err
    payload = json.loads(r.out)
    assert list(payload) == ["stacks"]
    assert [s["stack"] for s in payload["stacks"]] == ["public-example"]
    assert payload["stacks"][0]["pins"] == 2


@pytest.mark.parametrize("command", [["diff", "public-example", "public-example"],
                                     ["outdated", "public-example", "--from-lock", "x.lock"],
                                     ["scan", ".", "--stack", "public-example", "--since", "public-example"],
                                     ["abi", "a.whl"], ["wheel-diff", "a.whl", "b.whl"]])
def test_json_and_markdown_exclude_each_other(cli: Cli, tmp_path: Path, command: list[str]) -> None:
    r = cli(*command, "--json", "--markdown", cwd=_stack_dir(tmp_path))
    assert r.code == 2
    assert r.err.strip().splitlines()[0] == "error: --json and --markdown exclude each other: pick one"
    assert json.loads(r.out)["exit_code"] == 2


def test_export_to_an_unwritable_place_is_one_line(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    r = cli("export", str(PUBLIC), "--out", str(tmp_path / "file" / "req"))
    assert r.code == 2
    assert r.err.strip().splitlines() == [
        f"error: --out {tmp_path / 'file' / 'req'}: {tmp_path / 'file'} is not a directory"]
    # a file named as the directory: said so, not "README.md/requirements.txt: ... File exists"
    r = cli("export", str(PUBLIC), "--out", str(tmp_path / "file"))
    assert r.code == 2 and r.err.strip().splitlines() == [f"error: --out {tmp_path / 'file'}: not a directory"]


def test_what_an_option_names_to_write_is_made_the_directories_above_it_are_not(cli: Cli, tmp_path: Path) -> None:
    """One rule for every output: a mistyped --out is an error as a mistyped --wheelhouse is, said before any
    work (inventory runs no image), never a tree of directories quietly made."""
    missing = tmp_path / "nonexistent" / "dir"
    r = cli("inventory", "stackctl-base:bookworm", "--out", str(missing / "x.json"))
    assert r.code == 2
    assert r.err.strip().splitlines() == [f"error: --out {missing / 'x.json'}: no directory {missing}",
                                          f"hint: create it first (mkdir -p {missing})"]
    r = cli("export", str(PUBLIC), "--out", str(missing / "req"))
    assert r.code == 2 and f"no directory {missing}" in r.err
    assert not (tmp_path / "nonexistent").exists()
    r = cli("export", str(PUBLIC), "--out", str(tmp_path / "req"))  # the directory named is made
    assert r.code == 0 and (tmp_path / "req" / "requirements.txt").is_file()


def test_a_missing_lock_names_the_resolve_that_makes_it_in_every_command(cli: Cli, tmp_path: Path) -> None:
    root = _stack_dir(tmp_path)
    said = "stacks/public-example.lock: no such lock; run `stackctl resolve public-example` first"
    r = cli("check", "public-example", cwd=root)
    assert r.code == 1 and f"FAIL {said}" in r.out.splitlines()
    for args in (["abi", "public-example"],
                 ["fetch", "public-example", "--target", "cp311-linux_x86_64", "--dest", "w"]):
        r = cli(*args, cwd=root)
        assert r.code == 2 and r.err.strip().splitlines()[0] == f"error: {said}", (args, r.err)
    r = cli("render", "public-example", "--out", "ctx", cwd=root)
    assert r.code == 2 and r.err.strip().splitlines()[0] == (
        "error: stacks/public-example.lock: no such lock; run `stackctl resolve stacks/public-example.toml` first")


def test_export_json_names_the_stack(cli: Cli, tmp_path: Path) -> None:
    r = cli("export", str(PUBLIC), "--out", str(tmp_path), "--json")
    assert json.loads(r.out) == {"stack": "public-example", "written": [str(tmp_path / "requirements.txt")]}
    r = cli("export", str(PUBLIC), "--out", str(tmp_path), "--check", "--json")
    assert r.code == 0
    assert json.loads(r.out) == {"stack": "public-example", "drift": [], "checked": ["requirements.txt"]}


def test_fetch_into_a_file_is_one_line(cli: Cli, tmp_path: Path) -> None:
    root = _stack_dir(tmp_path)
    _lock_for(cli, root)
    (root / "wheels").write_text("not a directory")
    r = cli("fetch", "public-example", "--target", "cp311-linux_x86_64", "--dest", "wheels", cwd=root)
    assert r.code == 2
    assert r.err.strip().splitlines() == ["error: --dest wheels: not a directory"]


def test_check_says_missing_not_differs(cli: Cli, tmp_path: Path) -> None:
    root = _stack_dir(tmp_path)
    _lock_for(cli, root)
    r = cli("check", "public-example", "--requirements", "req", cwd=root)
    assert r.code == 1
    assert r.out.splitlines() == [
        "PASS stacks/public-example.lock matches public-example",
        "FAIL req/requirements.txt: missing; run `stackctl export public-example --out req`"]
    cli("export", "public-example", "--out", "req", cwd=root)
    (root / "req" / "requirements.txt").write_text("cffi==0\n")
    r = cli("check", "public-example", "--requirements", "req", cwd=root)
    fix = "; run `stackctl export public-example --out req`"
    wrong = ("no pin for pycparser (public-example pins pycparser==2.22)",
             "line 1 pins cffi==0, public-example pins cffi==1.17.1")
    assert r.out.splitlines()[1:] == [f"FAIL req/requirements.txt: differs from public-example: {w}{fix}"
                                      for w in wrong]
    # The right pins in another order: one failure, for the file.
    req = root / "req" / "requirements.txt"
    cli("export", "public-example", "--out", "req", cwd=root)
    lines = req.read_text().splitlines()
    req.write_text("\n".join(lines[:2] + lines[2:][::-1]) + "\n")
    r = cli("check", "public-example", "--requirements", "req", cwd=root)
    assert r.out.splitlines()[1:] == [f"FAIL req/requirements.txt: differs from public-example: order, header or "
                                      f"hashes{fix}"]


def test_lock_diff_counts_in_words(cli: Cli, tmp_path: Path) -> None:
    root = _stack_dir(tmp_path)
    a = _lock_for(cli, root)
    b = root / "b.lock"
    b.write_text(a.read_text().replace('"version": "1.17.1"', '"version": "1.17.2"'))
    r = cli("diff", str(a), str(b))
    assert r.code == 0, r.err
    assert r.out.splitlines()[-1] == "1 change"


@pytest.mark.parametrize("ref", ["BAD REF", "a:b:c", "Upper/case:tag", "name@sha256:xyz"])
def test_inspect_malformed_reference_is_input_not_engine(cli: Cli, ref: str) -> None:
    r = cli("inspect", ref)
    assert r.code == 2
    assert r.err.strip() == (f"error: {ref!r} is not an image reference ([HOST[:PORT]/]NAME[:TAG][@DIGEST], names "
                             "in lowercase)")


def test_well_formed_local_references_pass() -> None:
    from stackctl.engine.docker import check_local_ref

    for ref in ("stackctl-base:bookworm", "d4b404e9e059", "sha256:" + "ab" * 32, "name@sha256:" + "0" * 64,
                "vllm-musa:ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_2.11.0.post2_musa5.2.0"):
        check_local_ref(ref)


def test_one_lock_path_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--lock wins; else the .lock beside the profile in the work tree, for PATH@GITREV and stack names too."""
    from stackctl.resolve.lock import lock_path

    monkeypatch.chdir(REPO)
    assert lock_path("stacks/public-example.toml@HEAD") == Path("stacks/public-example.lock")
    assert lock_path("public-example") == Path("stacks/public-example.lock")
    assert lock_path(str(PUBLIC)) == PUBLIC.with_suffix(".lock")
    assert lock_path("public-example", tmp_path / "x.lock") == tmp_path / "x.lock"


def test_inventory_without_format_says_so(tmp_path: Path) -> None:
    from stackctl.abi.inventory import read_inventory

    (tmp_path / "inv.json").write_text('{"x": 1}')
    with pytest.raises(InputError) as exc:
        read_inventory(tmp_path / "inv.json")
    assert "(no format field)" in str(exc.value) and "None" not in str(exc.value)


def test_resolve_table_has_no_blank_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    import stackctl.cli.resolve as cmd

    lock = Lock("s", "d", (LockedPin("a", "1", "public", (LockedFile("cp310-linux_x86_64", "a-1-py3-none-any.whl",
                                                                       "u", "0" * 64, upload_time=None),)),))
    console = Console(record=True, width=160, force_terminal=True, color_system=None)
    monkeypatch.setattr(cmd, "console", console)
    cmd._print_lock(lock, None)
    yanked = replace(lock, pins=(replace(lock.pins[0], files=(replace(lock.pins[0].files[0], yanked=True),)),))
    cmd._print_lock(yanked, None)
    tables = console.export_text().split("s: 1 pins")
    header = next(line for line in tables[1].splitlines() if "package" in line)
    cells = [c.strip() for c in header.strip("┃").split("┃")]
    assert cells == ["package", "version", "index", "target", "file", "sha256", "uploaded", "newest in line"]
    assert "yanked" in tables[2]


def test_markdown_cells_render_as_written_in_a_pull_request() -> None:
    from stackctl.cli.app import markdown_table

    text = markdown_table(["member", "note"], [["<dist-info>/METADATA", "a|b"],
                                               ["demo/__init__.py", "*.json and libcuda.so.*"],
                                               ["deep_ep", ""]])
    assert text.splitlines()[2:] == [
        "| &lt;dist-info&gt;/METADATA | a\\|b |",
        "| demo/\\_\\_init\\_\\_.py | \\*.json and libcuda.so.\\* |",
        "| deep_ep |   |"]


def test_wheel_diff_markdown_summary_is_escaped(cli: Cli, tmp_path: Path) -> None:
    from tests.support.wheels import build_wheel

    old = build_wheel(tmp_path / "a", "demo", "1.0", files={"demo/__init__.py": "x = 1\n"})
    new = build_wheel(tmp_path / "b", "demo", "1.1", files={"demo/__init__.py": "x = 2\n"})
    r = cli("wheel-diff", str(old), str(new), "--markdown", "--no-record")
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert first.startswith("**demo-1.0-py3-none-any.whl → demo-1.1-py3-none-any.whl**: ")
    assert "\\_\\_init\\_\\_.py" in first and "(__init__" not in first
    assert "| &lt;dist-info&gt;/METADATA |" in r.out


def test_several_resolve_errors_are_all_kept_and_the_most_severe_code_wins() -> None:
    from stackctl.errors import CheckFailed, Problems, ServiceError

    one = Problems.of([CheckFailed("pin a: not on index x"),
                       ServiceError("index x: connection failed after 4 attempts", hint="h")])
    assert isinstance(one, Problems) and one.exit_code == 3 and one.hint == "h"
    assert [str(e) for e in one.errors] == ["index x: connection failed after 4 attempts", "pin a: not on index x"]
    assert str(one) == "index x: connection failed after 4 attempts (and 1 more, listed)"
    single = Problems.of([CheckFailed("only")])
    assert isinstance(single, CheckFailed) and single.exit_code == 1


def test_bare_stackctl_shows_the_help_not_an_error(cli: Cli) -> None:
    r = cli()
    assert r.code == 2
    text = r.out + r.err
    assert text.startswith("Usage: stackctl [OPTIONS] COMMAND [ARGS]...")
    assert "error:" not in text and "Commands:" in text


def test_every_command_reports_json_and_pr_facing_ones_markdown() -> None:
    import typer

    from stackctl.cli import COMMAND_MODULES, app, register

    register([])
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert set(commands) == {c for names in COMMAND_MODULES.values() for c in names}
    for name, command in commands.items():
        options = {o for p in command.params for o in p.opts}
        assert "--json" in options, name
        markdown = {"diff", "outdated", "scan", "abi", "wheel-diff", "propose", "report", "ab", "bisect"}
        assert ("--markdown" in options) == (name in markdown), name
        for option, metavar in (("--index", "NAME=URL"), ("--target", "LABEL"), ("--lock", "PATH")):
            param = next((p for p in command.params if option in p.opts), None)
            assert param is None or param.metavar == metavar, (name, option)


def test_a_directory_where_a_file_belongs_and_the_reverse(cli: Cli, tmp_path: Path) -> None:
    root = _stack_dir(tmp_path)
    (root / "allow").mkdir()
    r = cli("scan", ".", "--stack", "public-example", "--since", "public-example", "--allow", "allow", cwd=root)
    assert (r.code, r.err.strip()) == (2, "error: allow: a directory, not an allow file")
    (root / "req.txt").write_text("")
    r = cli("check", "public-example", "--requirements", "req.txt", cwd=root)
    assert (r.code, r.err.strip()) == (
        2, "error: --requirements req.txt: not a directory (the one `stackctl export --out` wrote)")


def test_every_command_takes_verbose_once_and_it_shows_the_traceback(cli: Cli, tmp_path: Path) -> None:
    """--verbose is declared once, for every command: each --help lists it once, and with it an error comes
    with its traceback (without it, the one error line alone)."""
    from stackctl.cli import COMMAND_MODULES

    for command in (c for commands in COMMAND_MODULES.values() for c in commands):
        r = cli(command, "--help")
        assert r.code == 0 and r.out.count("--verbose") == 1, command
    missing = str(tmp_path / "nonexist.toml")
    quiet, loud = cli("validate", missing), cli("validate", missing, "--verbose")
    assert quiet.code == loud.code == 2
    assert quiet.err.splitlines() == [f"error: {missing}: no such file"]
    assert loud.err.startswith("Traceback (most recent call last):") and loud.err.splitlines()[-1] == quiet.err.strip()


@pytest.mark.parametrize(("command", "other"), [("export", "verify"), ("verify", "export")])
def test_an_options_help_speaks_of_its_own_command(cli: Cli, command: str, other: str) -> None:
    r = cli(command, "--help")
    lock = " ".join(r.out.split("--lock PATH", 1)[1].split("--", 1)[0].split())
    assert lock and other not in lock, lock


@pytest.mark.parametrize("ref", ["Bad Ref", "127.0.0.1:5000/Bad Name:v1", "127.0.0.1:5000/x@sha256:xyz"])
def test_verify_and_inspect_say_a_malformed_reference_alike(cli: Cli, ref: str) -> None:
    """Refused as what it is, before any registry or engine is asked: not a reference, rather than one that
    names no registry host."""
    for command in ("inspect", "verify"):
        r = cli(command, ref)
        assert (r.code, r.err.strip()) == (2, f"error: {ref!r} is not an image reference ([HOST[:PORT]/]NAME[:TAG]"
                                              "[@DIGEST], names in lowercase)"), command
