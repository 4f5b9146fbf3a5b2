"""Messages that are grammatical and true: counted nouns agree, a summary never contradicts itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackctl.base.words import count
from tests.conftest import STACKS
from tests.support.cli import Cli
from tests.support.profiles import write_profile


def test_counted_nouns_agree() -> None:
    assert [count(0, "pin"), count(1, "pin"), count(2, "pin")] == ["0 pins", "1 pin", "2 pins"]
    assert count(1, "library", "libraries") == "1 library" and count(3, "library", "libraries") == "3 libraries"


def test_validate_says_one_target(cli: Cli, tmp_path: Path) -> None:
    path = write_profile(tmp_path, "one", {"a": "1.0", "b": "2.0"}, python=("3.12",))
    r = cli("validate", str(path))
    assert r.code == 0, r.err
    assert "one: 2 pins, 1 target (" in r.out and "1 targets" not in r.out


def test_wheel_diff_summary_does_not_say_only_after_listing_python_sources(cli: Cli, tmp_path: Path) -> None:
    from tests.support.wheels import build_wheel

    old = build_wheel(tmp_path / "a", "ep", "1.0", files={"ep/a.py": "1", "ep/b.py": "1", "ep/ops.h": "1"})
    new = build_wheel(tmp_path / "b", "ep", "1.1", files={"ep/a.py": "2", "ep/b.py": "2", "ep/ops.h": "2"})
    r = cli("wheel-diff", str(old), str(new), "--no-record")
    assert r.code == 0, r.err
    summary = next(line for line in r.out.splitlines() if "Python source" in line)
    assert summary.startswith("2 Python sources differ (a.py, b.py); besides them, ops.h differs")
    assert "only" not in summary
    one = build_wheel(tmp_path / "c", "ep", "1.2", files={"ep/a.py": "3", "ep/b.py": "2", "ep/ops.h": "2"})
    r = cli("wheel-diff", str(new), str(one), "--no-record")
    assert "1 Python source differs (a.py); dist-info METADATA, RECORD differ" in r.out
    assert "no other member" not in r.out  # RECORD (and METADATA, of another version) differ
    same = build_wheel(tmp_path / "d", "ep", "1.2", files={"ep/a.py": "3", "ep/b.py": "2", "ep/ops.h": "4"})
    r = cli("wheel-diff", str(one), str(same), "--no-record")
    assert "Python sources byte-identical; ops.h differs; dist-info RECORD differs" in r.out


def _wrapped(inner: BaseException) -> BaseException:
    """A socket error as requests hands it over: inside urllib3's MaxRetryError, inside ConnectionError."""
    import requests
    import urllib3.exceptions

    retry = urllib3.exceptions.MaxRetryError(None, "/v2/", inner)  # type: ignore[arg-type]
    return requests.exceptions.ConnectionError(retry)


def test_connection_failures_in_words() -> None:
    import socket
    import ssl

    import requests

    from stackctl.base.neterrors import cause_in_words

    assert cause_in_words(_wrapped(ConnectionRefusedError(111, "Connection refused"))) == (
        "connection refused: nothing listens there")
    assert cause_in_words(_wrapped(socket.gaierror(-2, "Name or service not known"))) == (
        "the host name does not resolve")
    assert cause_in_words(_wrapped(ssl.SSLCertVerificationError("certificate verify failed"))) == (
        "the TLS certificate is not trusted (CA bundle: REQUESTS_CA_BUNDLE)")
    assert cause_in_words(requests.exceptions.ReadTimeout("HTTPConnectionPool: Read timed out.")) == (
        "no answer in time (timed out)")
    assert cause_in_words(_wrapped(FileNotFoundError(2, "No such file or directory"))) == "no socket at that path"
    # only the text survived the wrapping: still words, never the repr
    text = requests.exceptions.ConnectionError(
        "HTTPConnectionPool(host='h', port=1): Max retries exceeded with url: /v2/ (Caused by "
        "NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f>: Failed to establish a new "
        "connection: [Errno 111] Connection refused'))")
    assert cause_in_words(text) == "connection refused: nothing listens there"
    assert cause_in_words(ValueError("what")) == "the connection failed (ValueError)"


def test_version(cli: Cli) -> None:
    from importlib.metadata import version

    r = cli("--version")
    assert r.code == 0 and r.out == f"stackctl {version('stackctl')}\n" and r.err == ""


