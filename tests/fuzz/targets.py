"""Fuzz targets: mutated profiles, locks, index pages, wheels, ELF files, validation plans and TOML files fed to
the real parsing code.

One module for both drivers: the test suite runs a few hundred `hypothesis` examples per kind
(tests/loopback/test_fuzz.py), `benchmarks/fuzz.py` runs 100,000 or more per kind on every core with the
same mutations drawn from `random`. The rule each target checks: whatever the bytes, the code either
returns or raises a `StackctlError` (the project's one hierarchy, which the CLI turns into an `error:`
line and exit 2 or 3); any other exception is a crash.

Inputs start from a seed corpus of valid files (the repository's profiles, a lock made from one, index
pages in both formats, wheels from tests/support/wheels.py, gcc-built libraries from
tests/support/elf_fixtures.py) and go through a list of mutations: byte flips, splices, interesting
integers written over the fields of the zip and ELF structures, and tokens known to break parsers
(huge numbers, `../`, NUL, format specs, broken IPv6 hosts). A mutation is plain data, so hypothesis
shrinks a failure to the fewest, smallest mutations of the smallest seed.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import random
import shutil
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackctl.errors import InputError, StackctlError

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("profile", "lock", "html", "json", "wheel", "elf", "cluster", "envelope", "dockerfile", "layout",
         "export", "pylock", "toml", "plan")

# --- mutations -------------------------------------------------------------------------------------
# ("flip", pos, value) | ("insert", pos, bytes) | ("delete", pos, length) | ("dup", pos, length)
# | ("int", pos, width, value) | ("token", pos, index) | ("truncate", pos)
Mutation = tuple[Any, ...]

INTERESTING = (0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
               0xFFFFFFFF, 1 << 40, (1 << 63) - 1, (1 << 64) - 1, 16, 24, 64, 4096)

# What the bounded TOML reader (stackctl/base/bounded.py) refuses, or must not mistake for it: keys of many
# parts, deep nesting, integers too long to convert, and the delimiters its scan must read as TOML does.
TOML_BOUNDS: tuple[bytes, ...] = (b"x" + b".a" * 70, b'."a"' * 70, b"." * 70, b"[" * 70, b"{a=" * 70,
                                  b"9" * 4301, b"1_" * 4301, b"0x" + b"1" * 5000, b"1." + b"1" * 5000,
                                  b'"""', b"'''", b'""""', b"\\\\", b'\\"', b"#", b"'", b'"', b"\r\n")

TOKENS: dict[str, tuple[bytes, ...]] = {
    "profile": (b"[[pins]]\n", b"[pins]\nx = {}\n", b"[[gate.probe]]\n", b"probe = {}\n", b"= [[[[[[[[",
                b"{a={b={c=1}}}",
                b'"../x.txt"', b'"/etc/passwd"', b'"a\\u0000b"', b"9" * 5000, b'"' + b"9" * 5000 + b'"',
                b"{python:>999999999}", b"{python.__class__}", b"{pins[torch][0]}", b"{python!r}",
                b'"http://[::1/"', b'"http://h:99999/"', b'"torch_musa<<2"', b'"2.2"', b'"2.2.0"',
                b"\xff\xfe", b"true", b"1979-05-27T07:32:00Z", b"[" * 1200, b"extends = \"../x\"\n",
                *TOML_BOUNDS),
    "dockerfile": (b"ARG STACK_IMAGE\n", b"FROM ${STACK_IMAGE}", b" AS ", b"\\\n", b"# syntax=x\n", b"# escape=`\n",
                   b"FROM --platform=$X ${STACK_IMAGE:-a} AS b\n", b"${", b"}", b"$STACK_IMAGE@sha256:",
                   b"ARG STACK_IMAGE=\n", b"\x00", b"\xff\xfe", b"ONBUILD FROM x\n", b"`\n", b"\r\n"),
    "lock": (b"1", b"null", b"[]", b"{}", b'"../evil.whl"', b'"/abs.whl"', b"9" * 5000, b"1e999",
             b'"x\\u0000y"', b"true", b"[" * 3000, b'"a\\nRUN x"', b'"' + b"9" * 4301 + b'"'),
    "pylock": (b"[[packages]]\n", b"[[packages.wheels]]\n", b'lock-version = "2.0"\n',
               b'version = "' + b"9" * 4301 + b'"', b"hashes = {}\n", b"upload-time = 1979-05-27T07:32:00Z\n",
               b'environments = ["os_name >"]\n',
               b"[" * 1200, b'marker = "python_version >"\n', b'name = "../x"\n', b"size = -1\n",
               b'url = "file:///etc/passwd"\n', b"{a={b={c=1}}}", b"\xff\xfe", b"requires-python = 3\n",
               b"size = " + b"9" * 4301 + b"\n", *TOML_BOUNDS),
    "toml": (b"[t]\n", b"[[t]]\n", b"a.b.c = 1\n", b"= [", b"]", b"{", b"}", b",", b"=", b"\n", b"\x00",
             b"\xff\xfe", b"1979-05-27T07:32:00.999Z", b"inf", b"-0x1", b"\\u0000", *TOML_BOUNDS),
    "plan": (b"[[trial]]\n", b"[[trial.metric]]\n", b"[trial.matrix]\nbs = [1, 2, 4]\n", b'files = ["../x"]\n',
             b"alpha = 1e999\n", b"repeat = -1\n", b'kind = "bench"\n', b"{out}", b"{python}", b"{bs}",
             b'command = ["{python:>999999999}"]\n', *TOML_BOUNDS),
    "html": (b"<a href=\"http://[::1/x-1.0-py3-none-any.whl\">x-1.0-py3-none-any.whl</a>",
             b"<a href=\"http://h:99999/x-1.0-py3-none-any.whl\">x-1.0-py3-none-any.whl</a>",
             b"<meta name=\"pypi:repository-version\" content=\"x.y\">",
             b"<meta name=\"pypi:repository-version\" content=\"99.0\">",
             b"torch-" + b"9" * 5000 + b"-py3-none-any.whl", b"<![CDATA[", b"<!", b"<a href=", b"#sha256=",
             b"&#99999999;", b"\x00", b"<base href=\"file:///\">", b"data-yanked", b"\xff\xfe"),
    "cluster": (b"ray://", b"[::1]", b":0", b":65536", b":99999999999999999999", b"[", b"]", b"auto", b"local",
                b"\x00", b"\n", b" ", b"u:p@", b"http://", b"x" * 300, b"9" * 5000, b"\xff\xfe", b"%00"),
    "layout": (b'"digest": "sha256:../../etc"', b'"mediaType": "application/vnd.oci.image.index.v1+json"',
               b'"size": -1', b'"size": 1e999', b'"manifests": []', b'"vnd.docker.reference.type"', b"\x00",
               b"\xff\xfe", b"9" * 5000, b"[" * 3000, b"null", b"{}"),
    "json": (b'"upload-time": "9999-12-31T23:59:59-23:59"', b'"upload-time": "0001-01-01T00:00:00+23:59"',
             b'"api-version": "x"', b'"api-version": "99.0"', b'"url": "http://[::1/x"', b'"url": "http://h:99999/"',
             b"9" * 5000, b"null", b"[]", b"{}", b"1e999", b'"size": -1', b'"yanked": 3', b"[" * 3000),
}


# Values a JSON document (a lock, a PEP 691 page) gets in place of one of its own: type confusion, bounds.
JSON_VALUES: tuple[Any, ...] = (None, 0, -1, 1.5, 1e308, True, "", [], {}, [[]], {"a": 1}, "../x.whl", "/abs.whl",
                                "a\u0000b", "a\nRUN x", "9" * 5000, "1." + "9" * 30, "x" * 70000,
                                "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "http://[::1/x",
                                "http://h:99999/x", "javascript:x", "sha256=zz", "2.2.0", "torch", "TORCH",
                                "torch-1.0-py3-none-any.whl", "cp310-linux_x86_64", "1.0", 1 << 70)


def _json_replace(data: bytes, pick: int, value_index: int) -> bytes:
    """The document with its `pick`-th value (depth first, keys included) replaced: a structured mutation
    that keeps the JSON valid, so the schema checks are what the case exercises."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return data
    slots: list[tuple[Any, Any]] = []
    todo: list[Any] = [doc]
    while todo:
        node = todo.pop()
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) \
            if isinstance(node, list) else []
        for key, value in items:
            slots.append((node, key))
            todo.append(value)
    if not slots:
        return data
    node, key = slots[pick % len(slots)]
    value = JSON_VALUES[value_index % len(JSON_VALUES)]
    if isinstance(node, dict) and value_index % 7 == 0:
        node.pop(key)  # a missing entry
    else:
        node[key] = value
    return json.dumps(doc).encode()


