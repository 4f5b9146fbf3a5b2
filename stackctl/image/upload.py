"""Push an image by digest through the registry API, its layers compressed here.

The engine gives each layer's uncompressed tar (its export stream); the layers the registry lacks are
compressed with `layers.Gzip` while they stream, several at once, and uploaded as they are compressed;
the ones this machine already compressed are found by digest (HEAD) or mounted from another repository
of the same registry without a byte sent. Then the reproducible config and the manifest go up by digest:
no tag moves here. `check_pushed` compares the registry's copy with what was sent, digest by digest,
without reading back a layer that was just hashed on its way out.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import queue
import tarfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from stackctl.base.files import write_atomic
from stackctl.base.progress import Progress
from stackctl.errors import ServiceError, StackctlError
from stackctl.image.attest import canonical, compare_with_build, reproducible_config
from stackctl.image.layers import COMPRESSOR, PIECE, Gzip, KnownBlob, image_manifest, parse_known, render_known
from stackctl.image.protocols import RegistryApi

SMALL_LAYER = 64 << 20  # a layer tar read whole into memory (the image's own records live in such layers)
BLOCK = 32 << 20  # compressed bytes per PATCH of an upload
EMPTY_JSON = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # of b"{}"
JOBS = 3  # layers compressed and uploaded at once; the engine's export stream feeds them in turn


class PushApi(RegistryApi, Protocol):
    def blob_size(self, repository: str, digest: str) -> int | None: ...
    def mount_blob(self, repository: str, digest: str, source: str) -> bool: ...
    def upload(self, repository: str, pieces: Iterator[bytes], digest: Any) -> str: ...


class Exporter(Protocol):
    def export(self, ref: str) -> Iterator[bytes]: ...


class StoredLayer(Protocol):
    """One layer's tar as the engine's store holds it (engine/layerstore.py), read without the export."""

    @property
    def diff_id(self) -> str: ...
    @property
    def size(self) -> int: ...
    def pieces(self) -> Iterator[bytes]: ...


class LayerSource(Protocol):
    def config(self, image_id: str) -> bytes | None: ...
    def layer(self, diff_ids: tuple[str, ...], index: int) -> StoredLayer | None: ...


@dataclass(frozen=True)
class Pushed:
    """An image in the registry by digest (no tag yet) and how it got there."""

    digest: str
    manifest: bytes
    config_digest: str
    config: dict[str, Any]
    layers: tuple[KnownBlob, ...]
    compressed: int = 0  # layers compressed and uploaded here
    sent_bytes: int = 0  # compressed layer bytes uploaded
    found: int = 0  # layers the repository had already
    mounted: int = 0  # layers linked from another repository of the registry
    exported: bool = False  # whether the engine's export was read at all
    files: Mapping[str, bytes] = field(default_factory=dict)  # the image's own records, when exported

    @property
    def media_type(self) -> str:
        return str(json.loads(self.manifest)["mediaType"])


class _Chunks(io.RawIOBase):
    """A file over an iterator of byte strings (the engine's stream), for tarfile's stream mode."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._left = chunks, memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        while not self._left:
            try:
                self._left = memoryview(next(self._chunks))
            except StopIteration:
                return 0
        n = min(len(buf), len(self._left))
        buf[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


class _Upload:
    """One layer compressed and uploaded on its own thread, fed pieces of its tar by the export reader."""

    def __init__(self, registry: PushApi, repository: str) -> None:
        self.gz = Gzip()
        self.error: BaseException | None = None
        self.digest = ""
        self._q: queue.Queue[bytes | None] = queue.Queue(maxsize=8)
        self._done = threading.Event()
        self._aborted = False
        self._thread = threading.Thread(target=self._run, args=(registry, repository), daemon=True)
        self._thread.start()

    def _blocks(self) -> Iterator[bytes]:
        out = bytearray()
        while (piece := self._q.get()) is not None:
            if self._aborted:
                raise ServiceError("the export stopped")
            out += self.gz.feed(piece)
            if len(out) >= BLOCK:
                yield bytes(out)
                out.clear()
        out += self.gz.finish()
        yield bytes(out)

    def _run(self, registry: PushApi, repository: str) -> None:
        try:
            self.digest = registry.upload(repository, self._blocks(), lambda: self.gz.digest)
        except BaseException as exc:  # handed to the reader, which raises it
            self.error = exc
        finally:
            self._done.set()

    def feed(self, piece: bytes | None) -> None:
        while not self._done.is_set():
            try:
                self._q.put(piece, timeout=0.2)
                return
            except queue.Full:
                continue
        self.raise_error()

    def wait(self) -> KnownBlob:
        while not self._done.wait(0.2):
            pass
        self.raise_error()
        return KnownBlob(self.gz.diff_id, self.gz.plain_size, self.digest, self.gz.size, COMPRESSOR)

    def abort(self) -> None:
        """The reader failed: end the upload without finishing the blob."""
        self._aborted = True
        with contextlib.suppress(queue.Full):  # a full queue: the worker sees the flag at its next piece
            self._q.put_nowait(b"")

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def raise_error(self) -> None:
        if isinstance(self.error, StackctlError):
            raise self.error
        if self.error is not None:
            raise ServiceError(f"a layer upload stopped: {self.error}") from self.error


def _records(tar_bytes: bytes, wanted: tuple[str, ...]) -> dict[str, bytes]:
    from stackctl.image.layers import tar_files

    try:
        return tar_files(tar_bytes, wanted)
    except tarfile.TarError:
        return {}


@dataclass
class _Pass:
    made: dict[str, KnownBlob] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)  # diff_ids read and hashed, uploaded or not
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)  # per small layer's diff_id
    config: bytes | None = None


