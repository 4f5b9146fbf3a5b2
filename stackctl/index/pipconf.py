"""pip's configuration, read as pip documents it, without importing pip (which is not a dependency: a tool
that makes environments without pip installs stackctl too).

The files, each later one overriding the earlier: the global ones (`/etc/xdg/pip/pip.conf` for each
directory of XDG_CONFIG_DIRS, `/etc/pip.conf`; on macOS and Windows their own places), the user's
(`~/.pip/pip.conf`, then `$XDG_CONFIG_HOME/pip/pip.conf`; not read when PIP_CONFIG_FILE names a file
that exists), the environment's (`sys.prefix/pip.conf`), then PIP_CONFIG_FILE; PIP_CONFIG_FILE set to
the null device reads none. Keys are `section.name` with `_` read as `-` (`global.index-url`); the
`PIP_<NAME>` variables (PIP_INDEX_URL, PIP_CERT) are the caller's to look at first. Where nothing names an
index, pip uses its default, which pip itself states (`pip_default_index`).
"""

from __future__ import annotations

import configparser
import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

_NAME = "pip.ini" if sys.platform == "win32" else "pip.conf"


def _global_files(env: Mapping[str, str]) -> list[Path]:
    if sys.platform == "win32":
        return [Path(env.get("PROGRAMDATA", r"C:\ProgramData")) / "pip" / _NAME]
    if sys.platform == "darwin":
        return [Path("/Library/Application Support/pip") / _NAME]
    dirs = [d for d in env.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep) if d]
    return [Path(d) / "pip" / _NAME for d in dirs] + [Path("/etc") / _NAME]


def _user_files(env: Mapping[str, str]) -> list[Path]:
    home = Path(env.get("HOME") or env.get("USERPROFILE") or Path.home())
    if sys.platform == "win32":
        return [home / "pip" / _NAME, Path(env.get("APPDATA", home / "AppData" / "Roaming")) / "pip" / _NAME]
    legacy = home / ".pip" / _NAME
    if sys.platform == "darwin" and (home / "Library/Application Support/pip").is_dir():
        return [legacy, home / "Library/Application Support/pip" / _NAME]
    return [legacy, Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / _NAME]


def config_files(env: Mapping[str, str]) -> list[Path]:
    """pip's configuration files in the order it reads them (the later wins)."""
    named = env.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    files = _global_files(env)
    if not (named and Path(named).exists()):
        files += _user_files(env)
    files.append(Path(sys.prefix) / _NAME)
    if named:
        files.append(Path(named))
    return files


def pip_settings(env: Mapping[str, str]) -> dict[str, str]:
    """Every `section.key` pip's configuration files set. A file that cannot be read or parsed is skipped,
    as if it set nothing (pip itself would refuse to run; stackctl only looks for an index and a CA)."""
    out: dict[str, str] = {}
    for path in config_files(env):
        parser = configparser.RawConfigParser()
        try:
            with open(path, encoding="utf-8") as fh:
                parser.read_file(fh)
        except (OSError, UnicodeDecodeError, configparser.Error):
            continue
        for section in parser.sections():
            for key, value in parser.items(section):
                out[f"{section}.{key.replace('_', '-')}"] = value
    return out


def pip_setting(keys: tuple[str, ...], env: Mapping[str, str]) -> str | None:
    """The first of `keys` the configuration files set, its first word (pip's list values are words)."""
    settings = pip_settings(env)
    for key in keys:
        value = settings.get(key, "").strip()
        if value:
            return value.split()[0]
    return None


def pip_default_index(keep_in: Path | None = None) -> str | None:
    """The index pip uses when its configuration names none, as pip's own `pip install --help` states it
    (`--index-url ... (default URL)`): pip's default is pip's to know, and its internals are not an API. Asked
    once per interpreter and pip version, then kept in `keep_in` (the run's `--cache-dir`), else beside
    stackctl's default HTTP cache; None when pip is not installed here or does not say."""
    import json
    import re
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    from stackctl.base.files import write_atomic
    from stackctl.index.cache import default_cache_dir

    try:
        key = f"{sys.executable} pip {version('pip')}"
    except PackageNotFoundError:
        return None
    kept = (keep_in or default_cache_dir().parent) / "pip-default-index.json"
    try:
        data = json.loads(kept.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("key") == key and isinstance(data.get("url"), str):
            return str(data["url"])
    except (OSError, ValueError):
        pass
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--help"], capture_output=True, text=True,
                              timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"--index-url\b[^(]*\(default\s+(https?://\S+?)\)", done.stdout) if done.returncode == 0 else None
    if found is None:
        return None
    with contextlib.suppress(OSError):  # not kept: asked again next time
        write_atomic(kept, json.dumps({"key": key, "url": found.group(1)}) + "\n")
    return found.group(1)
