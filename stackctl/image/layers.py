"""Reading a layer's tar: the image's own records (the SBOM, the installed list) from its small top layers."""

from __future__ import annotations

from collections.abc import Iterable


def tar_files(tar_bytes: bytes, wanted: Iterable[str]) -> dict[str, bytes]:
    """The regular files of a layer's tar whose paths are in `wanted` (compared without a leading / or ./),
    keyed by their absolute path; tarfile.TarError when the bytes are not a tar."""
    import io
    import tarfile

    names = {w.lstrip("/") for w in wanted}
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        for m in tar:
            name = m.name.lstrip("./").lstrip("/")
            if name in names and m.isfile():
                f = tar.extractfile(m)
                if f is not None:
                    out["/" + name] = f.read()
    return out
