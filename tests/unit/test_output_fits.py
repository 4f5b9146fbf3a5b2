"""Every table at 80 columns through a pipe: values whole on one line (never `2.11.0.po` / `st2+musa5`), the
row as `key: value` lines when the table would not fit, the table itself when it does."""

from __future__ import annotations

import hashlib
import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from stackctl.cli.app import short_hash, table
from stackctl.resolve.lock import Lock, LockedFile, LockedPin, write_lock
from tests.conftest import STACKS
from tests.support.cli import Cli
from tests.support.fit import assert_whole, check_fits, piped_80

LONG = "2.11.0.post2+musa5.2.0"


def render(width: int, terminal: bool, *rows: list[str]) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=terminal, color_system=None, soft_wrap=True)
    console.print(table("pins", ["package", "version", "note"], list(rows)))
    return out.getvalue()


def test_a_table_that_fits_stays_a_table_with_values_on_one_line() -> None:
    text = render(80, False, ["torch", LONG, "a note that may wrap between its words"])
    assert text.splitlines()[1].startswith("┏") and any(LONG in line for line in text.splitlines())


def test_a_table_too_wide_for_the_pipe_becomes_key_value_lines() -> None:
    wheel = f"torch-{LONG}-cp310-cp310-manylinux_2_28_x86_64.whl"
    text = render(200, False, ["torch", wheel, "a note"], ["numpy", "1.26.4", ""])
    # a pipe is read at 80 columns whatever COLUMNS says; on a 200-column terminal it is a table
    assert text.splitlines() == ["pins", "package: torch", f"  version: {wheel}", "  note: a note",
                                 "package: numpy", "  version: 1.26.4"]
    assert render(200, True, ["torch", wheel, "a note"]).splitlines()[1].startswith("┏")
    narrow = render(60, True, ["torch", wheel, "a note"])
    # a value too long to stand beside its key goes on its own line below it
    assert narrow.splitlines()[2:4] == ["  version:", f"    {wheel}"]


def test_free_text_in_a_narrow_terminal_wraps_between_items_and_words_never_inside_a_version() -> None:
    """What a narrow terminal would otherwise fold inside `+musa5.2.0`: each item of a free-text cell on
    its own lines, wrapped between words, within the width."""
    other = ("2.11.0.post2+musa5.2.1mp22 (local label +musa5.2.1mp22; platform linux_aarch64); "
             "2.9.1.post1+musa5.2.1mp22 (local label +musa5.2.1mp22; platform linux_aarch64; series 2.9)")
    text = render(60, True, ["torch", "2.11.0.post2+musa5.2.0", other])
    lines = text.splitlines()
    assert all(len(line) <= 60 for line in lines), text
    assert "  note:" in lines
    assert any(line.startswith("    2.11.0.post2+musa5.2.1mp22 (local label") for line in lines)
    assert any(line.startswith("    2.9.1.post1+musa5.2.1mp22 (local label") for line in lines)
    assert " ".join(" ".join(lines).split()).count("platform linux_aarch64") == 2


def test_hashes_shorten_to_twelve_hex() -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    assert short_hash(digest) == digest[:12]
    assert short_hash(f"sha256:{digest}") == f"sha256:{digest[:12]}"
    assert short_hash("2.11.0") == "2.11.0" and short_hash("deadbeef") == "deadbeef"


def _stacks(tmp_path: Path) -> Path:
    (tmp_path / "stacks").mkdir()
    for name in ("torch-2.11-post1", "torch-2.11-post2", "public-example"):
        shutil.copy(STACKS / f"{name}.toml", tmp_path / "stacks" / f"{name}.toml")
    return tmp_path


def _lock(root: Path, name: str, salt: str) -> Path:
    """A lock of the stack as resolve writes it, with real-length file names, hashes and upload times."""
    from stackctl.profile.locate import load_profile

    stack = load_profile(str(root / "stacks" / f"{name}.toml"))
    pins = tuple(LockedPin(
        p.name, p.version, p.index,
        tuple(LockedFile(t.label, f"{p.key.replace('-', '_')}-{p.version}-{t.interpreter}-{t.interpreter}-"
                         "manylinux_2_28_x86_64.whl", f"https://index.invalid/{p.name}.whl",
                         hashlib.sha256(f"{salt}{p.name}{t.label}".encode()).hexdigest(), 123456789,
                         "2026-03-01T12:10:00Z", "index") for t in p.targets(stack.targets)),
        newest_in_line=p.version + ".1" if "+" not in p.version else p.version,
        newest_upload_time="2026-03-04T12:00:00Z",
        other_lines=(f"{p.version}.post9+musa5.2.1mp22 (2026-03-05)",)) for p in stack.pins)
    path = root / "stacks" / f"{name}.lock"
    write_lock(path, Lock(stack.name, stack.digest(), pins))
    return path


