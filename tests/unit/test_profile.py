from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from stackctl.errors import ProfileError
from stackctl.profile.loader import load_stack
from stackctl.profile.model import GateCheck, GateMode
from tests.conftest import DATA, STACKS

BASE = """
[stack]
name = "s"

[targets]
python = ["3.10", "3.12"]
platforms = ["linux_x86_64"]

[indexes.vendor]
url = "https://vendor.example/simple/"

[pins.torchada]
version = "0.1.90"
index = "vendor"
gate = { order = 1 }

[pins.torch]
version = "2.11.0.post2+musa5.2.0"
index = "vendor"
gate = { order = 2 }
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ProfileError) as info:
        load_stack(path)
    return [str(p) for p in info.value.problems]


def test_reference_stacks_load() -> None:
    post2 = load_stack(STACKS / "torch-2.11-post2.toml")
    assert post2.pin("torch").version == "2.11.0.post2+musa5.2.0"  # type: ignore[union-attr]
    assert post2.pin("deep-ep").version == "1.1.0+musa5.2.0torch2.11.0.post2"  # type: ignore[union-attr]
    assert post2.pin("mate").version == "0.2.7"  # type: ignore[union-attr]  # inherited from post1
    assert [t.label for t in post2.targets] == ["cp310-linux_x86_64", "cp312-linux_x86_64"]
    gate = post2.gate_entries()
    assert [e.dist for e in gate[:3]] == ["torchada", "numpy", "torch"]
    exact = {e.dist for e in gate if e.check is GateCheck.EXACT}
    # The image's exact_version_dists: the six of the contract test, then the MATE cohort's.
    assert exact == {"torchada", "torch", "torch_musa", "torchvision", "torchaudio", "deep_ep",
                     "mate", "mate-mubin", "flash_attn_3", "flash_mla", "deep-gemm", "flashinfer-python",
                     "sageattention", "tilelang_musa", "apache-tvm-ffi"}
    assert post2.pin("tilelang_musa").version == "0.1.12+musa.2"  # type: ignore[union-attr]
    assert [e.order for e in gate] == list(range(1, len(gate) + 1))
    assert post2.sources[0].endswith("torch-2.11-post2.toml")
    assert post2.sources[1].endswith("torch-2.11-post1.toml")


def test_every_problem_in_a_file_is_reported_with_line_and_key() -> None:
    found = problems(DATA / "bad-everything" / "stack.toml")
    text = "\n".join(found)
    path = str(DATA / "bad-everything" / "stack.toml")
    assert f"{path}:3 stack.extend: unknown key; did you mean 'extends'?" in found
    assert f"{path}:14 indexes.public.token: unknown key; credentials never go in a profile" in text
    # An unknown key hides nothing: the other problems of the same file come in the same run
    assert f"{path}:18 pins.torch.index: 'vendr' is not a declared index; did you mean 'vendor'?" in found
    assert f"{path}:6 targets.python.1: 'three' is not a Python version like \"3.12\"" in found
    assert any(p.startswith(f"{path}:47 image.tag: renders to an invalid Docker tag") for p in found)
    assert len(found) == 16


def test_semantic_problems_name_line_and_key(tmp_path: Path) -> None:
    bad = (DATA / "bad-everything" / "stack.toml").read_text()
    bad = bad.replace('extend = "parent"\n', "").replace('token = "abc"\n', "")
    path = tmp_path / "stack.toml"
    path.write_text(bad)
    found = problems(path)
    text = "\n".join(found)
    assert f"{path}:5 targets.python.1: 'three' is not a Python version" in text
    assert "targets.platforms.1: 'win_amd64' is not a wheel platform tag" in text
    assert "indexes.vendor.url: credentials never go in a profile" in text
    assert "pins.torch.index: 'vendr' is not a declared index; did you mean 'vendor'?" in text
    assert "pins.deep-ep: duplicate of 'deep_ep' (same name after normalisation)" in text
    assert "pins.deep_ep.version: '>=1.1' is not a PEP 440 version" in text
    assert "pins.mate.abi: 'chek' is not one of check, provide, ignore; did you mean 'check'?" in text
    assert "gate.extra.numpy.check: check = \"prefix\" needs a prefix" in text  # a pin's defaults to its version
    assert "pins.mate.gate.before: 'vllm' is not an entry of this stack's gate" in text
    assert "pins.triton.version: '03.2.0' is not in canonical form; write '3.2.0'" in text
    assert "order 1 is taken by more than one entry (torch, deep_ep)" in text
    assert "gate order has a gap: no entry at 2, 3" in text
    assert "image.repository: 'Vendor/Image' is not a valid repository" in text
    assert "image.tag: renders to an invalid Docker tag '-2.11.0.post2_musa5.2.0'" in text
    # No secret from the file is echoed back.
    assert "s3cret" not in text


def test_malformed_toml_is_one_problem_with_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken", "[stack]\nname = \"x\"\nversion = = 2\n")
    [only] = problems(path)
    assert only.startswith(f"{path}:3: malformed TOML")


def test_wrong_type_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "s", BASE.replace('python = ["3.10", "3.12"]', 'python = "3.10"'))
    assert any("targets.python: must be an array of strings" in p for p in problems(path))


def test_extends_overrides_and_inherits(tmp_path: Path) -> None:
    write(tmp_path, "parent", BASE)
    child = write(tmp_path, "child", """
        [stack]
        name = "child"
        extends = "parent"

        [pins.torch]
        version = "2.11.0.post3+musa5.2.0"

        [pins.deep_ep]
        version = "1.1.0+musa5.2.0torch2.11.0.post3"
        index = "vendor"
        gate = { order = 3 }
    """)
    s = load_stack(child)
    assert [p.name for p in s.pins] == ["torchada", "torch", "deep_ep"]
    torch = s.pin("torch")
    assert torch is not None and torch.version == "2.11.0.post3+musa5.2.0"
    assert torch.gate is not None and torch.gate.order == 2  # kept from the parent
    assert s.extends == "parent"


def test_extends_matches_pins_by_normalised_name(tmp_path: Path) -> None:
    write(tmp_path, "parent", BASE + '\n[pins.deep_ep]\nversion = "1.0"\nindex = "vendor"\n')
    child = write(tmp_path, "child", '[stack]\nname = "c"\nextends = "parent"\n[pins.Deep-EP]\nversion = "1.1"\n')
    s = load_stack(child)
    assert [(p.name, p.version) for p in s.pins if p.key == "deep-ep"] == [("deep_ep", "1.1")]


def test_extends_can_remove_a_pin(tmp_path: Path) -> None:
    write(tmp_path, "parent", BASE + '\n[pins.mate]\nversion = "0.2.7"\nindex = "vendor"\n')
    child = write(tmp_path, "child", '[stack]\nname = "c"\nextends = "parent"\n[pins.mate]\nremove = true\n')
    assert load_stack(child).pin("mate") is None


def test_removing_what_no_parent_defines_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "parent", BASE)
    child = write(tmp_path, "child", '[stack]\nname = "c"\nextends = "parent"\n[pins.mate]\nremove = true\n')
    assert problems(child) == [f"{child}:5 pins.mate.remove: nothing to remove: no parent defines it"]


def test_removing_a_gated_pin_leaves_a_gap(tmp_path: Path) -> None:
    write(tmp_path, "parent", BASE + '\n[pins.mate]\nversion = "0.2.7"\nindex = "vendor"\ngate = { order = 3 }\n')
    child = write(tmp_path, "child", '[stack]\nname = "c"\nextends = "parent"\n[pins.torchada]\nremove = true\n')
    assert any("gate order has a gap: no entry at 1" in p for p in problems(child))


def test_unknown_parent(tmp_path: Path) -> None:
    child = write(tmp_path, "child", '[stack]\nname = "c"\nextends = "nowhere"\n')
    [only] = problems(child)
    assert only.startswith(f"{child}:3 stack.extends: unknown stack: no profile")
    assert "nowhere.toml" in only


def test_a_key_after_a_multi_line_string_is_found_on_its_own_line(tmp_path: Path) -> None:
    """The body of a multi-line string is text: a line in it that looks like a table header or a key does not
    move what comes after it (stack.extends was reported at line 1)."""
    from stackctl.profile.tomlpos import key_lines, locate

    text = ('[stack]\nname = "c"\ndescription = """\nUpgrade notes:\n[pins.torch]\nextends = "old"\n'
            'an escaped quote \\""" stays inside\n"""\nextends = "nowhere"\n'
            "[image]\nnote = \'\'\'\n[targets]\n\'\'\'\nrepository = \"r\"  # a \'\'\' in a comment opens nothing\n"
            'tag = "a \'\'\' b"\nbase = "x"\n')
    lines = key_lines(text)
    assert locate(lines, ("stack", "extends")) == 9
    assert ("pins", "torch") not in lines and ("targets",) not in lines
    assert (lines[("image", "repository")], lines[("image", "tag")], lines[("image", "base")]) == (14, 15, 16)
    child = write(tmp_path, "child", text)
    assert any(p.startswith(f"{child}:9 stack.extends: unknown stack") for p in problems(child))