def _export_pass(engine: Exporter, registry: PushApi, repository: str, ref: str, image_id: str,
                 want: set[str], skip_sizes: set[int], wanted_files: tuple[str, ...],
                 transfer: Progress | None) -> _Pass:
    """Read the engine's export once: every layer in `want` compressed and uploaded; a large layer whose
    size is in `skip_sizes` (a layer the registry has) only hashed."""
    out = _Pass()
    running: list[_Upload] = []
    config_name = image_id.removeprefix("sha256:") + ".json"

    def start() -> _Upload:
        while sum(u.running for u in running) >= JOBS:
            for u in running:
                if not u.running:
                    u.raise_error()
            threading.Event().wait(0.05)
        job = _Upload(registry, repository)
        running.append(job)
        return job

    if transfer:
        transfer("reading the image from the engine", 0, 1)
    reader = io.BufferedReader(_Chunks(engine.export(ref)), PIECE)
    try:
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for m in tar:
                f = tar.extractfile(m) if m.isfile() else None
                if f is None:
                    continue
                if m.name == config_name:
                    out.config = f.read()
                    continue
                if not m.name.endswith("/layer.tar"):
                    continue
                label = f"push layer {m.name[:12]}"
                if m.size <= SMALL_LAYER:
                    data = f.read()
                    diff_id = "sha256:" + hashlib.sha256(data).hexdigest()
                    out.seen.add(diff_id)
                    out.files[diff_id] = _records(data, wanted_files)
                    if diff_id in want:
                        job = start()
                        for at in range(0, len(data), PIECE):
                            job.feed(data[at:at + PIECE])
                            if transfer:
                                transfer(label, min(at + PIECE, len(data)), len(data))
                        job.feed(None)
                    continue
                if m.size in skip_sizes:
                    h = hashlib.sha256()
                    while piece := f.read(PIECE):
                        h.update(piece)
                    out.seen.add("sha256:" + h.hexdigest())
                    continue
                job, done = start(), 0
                while piece := f.read(PIECE):
                    job.feed(piece)
                    done += len(piece)
                    if transfer:
                        transfer(label, done, m.size)
                job.feed(None)
    except BaseException as exc:
        for job in running:
            if job.running:
                job.abort()
        if isinstance(exc, tarfile.TarError):
            raise ServiceError(f"{ref}: the engine's export is not a readable tar ({exc})") from None
        raise
    for job in running:
        blob = job.wait()
        out.seen.add(blob.diff_id)
        out.made[blob.diff_id] = blob
    if transfer:
        transfer("reading the image from the engine", 1, 1)
    return out


class _Dropped(Exception):
    """An upload left uncommitted: its tar did not hash to the diff_id it was read for (the export gives
    that layer instead), or publish is stopping."""


