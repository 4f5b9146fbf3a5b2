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


def assert_whole(out: str, wanted: Iterable[str]) -> None:
    """Each value on one line as a whole; no table line wider than 80 columns."""
    lines = out.splitlines()
    for line in lines:
        if any(c in line for c in _BOX):
            assert len(line) <= 80, f"table line wider than 80 columns: {line!r}"
    missing = [v for v in wanted if not any(shown(v) in line for line in lines)]
    assert not missing, f"values not whole on one line: {missing}\n{out}"


def check_fits(cli: Cli, monkeypatch: pytest.MonkeyPatch, args: list[str], keys: Iterable[str], *,
               code: int = 0, cwd: Any = None, skip: Callable[[str], bool] = lambda v: False) -> tuple[Any, str]:
    """Run ARGS with --json and piped at 80 columns; every value under `keys` must be whole in the latter."""
    doc = json_of(cli, *args, code=code, cwd=cwd)
    out = piped_80(cli, monkeypatch, *args, code=code, cwd=cwd)
    wanted = [v for v in values(doc, keys) if not skip(v)]
    assert wanted, f"nothing to look for under {list(keys)} in {doc}"
    assert_whole(out, wanted)
    return doc, out