def test_extends_cycle() -> None:
    found = problems(DATA / "cycle" / "a.toml")
    assert len(found) == 1
    assert "stack.extends: extends cycle: a.toml -> b.toml -> a.toml" in found[0]
    assert str(DATA / "cycle" / "b.toml") in found[0]


def test_three_level_chain_reports_problem_in_the_file_that_wrote_it(tmp_path: Path) -> None:
    write(tmp_path, "root", BASE)
    write(tmp_path, "mid", '[stack]\nname = "m"\nextends = "root"\n[pins.torch]\nindex = "nope"\n')
    leaf = write(tmp_path, "leaf", '[stack]\nname = "l"\nextends = "mid"\n[pins.torchada]\nversion = "0.1.91"\n')
    [only] = problems(leaf)
    assert only.startswith(f"{tmp_path / 'mid.toml'}:5 pins.torch.index: 'nope' is not a declared index")


def test_gate_roles(tmp_path: Path) -> None:
    path = write(tmp_path, "s", BASE + """
        [pins.tilelang_musa]
        version = "0.1.12"
        index = "vendor"
        gate = { order = 3, module = "tilelang", mode = "version", check = "present" }

        [pins.flash_mla]
        version = "1.0.0"
        index = "vendor"
        gate = { order = 4, mode = "spec", skip_import_if = "torch<2.12" }

        [gate.extra.numpy]
        order = 5
        check = "prefix"
        prefix = "1.26."
    """)
    entries = {e.dist: e for e in load_stack(path).gate_entries()}
    assert entries["tilelang_musa"].module == "tilelang"
    assert entries["tilelang_musa"].mode is GateMode.VERSION and entries["tilelang_musa"].expected is None
    assert entries["flash_mla"].mode is GateMode.SPEC and entries["flash_mla"].skip_import_if == "torch<2.12"
    assert entries["numpy"].expected == "1.26." and not entries["numpy"].pinned
    assert entries["numpy"].module == "numpy" and entries["torchada"].module == "torchada"
    assert entries["torch"].expected == "2.11.0.post2+musa5.2.0"


