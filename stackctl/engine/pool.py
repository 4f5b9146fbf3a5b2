"""The engine pool: the Docker engines a matrix build spreads its cells over, named by the user.

`--engine NAME=URL` (repeatable) or a TOML file (`--engines FILE`) with an `[engines]` table of NAME = URL;
neither: the one engine of DOCKER_HOST. URLs are what the docker SDK takes: unix://PATH, tcp://HOST:PORT
(TLS from DOCKER_TLS_VERIFY and DOCKER_CERT_PATH, as for DOCKER_HOST) and ssh://[USER@]HOST (through the
ssh client and its configuration). stackctl never starts an engine: one that does not answer is reported
and left out, and the cells run on the rest.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stackctl.base.neterrors import cause_in_words
from stackctl.base.progress import Steps
from stackctl.engine.docker import DockerEngine, engine_address
from stackctl.errors import InputError, ServiceError, StackctlError
from stackctl.image.matrix import (
    MATRIX_RECORD,
    Event,
    Matrix,
    MatrixRequest,
    build_matrix,
    matrix_cells,
    read_matrix,
)

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
SCHEMES = ("unix://", "tcp://", "ssh://", "http://", "https://")
DEFAULT = "default"  # the name of DOCKER_HOST's engine when no pool is given


@dataclass(frozen=True)
class EngineSpec:
    name: str
    url: str | None  # None: DOCKER_HOST's engine

    @property
    def address(self) -> str:
        return engine_address(self.url)


@dataclass(frozen=True)
class Unreachable:
    name: str
    address: str
    reason: str


@dataclass(frozen=True)
class PoolMember:
    name: str
    engine: DockerEngine
    machine: str  # x86_64, aarch64: the engine's own architecture


@dataclass(frozen=True)
class Pool:
    members: tuple[PoolMember, ...]
    unreachable: tuple[Unreachable, ...] = ()


def parse_engine(value: str, where: str = "--engine") -> EngineSpec:
    name, sep, url = value.partition("=")
    if not sep or not NAME_RE.fullmatch(name):
        raise InputError(f"{where} {value!r}: give NAME=URL, e.g. second=unix:///run/stackctl-engine2.sock")
    return EngineSpec(name, check_url(url, f"{where} {name}"))


def check_url(url: str, where: str) -> str:
    if not url.startswith(SCHEMES) or len(url) <= url.index("://") + 3:
        raise InputError(f"{where}: {engine_address(url)!r} is not an engine address "
                         "(unix://PATH, tcp://HOST:PORT or ssh://[USER@]HOST)")
    return url


def read_engines_file(path: Path) -> tuple[EngineSpec, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the engine list: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    return parse_engines(text, str(path))


def parse_engines(text: str, path: str) -> tuple[EngineSpec, ...]:
    """The `[engines]` table of an engine list's text; `path` names it in messages."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    try:
        data = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, and an integer longer than Python converts
        raise InputError(f"{path}: not TOML: {exc}") from None
    table = data.get("engines")
    if not isinstance(table, dict) or not table:
        raise InputError(f"{path}: no [engines] table (NAME = \"URL\" lines)")
    specs = []
    for name, url in table.items():
        if not NAME_RE.fullmatch(name):
            raise InputError(f"{path}: engines.{name}: not an engine name (letters, digits, _ . -)")
        if not isinstance(url, str):
            raise InputError(f"{path}: engines.{name}: give the engine's URL as a string")
        specs.append(EngineSpec(name, check_url(url, f"{path}: engines.{name}")))
    return tuple(specs)


def engine_specs(values: Sequence[str], file: Path | None) -> tuple[EngineSpec, ...]:
    """The pool the user named, or DOCKER_HOST's engine alone; a name given twice is an error."""
    specs = [*(read_engines_file(file) if file is not None else ()), *(parse_engine(v) for v in values)]
    seen: set[str] = set()
    for s in specs:
        if s.name in seen:
            raise InputError(f"--engine {s.name}: the pool names this engine twice")
        seen.add(s.name)
    return tuple(specs) or (EngineSpec(DEFAULT, None),)


