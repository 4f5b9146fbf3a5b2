"""What verify holds a statement to, what a rebuild compares, and the SBOM's dependency graph."""

from __future__ import annotations

import json
from typing import Any

from stackctl.image.layout import canonical, reproducible_config
from stackctl.image.sbom import depends_on
from stackctl.publish import attest
from stackctl.verify.rebuild import compare
from stackctl.verify.remote import sha256
from stackctl.verify.verification import _base_problems, provenance_problems, retargeted

SHA = "ab" * 32
COMMIT = "c" * 40
LABELS = {"org.opencontainers.image.revision": COMMIT, "io.stackctl.lock-digest": f"sha256:{SHA}",
          "io.stackctl.stack": "s", "io.stackctl.target": "cp311-linux_x86_64"}
CONFIG: dict[str, Any] = {"rootfs": {"diff_ids": [f"sha256:{'1' * 64}", f"sha256:{'2' * 64}"]},
                          "config": {"Labels": LABELS}}


def statement(**changes: Any) -> dict[str, Any]:
    materials = [
        attest.Material("source", f"git+https://example.invalid/x.git@{COMMIT}", (("gitCommit", COMMIT),),
                        (("dirty", changes.pop("dirty", False)),)),
        attest.Material("lock", "file:stacks/s.lock", (("sha256", SHA),)),
        changes.pop("base", attest.Material("base-image", f"oci://127.0.0.1:5000/base@sha256:{SHA}",
                                            (("sha256", SHA),), (("layers", 1),))),
        attest.Material("x-1.0-py3-none-any.whl", "http://h/x.whl", (("sha256", SHA),), (("version", "1.0"),)),
    ]
    doc = attest.statement(subject="r/x", digest=f"sha256:{SHA}", parameters={"stack": "s", "revision": COMMIT},
                           internal={}, materials=materials, builder={}, invocation="i", started=None,
                           finished="2026-01-01T00:00:00Z")
    for path, value in changes.items():
        node = doc
        *parents, last = path.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    return doc


def test_the_statement_publish_writes_passes() -> None:
    assert provenance_problems(statement(), LABELS, CONFIG, {"x": ("1.0", SHA)}) == []
    assert retargeted("the statement", statement(), f"sha256:{SHA}") == []


def test_every_field_held_against_the_image_is_checked() -> None:
    def problems(**changes: Any) -> str:
        return " | ".join(provenance_problems(statement(**changes), LABELS, CONFIG, {"x": ("1.0", SHA)}))

    assert "buildType is 'https://example.invalid/other'" in problems(
        **{"predicate.buildDefinition.buildType": "https://example.invalid/other"})
    assert "builder id is 'https://example.invalid/ci'" in problems(
        **{"predicate.runDetails.builder": {"id": "https://example.invalid/ci"}})
    assert "the source tree was dirty" in problems(dirty=True)
    assert "externalParameters.stack is 'other'" in problems(
        **{"predicate.buildDefinition.externalParameters": {"stack": "other"}})
    assert "not SLSA provenance v1" in problems(predicateType="https://slsa.dev/provenance/v0.2")
    assert "_type" in problems(_type="https://in-toto.io/Statement/v0.1")
    other = attest.Material("base-image", "docker-image:stackctl-base:bookworm", (("sha256", SHA),),
                            (("layers", 1),))
    assert "is not named by a manifest digest" in problems(base=other)
    # A statement naming other wheels than the lock's.
    out = provenance_problems(statement(), LABELS, CONFIG, {"x": ("2.0", SHA)})
    assert out and "the lock does not" in out[0]


def test_a_statement_about_another_digest_is_retargeted() -> None:
    out = retargeted("the provenance statement", statement(), f"sha256:{'cd' * 32}")
    assert out == [f"the provenance statement is re-targeted: it is about sha256:{SHA[:12]}, not sha256:{'cd' * 32}"]
    assert "about nothing" in retargeted("it", {"subject": "x"}, f"sha256:{SHA}")[0]


