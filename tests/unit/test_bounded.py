"""The one TOML reader (stackctl/base/bounded.py): what it refuses before the parser sees it, and that what
only looks like a bound (dots in a string, a comment, a float) is read as tomllib reads it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stackctl.base.bounded import beyond_bounds, read_toml
from stackctl.errors import InputError, ProfileError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
HUGE_KEY = "x" + ".a" * 99_999 + " = 1\n"  # 200 KB: tomllib alone took over 10 s and 3 GB on it
BOUND = "a key of 100000 parts; at most 64"


def test_a_key_of_many_parts_is_refused_naming_the_file_the_line_and_the_bound() -> None:
    with pytest.raises(InputError, match=rf"^x.toml:1: {BOUND}$"):
        read_toml(HUGE_KEY, "x.toml")


def test_a_pylock_file_with_a_key_of_many_parts_is_refused() -> None:
    from stackctl.resolve.check import pylock_packages

    with pytest.raises(InputError, match=rf"^locks/pylock.x.toml:3: {BOUND}$"):
        pylock_packages('lock-version = "1.0"\n\n' + HUGE_KEY, "locks/pylock.x.toml")


def test_a_profile_with_a_key_of_many_parts_is_one_problem(tmp_path: Path) -> None:
    from stackctl.profile.loader import load_stack

    profile = tmp_path / "stacks" / "huge.toml"
    profile.parent.mkdir()
    profile.write_text('[stack]\nname = "huge"\n' + HUGE_KEY, encoding="utf-8")
    with pytest.raises(ProfileError) as caught:
        load_stack(profile)
    assert [str(p) for p in caught.value.problems] == [f"{profile}:3: {BOUND}"]


def test_a_validation_plan_with_a_key_of_many_parts_is_one_problem(tmp_path: Path) -> None:
    from stackctl.ab import load_plan

    plan = tmp_path / "plan.toml"
    plan.write_text(HUGE_KEY, encoding="utf-8")
    with pytest.raises(ProfileError) as caught:
        load_plan(plan)
    assert [str(p) for p in caught.value.problems] == [f"{plan}:1: {BOUND}"]


KEY_65 = "b" + ".c" * 64 + " = 1\n"
DEEP = "arrays or inline tables nested more than 64 deep"


@pytest.mark.parametrize(("text", "message"), [
    ("[x" + ".a" * 64 + "]\n", "f.toml:1: a key of 65 parts; at most 64"),
    ('a = 1\n\n"x"' + '."a"' * 64 + " = 1\n", "f.toml:3: a key of 65 parts; at most 64"),
    ("a = {" + "b = {" * 64, f"f.toml:1: {DEEP}"),
    ("size = 1" + "0" * 5000 + "\n", "f.toml:1: a number of 5001 digits; at most 4300"),
    ("size = 1" + "_000" * 1500 + "\n", "f.toml:1: a number of 4501 digits; at most 4300"),
    # it parses, but no message or record could write it in decimal
    ("size = 0x" + "1" * 5000 + "\n", "f.toml:1: a number of 6021 digits; at most 4300"),
    ("size = 0b" + "1" * 20000 + "\n", "f.toml:1: a number of 6021 digits; at most 4300"),
    ("a = 1\n" * 2_000_000, "f.toml: 12,000,000 bytes; at most 8 MiB"),
    # a string's end as TOML defines it: the scan goes on after it and finds the key
    ('a = """x""""\n' + KEY_65, "f.toml:2: a key of 65 parts; at most 64"),
    ("a = '''x'''''\n" + KEY_65, "f.toml:2: a key of 65 parts; at most 64"),
    ('a = "x\\"#"\n' + KEY_65, "f.toml:2: a key of 65 parts; at most 64"),
    ('a = """\\""""\n' + KEY_65, "f.toml:2: a key of 65 parts; at most 64"),
    ("a = 'x\\'\n" + KEY_65, "f.toml:2: a key of 65 parts; at most 64"),
    ("# a comment\n\n" + KEY_65, "f.toml:3: a key of 65 parts; at most 64"),
    ('a = """\n\n"""  # x\nb = 1\n' + KEY_65, "f.toml:5: a key of 65 parts; at most 64"),
    ("x" + ".a" * 40 + '"""m\n"""' + ".a" * 40 + " = 1\n", "f.toml:1: a key of 81 parts; at most 64"),
    ("a = [" + "[], " * 1000 + "[" * 64 + "]" * 64 + "]\n", f"f.toml:1: {DEEP}"),
], ids=lambda v: v[:30] + f"...{len(v)}" if len(v) > 40 else v)
def test_the_bounds(text: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        read_toml(text, "f.toml")
    assert str(caught.value) == message


def test_a_syntax_error_keeps_the_parsers_words_and_line() -> None:
    with pytest.raises(InputError) as caught:
        read_toml("a = 1\nb = = 2\n", "f.toml")
    assert str(caught.value) == "f.toml:2: malformed TOML: Invalid value (at line 2, column 5)"


@pytest.mark.parametrize("text", [
    'a = "' + "." * 5000 + '"\nb.c = 1\n',
    "# " + "." * 5000 + "\nb.c = 1\n",
    'a = """\n' + ".\n" * 5000 + '"""\nb.c = 1\n',
    "a = '''" + "." * 5000 + "'''\n",
    'a = "\\"' + "." * 5000 + '"\n',
    'a = """\\"""' + "." * 5000 + '"""\n',
    'a = "' + "9" * 5000 + '"\n',
    'x = [1.5, 2.5, 1979-05-27T07:32:00.999Z, "a.b.c"]\n"' + "." * 200 + '".b = 1\n',
    "a = [" + "[" * 62 + "]" * 62 + "]\n[[t]]\n[[t.u]]\n",
    "a" + ".b" * 63 + " = 1\n",
    "b = 1." + "1" * 5000 + "\nc = " + "1" * 5000 + "e5\n",  # floats: Python converts them whatever their length
    "a = 0x" + "f" * 3000 + "\n",  # 3,612 decimal digits
], ids=lambda v: v[:30] + f"...{len(v)}" if len(v) > 40 else v)
def test_what_only_looks_like_a_bound_is_read_as_tomllib_reads_it(text: str) -> None:
    assert read_toml(text, "f.toml") == tomllib.loads(text)


def test_every_toml_file_of_the_repository_is_within_the_bounds() -> None:
    """The bounds are generous for real files: each profile, plan and stack the repository ships reads as
    tomllib reads it."""
    files = [p for d in ("stacks", "benchmarks", "examples", "tests/data", "gates") for p in (ROOT / d).rglob("*.toml")]
    assert len(files) >= 10
    for path in [*files, ROOT / "pyproject.toml"]:
        text = path.read_text(encoding="utf-8")
        assert read_toml(text, str(path)) == tomllib.loads(text), path


def test_a_long_string_costs_the_scan_no_state_per_character() -> None:
    """A regular expression that repeats a group per character of a string kept a backtracking mark per
    character: the scan of one 8 MB string took a gigabyte. Runs between escapes keep none."""
    import tracemalloc

    texts = ('a = "' + "x" * 4_000_000 + '"\n', 'a = """' + "x\\\n" * 1_000_000 + '"""\n',
             'a = "' + "\\\\" * 2_000_000 + '"\n')
    for text in texts:
        tracemalloc.start()
        try:
            assert beyond_bounds(text) is None
            peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()
        assert peak_mb < 4 * len(text) / 2**20 + 16, f"the scan of {len(text):,} characters took {peak_mb:.0f} MB"