def apply(seed: bytes, mutations: Sequence[Mutation], kind: str) -> bytes:
    data = bytearray(seed)
    tokens = TOKENS.get(kind, TOKENS["lock"])
    for m in mutations:
        op, n = m[0], len(data)
        pos = m[1] % (n + 1) if n else 0
        if op == "flip" and n:
            data[pos % n] = m[2] & 0xFF
        elif op == "insert":
            data[pos:pos] = m[2]
        elif op == "delete":
            del data[pos:pos + m[2]]
        elif op == "dup":
            data[pos:pos] = data[pos:pos + m[2]]
        elif op == "token":
            data[pos:pos] = tokens[m[2] % len(tokens)]
        elif op == "replace_token":
            # a token in place of the value on the line at `pos`: type confusion in a profile or lock
            toml = kind in ("profile", "pylock", "toml", "plan")
            start = data.rfind(b"=", 0, pos) + 1 if toml else data.rfind(b":", 0, pos) + 1
            end = data.find(b"\n" if toml else b",", pos)
            end = n if end < 0 else end
            data[start:end] = b" " + tokens[m[2] % len(tokens)]
        elif op == "int" and n:
            width = m[2]
            at = (pos // width) * width
            value = m[3] & ((1 << (8 * width)) - 1)
            data[at:at + width] = value.to_bytes(width, "little")
        elif op == "truncate":
            del data[pos:]
        elif op == "json_value":
            data = bytearray(_json_replace(bytes(data), m[1], m[2]))
    return bytes(data)


def random_mutations(rng: random.Random, kind: str, size: int) -> list[Mutation]:
    """What `benchmarks/fuzz.py` draws: the same operations the hypothesis strategy generates."""
    out: list[Mutation] = []
    binary = kind in ("wheel", "elf")
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        pos = rng.randrange(size + 1)
        r = rng.random()
        if binary and r < 0.55:
            out.append(("int", pos, rng.choice((1, 2, 4, 8)), rng.choice(INTERESTING) if rng.random() < 0.8
                        else rng.getrandbits(64)))
        elif r < 0.25:
            out.append(("flip", pos, rng.getrandbits(8)))
        elif r < 0.45 and not binary:
            if kind in ("lock", "json", "envelope") and rng.random() < 0.7:
                out.append(("json_value", rng.getrandbits(16), rng.getrandbits(16)))
            else:
                out.append((rng.choice(("token", "replace_token")), pos, rng.getrandbits(16)))
        elif r < 0.6:
            out.append(("insert", pos, rng.randbytes(rng.randrange(1, 9))))
        elif r < 0.75:
            out.append(("delete", pos, rng.randrange(1, 64)))
        elif r < 0.9:
            out.append(("dup", pos, rng.randrange(1, 64)))
        else:
            out.append(("truncate", pos))
    return out


def mutation_strategy(kind: str) -> Any:
    """The hypothesis strategy for a list of mutations of one kind (imported lazily: a test extra)."""
    from hypothesis import strategies as st

    pos = st.integers(0, 1 << 20)
    ops = [st.tuples(st.just("flip"), pos, st.integers(0, 255)),
           st.tuples(st.just("insert"), pos, st.binary(min_size=1, max_size=8)),
           st.tuples(st.just("delete"), pos, st.integers(1, 64)),
           st.tuples(st.just("dup"), pos, st.integers(1, 64)),
           st.tuples(st.just("truncate"), pos)]
    if kind in ("wheel", "elf"):
        value = st.sampled_from(INTERESTING) | st.integers(0, (1 << 64) - 1)
        ops.append(st.tuples(st.just("int"), pos, st.sampled_from((1, 2, 4, 8)), value))
    else:
        ops += [st.tuples(st.sampled_from(("token", "replace_token")), pos, st.integers(0, 1 << 16))]
    if kind in ("lock", "json", "envelope"):
        ops += [st.tuples(st.just("json_value"), st.integers(0, 1 << 16), st.integers(0, 1 << 16))] * 3
    return st.lists(st.one_of(*ops), min_size=1, max_size=5)


# --- seeds -----------------------------------------------------------------------------------------
CLUSTERS = (b"10.0.0.5:6379", b"ray://head.example.internal:10001", b"[fd00::5]:6379")


@dataclass
class Corpus:
    """Valid inputs of every kind, made once per process."""

    profiles: dict[str, bytes]  # file name -> text, all of stacks/*.toml
    lock: bytes
    html: bytes
    json: bytes
    wheels: tuple[bytes, ...]
    elves: tuple[bytes, ...]
    clusters: tuple[bytes, ...] = CLUSTERS
    envelopes: tuple[bytes, ...] = ()  # a signed DSSE envelope, and the provenance statement inside it
    public_key: Any = None  # the key the envelope is signed with
    dockerfiles: tuple[bytes, ...] = ()
    layouts: tuple[bytes, ...] = ()  # the index.json of a build's OCI image layout
    layout: Path | None = None  # that layout, whose index.json the target replaces
    exports: tuple[bytes, ...] = ()  # an engine's export (`docker save`, the legacy format)
    pylocks: tuple[bytes, ...] = ()  # `export --format pylock`'s file of the lock above, one per target
    tomls: tuple[bytes, ...] = ()  # every TOML file of the repository, and the PEP 751 files above
    plans: tuple[bytes, ...] = ()  # the repository's validation plans
    plan_dir: Path | None = None  # beside the files the plans name: where the fuzzed plan is written

    def seeds(self, kind: str) -> tuple[bytes, ...]:
        return {"profile": tuple(self.profiles.values()), "lock": (self.lock,), "html": (self.html,),
                "json": (self.json,), "wheel": self.wheels, "elf": self.elves, "cluster": self.clusters,
                "envelope": self.envelopes, "dockerfile": self.dockerfiles, "layout": self.layouts,
                "export": self.exports, "pylock": self.pylocks, "toml": self.tomls, "plan": self.plans}[kind]


PROJECT = "torch"
_SHA = "0123456789abcdef" * 4


def _lock_text(profile_dir: Path, name: str) -> bytes:
    from stackctl.profile.loader import load_stack
    from stackctl.resolve.lock import ClosureEntry, Lock, LockedFile, LockedPin, TrainReport, dumps

    stack = load_stack(profile_dir / name)
    pins = []
    for p in stack.pins:
        files = tuple(LockedFile(t.label, f"{p.key.replace('-', '_')}-{p.version}-{t.interpreter}-{t.interpreter}-"
                                 f"{t.platform}.whl", f"https://index.invalid/files/{p.key}.whl", _SHA, 1234,
                                 "2026-01-01T00:00:00Z", "index", requires_dist=("numpy>=1",))
                      for t in stack.targets)
        pins.append(LockedPin(p.name, p.version, p.index, files, p.version, None, ("9.9 (aarch64 only)",)))
    target = stack.targets[0].label
    closure = (ClosureEntry(target, "numpy", "1.26.4", LockedFile(target, "numpy-1.26.4-py3-none-any.whl",
                            "https://index.invalid/numpy.whl", _SHA), (f"sha256:{_SHA}",)),)
    trains = (TrainReport("t", tuple(p.name for p in stack.pins[:2]), "2026-01-01T00:00:00Z",
                          "2026-01-01T01:00:00Z", 3600.0, ()),)
    lock = Lock(stack.name, stack.digest(), tuple(pins), closure, trains, ("a warning",))
    return dumps(lock).encode()


def _pages() -> tuple[bytes, bytes]:
    names = [f"torch-2.11.0.post{n}+musa5.2.0-cp310-cp310-linux_x86_64.whl" for n in (1, 2)]
    names += ["torch-2.12.0-cp312-cp312-manylinux_2_28_x86_64.whl", "torch-2.11.0.tar.gz",
              "other-1.0-py3-none-any.whl"]
    links = "\n".join(
        f'<a href="../../files/{n}#sha256={_SHA}" data-requires-python="&gt;=3.10"'
        f'{" data-yanked=&quot;bad&quot;" if i == 2 else ""} data-dist-info-metadata="sha256={_SHA}"'
        f' data-core-metadata="sha256={_SHA}">{n}</a><br/>' for i, n in enumerate(names))
    html = ("<!DOCTYPE html><html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            f"<base href=\"https://index.invalid/simple/torch/\"></head><body>{links}</body></html>")
    files = [{"filename": n, "url": f"../../files/{n}", "hashes": {"sha256": _SHA}, "requires-python": ">=3.10",
              "size": 1000 + i, "upload-time": f"2026-01-0{i + 1}T00:00:00Z", "yanked": i == 2,
              "core-metadata": {"sha256": _SHA}, "data-dist-info-metadata": True} for i, n in enumerate(names)]
    doc = {"meta": {"api-version": "1.1"}, "name": PROJECT, "files": files, "versions": ["2.11.0", "2.12.0"]}
    return html.encode(), json.dumps(doc, indent=1).encode()


def _elf_seeds(tmp: Path) -> tuple[bytes, ...]:
    from tests.support.elf_fixtures import build_libs, have_gcc

    if have_gcc():
        libs = build_libs(tmp / "libs")
        return tuple(p.read_bytes() for p in (libs.core, libs.kern, libs.ext_v2, libs.needs_missing))
    # without a compiler: the running interpreter's own libraries are real ELF files too
    import sysconfig

    found = sorted(Path(sysconfig.get_config_var("LIBDIR") or "/usr/lib").glob("libpython3*.so*"))[:1]
    return tuple(p.read_bytes() for p in found)


def _wheel_seeds(tmp: Path, elves: Sequence[bytes]) -> tuple[bytes, ...]:
    from tests.support.wheels import build_wheel

    tag = "cp310-cp310-linux_x86_64"
    lib = min(elves, key=len) if elves else b"\x7fELF"
    paths = [build_wheel(tmp / "w", "corelib", "1.0", tag=tag, requires_dist=["numpy>=1"],
                         files={"corelib/__init__.py": "", "corelib/lib/libcore.so.1": lib}),
             build_wheel(tmp / "w", "pure", "2.0", files={"pure/__init__.py": "X = 1\n"})]
    stored = tmp / "w" / "stored-1.0-py3-none-any.whl"
    with zipfile.ZipFile(stored, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("stored/lib.so", lib)
        z.writestr("stored-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: stored\nVersion: 1.0\n")
    # LZMA members carry their own header (a dictionary size the decoder allocates): mutations reach it here
    packed = tmp / "w" / "packed-1.0-py3-none-any.whl"
    with zipfile.ZipFile(packed, "w", compression=zipfile.ZIP_LZMA) as z:
        z.writestr("packed/lib.so", lib)
        z.writestr("packed-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: packed\nVersion: 1.0\n")
    return tuple(p.read_bytes() for p in [*paths, stored, packed])


def make_corpus(tmp: Path) -> Corpus:
    stacks = ROOT / "stacks"
    profiles = {p.name: p.read_bytes() for p in sorted(stacks.glob("*.toml"))}
    html, js = _pages()
    elves = _elf_seeds(tmp)
    envelopes, public = _envelope_seeds()
    dockerfiles = ((ROOT / "examples" / "app" / "Dockerfile").read_bytes(),
                   b"ARG BASE=x\nFROM scratch AS a\nFROM ${BASE} AS runtime\nRUN a \\\n  b\n")
    lock = _lock_text(stacks, "torch-2.11-post2.toml")
    pylocks = _pylock_seeds(profiles, lock)
    tomls = tuple(sorted({p.read_bytes() for d in ("stacks", "benchmarks", "examples", "tests/data")
                          for p in (ROOT / d).rglob("*.toml")} | {(ROOT / "pyproject.toml").read_bytes()}))
    validation = ROOT / "benchmarks" / "gpu-host" / "stacks" / "validation"
    shutil.copytree(validation, tmp / "plan")  # the plans beside the files they name
    plans = tuple(p.read_bytes() for p in (stacks / "validation" / "plan.toml", validation / "plan.toml",
                                           validation / "decode.toml"))
    return Corpus(profiles, lock, html, js, _wheel_seeds(tmp, elves), elves,
                  envelopes=envelopes, public_key=public, dockerfiles=dockerfiles,
                  layouts=(_layout_seed(tmp / "layout"),), layout=tmp / "layout", exports=(_export_seed(),),
                  pylocks=pylocks, tomls=tomls + pylocks, plans=plans, plan_dir=tmp / "plan")


def _index_urls(stack: Any) -> dict[str, str]:
    return {i.name: f"https://{i.name}.example.invalid/simple/" for i in stack.indexes}


def _pylock_seeds(profiles: dict[str, bytes], lock: bytes) -> tuple[bytes, ...]:
    from stackctl.profile.loader import load_stack
    from stackctl.resolve.lock import loads
    from stackctl.resolve.pylock import render_pylocks

    stack = load_stack("torch-2.11-post2.toml", _MemSource(profiles))
    files = render_pylocks(stack, loads(lock.decode()), _index_urls(stack))
    return tuple(text.encode() for text in files.values())


def _envelope_seeds() -> tuple[tuple[bytes, ...], Any]:
    """A provenance statement as publish writes it, alone and in an envelope signed with a fresh P-256 key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from stackctl.image.layout import canonical
    from stackctl.publish import attest
    from stackctl.verify.sign import envelope, load_private_key, load_public_key

    key = ec.generate_private_key(ec.SECP256R1())
    private = load_private_key(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()), "fuzz.key")
    public = load_public_key(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                           serialization.PublicFormat.SubjectPublicKeyInfo), "fuzz.pub")
    materials = [attest.Material("source", "git+https://example.invalid/x.git@" + "a" * 40, (("gitCommit", "a" * 40),),
                                 (("dirty", False),)),
                 attest.Material("lock", "file:stacks/x.lock", (("sha256", _SHA),)),
                 attest.Material("base-image", f"oci://127.0.0.1:5000/base@sha256:{_SHA}", (("sha256", _SHA),),
                                 (("layers", 1),)),
                 attest.Material("x-1.0-py3-none-any.whl", "http://h/x.whl", (("sha256", _SHA),),
                                 (("version", "1.0"),))]
    doc = attest.statement(subject="r/x", digest="sha256:" + _SHA, parameters={"stack": "x", "revision": "a" * 40},
                           internal={}, materials=materials, builder={"stackctl": "0"}, invocation="i",
                           started="2026-01-01T00:00:00Z", finished="2026-01-01T00:00:01Z")
    raw = canonical(doc)
    return (envelope(raw, private), raw), public


def _tar(members: dict[str, bytes]) -> bytes:
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _layout_seed(root: Path) -> bytes:
    """A one-image OCI image layout under `root` (the build's artefact); its index.json is the seed."""
    import hashlib

    def put(data: bytes) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (root / "blobs" / "sha256" / digest).write_bytes(data)
        return {"digest": "sha256:" + digest, "size": len(data)}

    layer = put(_tar({"opt/stackctl/sbom.cdx.json": b'{"bomFormat": "CycloneDX"}'}))
    config = put(json.dumps({"rootfs": {"type": "layers", "diff_ids": []}, "config": {"Labels": {}}}).encode())
    manifest = put(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                               "config": {**config, "mediaType": "application/vnd.oci.image.config.v1+json"},
                               "layers": [{**layer, "mediaType": "application/vnd.oci.image.layer.v1.tar"}]}).encode())
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    index = json.dumps({"schemaVersion": 2, "manifests": [
        {**manifest, "mediaType": "application/vnd.oci.image.manifest.v1+json"}]}).encode()
    (root / "index.json").write_bytes(index)
    return index


def _export_seed() -> bytes:
    """`docker save`'s export of a one-layer image in the legacy format (20.10's): the layer's tar, its
    config naming the layer's diff_id, and manifest.json naming both."""
    import hashlib

    layer = _tar({"etc/hostname": b"fuzz\n"})
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": {}},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": ["fuzz:1"], "Layers": ["0a/layer.tar"]}]).encode()
    return _tar({"0a/layer.tar": layer, config_name: config, "manifest.json": manifest})