def _store_pass(store: LayerSource, registry: PushApi, repository: str, diff_ids: tuple[str, ...], want: set[str],
                wanted_files: tuple[str, ...], transfer: Progress | None) -> _Pass:
    """Every layer in `want` that the engine's store has, read from it, compressed and uploaded, several at
    once; each tar is hashed on its way and an upload whose tar is not the diff_id it was read for is never
    committed (its closing PUT is not sent)."""
    out = _Pass()
    lock, stop = threading.Lock(), threading.Event()
    layers = [t for i, d in enumerate(diff_ids) if d in want and d not in diff_ids[:i]
              and (t := store.layer(diff_ids, i)) is not None]

    def one(tar: StoredLayer) -> tuple[KnownBlob, dict[str, bytes]] | None:
        gz, small = Gzip(), bytearray() if tar.size <= SMALL_LAYER else None
        label = f"push layer {tar.diff_id.removeprefix('sha256:')[:12]}"

        def blocks() -> Iterator[bytes]:
            block = bytearray()
            for piece in tar.pieces():
                if stop.is_set():
                    raise _Dropped
                if small is not None:
                    small.extend(piece)
                block += gz.feed(piece)
                if transfer:
                    with lock:
                        transfer(label, gz.plain_size, max(tar.size, gz.plain_size))
                if len(block) >= BLOCK:
                    yield bytes(block)
                    block.clear()
            block += gz.finish()
            if gz.diff_id != tar.diff_id:
                raise _Dropped
            yield bytes(block)

        try:
            digest = registry.upload(repository, blocks(), lambda: gz.digest)
        except (_Dropped, OSError, ValueError):  # or a file changed or vanished under the store
            return None
        records = _records(bytes(small), wanted_files) if small is not None else {}
        return KnownBlob(gz.diff_id, gz.plain_size, digest, gz.size, COMPRESSOR), records

    # Daemon threads, as the export pass's: a Ctrl-C or a failed upload ends publish at once, even while
    # another upload waits on the network; the uploads left behind are never committed.
    results: list[tuple[KnownBlob, dict[str, bytes]] | None] = [None] * len(layers)
    errors: list[BaseException] = []
    slots = threading.Semaphore(JOBS)

    def run(n: int, tar: StoredLayer) -> None:
        try:
            results[n] = one(tar)
        except BaseException as exc:  # handed to the caller's thread, which raises it
            errors.append(exc)
        finally:
            slots.release()

    try:
        threads = []
        for n, tar in enumerate(layers):
            while not slots.acquire(timeout=0.2) and not errors:
                pass
            if errors:
                break
            threads.append(threading.Thread(target=run, args=(n, tar), daemon=True))
            threads[-1].start()
        for thread in threads:
            while thread.is_alive() and not errors:
                thread.join(0.2)
    finally:
        stop.set()  # the others stop at their next piece (all are done, unless something failed)
    if errors:
        if isinstance(errors[0], StackctlError):
            raise errors[0]
        raise ServiceError(f"a layer upload stopped: {errors[0]}") from errors[0]
    for got in results:
        if got is not None:
            out.made[got[0].diff_id] = got[0]
            out.files[got[0].diff_id] = got[1]
    return out


def _take_files(files: dict[str, bytes], got: _Pass, diff_ids: tuple[str, ...]) -> None:
    for diff_id in reversed(diff_ids):  # the top layer's copy of a path wins
        for path, data in got.files.get(diff_id, {}).items():
            files.setdefault(path, data)


def _config_file(known_file: Path, image_id: str) -> Path:
    return known_file.parent / "configs" / (image_id.removeprefix("sha256:") + ".json")


def _cached_config(known_file: Path | None, image_id: str) -> bytes | None:
    """The engine's config of `image_id` as an earlier publish read it; its hash is the id, so a changed
    file is simply not used."""
    if known_file is None:
        return None
    try:
        data = _config_file(known_file, image_id).read_bytes()
    except OSError:
        return None
    return data if "sha256:" + hashlib.sha256(data).hexdigest() == image_id else None


def _remember(known_file: Path | None, known: dict[str, KnownBlob], image_id: str, config: bytes) -> None:
    """The cache only saves work: a cache that cannot be written costs a compression next time, no more."""
    if known_file is None:
        return
    try:
        fresh = parse_known(known_file.read_text(encoding="utf-8")) if known_file.exists() else {}
        fresh.update(known)
        write_atomic(known_file, render_known(fresh))
        write_atomic(_config_file(known_file, image_id), config)
    except OSError:
        pass