def test_a_pins_prefix_check_defaults_to_its_version(tmp_path: Path) -> None:
    path = write(tmp_path, "s", BASE + '[pins.triton]\nversion = "3.2.0"\nindex = "vendor"\n'
                                       'gate = { order = 3, check = "prefix" }\n')
    triton = next(e for e in load_stack(path).gate_entries() if e.dist == "triton")
    assert (triton.check, triton.expected) == (GateCheck.PREFIX, "3.2.0")


def test_a_child_clears_and_changes_inherited_gate_roles(tmp_path: Path) -> None:
    write(tmp_path, "parent", BASE + '[pins.flash_mla]\nversion = "0.2.7+musa"\nindex = "vendor"\n'
                                     'gate = { order = 3, skip_import_if = "torch<2.12" }\n')
    child = write(tmp_path, "child", '[stack]\nname = "c"\nextends = "parent"\n'
                                     '[pins.flash_mla]\ngate = { mode = "spec", skip_import_if = "" }\n')
    flash = next(e for e in load_stack(child).gate_entries() if e.dist == "flash_mla")
    assert (flash.order, flash.mode, flash.skip_import_if) == (3, GateMode.SPEC, None)


def test_before_holds_an_import_order(tmp_path: Path) -> None:
    ok = write(tmp_path, "ok", BASE.replace("gate = { order = 1 }", 'gate = { order = 1, before = ["torch"] }'))
    assert [e.dist for e in load_stack(ok).gate_entries()] == ["torchada", "torch"]
    swapped = BASE.replace("gate = { order = 1 }", 'gate = { order = 9, before = ["torch"] }')
    bad = write(tmp_path, "bad", swapped.replace("gate = { order = 2 }", "gate = { order = 1 }")
                .replace("order = 9", "order = 2"))
    assert problems(bad) == [f"{bad}:15 pins.torchada.gate.order: gate order: torchada (order 2) must come before "
                             "torch (order 1)"]