def test_a_typo_in_a_stack_name_gets_did_you_mean(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "stacks").mkdir()
    for name in ("torch-2.11-post1", "torch-2.11-post2", "public-example"):
        (tmp_path / "stacks" / f"{name}.toml").write_text((STACKS / f"{name}.toml").read_text())
    r = cli("show", "torch-2.11-pots2", cwd=tmp_path)
    assert r.code == 2
    assert r.err.splitlines() == ["error: unknown stack 'torch-2.11-pots2': no stacks/torch-2.11-pots2.toml",
                                  "hint: did you mean torch-2.11-post2 or torch-2.11-post1?"]
    r = cli("validate", "nothing-like-it", cwd=tmp_path)
    assert r.code == 2 and r.err.splitlines()[1] == ("hint: stacks/ here has public-example, torch-2.11-post1, "
                                                     "torch-2.11-post2")


def test_a_bare_stack_name_outside_the_repository_says_where_it_was_looked_for(cli: Cli, tmp_path: Path) -> None:
    r = cli("show", "torch-2.11-post2", cwd=tmp_path)
    assert r.code == 2
    assert r.err.splitlines() == [
        "error: unknown stack 'torch-2.11-post2': no stacks/torch-2.11-post2.toml",
        f"hint: a bare stack name is looked for in stacks/ of the current directory ({tmp_path}), which has "
        "none: run from the repository's top, or give the profile's path"]


def test_a_typo_in_a_tag_template_pin_gets_did_you_mean(cli: Cli, tmp_path: Path) -> None:
    text = (STACKS / "torch-2.11-post1.toml").read_text().replace("pins[torch]", "pins[trch]")
    assert "pins[trch]" in text
    (tmp_path / "p.toml").write_text(text)
    r = cli("tag", str(tmp_path / "p.toml"))
    assert r.code == 2
    assert "{pins[trch]} names no pin of this stack (did you mean torch or torchada?)" in r.err


def test_build_log_lines_carry_no_terminal_escapes_and_steps_print_as_they_start(
        capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from stackctl.cli.app import step_lines
    from stackctl.image.buildlog import BuildFailed, parse_build_stream

    step = step_lines("build")
    events = iter([{"stream": "Step 1/2 : FROM base\n"}, {"stream": "\x1b[91mwarning: red\x1b[0m\n"},
                   {"stream": "Step 2/2 : RUN python gate.py\n"}, {"stream": "\x1b]0;title\x07FAIL import a\n"},
                   {"error": "\x1b[31mreturned a non-zero code: 1\x1b[0m"}])
    with pytest.raises(BuildFailed) as exc:
        parse_build_stream(events, step)
    assert exc.value.lines == ("FAIL import a",)
    assert "warning: red" in exc.value.log and not any("\x1b" in line for line in exc.value.log)
    err = capsys.readouterr().err.splitlines()
    assert [re.sub(r"^\d\d:\d\d:\d\d ", "", line) for line in err] == [
        "build step 1/2: FROM base", "build step 2/2: RUN python gate.py"]
    assert all(re.match(r"\d\d:\d\d:\d\d build", line) for line in err)


def test_shell_completion_completes_commands_and_options(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_STACKCTL_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "stackctl outd")
    monkeypatch.setenv("COMP_CWORD", "1")
    r = cli()
    assert r.code == 0 and r.out.split() == ["outdated"]
    monkeypatch.setenv("COMP_WORDS", "stackctl publish --record")
    monkeypatch.setenv("COMP_CWORD", "2")
    r = cli()
    assert r.out.split() == ["--record-dir"]  # the older --record spelling is hidden
    monkeypatch.delenv("_STACKCTL_COMPLETE")
    assert "--install-completion" in cli("--help").out


def test_terminal_bars_count_bytes_as_sizes_and_items_as_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import re
    import sys

    from rich.console import Console

    app = sys.modules["stackctl.cli.app"]
    out = io.StringIO()
    monkeypatch.setattr(app, "console_err", Console(file=out, force_terminal=True, width=100))
    with app.progress_bar(True) as progress:
        progress("bytes", 300 * 2**20, 2 * 2**30)
        progress("wheels", 3, 9)
        progress("push layer 3f2a1b4c5d6e", 5000, 10000)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    # The same units as a CI log's lines and every message: binary, never GB beside GiB.
    assert "300.0 MiB/2.0 GiB" in text and "3/9" in text and "4.9 KiB/9.8 KiB" in text
    assert " GB" not in text and " kB" not in text


def test_ci_lines_count_bytes_as_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from stackctl.cli.app import progress_lines

    line = progress_lines("publish")
    for done in (0, 2**20, 5 * 2**20):
        line("push layer 3f2a1b4c5d6e", done, 5 * 2**20)
    line("wheels", 1, 1)
    err = [re.sub(r"^\d\d:\d\d:\d\d ", "", ln) for ln in capsys.readouterr().err.splitlines()]
    assert err == ["publish push layer 3f2a1b4c5d6e 1.0 MiB of 5.0 MiB",
                   "publish push layer 3f2a1b4c5d6e 5.0 MiB of 5.0 MiB", "publish wheels 1/1"]