def push_image(engine: Exporter, registry: PushApi, repository: str, ref: str, image_id: str,
               diff_ids: tuple[str, ...], epoch: int, *, known_file: Path | None = None,
               wanted_files: tuple[str, ...] = (), transfer: Progress | None = None,
               store: LayerSource | None = None) -> Pushed:
    """Every blob of `ref` in `repository` (found, mounted or uploaded), then its reproducible config and
    the manifest, by digest only. The layers to send, and the config, come from the engine's `store` where
    it has them; the engine's export gives the rest (it writes out the whole image before its first byte)."""
    known: dict[str, KnownBlob] = {}
    if known_file is not None and known_file.exists():
        try:
            known = parse_known(known_file.read_text(encoding="utf-8"))
        except OSError:
            known = {}
    # One request on this thread first: the client settles the registry's scheme and its push login once,
    # before several uploads start at the same time.
    registry.blob_size(repository, EMPTY_JSON)
    present: dict[str, KnownBlob] = {}
    found = mounted = 0
    for diff_id in dict.fromkeys(diff_ids):
        blob = known.get(diff_id)
        if blob is None:
            continue
        if registry.blob_size(repository, blob.digest) == blob.size:
            present[diff_id], found = blob.seen_in(repository), found + 1
            continue
        for source in reversed(blob.repositories):
            if source != repository and registry.mount_blob(repository, blob.digest, source) and \
                    registry.blob_size(repository, blob.digest) == blob.size:
                present[diff_id], mounted = blob.seen_in(repository), mounted + 1
                break
    config = _cached_config(known_file, image_id)
    want = {d for d in diff_ids if d not in present}
    made: dict[str, KnownBlob] = {}
    files: dict[str, bytes] = {}
    exported = False
    if store is not None and (want or config is None):
        config = config or store.config(image_id)
        got = _store_pass(store, registry, repository, diff_ids, want, wanted_files, transfer)
        made.update(got.made)
        _take_files(files, got, diff_ids)
        want -= set(made)
    if want or config is None:
        exported = True
        skip = {b.tar_size for b in present.values() if b.tar_size > SMALL_LAYER}
        for _ in range(2):  # a second pass only when a layer to push had the size of one the registry has
            got = _export_pass(engine, registry, repository, ref, image_id, want, skip, wanted_files, transfer)
            config = got.config if got.config is not None else config
            made.update(got.made)
            _take_files(files, got, diff_ids)
            stray = set(got.made) - set(diff_ids)
            if stray:
                raise ServiceError(f"{ref}: the engine exported a layer the image does not list ({min(stray)})")
            want -= set(made)
            if not want:
                break
            skip = set()
        if want:
            raise ServiceError(f"{ref}: the engine's export lacks {len(want)} of the image's layers "
                               f"({min(want)[:19]}...)")
    if config is None or "sha256:" + hashlib.sha256(config).hexdigest() != image_id:
        raise ServiceError(f"{ref}: the engine's export holds no config hashing to the image id {image_id[:19]}")
    blobs = {**present, **{d: b.seen_in(repository) for d, b in made.items()}}
    _remember(known_file, blobs, image_id, config)
    doc = reproducible_config(json.loads(config), epoch)
    data = canonical(doc)
    config_digest = registry.put_blob(repository, data)
    manifest = canonical(image_manifest(data, config_digest, (blobs[d] for d in diff_ids)))
    digest = registry.put_manifest(repository, "sha256:" + hashlib.sha256(manifest).hexdigest(), manifest,
                                   str(json.loads(manifest)["mediaType"]))
    return Pushed(digest, manifest, config_digest, doc, tuple(blobs[d] for d in diff_ids),
                  compressed=len(made), sent_bytes=sum(b.size for b in made.values()), found=found,
                  mounted=mounted, exported=exported, files=files)


def check_pushed(registry: PushApi, repository: str, pushed: Pushed, diff_ids: tuple[str, ...],
                 labels: Mapping[str, str]) -> list[str]:
    """What differs between the registry's copy and what was sent: the manifest by digest (its bytes),
    the config (diff_ids and labels against the build) and each layer blob's presence and size. The layer
    bytes were hashed here on their way out and the registry checked each upload against that digest."""
    got = registry.manifest(repository, pushed.digest)
    if got is None:
        return [f"the registry has no manifest {pushed.digest}"]
    problems = [] if got[1] == pushed.manifest else [f"the registry's manifest {pushed.digest} is not the one sent"]
    problems += compare_with_build(registry, repository, pushed.digest, diff_ids, labels, stream_layers=False)
    for n, blob in enumerate(pushed.layers, 1):
        size = registry.blob_size(repository, blob.digest)
        if size != blob.size:
            problems.append(f"layer {n} ({blob.digest[:19]}) is " + (
                "not in the registry" if size is None else f"{size} bytes in the registry, {blob.size} sent"))
    return problems