def test_show_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = _stacks(tmp_path)
    doc, _out = check_fits(cli, monkeypatch, ["show", "torch-2.11-post2"], ["version", "file", "train", "module"],
                          cwd=root)
    assert any(p["version"] == "1.1.0+musa5.2.0torch2.11.0.post2" for p in doc["stack"]["pins"])


def test_profile_diff_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = _stacks(tmp_path)
    check_fits(cli, monkeypatch, ["diff", "torch-2.11-post1", "torch-2.11-post2"], ["package", "before", "after"],
               cwd=root)


def test_lock_diff_outdated_and_check_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = _stacks(tmp_path)
    a = _lock(root, "torch-2.11-post2", "a")
    b = root / "b.lock"
    shutil.copy(a, b)
    _lock(root, "torch-2.11-post2", "b")
    a, b = b, a
    doc, _out = check_fits(cli, monkeypatch, ["diff", str(a), str(b)], ["package", "target", "before", "after"],
                          cwd=root)
    assert any(c["field"] == "sha256" for c in doc["changes"])
    check_fits(cli, monkeypatch, ["outdated", "torch-2.11-post2", "--from-lock", str(b)],
               ["artifact", "pinned", "newest_in_line", "other_lines"], cwd=root)
    check_fits(cli, monkeypatch, ["check", "torch-2.11-post2"], ["passed"], cwd=root)
    check_fits(cli, monkeypatch, ["lock", "torch-2.11-post2"], ["lock", "stack"], cwd=root)
    check_fits(cli, monkeypatch, ["export", "torch-2.11-post2", "--out", str(root / "req"), "--lock", str(b)],
               ["written"], cwd=root)


def test_validate_and_tag_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = _stacks(tmp_path)
    check_fits(cli, monkeypatch, ["validate", "torch-2.11-post1", "torch-2.11-post2"], ["stack"], cwd=root)
    check_fits(cli, monkeypatch, ["tag", "torch-2.11-post2"], ["tag"], cwd=root)


def test_wheel_diff_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.support.wheels import build_wheel

    member = "deep_ep/include/very/long/path/to/the/kernels/intranode_dispatch_configs.json"
    old = build_wheel(tmp_path / "a", "deep_ep", "1.1.0+musa5.2.0torch2.11.0.post1",
                      files={member: "1", "deep_ep/__init__.py": "x = 1\n"})
    new = build_wheel(tmp_path / "b", "deep_ep", "1.1.0+musa5.2.0torch2.11.0.post2",
                      files={member: "22", "deep_ep/__init__.py": "x = 2\n"})
    check_fits(cli, monkeypatch, ["wheel-diff", str(old), str(new), "--no-record"], ["path", "crc_before", "crc_after"])


