"""The dependency closure of a stack, per target, from a real resolver: uv.

uv resolves for a Python version and platform other than the running one (`--python-version`,
`--python-platform`), which pip-compile cannot, and writes a PEP 751 `pylock.toml` with every file's URL,
size, upload time and sha256, so the lock records the closure without a second round of index queries.

Pins from a private index must not be looked for on the public one (it carries unrelated projects with
the same names). Every non-pip index goes to uv as a named `--index`, searched before the public
`--default-index`, under uv's `first-index` strategy: a name found on a private index is taken from
there only. Credentials reach uv through its per-index environment variables, never its command line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename

from stackctl.base.concurrency import parallel, run_child
from stackctl.base.times import utc_iso
from stackctl.base.urls import strip_userinfo, with_userinfo
from stackctl.errors import CheckFailed, InputError, Problems, ServiceError, StackctlError
from stackctl.index.config import IndexEndpoint, tls_verify
from stackctl.index.pages import IndexedFile
from stackctl.profile.model import Stack, Target
from stackctl.resolve.lock import ClosureEntry, Lock, LockedFile
from stackctl.resolve.targets import DEFAULT_GLIBC, best_wheel


def uv_binary() -> str:
    try:
        from uv import find_uv_bin  # the `uv` distribution ships the binary

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise InputError("the closure needs uv, which is not installed",
                     hint="pip install uv, or run with --no-closure")


def uv_platform(t: Target, glibc: tuple[int, int] = DEFAULT_GLIBC) -> str:
    arch = t.platform.removeprefix("linux_")
    return f"{arch}-manylinux_{glibc[0]}_{glibc[1]}"


def _env_name(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def uv_command(stack: Stack, eps: Mapping[str, IndexEndpoint], t: Target, *, offline: bool = False,
               cache_dir: Path | None = None, uv: str | None = None,
               mirror: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The uv command line and the extra environment (credentials) for one target. `mirror`: the URL uv is
    to read a named index at instead (stackctl's loopback mirror, which holds the credentials itself)."""
    public = [i for i in stack.indexes if i.from_pip]
    default = eps[public[0].name] if public else eps[stack.indexes[-1].name]
    cmd = [uv or uv_binary(), "pip", "compile", "-", "--format", "pylock.toml", "--no-header", "--no-config",
           "--quiet", "--python-version", t.python, "--python-platform", uv_platform(t),
           "--no-python-downloads", "--index-strategy", "first-index"]
    env: dict[str, str] = {}
    if mirror is not None and default.name in mirror:  # a stack of named indexes only: the last is the default
        cmd += ["--default-index", mirror[default.name]]
    elif default.credentials is None:
        cmd += ["--default-index", default.url]
    else:
        # uv takes a default index's credentials only inside its URL: give that URL through the
        # environment, never on the command line (which every user of the machine can read)
        env["UV_DEFAULT_INDEX"] = with_userinfo(default.url, default.credentials.username, default.credentials.password)
    for i in stack.indexes:
        ep = eps[i.name]
        if ep is default:
            continue
        name = "stackctl-" + re.sub(r"[^a-z0-9-]", "-", i.name.lower())
        if mirror is not None and i.name in mirror:
            cmd += ["--index", f"{name}={mirror[i.name]}"]
            continue
        cmd += ["--index", f"{name}={ep.url}"]
        if ep.credentials is not None:
            env[f"UV_INDEX_{_env_name(name)}_USERNAME"] = ep.credentials.username
            env[f"UV_INDEX_{_env_name(name)}_PASSWORD"] = ep.credentials.password
    if offline:
        cmd.append("--offline")
    # no cache of ours (--no-cache): none of uv's either, or a stale uv cache could outlive the fresh pins
    cmd += ["--cache-dir", str(cache_dir)] if cache_dir is not None else ["--no-cache"]
    return cmd, env


def _scrub(text: str, eps: Mapping[str, IndexEndpoint]) -> str:
    """uv redacts passwords in what it prints; this makes sure none reaches our output if it did not."""
    for ep in eps.values():
        if ep.credentials is not None and ep.credentials.password:
            for secret in {ep.credentials.password, quote(ep.credentials.password, safe="")}:
                text = text.replace(secret, "***")
    return text


def _strip(url: str) -> str:
    return urlsplit(strip_userinfo(url))._replace(fragment="").geturl()


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return None


