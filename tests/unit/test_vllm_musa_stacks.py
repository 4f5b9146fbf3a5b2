"""The reference stacks say what MooreThreads/vllm-musa pins and gates (facts in tests/data/vllm-musa/).

Export writes exactly the real requirement files' pins, the rendered gate is the real image gate entry
for entry, and tag and labels are what the project's build_image.sh gives its image.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from stackctl.image.gatespec import gate_spec
from stackctl.image.labels import OCI, Provenance, image_ref, oci_labels
from stackctl.profile.loader import load_stack
from tests.conftest import DATA, STACKS
from tests.support.cli import Cli

FACTS = DATA / "vllm-musa"
STACK_NAMES = ["torch-2.11-post2", "torch-2.11-post1", "torch-2.9-control"]


def pins(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("name", STACK_NAMES)
def test_export_writes_exactly_the_real_pins(cli: Cli, tmp_path: Path, name: str) -> None:
    r = cli("export", str(STACKS / f"{name}.toml"), "--out", str(tmp_path))
    assert r.code == 0, r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["common.txt", "musa_private.txt"]
    for file in ("musa_private.txt", "common.txt"):
        # the project's files carry no markers; the export says deep_ep is for cp310 only, as shipped
        exported = pins(tmp_path / file)
        assert [p for p in exported if " ; " in p] == (
            [p for p in exported if p.startswith("deep_ep==")] if file == "musa_private.txt" else [])
        assert all(p.endswith(' ; python_version == "3.10"') for p in exported if " ; " in p)
        assert [p.split(" ; ")[0] for p in exported] == pins(FACTS / name / file), file


def test_post2_exports_all_sixteen_vendor_pins(cli: Cli, tmp_path: Path) -> None:
    assert cli("export", "torch-2.11-post2", "--out", str(tmp_path), cwd=STACKS.parent).code == 0
    private = pins(tmp_path / "musa_private.txt")
    assert len(private) == 16 and "tilelang_musa==0.1.12+musa.2" in private
    stack = load_stack(STACKS / "torch-2.11-post2.toml")
    assert {p.index for p in stack.pins if p.file == "musa_private.txt"} == {"musa"}
    assert {p.index for p in stack.pins if p.file == "common.txt"} == {"public"}


def real_gate(name: str) -> list[tuple[str, str, str, str, str, str | None]]:
    """(dist, module, expected, check, mode, skip-if) per line of the gate fact file."""
    out = []
    for line in pins(FACTS / name / "gate.txt"):
        dist, module, expected, check, mode, *rest = line.split()
        out.append((dist, module, expected, check, mode, rest[0].removeprefix("skip-if:") if rest else None))
    return out


@pytest.mark.parametrize("name", STACK_NAMES)
def test_rendered_gate_is_the_real_gate_entry_for_entry(name: str) -> None:
    versions = {canonicalize_name(p.split("==")[0]): p.split("==")[1]
                for file in ("musa_private.txt", "common.txt") for p in pins(FACTS / name / file)}
    entries = gate_spec(load_stack(STACKS / f"{name}.toml"))["entries"]
    real = real_gate(name)
    assert [canonicalize_name(e["dist"]) for e in entries] == [canonicalize_name(r[0]) for r in real]
    assert [e["dist"] for e in entries[-2:]] == ["vllm", "vllm_musa"]
    for e, (dist, module, expected, check, mode, skip_if) in zip(entries, real, strict=True):
        assert (e["module"], e["check"]) == (module, check), dist
        # The real script compares version("tilelang_musa") with the string: no PEP 440 here.
        skipped = skip_if is not None and versions[canonicalize_name(skip_if.split("==")[0])] == skip_if.split("==")[1]
        assert e["mode"] == ("version" if skipped else mode), dist
        assert (e["note"] == f"import skipped: {skip_if}") == skipped, dist
        want = versions[canonicalize_name(dist)] if expected == "pin" else None if expected == "-" else expected
        if check == "prefix":
            assert want is not None and e["expected"].rstrip(".") == want.rstrip("."), dist  # 1.26. / 3.2.0
        else:
            assert e["expected"] == (want if check == "exact" else None), dist


@pytest.mark.parametrize(("name", "torch"), [("torch-2.11-post2", "2.11.0.post2_musa5.2.0"),
                                             ("torch-2.11-post1", "2.11.0.post1_musa5.2.0"),
                                             ("torch-2.9-control", "2.9.1.post1_musa5.2.0")])
def test_tag_and_labels_are_build_image_sh_s(name: str, torch: str) -> None:
    stack = load_stack(STACKS / f"{name}.toml")
    assert str(image_ref(stack)) == f"vllm-musa:ubuntu22.04_py3.10_musa_runtime_5.2_pytorch_release_{torch}"
    labels = dict(oci_labels(stack, prov=Provenance("0" * 40, "main"), lock_digest="sha256:x",
                             target="cp310-linux_x86_64", installed=()))
    assert labels[f"{OCI}.source"] == "https://github.com/MooreThreads/vllm-musa"
    assert (labels[f"{OCI}.revision"], labels[f"{OCI}.version"]) == ("0" * 40, "main")
    assert f"{OCI}.created" not in labels  # build_image.sh leaves it out on purpose: reproducible images
    # third_party/PINS VLLM_TAG; the control's was not found, so its image does not claim one.
    assert labels.get("com.mthreads.vllm.version") == (None if name == "torch-2.9-control" else "v0.28.0")


def test_release_trains() -> None:
    post2 = load_stack(STACKS / "torch-2.11-post2.toml")
    trains: dict[str | None, set[str]] = {}
    for p in post2.pins:
        trains.setdefault(p.train, set()).add(p.name)
    assert trains["musa-torch"] == {"torch", "torch_musa", "torchvision", "torchaudio"}
    assert trains["mate"] == {"mate", "mate-mubin", "flash_attn_3", "flash_mla", "deep-gemm", "flashinfer-python",
                              "sageattention"}
    control = load_stack(STACKS / "torch-2.9-control.toml")
    # MATE 0.2.5 beside 0.2.4 kernels: two releases, so two trains.
    assert {p.name for p in control.pins if p.train == "mate"} == {"mate", "mate-mubin"}
    assert {p.version for p in control.pins if p.train == "mate-kernels"} == {"0.2.4"}