def test_a_base_known_by_image_id_only_is_accepted_as_what_it_says() -> None:
    local = {"name": "base-image", "uri": f"docker-image-id:sha256:{SHA}", "digest": {"sha256": SHA},
             "annotations": {"local_only": True, "layers": 1}}
    assert _base_problems(local, CONFIG) == []
    assert "does not fit the image's 2 layers" in _base_problems(
        {**local, "annotations": {"local_only": True, "layers": 3}}, CONFIG)[0]
    assert _base_problems(None, CONFIG) == ["provenance names no base image"]


def engine_config(diff_ids: list[str], created: str = "2026-12-01T21:00:00.123Z") -> bytes:
    return json.dumps({"created": created, "container": "abc", "docker_version": "20.10",
                       "config": {"Labels": LABELS, "Hostname": "abc", "Image": "sha256:x"},
                       "history": [{"created": created}], "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()


def test_a_rebuild_whose_layout_has_the_published_config_has_no_differences() -> None:
    ids = list(CONFIG["rootfs"]["diff_ids"])
    published = reproducible_config(json.loads(engine_config(ids, "2025-01-01T00:00:00Z")), 1700000000)
    digest = sha256(canonical(published))
    got, layers, differences = compare(published, digest, canonical(published))
    assert (got, layers, differences) == (digest, tuple(ids), ())


def test_a_rebuild_names_the_layer_that_differs() -> None:
    ids = list(CONFIG["rootfs"]["diff_ids"])
    forged = reproducible_config(json.loads(engine_config([*ids, f"sha256:{'9' * 64}"])), 1700000000)
    digest = sha256(canonical(forged))
    rebuilt = canonical(reproducible_config(json.loads(engine_config(ids)), 1700000000))
    got, _, differences = compare(forged, digest, rebuilt)
    assert got != digest
    assert differences == (f"the rebuilt config is {got}, the registry's {digest}",
                           "layer 3: registry sha256:999999999999, rebuilt none")


def test_depends_on_reads_requires_dist_for_what_the_image_installs() -> None:
    requires = {"cffi": ("pycparser", "setuptools; extra == 'dev'"), "pycparser": (), "Mystery": None,
                "x": ("not a requirement !!", "y>=1; python_version>'3'", "absent")}
    got = depends_on(requires, ["cffi", "pycparser", "mystery", "x", "Y"])
    # An extra's requirement, a distribution not installed and an unreadable line say nothing; a
    # distribution whose Requires-Dist the lock does not know is left out rather than called dependency-free.
    assert got == {"cffi": ("pycparser",), "pycparser": (), "x": ("y",)}


def test_the_statement_says_which_builder_built_the_image_and_verify_accepts_either() -> None:
    """The build record's `builder` picks the build type; verify takes both, and holds it to the builder the
    statement's version names."""
    from pathlib import Path

    from stackctl.image.buildlog import ImageFacts
    from stackctl.profile.model import Stack
    from stackctl.publish.publication import gather_evidence
    from stackctl.resolve.lock import Lock

    stack = Stack(name="s", description="", targets=(), indexes=(), pins=())
    local = ImageFacts(f"sha256:{SHA}", tuple(sorted(LABELS.items())), (), 0)

    def evidence_type(record: dict[str, Any]) -> str:
        return gather_evidence(stack, Lock("s", "", (), ()), Path("s.lock"), local, None, {}, record).build_type

    buildkit, classic = "urn:stackctl:build:buildkit:v1", "urn:stackctl:build:docker-classic:v1"
    assert evidence_type({"builder": "buildkit"}) == buildkit
    assert evidence_type({"builder": "classic"}) == classic
    assert evidence_type({}) == classic  # a record from before the field: the classic builder's
    for kind, builder in ((buildkit, "buildkit"), (classic, "classic")):
        doc = statement(**{"predicate.buildDefinition.buildType": kind,
                           "predicate.runDetails.builder": {"id": "urn:stackctl:builder",
                                                            "version": {"builder": builder}}})
        assert provenance_problems(doc, LABELS, CONFIG, {"x": ("1.0", SHA)}) == []
    mixed = statement(**{"predicate.buildDefinition.buildType": classic,
                         "predicate.runDetails.builder": {"id": "urn:stackctl:builder",
                                                          "version": {"builder": "buildkit"}}})
    assert provenance_problems(mixed, LABELS, CONFIG, {"x": ("1.0", SHA)}) == [
        f"buildType is '{classic}', but the builder's version names the buildkit builder ({buildkit})"]