# --- targets ---------------------------------------------------------------------------------------
class _MemSource:
    """Profiles from memory: the fuzzed file among the repository's real ones (so `extends` works)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def read(self, name: str) -> str:
        from stackctl.errors import InputError

        try:
            return self.files[name].decode("utf-8")
        except KeyError:
            raise InputError(f"{name}: no such file") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"{name}: cannot read: {exc}") from None

    def display(self, name: str) -> str:
        return name

    def exists(self, name: str) -> bool:
        return name in self.files


def target_profile(corpus: Corpus, data: bytes, seed_index: int = 0) -> None:
    """Load a fuzzed profile (in place of one of the real ones), then use it as every command would."""
    from stackctl.image.gatespec import gate_spec
    from stackctl.profile.loader import load_stack
    from stackctl.resolve.export import render_requirements
    from stackctl.review.diff import diff_stacks, rendered_tag

    names = list(corpus.profiles)
    name = names[seed_index % len(names)]
    source = _MemSource({**corpus.profiles, name: data})
    stack = load_stack(name, source)
    _schema_accepts(data)
    stack.digest()
    rendered_tag(stack)
    gate_spec(stack)
    render_requirements(stack)
    for t in stack.targets:
        render_requirements(stack, target=t.label)
    for other in names:
        diff_stacks(load_stack(other, _MemSource(corpus.profiles)), stack)


@functools.cache
def _schema_validator() -> Any:
    from jsonschema import Draft202012Validator

    from stackctl.profile import profile_schema

    return Draft202012Validator(profile_schema())


def _schema_accepts(data: bytes) -> None:
    """A file the loader accepts, the editors' schema (`stackctl schema`) accepts too: it never flags a good
    profile. (The converse does not hold: rules across keys and files are the loader's alone.)"""
    from stackctl.base.bounded import read_toml

    errors = [e.message for e in _schema_validator().iter_errors(read_toml(data.decode(), "fuzzed.toml"))]
    assert not errors, f"the schema refuses a profile the loader accepts: {errors}"


def target_lock(corpus: Corpus, data: bytes) -> None:
    """Read a fuzzed lock; diff it, export, plan the image and the wheelhouse from it."""
    from stackctl.image.render import plan_layers
    from stackctl.profile.loader import load_stack
    from stackctl.resolve.export import render_closure
    from stackctl.resolve.lock import EditedLock, loads
    from stackctl.resolve.pylock import render_pylocks
    from stackctl.resolve.run import held_by
    from stackctl.review.diff import diff_locks

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # as read_lock reads a lock file
        raise InputError(f"fuzzed.lock: cannot read the lock ({exc})") from None
    with contextlib.suppress(EditedLock):  # a mutation its digest does not cover is refused, said
        loads(text, "fuzzed.lock")
    # and as a hand that also rewrote the digest would leave it: what follows must hold for any content
    lock = loads(text, "fuzzed.lock", sealed=False)
    seed = loads(corpus.lock.decode(), "seed.lock")
    diff_locks(seed, lock)
    diff_locks(lock, seed)
    lock.digest()
    for p in lock.pins:  # outdated --from-lock: which pin holds the newest in line back
        held_by(lock, p.name, str(p.newest_in_line))
    stack = load_stack("torch-2.11-post2.toml", _MemSource(corpus.profiles))
    render_closure(stack, lock)
    with contextlib.suppress(StackctlError):  # export --format pylock: what the format refuses is said
        render_pylocks(stack, lock, _index_urls(stack))
    for t in stack.targets:
        lock.wheels_for(t.label)
        with contextlib.suppress(StackctlError):
            plan_layers(stack, lock, t.label)


def _target_page(data: bytes, ctype: str) -> None:
    from stackctl.index.pages import listing
    from stackctl.profile.model import Target
    from stackctl.resolve.newest import newest_in_line
    from stackctl.resolve.targets import best_wheel

    page = listing("fuzz", PROJECT, data, ctype, "https://index.invalid/simple/torch/")
    targets = [Target("3.10", "linux_x86_64"), Target("3.12", "linux_x86_64")]
    for version in ("2.11.0.post1+musa5.2.0", "2.12.0"):
        newest_in_line(version, page.files, targets)
        for t in targets:
            best_wheel([f for f in page.files if str(f.version) == version], t)


def target_html(corpus: Corpus, data: bytes) -> None:
    _target_page(data, "text/html")


def target_json(corpus: Corpus, data: bytes) -> None:
    _target_page(data, "application/vnd.pypi.simple.v1+json")


def target_wheel(corpus: Corpus, data: bytes) -> None:
    """Open a fuzzed wheel in place, read its metadata and every library, diff it with itself."""
    from stackctl.abi.check import StackWheel, check_abi
    from stackctl.abi.wheeldiff import diff_wheels, summarize
    from stackctl.wheels.archive import Limits, WheelReader
    from stackctl.wheels.scan import scan_wheel

    limits = Limits(max_member=64 << 20, max_total=256 << 20)
    with WheelReader(io.BytesIO(data), label="corelib-1.0-cp310-cp310-linux_x86_64.whl", limits=limits) as r:
        scan = scan_wheel(r, with_metadata=True, workers=1)
    summarize(diff_wheels(scan, scan))
    check_abi([StackWheel(scan, True)])
    # the facts `abi` keeps per sha256 read back as the scan they were written from
    import json

    from stackctl.base.jsonout import to_jsonable
    from stackctl.wheels.facts import _scan

    assert _scan(json.loads(json.dumps(to_jsonable(scan)))) == scan


def target_elf(corpus: Corpus, data: bytes) -> None:
    """Read a fuzzed ELF file as `abi` does (not-ELF is a finding, not an error), then check it."""
    from stackctl.abi.check import StackWheel, check_abi
    from stackctl.abi.inventory import split_version
    from stackctl.wheels.elf import NotElf, read_elf_bytes
    from stackctl.wheels.scan import ElfMember, WheelScan

    try:
        info = read_elf_bytes(data)
    except NotElf:
        return
    for _, version in info.required_versions():
        split_version(version)
    for version in info.version_defs:
        split_version(version)
    member = ElfMember("pkg/lib.so", "pkg/lib.so", info)
    scan = WheelScan("pkg-1.0-cp310-cp310-linux_x86_64.whl", "pkg", "1.0", ("linux_x86_64",), (), (member,), None)
    check_abi([StackWheel(scan, True)], allow=["libc.so.6"])
    # the loader's whole run time on the same file: an import that loads it, the driver's set, an optional
    # glob, and the manylinux policy of a tag (no inventory)
    from stackctl.abi.check import RunTime
    from stackctl.profile.model import OptionalMember
    from stackctl.profile.runtime import provider_sets

    tagged = WheelScan("pkg-1.0-cp310-cp310-manylinux_2_17_x86_64.whl", "pkg", "1.0", ("manylinux_2_17_x86_64",),
                       (), (member, ElfMember("pkg/_C.cpython-310-x86_64-linux-gnu.so", "pkg/_C.cpython-310-x86_64-"
                                              "linux-gnu.so", info)), None)
    check_abi([StackWheel(tagged, True, ())], runtime=RunTime(
        ("pkg",), provider_sets(("nvidia", "musa")), (OptionalMember("pkg/*.so", "fuzz"),), None, ("/opt/x",)))


def target_cluster(corpus: Corpus, data: bytes) -> None:
    """A cluster's address as `--cluster` and STACKCTL_CLUSTER take it: parsed, or a usage error naming it."""
    from stackctl.cluster import parse_address

    text = data.decode("utf-8", "replace")
    address = parse_address(text)
    assert 0 < address.port < 65536 and address.host and str(address) == text.strip()


def target_envelope(corpus: Corpus, data: bytes) -> None:
    """Open a fuzzed envelope with the key (as `verify --key` does), then hold its statement, and the fuzzed
    bytes taken as a statement themselves, against an image's labels and config as `verify` does."""
    from stackctl.verify.sign import envelope, open_envelope
    from stackctl.verify.verification import provenance_problems, retargeted

    labels = {"org.opencontainers.image.revision": "a" * 40, "io.stackctl.lock-digest": "sha256:" + _SHA}
    config = {"rootfs": {"diff_ids": ["sha256:" + _SHA] * 3}, "config": {"Labels": labels}}
    for raw in (data, envelope(data, None)):
        opened = open_envelope(raw, corpus.public_key, "fuzz.att")
        retargeted("the statement", opened.statement, "sha256:" + _SHA)
        provenance_problems(opened.statement, labels, config, {"x": ("1.0", _SHA)})


def target_dockerfile(corpus: Corpus, data: bytes) -> None:
    """Check a fuzzed project Dockerfile as [image.app]'s validation does: problems are answers, never a crash."""
    from stackctl.profile.app import dockerfile_problems

    text = data.decode("utf-8", "replace")  # the loader reads the file as UTF-8; undecodable is "no such file"
    for arg, stage in (("STACK_IMAGE", None), ("BASE", "runtime")):
        for line, message in dockerfile_problems(text, arg, stage):
            assert line is None or line >= 1, (line, message)
    # the images it builds FROM, as a BuildKit build reads them to name a held base by its registry's name
    from stackctl.engine.buildx import from_images, source_name

    for ref in from_images(text, {"STACK_IMAGE": "127.0.0.1:5000/p/app:1-stack"}):
        assert ref and "$" not in ref and not ref.isspace(), ref
        source_name(ref, [ref, f"127.0.0.1:5000/{ref}"], [f"{ref}@sha256:{'0' * 64}"])


def target_layout(corpus: Corpus, data: bytes) -> None:
    """Read a build's layout with a fuzzed index.json as publish does: an image, or one InputError."""
    from stackctl.image.artefact import read_layout

    assert corpus.layout is not None
    (corpus.layout / "index.json").write_bytes(data)
    got = read_layout(corpus.layout)
    assert got.layout == corpus.layout and got.size > 0


def target_export(corpus: Corpus, data: bytes) -> None:
    """Read a fuzzed engine export into a layout as the build's copy does: a layout, or None (skopeo then
    reads the export whole), or UnexpectedExport / TarError, which the copy answers the same way."""
    import tarfile
    import tempfile

    from stackctl.engine.ocicopy import UnexpectedExport, export_layout
    from stackctl.image.artefact import read_layout

    with tempfile.TemporaryDirectory() as tmp:
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as export:
                kept = export_layout(export, Path(tmp) / "source", {})
        except (tarfile.TarError, UnexpectedExport):
            return
        if kept is not None:  # what it wrote is a layout skopeo can read, every layer checked
            assert kept == 0 and read_layout(Path(tmp) / "source").layers


def target_pylock(corpus: Corpus, data: bytes) -> None:
    """Read a fuzzed PEP 751 lock file as `check --format pylock` reads one from the tree."""
    from stackctl.resolve.check import pylock_packages

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # read_existing reads with replacement characters: the same answer
        raise InputError(f"pylock.toml: not UTF-8 ({exc})") from None
    pylock_packages(text, "pylock.toml")


def _depth(value: Any) -> int:
    """How deep tables and arrays nest in a parsed TOML document, without recursion."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            todo += [(v, depth + 1) for v in node.values()]
        elif isinstance(node, list):
            todo += [(v, depth + 1) for v in node]
    return deepest


def _leaves(value: Any) -> list[Any]:
    """Every key and value of a parsed TOML document."""
    out, todo = [], [value]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            out += list(node)
            todo += list(node.values())
        elif isinstance(node, list):
            todo += node
        else:
            out.append(node)
    return out


def _decimal_digits(leaf: Any) -> int:
    """About how many digits a key or an integer has in decimal (an integer too long for `str` is not said)."""
    import math

    if isinstance(leaf, str):
        return sum(c.isdigit() for c in leaf)
    if isinstance(leaf, int) and not isinstance(leaf, bool):
        return math.ceil(abs(leaf).bit_length() * math.log10(2))
    return 0


def target_toml(corpus: Corpus, data: bytes) -> None:
    """The bounded TOML reader on a fuzzed TOML file. A file refused for a bound must be beyond it: the parser
    refuses the file too, or what it reads nests deeper than the bound (a key of N parts is N tables deep) or
    holds a key or an integer of that many digits; the reader never refuses a file for what a string or a
    comment holds."""
    import sys

    from stackctl.base.bounded import MAX_DIGITS, MAX_KEY_PARTS, MAX_NESTING, TomlError, read_toml

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # as a profile's source reads a file
        raise InputError(f"fuzzed.toml: not UTF-8 ({exc})") from None
    try:
        read_toml(text, "fuzzed.toml")
    except TomlError as exc:
        if exc.reason.startswith("malformed TOML") or "bytes; at most" in exc.reason:
            raise
        try:
            doc = tomllib.loads(text)
        except (ValueError, RecursionError):
            raise exc from None  # not TOML either: refused for a bound before the parser said so
        if exc.reason.startswith("a number of"):  # a key of that many digits, or a hexadecimal number
            assert any(_decimal_digits(leaf) >= MAX_DIGITS - 1 for leaf in _leaves(doc)), exc.reason
        else:
            bound = MAX_KEY_PARTS if exc.reason.startswith("a key of") else MAX_NESTING
            assert _depth(doc) > bound, f"{exc.reason}, yet the document nests {_depth(doc)} deep"
        raise


def target_plan(corpus: Corpus, data: bytes) -> None:
    """Read a fuzzed validation plan beside the files it names, as `ab` does; select a trial and repeat it."""
    from stackctl.ab import load_plan

    assert corpus.plan_dir is not None
    path = corpus.plan_dir / "plan.toml"
    path.write_bytes(data)
    plan = load_plan(path)
    plan.select(tuple(t.name for t in plan.trials[:1])).repeated(3, 5, allow_undecided=True)


TARGETS: dict[str, Callable[[Corpus, bytes], None]] = {
    "profile": target_profile, "lock": target_lock, "html": target_html, "json": target_json,
    "wheel": target_wheel, "elf": target_elf, "cluster": target_cluster, "envelope": target_envelope,
    "dockerfile": target_dockerfile, "layout": target_layout, "export": target_export, "pylock": target_pylock,
    "toml": target_toml, "plan": target_plan,
}


def run_case(corpus: Corpus, kind: str, seed_index: int, mutations: Sequence[Mutation]) -> bytes:
    """Mutate one seed and run the kind's target; return the input. StackctlError is an answer, not a crash."""
    seeds = corpus.seeds(kind)
    data = apply(seeds[seed_index % len(seeds)], mutations, kind)
    try:
        if kind == "profile":
            target_profile(corpus, data, seed_index)
        else:
            TARGETS[kind](corpus, data)
    except StackctlError:
        pass
    return data




# --- through the command line ----------------------------------------------------------------------
def cli_case(corpus: Corpus, kind: str, data: bytes, workdir: Path) -> str | None:
    """Run the command a user would on a fuzzed profile or lock, in this process; None when it behaved:
    exit 0, 1 or 2, and on 2 one JSON error object on stdout and `error:` lines (no traceback) on stderr."""
    import contextlib

    from stackctl.cli import main

    workdir.mkdir(parents=True, exist_ok=True)
    for name, text in corpus.profiles.items():
        (workdir / name).write_bytes(text)
    if kind == "profile":
        (workdir / "fuzz.toml").write_bytes(data)
        args = ["validate", str(workdir / "fuzz.toml"), "--json"]
    else:
        (workdir / "seed.lock").write_bytes(corpus.lock)
        (workdir / "fuzz.lock").write_bytes(data)
        args = ["diff", str(workdir / "seed.lock"), str(workdir / "fuzz.lock"), "--json"]
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code
    stdout, stderr = out.getvalue(), err.getvalue()
    if "Traceback" in stderr or code not in (0, 1, 2):
        return f"exit {code}: {stderr[-300:]}"
    try:
        doc = json.loads(stdout)
    except ValueError:
        return f"exit {code}: stdout is not one JSON object: {stdout[:200]!r}"
    if code == 2:
        lines = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
        if not lines or not isinstance(doc, dict) or doc.get("exit_code") != 2 or "error" not in doc:
            return f"exit 2 without an error line and a JSON error object: {stderr[-200:]!r} {stdout[:200]!r}"
    return None
