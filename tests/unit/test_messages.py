"""Messages that are grammatical and true: counted nouns agree, a summary never contradicts itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from stackctl.base.words import count
from tests.conftest import STACKS, Result

Cli = Callable[..., Result]


def test_counted_nouns_agree() -> None:
    assert [count(0, "pin"), count(1, "pin"), count(2, "pin")] == ["0 pins", "1 pin", "2 pins"]
    assert count(1, "library", "libraries") == "1 library" and count(3, "library", "libraries") == "3 libraries"


def test_validate_says_one_target(cli: Cli, tmp_path: Path) -> None:
    text = (STACKS / "public-example.toml").read_text().replace('python = ["3.10", "3.12"]', 'python = ["3.12"]')
    (tmp_path / "one.toml").write_text(text)
    r = cli("validate", str(tmp_path / "one.toml"))
    assert r.code == 0, r.err
    assert "public-example: 4 pins, 1 target (" in r.out and "1 targets" not in r.out


def test_wheel_diff_summary_does_not_say_only_after_listing_python_sources(cli: Cli, tmp_path: Path) -> None:
    from tests.support.wheels import build_wheel

    old = build_wheel(tmp_path / "a", "ep", "1.0", files={"ep/a.py": "1", "ep/b.py": "1", "ep/ops.h": "1"})
    new = build_wheel(tmp_path / "b", "ep", "1.1", files={"ep/a.py": "2", "ep/b.py": "2", "ep/ops.h": "2"})
    r = cli("wheel-diff", str(old), str(new))
    assert r.code == 0, r.err
    summary = next(line for line in r.out.splitlines() if "Python source" in line)
    assert summary.startswith("2 Python sources differ (a.py, b.py); besides them, ops.h differs")
    assert "only" not in summary
    one = build_wheel(tmp_path / "c", "ep", "1.2", files={"ep/a.py": "3", "ep/b.py": "2", "ep/ops.h": "2"})
    r = cli("wheel-diff", str(new), str(one))
    assert "1 Python source differs (a.py); no other member differs" in r.out
