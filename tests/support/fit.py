"""Human output read at 80 columns through a pipe (a CI log): every value the --json report carries, and the
human output shows, must stand whole on one line, never folded or cut inside a cell."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from tests.support.cli import Cli

_HEX = re.compile(r"(?:sha256:)?[0-9a-f]{40,}")
_BOX = "│┃┏┓┗┛┡┩└┘━─┳┻╇┼┬┴"


def values(doc: Any, keys: Iterable[str]) -> list[str]:
    """Every string (and number) under one of `keys`, anywhere in a JSON document."""
    wanted, found = set(keys), []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in wanted and isinstance(v, str | int) and not isinstance(v, bool):
                    found.append(str(v))
                elif k in wanted and isinstance(v, list):
                    found.extend(str(x) for x in v if isinstance(x, str))
                walk(v)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(doc)
    return [v for v in found if v]


def shown(value: str) -> str:
    """A long hex digest is shown by its first 12 hex (the `sha256:` prefix kept); `--json` has it whole."""
    if _HEX.fullmatch(value):
        prefix = "sha256:" if value.startswith("sha256:") else ""
        return prefix + value.removeprefix("sha256:")[:12]
    return value


def piped_80(cli: Cli, monkeypatch: pytest.MonkeyPatch, *args: str, code: int = 0, cwd: Any = None) -> str:
    """The human output of `stackctl ARGS` on an 80-column console that is not a terminal."""
    monkeypatch.setenv("COLUMNS", "80")
    r = cli(*args, cwd=cwd)
    assert r.code == code, r.out + r.err
    monkeypatch.setenv("COLUMNS", "200")
    return r.out


def json_of(cli: Cli, *args: str, code: int = 0, cwd: Any = None) -> Any:
    r = cli(*args, "--json", cwd=cwd)
    assert r.code == code, r.out + r.err
    return json.loads(r.out)


def assert_whole(out: str, wanted: Iterable[str], prose: Iterable[str] = ()) -> None:
    """Each value on one line as a whole; no table line wider than 80 columns. A `prose` value (free text, a
    list of items) may wrap between its words, never inside one: every word whole on a line, and the words
    in order."""
    lines = out.splitlines()
    for line in lines:
        if any(c in line for c in _BOX):
            assert len(line) <= 80, f"table line wider than 80 columns: {line!r}"
    missing = [v for v in wanted if not any(shown(v) in line for line in lines)]
    assert not missing, f"values not whole on one line: {missing}\n{out}"
    words = [w for line in lines for w in line.split()]
    flat = " ".join(words)
    for v in prose:
        assert " ".join(v.split()) in flat, f"free text not all there, in order: {v!r}\n{out}"


def check_fits(cli: Cli, monkeypatch: pytest.MonkeyPatch, args: list[str], keys: Iterable[str], *,
               code: int = 0, cwd: Any = None, skip: Callable[[str], bool] = lambda v: False,
               prose: Iterable[str] = ()) -> tuple[Any, str]:
    """Run ARGS with --json and piped at 80 columns; every value under `keys` must be whole in the latter, every
    value under `prose` there in full, wrapped between words at most."""
    doc = json_of(cli, *args, code=code, cwd=cwd)
    out = piped_80(cli, monkeypatch, *args, code=code, cwd=cwd)
    wanted = [v for v in values(doc, keys) if not skip(v)]
    assert wanted, f"nothing to look for under {list(keys)} in {doc}"
    assert_whole(out, wanted, values(doc, prose))
    return doc, out



def in_terminal(args: list[str], cwd: Any, columns: int = 80, env: dict[str, str] | None = None) -> str:
    """The output of `stackctl ARGS` in a real terminal `columns` wide (a pseudo-terminal, as tmux gives one),
    escapes removed: what a person reads at that width."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
    child_env = {k: v for k, v in (env or os.environ).items() if k not in ("COLUMNS", "LINES")}
    child_env["TERM"] = "xterm"
    proc = subprocess.Popen([sys.executable, "-m", "stackctl", *args], stdin=slave, stdout=slave, stderr=slave,
                            cwd=cwd, env=child_env, close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        proc.wait(timeout=60)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", text)


def assert_fits_terminal(out: str, columns: int, whole: Iterable[str]) -> None:
    """No line reaches past the terminal's edge (where it would fold inside a value); each of `whole` stands on
    one line."""
    from rich.cells import cell_len

    lines = out.splitlines()
    over = [line for line in lines if cell_len(line) > columns]
    assert not over, f"lines past {columns} columns, folded by the terminal: {over}\n{out}"
    missing = [v for v in whole if not any(v in line for line in lines)]
    assert not missing, f"not whole on one line: {missing}\n{out}"
