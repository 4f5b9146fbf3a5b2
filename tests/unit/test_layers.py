"""The layer compressor: one tar, one blob, however it is read; the cache of what this machine compressed."""

from __future__ import annotations

import gzip
import hashlib
import io
import random
import tarfile

from hypothesis import given, settings
from hypothesis import strategies as st

from stackctl.image.layers import COMPRESSOR, PIECE, Gzip, KnownBlob, parse_known, render_known


def layer_tar(seed: int, files: int = 40) -> bytes:
    """A layer-like tar: text, incompressible bytes and runs, so every kind of deflate block appears."""
    rng = random.Random(seed)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for n in range(files):
            kind = n % 3
            data = (rng.randbytes(rng.randrange(1, 300_000)) if kind == 0 else
                    b"import torch\n" * rng.randrange(1, 50_000) if kind == 1 else bytes(rng.randrange(1, 900_000)))
            info = tarfile.TarInfo(f"opt/stack/f{n}")
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def compress(data: bytes, cuts: list[int]) -> tuple[bytes, Gzip]:
    g, out, at = Gzip(), [], 0
    for cut in cuts:
        out.append(g.feed(data[at:at + cut]))
        at += cut
    out.append(g.feed(data[at:]))
    out.append(g.finish())
    return b"".join(out), g


TAR = layer_tar(7)


def test_the_same_tar_gives_the_same_blob_however_it_is_cut() -> None:
    assert len(TAR) > 3 * PIECE  # several pieces, and a tail
    whole, g = compress(TAR, [])
    assert g.diff_id == "sha256:" + hashlib.sha256(TAR).hexdigest()
    assert g.digest == "sha256:" + hashlib.sha256(whole).hexdigest() and g.size == len(whole)
    assert gzip.decompress(whole) == TAR
    rng = random.Random(1)
    for cuts in ([PIECE] * 3, [1, PIECE - 1, PIECE + 1], [rng.randrange(1, 3 << 20) for _ in range(8)],
                 [65536] * 100):
        again, _ = compress(TAR, cuts)
        assert again == whole, cuts
    # No name and no time in the header: only the tar decides the bytes.
    assert whole[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3 * PIECE), max_size=6))
def test_any_cuts_give_the_same_blob(cuts: list[int]) -> None:
    data = TAR[:sum(cuts) + 1000]
    assert compress(data, cuts)[0] == compress(data, [])[0]


def test_the_compressor_is_named_by_what_decides_the_bytes() -> None:
    # A digest published with one compressor must not be matched against a blob made by another.
    assert COMPRESSOR.startswith("isal-") and f"piece-{PIECE}" in COMPRESSOR and "gzip-1" in COMPRESSOR


def test_the_cache_keeps_only_this_compressor_and_survives_anything() -> None:
    mine = KnownBlob("sha256:" + "a" * 64, 2048, "sha256:" + "b" * 64, 300, COMPRESSOR, ("r:5000/x",))
    other = KnownBlob("sha256:" + "c" * 64, 2048, "sha256:" + "d" * 64, 300, "zlib-6")
    text = render_known({mine.diff_id: mine, other.diff_id: other})
    assert parse_known(text) == {mine.diff_id: mine}
    assert mine.seen_in("r:5000/y").repositories == ("r:5000/x", "r:5000/y")
    assert mine.seen_in("r:5000/x") is mine
    for bad in ("", "[", "null", "[]", '{"layers": 3}', '{"layers": [1, {"diff_id": 1}]}', "[" * 5000,
                '{"layers": [{"diff_id": "sha256:x", "tar_size": "x", "digest": "d", "size": 1, "compressor": "c"}]}'):
        assert parse_known(bad) == {}


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400) | st.text(max_size=400))
def test_a_damaged_cache_file_is_read_as_empty_or_partial(junk: bytes | str) -> None:
    text = junk.decode("utf-8", "replace") if isinstance(junk, bytes) else junk
    for doc in (text, '{"layers": [' + text + "]}"):
        assert isinstance(parse_known(doc), dict)