def test_scan_lines_are_whole_at_80_piped(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = _stacks(tmp_path)
    (root / "notes.md").write_text(f"we pin torch {LONG.replace('post2', 'post1')} still\n")
    out = piped_80(cli, monkeypatch, "scan", str(root / "notes.md"), "--stack", "torch-2.11-post2", "--since",
                   "torch-2.11-post1", code=1, cwd=root)
    assert_whole(out, ["2.11.0.post1+musa5.2.0"])


@pytest.mark.parametrize("terminal", [True, False])
def test_prose_wraps_between_words_on_a_terminal_and_stays_one_line_piped(
        monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    import importlib

    app = importlib.import_module("stackctl.cli.app")  # the module: the package's `app` is the Typer app
    out = io.StringIO()
    made = Console(file=out, width=80, force_terminal=terminal, color_system=None, soft_wrap=True, highlight=False)
    monkeypatch.setattr(app.console, "_console", made)
    text = ("gate: step taken from the cache (the same layers passed it before; the lines above are those its run "
            "kept in the image; --no-cache runs it again)")
    app.say(text)
    lines = out.getvalue().splitlines()
    if terminal:  # never `ru` / `ns it again`: each line within the width, every word whole
        assert len(lines) > 1 and all(len(ln) <= 80 for ln in lines), lines
        assert " ".join(" ".join(lines).split()) == text
    else:  # a log line a reader greps for stays whole
        assert lines == [text]


def test_a_free_text_column_is_never_squeezed_to_a_word_a_line() -> None:
    """report's "Is this the newest?" table piped: "other lines" got 9 columns, `3.12 (series 3.12);` over
    three lines. Each item stays on one line, in the table or, when the table cannot give that, as blocks."""
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None, soft_wrap=True)
    rows = [["pycparser", "2.22", "2.22", "2024-03-30", "yes", "3.12 (series 3.12); 3.13 (series 3.13)"]]
    console.print(table(None, ["package", "pinned", "newest in line", "published", "newest?", "other lines"], rows))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    for item in ("3.12 (series 3.12)", "3.13 (series 3.13)"):
        assert any(item in line for line in lines), out.getvalue()


def test_a_long_detail_wraps_between_words_in_a_terminal() -> None:
    """verify's detail column in an 80-column terminal: wrapped between words, never inside one."""
    detail = ("the statement names revision 0123456789abcdef0123456789abcdef01234567 and stack public-example; "
              "the labels name revision fedcba9876543210fedcba9876543210fedcba98 and the tree was clean")
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None, soft_wrap=True)
    console.print(table(None, ["check", "result", "detail"], [["provenance", "FAIL", detail]]))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    words = [w for line in lines for w in line.replace("│", " ").split()]
    assert "0123456789abcdef0123456789abcdef01234567" in words and "fedcba9876543210fedcba9876543210fedcba98" in words


def test_an_error_and_its_hint_are_one_line_each_in_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns the hint was split inside `bash .ci/services.sh`, both lines padded with spaces."""
    import importlib

    app = importlib.import_module("stackctl.cli.app")
    cli_pkg = importlib.import_module("stackctl.cli")
    out = io.StringIO()
    made = Console(file=out, width=80, force_terminal=True, color_system=None, highlight=False)
    monkeypatch.setattr(app.console_err, "_console", made)
    message = ("registry 127.0.0.1:5000 unreachable at http://127.0.0.1:5000/v2/: connection refused: nothing "
               "listens there")
    hint = ("check that the registry runs and that REF names its host:port (CI: `bash .ci/services.sh` starts "
            "one on 127.0.0.1:5000)")
    cli_pkg._print_error([message], hint, None)
    assert out.getvalue().splitlines() == [f"error: {message}", f"hint: {hint}"]


def test_abi_of_wheels_with_no_elf_says_so_instead_of_an_empty_table(cli: Cli, tmp_path: Path) -> None:
    from tests.support.wheels import build_wheel

    pure = build_wheel(tmp_path, "pure", "1.0", files={"pure/__init__.py": "X = 1\n"})
    r = cli("abi", str(pure))
    assert r.code == 0, r.err
    assert not any(c in r.out for c in "┏┃━│"), r.out
    assert "no ELF file here needs a shared library" in r.out


LOG_WIDTH = 200  # a progress or summary line in a log: a few hundred characters at most, read on one line


def test_a_builds_progress_in_a_log_names_each_step_briefly_and_the_phases_as_phases(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Piped at 80 columns a progress line was 1,845 characters (every RUN whole: mounts, flags and shell), and
    after the last step the phases went on as `19/19 ... 27/27`, step counts that never say what remains. Each
    step is named by its stage and first words; each phase as a phase."""
    import re

    from stackctl.base.progress import Phases
    from stackctl.cli.app import step_lines
    from stackctl.image.rawjson import Folder, documents
    from tests.unit.test_rawjson import DATA

    phases = Phases(step_lines("build"))
    folder = Folder(phases, phases.phase)
    docs, _ = documents((DATA / "build-pass-d26.txt").read_text())
    for doc in docs:
        folder.feed(doc)
    phases.phase("the build record build/e2e.build.json", "the record")
    lines = [re.sub(r"^\d\d:\d\d:\d\d ", "", ln) for ln in capsys.readouterr().err.splitlines()]
    steps = [ln for ln in lines if ln.startswith("build step ")]
    after = lines[len(steps):]
    assert len(steps) == 18 and all(ln.startswith("build phase: ") for ln in after) and after, lines
    assert all(len(ln) <= LOG_WIDTH - 9 for ln in lines), max(lines, key=len)
    # the stage says which group a step installs; a step's words are the command, not its mounts and flags
    assert "build step 12/18: layer02-deps: RUN python -m pip install --no-index --find-links …" in steps, steps
    assert any(ln.endswith(": stage-5: COPY --from=layer04-pin-toplib /export/ /") for ln in steps), steps
    assert not any("--mount" in ln or "SOURCE_DATE_EPOCH" in ln for ln in steps), steps
    assert after[-1].startswith("build phase: the build record build/e2e.build.json (")