def test_skip_condition_must_name_a_pin(tmp_path: Path) -> None:
    path = write(tmp_path, "s", BASE.replace("gate = { order = 2 }",
                                             'gate = { order = 2, skip_import_if = "nothing>1" }'))
    assert any("skip_import_if: must name another pin of this stack" in p for p in problems(path))


@pytest.mark.parametrize(("extra", "message"), [
    ('[gate.extra.torch]\norder = 3\n', "gate.extra.torch: is also a pin"),
    ('[gate.extra.vllm]\norder = 3\ncheck = "exact"\n',
     'check = "exact" on an unpinned entry needs expect = VERSION'),
    ('[image]\nbase = "b"\nrepository = "r"\ntag = "x{distro}"\n', "image.tag: unknown field {distro}"),
    (f'[image]\nbase = "b"\nrepository = "r"\ntag = "{"x" * 120}{{pins[torch]}}"\n', "longer than 128 characters"),
    ('[image]\nbase = "b"\nrepository = "r"\ntag = "{pins[vllm]}"\n', "{pins[vllm]} names no pin of this stack"),
    ('[indexes.both]\nurl = "https://x.example/simple/"\nfrom_pip = true\n', "indexes.both: give exactly one of url"),
], ids=["gate-extra-is-a-pin", "unpinned-exact-needs-expect", "tag-unknown-field", "tag-too-long",
        "tag-names-a-missing-pin", "index-needs-one-source"])
def test_rule_added_to_a_valid_profile_is_reported(tmp_path: Path, extra: str, message: str) -> None:
    load_stack(write(tmp_path, "ok", BASE))  # valid without the addition
    path = write(tmp_path, "s", BASE + "\n" + extra)
    assert any(message in p for p in problems(path)), problems(path)


def test_digest_is_stable_and_tracks_content(tmp_path: Path) -> None:
    a = write(tmp_path, "a", BASE)
    b = write(tmp_path, "b", BASE.replace("0.1.90", "0.1.91"))
    assert load_stack(a).digest() == load_stack(a).digest()
    assert load_stack(a).digest() != load_stack(b).digest()


