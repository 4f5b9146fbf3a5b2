"""The engine pool: the Docker engines a matrix build spreads its cells over, named by the user, and reached.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from stackctl.base.neterrors import cause_in_words
from stackctl.engine.docker import DockerEngine, engine_address
from stackctl.errors import InputError, ServiceError, StackctlError

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


def recorded_spec(name: str, address: str | None) -> EngineSpec:
    """The engine a matrix record names: its URL, or DOCKER_HOST's engine where the pool was that one alone
    (the record keeps its address in words, `unix:///... (DOCKER_HOST)`, not as a URL to reach)."""
    if address is None or address.endswith(("(DOCKER_HOST)", "(DOCKER_HOST is not set)")):
        return EngineSpec(name, None)
    return EngineSpec(name, address)
