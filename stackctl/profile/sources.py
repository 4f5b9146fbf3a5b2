"""Where profile text comes from: the working tree, or a file at a git revision (`PATH@REV`)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from stackctl.errors import InputError


class Source(Protocol):
    """Reads profile files by path relative to the profile's directory."""

    def read(self, name: str) -> str: ...

    def display(self, name: str) -> str: ...

    def exists(self, name: str) -> bool: ...


@dataclass(frozen=True)
class DirSource:
    directory: Path

    def read(self, name: str) -> str:
        path = self.directory / name
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{self.display(name)}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{self.display(name)}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None

    def display(self, name: str) -> str:
        return str(self.directory / name) if str(self.directory) != "." else name

    def exists(self, name: str) -> bool:
        return (self.directory / name).is_file()


@dataclass(frozen=True)
class GitSource:
    """Files of one directory as they were at `rev`; `directory` is relative to the repository root."""

    root: Path
    rev: str
    directory: PurePosixPath

    def _spec(self, name: str) -> str:
        return f"{self.rev}:{(self.directory / name).as_posix()}"

    def read(self, name: str) -> str:
        proc = subprocess.run(["git", "-C", str(self.root), "show", self._spec(name)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            why = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "git show failed"
            raise InputError(f"{self.display(name)}: {why}")
        return proc.stdout

    def display(self, name: str) -> str:
        return f"{(self.directory / name).as_posix()}@{self.rev}"

    def exists(self, name: str) -> bool:
        proc = subprocess.run(["git", "-C", str(self.root), "cat-file", "-e", self._spec(name)],
                              capture_output=True, check=False)
        return proc.returncode == 0


def split_ref(spec: str) -> tuple[Source, str]:
    """`stacks/x.toml` or `stacks/x.toml@origin/main` -> (source, file name)."""
    path_text, sep, rev = spec.rpartition("@")
    if not sep or not rev or Path(spec).exists():
        path = Path(spec)
        return DirSource(path.parent), path.name
    path = Path(path_text).resolve()
    proc = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise InputError(f"{spec}: {path.parent} is not inside a git repository")
    root = Path(proc.stdout.strip())
    verify = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                            capture_output=True, text=True, check=False)
    if verify.returncode != 0:
        raise InputError(f"{spec}: unknown git revision {rev!r}")
    relative = PurePosixPath(path.parent.relative_to(root).as_posix())
    return GitSource(root, rev, relative), path.name


@dataclass(frozen=True)
class PendingSource:
    """A profile not written yet, read beside the files of `base`: validated before it is written."""

    base: Source
    name: str
    text: str

    def read(self, name: str) -> str:
        return self.text if name == self.name else self.base.read(name)

    def display(self, name: str) -> str:
        return self.base.display(name)

    def exists(self, name: str) -> bool:
        return name == self.name or self.base.exists(name)


def repo_root(directory: Path) -> Path:
    """The profile's repository root, which [image.app]'s paths are relative to: the git work tree holding
    `directory`; without git, the directory above a `stacks/` directory, else `directory` itself."""
    start = directory.resolve()
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return start.parent if start.name == "stacks" else start


def read_repo_file(source: Source, profile: str, relative: str) -> tuple[str, str] | None:
    """(how to name it, text) of the file at `relative` to the repository root of `profile` (a file name
    within `source`), or None when there is no such file."""
    if isinstance(source, PendingSource):
        source = source.base
    if isinstance(source, GitSource):
        spec = f"{source.rev}:{PurePosixPath(relative).as_posix()}"
        proc = subprocess.run(["git", "-C", str(source.root), "show", spec], capture_output=True, text=True,
                              check=False)
        return (f"{relative}@{source.rev}", proc.stdout) if proc.returncode == 0 else None
    if isinstance(source, DirSource):
        path = repo_root((source.directory / profile).parent) / relative
        try:
            shown = path.relative_to(Path.cwd().resolve())
        except ValueError:
            shown = path
        try:
            return str(shown), path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    return None
