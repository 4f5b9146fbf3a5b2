"""Publish reads the layers it sends from the engine's own store: the export's bytes, without the export.

The engine's export writes out a whole image before its first byte, so a publish after one pin moved
would wait for every layer to send one. The store (overlay2's tar-split and diff directories) gives each
layer's tar alone; these tests hold it to the export's digest, and a forged store to the export.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest

from stackctl.engine.docker import DockerEngine
from stackctl.engine.layerstore import LayerStore, chain_ids
from stackctl.engine.registry import Registry
from stackctl.image.layers import Gzip
from stackctl.image.upload import push_image
from tests.support.engine import Cleanup, unique_tag

pytestmark = pytest.mark.integration


def small_image(tmp_path: Path, client: Any, cleanup: Cleanup) -> str:
    context = tmp_path / "context"
    (context / "b").mkdir(parents=True)
    (context / "a.txt").write_bytes(b"the first layer\n" * 100)
    (context / "b" / "data.bin").write_bytes(hashlib.sha256(b"x").digest() * 4096)
    (context / "Dockerfile").write_text("FROM scratch\nCOPY a.txt /opt/a.txt\nCOPY b/ /opt/b/\n")
    tag = cleanup.images(f"stackctl-test/{unique_tag('store')}") + ":t"
    client.images.build(path=str(context), tag=tag, rm=True)
    return tag


def test_publish_reads_its_layers_from_the_engines_store_and_pushes_the_exports_digest(
        tmp_path: Path, docker_client: Any, registry: str, cleanup: Cleanup) -> None:
    tag = small_image(tmp_path, docker_client, cleanup)
    engine = DockerEngine()
    store = engine.layer_store()
    assert not isinstance(store, str), store  # the tests run on the engine's host, as root
    facts = engine.facts(tag)
    assert facts is not None and len(facts.layers) == 2
    for n, diff_id in enumerate(facts.layers):
        tar = store.layer(facts.layers, n)
        assert tar is not None
        data = b"".join(tar.pieces())
        assert "sha256:" + hashlib.sha256(data).hexdigest() == diff_id and len(data) == tar.size
    config = store.config(facts.id)
    assert config is not None and "sha256:" + hashlib.sha256(config).hexdigest() == facts.id
    assert store.layer(facts.layers[::-1], 1) is None  # another parent chain: not this image's layer

    pushed = {}
    for how, source in (("store", store), ("export", None)):
        repository = f"{registry}/stackctl-test/{unique_tag(how)}"
        pushed[how] = push_image(engine, Registry(), repository, tag, facts.id, facts.layers, 315532800,
                                 store=source)
        cleanup.manifest(registry, repository, pushed[how].digest)
    assert not pushed["store"].exported and pushed["export"].exported
    assert pushed["store"].digest == pushed["export"].digest and pushed["store"].compressed == 2


def test_a_store_that_lies_about_a_layer_is_found_out_and_the_export_sends_it(
        tmp_path: Path, docker_client: Any, registry: str, cleanup: Cleanup) -> None:
    tag = small_image(tmp_path, docker_client, cleanup)
    engine = DockerEngine()
    real = engine.layer_store()
    facts = engine.facts(tag)
    assert not isinstance(real, str) and facts is not None
    # A copy of the image's part of the store, one file's bytes changed (its size kept)
    forged = tmp_path / "root"
    top = real.layer(facts.layers, 1)
    assert top is not None
    for chain in chain_ids(facts.layers):
        rel = Path("image", "overlay2", "layerdb", "sha256", chain.removeprefix("sha256:"))
        shutil.copytree(real.root / rel, forged / rel)
        cache_id = (real.root / rel / "cache-id").read_text()
        shutil.copytree(real.root / "overlay2" / cache_id / "diff", forged / "overlay2" / cache_id / "diff",
                        symlinks=True)
    bad = forged / "overlay2" / top.diff.parent.name / "diff" / "opt" / "b" / "data.bin"
    bad.write_bytes(bytes(bad.stat().st_size))
    liar = LayerStore(forged)
    lie = liar.layer(facts.layers, 1)
    assert lie is not None  # the store has it, under the image's diff_id...
    gz = Gzip()
    for piece in lie.pieces():
        gz.feed(piece)
    gz.finish()
    assert gz.diff_id != facts.layers[1]  # ...but not its bytes

    repository = f"{registry}/stackctl-test/{unique_tag('liar')}"
    pushed = push_image(engine, Registry(), repository, tag, facts.id, facts.layers, 315532800, store=liar)
    cleanup.manifest(registry, repository, pushed.digest)
    honest = f"{registry}/stackctl-test/{unique_tag('honest')}"
    again = push_image(engine, Registry(), honest, tag, facts.id, facts.layers, 315532800)
    cleanup.manifest(registry, honest, again.digest)
    assert pushed.exported and pushed.digest == again.digest  # the lying layer came from the export
    assert Registry().blob_size(repository, gz.digest) is None  # its upload was never committed
