"""`stackctl schema`: the profile's JSON Schema, checked by an independent validator (jsonschema)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from stackctl.errors import ProfileError
from stackctl.profile.loader import load_stack
from tests.conftest import STACKS
from tests.support.cli import Cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    from stackctl.profile import profile_schema

    schema = profile_schema()
    Draft202012Validator.check_schema(schema)  # a valid draft 2020-12 document
    return Draft202012Validator(schema)


def test_the_command_prints_the_schema(cli: Cli) -> None:
    from stackctl.profile import profile_schema

    r = cli("schema")
    assert r.code == 0 and r.err == ""
    printed = json.loads(r.out)
    assert printed == profile_schema()
    assert printed["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("profile", sorted(STACKS.glob("*.toml")), ids=lambda p: p.name)
def test_every_bundled_stack_is_valid(validator: Draft202012Validator, profile: Path) -> None:
    errors = list(validator.iter_errors(tomllib.loads(profile.read_text())))
    assert errors == [], [e.message for e in errors]


GOOD = """\
[stack]
name = "sample"

[targets]
python = ["3.12"]
platforms = ["linux_x86_64"]

[indexes.public]
from_pip = true

[pins.torch]
version = "2.9.0"
index = "public"
gate = { order = 1, check = "exact", mode = "import" }

[image]
base = "example.invalid/base:1"
repository = "example.invalid/stack"
tag = "{stack}-{python}"
bytecode = "pins"
"""

# Each edit makes a profile both the loader and the schema refuse, one kind of mistake at a time.
INVALID = {
    "misspelt key": ('version = "2.9.0"', 'verison = "2.9.0"\nversion = "2.9.0"'),
    "misspelt table": ("[image]", "[imagee]"),
    "wrong scalar type": ('version = "2.9.0"', "version = 2.9"),
    "string for an array": ('python = ["3.12"]', 'python = "3.12"'),
    "integer for true/false": ("from_pip = true", "from_pip = 1"),
    "bool for an integer": ("order = 1,", "order = true,"),
    "not a gate check": ('check = "exact"', 'check = "exactly"'),
    "not a gate mode": ('mode = "import"', 'mode = "imports"'),
    "credential in the profile": ("from_pip = true", "from_pip = true\ntoken = \"abc\""),
    "number for bytecode": ('bytecode = "pins"', "bytecode = 1"),
    "table for a pin": ('[pins.torch]\nversion = "2.9.0"\nindex = "public"\ngate = { order = 1, check = "exact", '
                        'mode = "import" }', 'pins = { torch = "2.9.0" }'),
}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sample.toml"
    path.write_text(text)
    return path


def test_the_sample_is_good_for_both(validator: Draft202012Validator, tmp_path: Path) -> None:
    assert load_stack(_write(tmp_path, GOOD)).name == "sample"
    assert list(validator.iter_errors(tomllib.loads(GOOD))) == []


@pytest.mark.parametrize("case", sorted(INVALID))
def test_what_the_loader_refuses_the_schema_refuses(validator: Draft202012Validator, tmp_path: Path,
                                                    case: str) -> None:
    old, new = INVALID[case]
    assert old in GOOD
    text = GOOD.replace(old, new)
    with pytest.raises(ProfileError):
        load_stack(_write(tmp_path, text))
    assert list(validator.iter_errors(tomllib.loads(text))) != []


# Rules that span keys or files: the loader's alone, as docs/ci.md says. Kept here so a change that teaches
# the schema one of them also updates what the documentation promises.
LOADER_ONLY = {
    "gate order gap": ("order = 1,", "order = 2,"),
    "undeclared index": ('index = "public"', 'index = "vendor"'),
    "non-canonical version": ('version = "2.9.0"', 'version = "2.9.0.POST1"'),
    "bytecode other than \"pins\"": ('bytecode = "pins"', 'bytecode = "all"'),
}


@pytest.mark.parametrize("case", sorted(LOADER_ONLY))
def test_cross_key_rules_are_the_loaders_alone(validator: Draft202012Validator, tmp_path: Path, case: str) -> None:
    old, new = LOADER_ONLY[case]
    text = GOOD.replace(old, new)
    with pytest.raises(ProfileError):
        load_stack(_write(tmp_path, text))
    assert list(validator.iter_errors(tomllib.loads(text))) == []


def test_a_key_added_to_the_loader_table_appears_in_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    from stackctl.profile import loader
    from stackctl.profile.schema import profile_schema

    table: dict[str, Any] = {**loader.SCHEMA, "image": {**loader.SCHEMA["image"], "app": {"dockerfile": str}}}
    monkeypatch.setattr("stackctl.profile.schema.SCHEMA", table)
    assert profile_schema()["properties"]["image"]["properties"]["app"] == {
        "type": "object", "properties": {"dockerfile": {"type": "string"}}, "additionalProperties": False}