def _built(ran: int) -> object:
    from stackctl.image import gate_lines
    from stackctl.usecases import BuildReport

    names = tuple(f"layer{n:02d}-pin-somepackage-with-a-long-name: RUN python -m pip install --no-index "
                  "--find-links …" for n in range(ran))
    return BuildReport("torch-2.11-post2", "torch-2.11-post2", f"127.0.0.1:5000/musa/torch:{LONG.replace('+', '_')}"
                       "_ubuntu22.04_py3.10", "sha256:" + "d3" * 32, Path("build/torch-2.11-post2.build.json"),
                       gate_lines(("gate ok: 40 passed, 0 failed",)), False, (), "mounted into the install stages", 17,
                       17 - ran, names, None, {})


@pytest.mark.parametrize("terminal", [True, False])
def test_the_summary_after_a_build_fits_the_terminal_and_a_log(monkeypatch: pytest.MonkeyPatch,
                                                              terminal: bool) -> None:
    """The summary after a rebuild was one 4,051-character line: the whole text of every RUN it ran, numbered
    unlike the progress lines. The steps a rebuild ran are named as the progress names them, a few of them."""
    import importlib

    app = importlib.import_module("stackctl.cli.app")
    image = importlib.import_module("stackctl.cli.image")
    out = io.StringIO()
    made = Console(file=out, width=80, force_terminal=terminal, color_system=None, soft_wrap=True, highlight=False)
    monkeypatch.setattr(app.console, "_console", made)
    image._show_built(_built(12))
    lines = out.getvalue().splitlines()
    assert all(len(ln) <= (80 if terminal else LOG_WIDTH) for ln in lines), max(lines, key=len)
    said = " ".join(" ".join(lines).split())
    assert "5 of 17 steps cached; record build/torch-2.11-post2.build.json" in said, said
    assert said.count("RUN python -m pip install") == 3 and "ran 9 more steps (the record's ran_steps" in said, said
    if not terminal:  # each step that ran on a line of its own, as its progress line named it
        assert lines[-4:-1] == [f"ran {name}" for name in _built(12).ran[:3]]  # type: ignore[attr-defined]


def test_the_build_display_in_an_80_column_terminal_keeps_a_step_within_the_width() -> None:
    """The live display's line for the steps: the step's brief name beside the bar, all within the width."""
    import importlib

    from stackctl.image.buildlog import brief_step

    app = importlib.import_module("stackctl.cli.app")
    out = io.StringIO()
    display = app.progress_display("build")
    name = brief_step("[layer01-train-core 2/2] RUN --network=none --mount=type=bind,from=wheels-train-core,"
                      "target=/tmp/group SOURCE_DATE_EPOCH=315532800 /opt/venv/bin/python -m pip install "
                      "--no-index --find-links /tmp/group --require-hashes --no-deps --target /opt/stack/x")
    task = display.add_task(name[:70], total=18, completed=9)
    display.update(task, description=name[:70])
    Console(file=out, width=80, force_terminal=True, color_system=None).print(display.get_renderable())
    lines = out.getvalue().splitlines()
    assert lines and all(len(line) <= 80 for line in lines), lines
    assert "layer01-train-core: RUN python -m pip install" in " ".join(" ".join(lines).split())


def test_a_step_named_briefly_is_one_line_whatever_its_instruction_holds() -> None:
    """Fuzzed: an exec-form RUN's JSON strings may hold newlines and escapes, which would split a progress line."""
    from stackctl.image.buildlog import brief_step

    assert brief_step('[s 1/1] RUN ["/usr/bin/a\\nb", "c\\u001b[31m\\r"]') == "s: RUN a b c"
    assert brief_step("RUN --mount=type=cache,target=/x A=1 B=2 /bin/sh -c true", "tools") == "tools: RUN sh -c true"