def entries_from_pylock(data: Mapping[str, Any], t: Target, pinned: set[NormalizedName]) -> tuple[ClosureEntry, ...]:
    """Closure entries for `t` from a parsed pylock.toml, leaving out the stack's own pins."""
    out = []
    for pkg in data.get("packages", ()):
        name = canonicalize_name(pkg["name"])
        if name in pinned:
            continue
        version = str(pkg.get("version", ""))
        files: list[IndexedFile] = []
        hashes: set[str] = set()
        for w in pkg.get("wheels", ()):
            fname = unquote(urlsplit(w["url"]).path.rsplit("/", 1)[-1])
            sha = (w.get("hashes") or {}).get("sha256")
            if sha:
                hashes.add(sha)
            try:
                n, v, build, tags = parse_wheel_filename(fname)
            except InvalidWheelFilename:
                continue
            files.append(IndexedFile(filename=fname, url=_strip(w["url"]), name=n, version=v, sha256=sha,
                                     tags=frozenset(tags), build=build, size=w.get("size"),
                                     upload_time=_time(w.get("upload-time"))))
        sdist = pkg.get("sdist") or {}
        if (sdist.get("hashes") or {}).get("sha256"):
            hashes.add(sdist["hashes"]["sha256"])
        best = best_wheel(files, t)
        lf = None
        if best is not None:
            up = utc_iso(best.upload_time) if best.upload_time else None
            lf = LockedFile(target=t.label, filename=best.filename, url=best.url, sha256=best.sha256 or "",
                            size=best.size, upload_time=up, upload_time_source="index" if up else "none")
        out.append(ClosureEntry(target=t.label, name=str(name), version=version, file=lf,
                                hashes=tuple(f"sha256:{h}" for h in sorted(hashes))))
    return tuple(sorted(out, key=lambda c: c.name))


def uv_failure(label: str, stderr: str) -> StackctlError:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    err = next((ln for ln in lines if ln.lower().startswith("error:")), lines[0] if lines else "no output")
    detail = " ".join(lines[lines.index(err) + 1:lines.index(err) + 3]) if err in lines else ""
    text = f"closure for {label}: uv pip compile failed: {err.removeprefix('error:').strip()}"
    if detail:
        text += f" {detail}"
    text = text[:400]
    # uv reports an index it could not log in to as a hint under "no solution": that is the index
    # failing, not the stack
    denied = next((ln for ln in lines if any(m in ln.lower() for m in _DENIED)), None)
    if denied is not None:
        return ServiceError(f"closure for {label}: uv could not read an index: "
                            f"{denied.removeprefix('hint:').strip()}"[:400])
    if "no solution found" in stderr.lower() or "unsatisfiable" in stderr.lower():
        return CheckFailed(text)
    return ServiceError(text)


_DENIED = ("could not be queried", "401 unauthorized", "403 forbidden")


def compute(stack: Stack, lock: Lock, eps: Mapping[str, IndexEndpoint], *, offline: bool = False,
            cache_dir: Path | None = None, timeout: float = 600.0,
            mirror: Mapping[str, str] | None = None,
            unmirror: Callable[[str], str] | None = None) -> tuple[ClosureEntry, ...]:
    """The closure uv chooses under the pins, per target. `mirror`: index name → the URL uv reads it at
    (stackctl's loopback mirror); `unmirror` turns a file URL of the mirror back into the index's own, so
    the lock names files where the index has them, not a port of this run."""
    from stackctl.base.bounded import TomlError, read_toml

    pinned = {p.key for p in stack.pins}
    # found here, before any thread: uv's find_uv_bin reads sysconfig, whose first use is not safe from two
    # threads at once on every Python this runs on
    uv = uv_binary()

    def one(t: Target) -> tuple[ClosureEntry, ...]:
        requirements = "".join(f"{p.name}=={p.version}\n" for p in stack.pins_for(t))
        cmd, extra = uv_command(stack, eps, t, offline=offline, cache_dir=cache_dir, uv=uv, mirror=mirror)
        env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
        env.update(extra)
        if "SSL_CERT_FILE" not in env and isinstance(ca := tls_verify(), str):
            env["SSL_CERT_FILE"] = ca  # uv reads the same CA bundle as the index client
        try:
            proc = run_child(cmd, input=requirements, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ServiceError(f"closure for {t.label}: uv pip compile took longer than {timeout:g}s") from None
        if proc.returncode != 0:
            raise uv_failure(t.label, _scrub(proc.stderr, eps))
        try:
            data = read_toml(proc.stdout, "uv's pylock.toml")
        except TomlError as exc:
            raise ServiceError(f"closure for {t.label}: uv wrote no readable pylock.toml ({exc.reason})") from None
        entries = entries_from_pylock(data, t, pinned)
        if unmirror is None:
            return entries
        return tuple(replace(e, file=replace(e.file, url=unmirror(e.file.url))) if e.file else e for e in entries)

    per_target = parallel(len(stack.targets), one, stack.targets)
    errors = [r for r in per_target if isinstance(r, StackctlError)]
    if errors:
        raise Problems.of(errors)
    return tuple(e for entries in per_target if not isinstance(entries, StackctlError) for e in entries)