def test_reference_stacks_limit_deep_ep_to_cp310_as_the_vendor_ships_it() -> None:
    for name in ("torch-2.9-control", "torch-2.11-post1", "torch-2.11-post2"):
        s = load_stack(STACKS / f"{name}.toml")
        cp310, cp312 = s.targets
        deep_ep = s.pin("deep_ep")
        assert deep_ep is not None and deep_ep.targets(s.targets) == (cp310,)
        assert deep_ep not in s.pins_for(cp312) and deep_ep in s.pins_for(cp310)
        assert "deep_ep" not in [e.dist for e in s.gate_entries(cp312)]
        assert "deep_ep" in [e.dist for e in s.gate_entries(cp310)]


@pytest.mark.parametrize(("limit", "cp310", "cp312"), [
    ('python = ["3.10"]', True, False),
    ('platforms = ["linux_x86_64"]', True, True),
    ("marker = 'python_version == \"3.12\"'", False, True),
    ("marker = 'python_version >= \"3.11\" and platform_machine == \"x86_64\"'", False, True),
    ("marker = 'sys_platform == \"linux\" and implementation_name == \"cpython\"'", True, True),
])
def test_a_pin_limited_to_some_targets(tmp_path: Path, limit: str, cp310: bool, cp312: bool) -> None:
    s = load_stack(write(tmp_path, "s", BASE.replace('version = "0.1.90"', 'version = "0.1.90"\n' + limit)))
    pin = s.pin("torchada")
    assert pin is not None
    assert [pin.applies_to(t) for t in s.targets] == [cp310, cp312]


def test_pin_targets_are_validated_against_the_stacks_targets(tmp_path: Path) -> None:
    text = BASE.replace('version = "0.1.90"', 'version = "0.1.90"\npython = ["3.11"]\nplatforms = ["linux_aarch64"]')
    text = text.replace('version = "2.11.0.post2+musa5.2.0"',
                        "version = \"2.11.0.post2+musa5.2.0\"\nmarker = 'python_version == \"3.9\"'")
    found = problems(write(tmp_path, "s", text))
    assert any(p.endswith("pins.torchada.python.0: '3.11' is not one of the stack's targets (3.10, 3.12)")
               for p in found), found
    assert any("pins.torchada.platforms.0: 'linux_aarch64' is not one of the stack's targets (linux_x86_64)" in p
               for p in found), found
    assert any("pins.torch.marker: matches none of the stack's targets (cp310-linux_x86_64, cp312-linux_x86_64)"
               in p for p in found), found
    bad_marker = "version = \"0.1.90\"\nmarker = 'python_version =='"
    bad = problems(write(tmp_path, "b", BASE.replace('version = "0.1.90"', bad_marker)))
    assert len(bad) == 1 and "pins.torchada.marker: not a PEP 508 marker" in bad[0] and ":" in bad[0].split(" ")[0]


def test_a_child_profile_overrides_or_lifts_a_pin_limit(tmp_path: Path) -> None:
    write(tmp_path, "base", BASE.replace('version = "0.1.90"', 'version = "0.1.90"\npython = ["3.10"]'))
    child = load_stack(write(tmp_path, "child", '[stack]\nname = "c"\nextends = "base"\n\n'
                                                '[pins.torchada]\npython = ["3.10", "3.12"]\n'))
    assert child.pin("torchada").python == ("3.10", "3.12")  # type: ignore[union-attr]


def test_limited_pins_export_with_a_marker_and_digests_of_unlimited_profiles_stay(tmp_path: Path) -> None:
    from stackctl.profile.model import canonical_json
    from stackctl.resolve.export import render_requirements

    text = BASE.replace('index = "vendor"\ngate = { order = 1 }',
                        'index = "vendor"\nfile = "a.txt"\ngate = { order = 1 }')
    plain = load_stack(write(tmp_path, "p", text))
    assert '"marker"' not in canonical_json(plain) and '"platforms":[]' not in canonical_json(plain)
    limited = load_stack(write(tmp_path, "l", text.replace('file = "a.txt"', 'file = "a.txt"\npython = ["3.10"]')))
    assert limited.digest() != plain.digest()
    assert 'torchada==0.1.90 ; python_version == "3.10"\n' in render_requirements(limited)["a.txt"]
    both = load_stack(write(tmp_path, "m", text.replace(
        'file = "a.txt"', 'file = "a.txt"\npython = ["3.10", "3.12"]\nmarker = \'platform_machine == "x86_64"\'')))
    assert ('torchada==0.1.90 ; (python_version == "3.10" or python_version == "3.12") and '
            'platform_machine == "x86_64"') in render_requirements(both)["a.txt"]


