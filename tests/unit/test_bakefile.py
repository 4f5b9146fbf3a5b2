"""The bake file of `build --all` and the split of one bake's rawjson stream by target: pure values, over a real
captures (tests/data/rawjson/, Docker 26.1 on the containerd store, buildx 0.13.1: bake-two-targets-d26c.txt,
`docker buildx bake --no-cache` of two sibling stacks of the image test stack; bake-one-gate-fails-d26c.txt,
those two and a third whose gate fails, from the registry cache; tests/services/test_bake_matrix.py has buildx
read a generated file back)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from stackctl.image.bakefile import (
    BakeSplit,
    BakeTarget,
    bake_document,
    cache_ref,
    failed_on_its_own,
    merged,
    registry_cache,
    target_name,
    unprefixed,
)
from stackctl.image.buildlog import BuildFailed
from stackctl.image.rawjson import Folder, Stream, documents, result_of

DATA = Path(__file__).parent.parent / "data" / "rawjson"
S1, S2 = "s1-cp311-linux_x86_64", "s2-cp311-linux_x86_64"


def test_a_target_per_cell_with_its_context_wheels_args_output_and_cache() -> None:
    ref = cache_ref("127.0.0.1:5000/team/stack", "s1", "cp311-linux_x86_64")
    assert ref == "127.0.0.1:5000/team/stack:buildcache-s1-cp311-linux_x86_64"
    cache_from, cache_to = registry_cache(ref)
    one = BakeTarget(S1, Path("/r/s1/context"), "reg/x:one", args={"SOURCE_DATE_EPOCH": "315532800"},
                     contexts={"wheels": Path("/r/s1/context/groups")}, layout=Path("/r/s1.oci"),
                     cache_from=cache_from, cache_to=cache_to)
    two = BakeTarget(S2, Path("/r/s2/context"), "reg/x:two", no_cache=True)
    exporters = ("type=oci,dest=/w/s1/oci,tar=false,compression=gzip,oci-mediatypes=true",
                 "type=image,name=reg/x:one,compression=gzip,oci-mediatypes=true")
    doc = bake_document([one, two], {S1: exporters})
    assert doc["group"] == {"default": {"targets": [S1, S2]}}
    assert doc["target"][S1] == {
        "context": "/r/s1/context", "dockerfile": "Dockerfile", "tags": ["reg/x:one"],
        "args": {"SOURCE_DATE_EPOCH": "315532800"}, "contexts": {"wheels": "/r/s1/context/groups"},
        "output": list(exporters),
        "cache-from": [f"type=registry,ref={ref}"], "cache-to": [f"type=registry,ref={ref},mode=max"]}
    # no exporter chosen (overlay2): the image is loaded into the engine; no cache named, none written
    assert doc["target"][S2] == {"context": "/r/s2/context", "dockerfile": "Dockerfile", "tags": ["reg/x:two"],
                                 "output": ["type=docker"], "no-cache": True}


def test_two_cells_of_one_name_are_refused() -> None:
    t = BakeTarget(S1, Path("/c"), "x:1")
    with pytest.raises(ValueError, match="two bake targets are named"):
        bake_document([t, t])


def test_target_and_cache_names_keep_to_the_letters_bake_and_tags_allow() -> None:
    assert target_name("torch.2.11+musa", "cp311-linux_x86_64") == "torch-2-11-musa-cp311-linux_x86_64"
    assert target_name("s", "cp311-manylinux_2_28_aarch64") == "s-cp311-manylinux_2_28_aarch64"
    tag = cache_ref("r/x", "a+b" * 60, "cp311").rpartition(":")[2]
    assert tag.startswith("buildcache-a-b") and len(tag) == 128


def test_vertex_names_lose_the_targets_prefix_as_a_single_build_names_them() -> None:
    assert unprefixed(f"[{S1} layer01-core 1/1] RUN x", S1) == "[layer01-core 1/1] RUN x"
    assert unprefixed(f"[{S1} internal] load build definition from Dockerfile", S1) == \
        "[internal] load build definition from Dockerfile"
    assert unprefixed(f"[{S1}] exporting to image", S1) == "exporting to image"
    assert unprefixed(f"[{S2}] exporting to image", S1) == f"[{S2}] exporting to image"


def _split(capture: str = "bake-two-targets-d26c.txt", names: tuple[str, ...] = (S1, S2)
           ) -> tuple[BakeSplit, dict[str, Stream], str]:
    docs, trailer = documents((DATA / capture).read_text())
    split = BakeSplit(names)
    folders = {n: Folder() for n in names}
    for doc in docs:
        for name, part in split.feed(doc).items():
            folders[name].feed(part)
    return split, {n: f.stream() for n, f in folders.items()}, trailer


def test_each_target_of_a_real_bake_reads_as_its_single_build() -> None:
    _, streams, trailer = _split()
    # buildx exited 0; what it wrote after the documents is the content store's retries of two layouts
    # writing one layer at once, not an error of either cell
    assert all(ln.startswith("ERROR: (*service).Write failed") for ln in trailer.splitlines())
    for name, stack in ((S1, "s1"), (S2, "s2")):
        result = result_of(merged(streams[name], True), "sha256:x", True)
        # the image test stack's 16 Dockerfile steps, none cached under --no-cache, each cell's own gate
        assert (result.steps, result.cached_steps) == (16, 0)
        assert result.gate_lines[0] == f"gate {stack}: python 3.11.2"
        assert "PASS import patcher version=1.0.0" in result.gate_lines
        assert result.gate_lines[-1] == "gate ok: 11 passed, 0 failed"
    # the bake's own vertex ("[internal] load local bake definitions") is no cell's
    assert not any("bake definitions" in v[0] for s in streams.values() for v in s.vertices)


def test_a_shared_step_is_named_twice_and_one_copy_said_cancelled_yet_the_cell_was_built() -> None:
    _, streams, _ = _split()
    s1 = streams[S1]
    copies = [v for v in s1.vertices if v[0] == "[stage-7 4/9] COPY --from=layer01-train-core /export/ /"]
    assert len(copies) == 2 and any("context canceled" in (v[2] or "") for v in copies)
    with pytest.raises(BuildFailed):  # read as it came, the cancelled copy would fail the cell
        result_of(s1, "sha256:x", True)
    one = merged(s1, True)
    assert [v[0] for v in one.vertices].count(copies[0][0]) == 1 and not any(v[2] for v in one.vertices)


def test_a_real_error_stays_and_a_lone_cancelled_step_of_a_failed_bake_stays_too() -> None:
    stream = Stream((("[a 1/2] RUN x", False, "process exited 1", ("boom",)),
                     ("[a 1/2] RUN x", False, "context canceled", ()),
                     ("[a 2/2] RUN y", False, "context canceled", ())), ())
    out = merged(stream, False)
    assert out.vertices == (("[a 1/2] RUN x", False, "process exited 1", ("boom",)),
                            ("[a 2/2] RUN y", False, "context canceled", ()))
    assert merged(stream, True).vertices[1][2] is None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_a_shared_vertexs_log_goes_to_every_target_that_named_it_and_a_cold_cache_is_no_failure() -> None:
    split = BakeSplit(["t-one", "t-two"])
    parts = split.feed({"vertexes": [
        {"digest": "sha256:s", "name": "[t-one shared 2/2] RUN echo", "started": "t"},
        {"digest": "sha256:s", "name": "[t-two shared 2/2] RUN echo", "started": "t"},
        {"digest": "sha256:c", "name": "[t-one] importing cache manifest from r/x:buildcache-one", "started": "t",
         "completed": "t", "error": "failed to configure registry cache importer: r/x:buildcache-one: not found"},
        {"digest": "sha256:d", "name": "[t-two] importing cache manifest from r/x:buildcache-two", "started": "t",
         "completed": "t"},
        {"digest": "sha256:i", "name": "[internal] load local bake definitions"}],
        "logs": [{"vertex": "sha256:s", "stream": 1, "data": _b64("hello\n")}]})
    assert set(parts) == {"t-one", "t-two"}
    for name in ("t-one", "t-two"):
        assert parts[name]["logs"] == [{"vertex": "sha256:s", "stream": 1, "data": _b64("hello\n")}]
        assert parts[name]["vertexes"][0]["name"] == "[shared 2/2] RUN echo"
    assert split.cache_found == {"t-one": False, "t-two": True}
    assert not any(v.get("error") for v in parts["t-one"]["vertexes"])


def test_in_a_bake_where_one_gate_failed_only_that_cell_failed_on_its_own() -> None:
    s3 = "s3-cp311-linux_x86_64"
    split, streams, trailer = _split("bake-one-gate-fails-d26c.txt", (S1, S2, s3))
    assert "ERROR: failed to solve: process" in trailer
    assert split.cache_found == {S1: True, S2: True, s3: False}
    failed = {n: failed_on_its_own(merged(st, False)) for n, st in streams.items()}
    assert failed == {S1: False, S2: False, s3: True}
    # the stopped cells' exporters failed in words of their own: no failure of theirs, they are baked again
    assert any(v[0] == "exporting to oci image format" and v[2] and "canceled" not in v[2]
               for v in streams[S1].vertices)
    with pytest.raises(BuildFailed) as caught:
        result_of(merged(streams[s3], False), "", False)
    assert str(caught.value) == "the gate failed: 1 check did not pass"
    assert caught.value.lines == ("FAIL import corelib: ImportError: corelib needs patcher imported first",)


def test_a_lone_target_is_not_prefixed_by_buildx_and_keeps_every_vertex() -> None:
    split = BakeSplit([S1])
    parts = split.feed({"vertexes": [{"digest": "sha256:a", "name": "[layer01-core 1/1] RUN x", "started": "t"},
                                     {"digest": "sha256:b", "name": "exporting to image"}],
                        "logs": [{"vertex": "sha256:a", "stream": 1, "data": _b64("ok\n")}]})
    assert [v["name"] for v in parts[S1]["vertexes"]] == ["[layer01-core 1/1] RUN x", "exporting to image"]
    assert len(parts[S1]["logs"]) == 1


def test_the_buildkit_engine_declares_it_bakes_so_build_all_bakes_on_it() -> None:
    """build --all bakes on an engine whose `baking` answers, read without an engine: the BuildKit adapter's is
    itself, with every member of `Bakes`; the classic adapter declares none."""
    from stackctl.engine.buildx import BuildxEngine
    from stackctl.engine.docker import DockerEngine
    from stackctl.image.protocols import Bakes

    kit = object.__new__(BuildxEngine)
    assert kit.baking is kit
    members = [m for m in dir(Bakes) if not m.startswith("_")]
    assert set(members) == {"bake", "named_contexts", "registry_cache"}
    assert [m for m in members if m not in vars(BuildxEngine)] == []
    assert object.__new__(DockerEngine).baking is None


def test_a_target_imports_its_own_cache_first_then_its_siblings_of_the_same_target() -> None:
    from stackctl.image.bakefile import SIBLING_CACHES, registry_cache, with_sibling_caches

    repo = "127.0.0.1:5000/team/cache"
    own, _ = registry_cache(cache_ref(repo, "post2", "cp311-linux_x86_64"))
    tags = ["buildcache-post2-cp311-linux_x86_64", "buildcache-post1-cp311-linux_aarch64",
            "buildcache-post1-cp311-linux_x86_64", "latest",
            *(f"buildcache-old{n}-cp310-linux_x86_64" for n in range(9))]
    got = with_sibling_caches(own, tags)
    assert got[0] == own[0]  # its own first: the import the build's log reports on
    assert got[1] == f"type=registry,ref={repo}:buildcache-post1-cp311-linux_x86_64"  # the sibling, same target
    assert len(got) == 1 + SIBLING_CACHES and f"type=registry,ref={repo}:latest" not in got
    assert len(set(got)) == len(got)
    assert with_sibling_caches((), tags) == ()  # no registry cache asked for: none imported