def connect(specs: Sequence[EngineSpec],
            make: Callable[[str | None], DockerEngine] = DockerEngine) -> Pool:
    """Reach every engine at once (an ssh engine takes a handshake); the ones that do not answer are left out."""
    results: dict[str, PoolMember | Unreachable] = {}

    def reach(spec: EngineSpec) -> None:
        try:
            engine = make(spec.url)
            results[spec.name] = PoolMember(spec.name, engine, engine.machine())
        except StackctlError as exc:
            reason = str(exc).partition(": ")[2] if str(exc).startswith("cannot reach") else str(exc)
            results[spec.name] = Unreachable(spec.name, spec.address, reason or str(exc))
        except Exception as exc:  # an error the adapter does not know (an ssh library's): this engine only
            results[spec.name] = Unreachable(spec.name, spec.address, cause_in_words(exc))

    threads = [threading.Thread(target=reach, args=(s,), daemon=True) for s in specs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    members = tuple(r for s in specs if isinstance(r := results[s.name], PoolMember))
    missing = tuple(r for s in specs if isinstance(r := results[s.name], Unreachable))
    return Pool(members, missing)


def reach_pool(specs: Sequence[EngineSpec], on_unreachable: Callable[[Unreachable], None]) -> Pool:
    """The pool's engines that answer, each one that does not told to `on_unreachable`; none answering is an
    error naming them all."""
    pool = connect(specs)
    for u in pool.unreachable:
        on_unreachable(u)
    if not pool.members:
        raise ServiceError("no engine of the pool answers: " + "; ".join(f"{u.name} ({u.address})"
                                                                           for u in pool.unreachable),
                           hint="start the engines, or name others with --engine")
    return pool


@dataclass(frozen=True)
class PoolBuild:
    """What `build --all` was asked for."""

    profiles: tuple[str, ...]
    targets: tuple[str, ...]
    engines: tuple[EngineSpec, ...]
    lock: Path | None = None
    wheelhouse: Path | None = None
    overrides: Mapping[str, str] = field(default_factory=dict)
    repository: str | None = None
    cache_repository: str | None = None
    allow_dirty: bool = False
    revision: str | None = None
    ref: str | None = None
    created: str | None = None
    record_dir: Path = Path("build")
    no_cache: bool = False
    send_wheels: bool = False
    builder: str | None = None  # --builder; None: STACKCTL_BUILDER, else auto


def build_over_pool(order: PoolBuild, env: Mapping[str, str], on_unreachable: Callable[[Unreachable], None],
                    on_event: Event, on_step: Callable[[str, str], Steps] | None = None) -> tuple[Matrix, Pool]:
    """`build --all` as one call: the cells prepared (bad input fails before any engine is asked), the pool
    reached, each engine's builder chosen as for a single build (a BuildKit engine bakes its queue), the matrix
    built over it."""
    from stackctl.engine.building import chosen_builder, with_builder

    builder = chosen_builder(order.builder, env)
    cells = matrix_cells(order.profiles, order.targets, lock=order.lock, record_dir=order.record_dir,
                         revision=order.revision, ref=order.ref, created=order.created, allow_dirty=order.allow_dirty,
                         env=env)
    pool = reach_pool(order.engines, on_unreachable)
    urls = {s.name: s.url for s in order.engines}

    def told(name: str) -> Callable[[str], None]:
        return lambda line: on_event(name, "engine", line)

    builders = {m.name: with_builder(m.engine, builder, url=urls.get(m.name), say=told(m.name))
                for m in pool.members}
    for name, engine in builders.items():
        on_event(name, "engine", f"builder: {getattr(engine, 'builder', 'classic')}")
    req = MatrixRequest(cells, {m.name: m.machine for m in pool.members},
                        {m.name: m.engine.address for m in pool.members}, order.repository, order.cache_repository,
                        order.wheelhouse, order.record_dir, order.no_cache, order.overrides, order.send_wheels)
    return build_matrix(req, builders, on_event, on_step), pool


@dataclass(frozen=True)
class Published:
    stack: str
    target: str
    engine: str | None
    tag: str
    result: str  # published | failed
    digest: str | None = None
    image_id: str | None = None
    error: str | None = None
    exit_code: int = 0


def _recorded_spec(name: str, address: str | None) -> EngineSpec:
    """The engine a matrix record names: its URL, or DOCKER_HOST's engine where the pool was that one alone
    (the record keeps its address in words, `unix:///... (DOCKER_HOST)`, not as a URL to reach)."""
    if address is None or address.endswith(("(DOCKER_HOST)", "(DOCKER_HOST is not set)")):
        return EngineSpec(name, None)
    return EngineSpec(name, address)


def publish_over_pool(record_dir: Path, engines: Sequence[EngineSpec], repository: str | None,
                      on_event: Event) -> tuple[Published, ...]:
    """Every cell the last `build --all` built (RECORD_DIR/matrix.json), published from the engine that built
    it: the one of that name in `engines`, else the address the record keeps. A cell that fails to publish
    is the cell's result (with its error and exit code); the others go on."""
    from stackctl.engine.publishing import publish_image
    from stackctl.profile.locate import load_profile

    cells = [c for c in read_matrix(record_dir / MATRIX_RECORD) if c.result == "built"]
    if not cells:
        raise InputError(f"{record_dir / MATRIX_RECORD}: no built cell to publish")
    given = {s.name: s for s in engines}
    specs = {c.engine or "": given.get(c.engine or "") or _recorded_spec(c.engine or "", c.address) for c in cells}
    pool = connect(list(specs.values()))
    reached = {m.name: m.engine for m in pool.members}
    out: list[Published] = []
    for c in cells:
        name = c.engine or ""
        try:
            if name not in reached:
                raise ServiceError(f"{c.stack} {c.target}: engine {name} ({specs[name].address}) does not answer")
            stack = load_profile(c.profile or c.stack)
            pub = publish_image(stack, Path(c.lock or ""), record_dir / "publications.jsonl", repository,
                                build_record=record_dir / f"{c.stack}.build.json")
            on_event(name, f"{c.stack} {c.target}", f"published {pub.tag} {pub.digest}")
            out.append(Published(c.stack, c.target, c.engine, pub.tag, "published", pub.digest, pub.image_id))
        except StackctlError as exc:
            out.append(Published(c.stack, c.target, c.engine, c.image, "failed", None, c.image_id, str(exc),
                                 exc.exit_code))
    return tuple(out)