@pytest.mark.parametrize(("find", "typo", "said"), [
    ('version = "2.22"', 'verison = "2.22"', ":18 pins.pycparser.verison: unknown key; did you mean 'version'?"),
    ("[indexes.public]", "[indexs.public]", ":14 indexs: unknown key; did you mean 'indexes'?"),
    ("[image]", "[imag]", ":39 imag: unknown key; did you mean 'image'?"),
])
def test_one_typo_is_one_problem_with_its_line_and_no_follow_on(tmp_path: Path, find: str, typo: str,
                                                                 said: str) -> None:
    """Read on as if spelt as meant: no `missing` for the key, no gate-order gap for the pin it hid, no
    undeclared index for the pins on the table it hid."""
    path = tmp_path / "public-example.toml"
    path.write_text((STACKS / "public-example.toml").read_text().replace(find, typo, 1))
    with pytest.raises(ProfileError) as caught:
        load_stack(path)
    assert [str(p) for p in caught.value.problems] == [f"{path}{said}"]


def test_abi_providers_optional_members_and_baseline(tmp_path: Path) -> None:
    """`[abi]`'s run-time keys: known provider sets (or ones the profile adds), optional members with a glob and
    a reason, a policy auditwheel knows; each problem at its line, with the nearest known name."""
    base = textwrap.dedent(BASE)
    good = write(tmp_path, "good", base + textwrap.dedent('''
        [abi]
        providers = ["nvidia", "tpu"]
        provides = { tpu = ["libtpu.so*"] }
        baseline = "manylinux_2_28"
        ld_library_path = ["/usr/local/tpu/lib"]

        [[abi.optional]]
        glob = "nvidia/nvshmem/lib/nvshmem_transport_*.so*"
        reason = "loaded only when a transport is picked"
        '''))
    stack = load_stack(good)
    assert stack.abi.providers == ("nvidia", "tpu") and stack.abi.provides == (("tpu", ("libtpu.so*",)),)
    assert stack.abi.baseline == "manylinux_2_28" and stack.abi.ld_library_path == ("/usr/local/tpu/lib",)
    assert stack.abi.optional[0].reason == "loaded only when a transport is picked"
    bad = write(tmp_path, "bad", base + textwrap.dedent('''
        [abi]
        providers = ["nvidai"]
        baseline = "manylinux_2_99"
        ld_library_path = ["usr/lib"]

        [[abi.optional]]
        glob = "x/*.so"
        '''))
    found = "\n".join(problems(bad))
    assert "abi.providers.0: 'nvidai' is not a declared run-time provider; did you mean 'nvidia'?" in found
    assert "abi.baseline: 'manylinux_2_99' is not a declared manylinux or musllinux policy" in found
    assert "abi.ld_library_path.0: 'usr/lib' is not an absolute directory" in found
    assert "abi.optional.0.reason: missing: an optional member is named by an install-path glob and says why" in found
    assert all(line.startswith(f"{bad}:") and line.split(":")[1].split()[0].isdigit()
               for line in problems(bad)), found


def test_the_schema_knows_the_abi_run_time_keys() -> None:
    from stackctl.profile.schema import profile_schema

    abi = profile_schema()["properties"]["abi"]["properties"]
    assert {"providers", "provides", "optional", "baseline", "ld_library_path"} <= set(abi)
    assert abi["optional"]["items"]["properties"].keys() == {"glob", "reason"}
