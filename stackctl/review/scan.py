"""Find references to superseded pins left in a tree.

A version with a local label or a post/pre/dev segment (`2.11.0.post1+musa5.2.0`) is distinctive on
its own. A plain one (`0.1.83`) is not, so it only counts on a line that also names its package.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from stackctl.base.annotations import Annotation, Level
from stackctl.base.words import count
from stackctl.errors import CheckFailed, InputError
from stackctl.profile.locate import StackRef
from stackctl.profile.model import Stack
from stackctl.profile.tag import sanitize


@dataclass(frozen=True)
class Superseded:
    package: str
    old: str
    new: str | None  # None: the new stack dropped the pin


@dataclass(frozen=True)
class Needle:
    superseded: Superseded
    pattern: re.Pattern[str]
    name_pattern: re.Pattern[str] | None  # the line must also name the package


@dataclass(frozen=True)
class StaleRef:
    """One line that names superseded pins (several pins can share a version, like torch and torch_musa)."""

    path: str
    line: int
    text: str
    packages: tuple[str, ...]
    old: tuple[str, ...]


@dataclass(frozen=True)
class AllowRule:
    glob: str
    line: int | None

    def matches(self, path: str, line: int) -> bool:
        return fnmatch.fnmatch(path, self.glob) and (self.line is None or self.line == line)


def superseded(old: Stack, new: Stack) -> tuple[Superseded, ...]:
    out = []
    for p in old.pins:
        q = new.pin(p.name)
        if q is None or q.version != p.version:
            out.append(Superseded(p.name, p.version, q.version if q else None))
    return tuple(out)


def _version_re(text: str) -> str:
    return rf"(?<![A-Za-z0-9.]){re.escape(text)}(?![A-Za-z0-9])(?!\.[0-9])"


def needles(items: Iterable[Superseded]) -> tuple[Needle, ...]:
    out = []
    for s in items:
        v = Version(s.old)
        forms = {s.old, sanitize(s.old)}
        distinctive = v.local is not None or v.is_postrelease or v.is_prerelease or v.is_devrelease
        if v.local is not None and (v.is_postrelease or v.is_prerelease or v.is_devrelease):
            new_public = Version(s.new).public if s.new else None
            if v.public != new_public:
                forms.add(v.public)
        pattern = re.compile("|".join(_version_re(f) for f in sorted(forms, key=len, reverse=True)))
        name = None
        if not distinctive:
            spelled = r"[-_.]+".join(re.escape(part) for part in re.split(r"[-_.]+", s.package))
            name = re.compile(rf"(?<![A-Za-z0-9]){spelled}(?![A-Za-z0-9])", re.IGNORECASE)
        out.append(Needle(s, pattern, name))
    return tuple(out)


def scan_text(path: str, text: str, found: tuple[Needle, ...], allow: tuple[AllowRule, ...]) -> Iterator[StaleRef]:
    for number, line in enumerate(text.splitlines(), start=1):
        hits = [n.superseded for n in found
                if n.pattern.search(line) and (n.name_pattern is None or n.name_pattern.search(line))]
        if hits and not any(rule.matches(path, number) for rule in allow):
            yield StaleRef(path, number, line.strip()[:300], tuple(h.package for h in hits),
                           tuple(dict.fromkeys(h.old for h in hits)))


def parse_allow(text: str, origin: str) -> tuple[AllowRule, ...]:
    """One rule a line: `PATH_GLOB` or `PATH_GLOB:LINE`; `#` starts a comment."""
    rules = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        glob, sep, tail = line.rpartition(":")
        if sep and tail.isdigit():
            rules.append(AllowRule(glob, int(tail)))
        elif sep and not tail.isdigit() and glob and "/" not in tail:
            raise InputError(f"{origin}:{number}: {line!r}: after ':' comes a line number")
        else:
            rules.append(AllowRule(line, None))
    return tuple(rules)


# --- the edge: which files a tree holds, and their text ------------------------------------------

def tree_files(root: Path) -> list[Path]:
    """Git-tracked files when `root` is in a repository; every file under it otherwise."""
    if not root.exists():
        raise InputError(f"{root}: no such file or directory")
    if root.is_file():
        return [root]
    proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--", "."],
                          capture_output=True, check=False)
    if proc.returncode == 0:
        return sorted(root / p for p in proc.stdout.decode().split("\0") if p)
    return sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)


def read_text(path: Path) -> str | None:
    """The file's text, or None for binary files and unreadable ones."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def scan_tree(root: Path, found: tuple[Needle, ...], allow: tuple[AllowRule, ...],
              exclude: frozenset[Path] = frozenset()) -> tuple[list[StaleRef], int]:
    """Every stale reference under `root`, and how many text files were read."""
    refs: list[StaleRef] = []
    read = 0
    base = root if root.is_dir() else root.parent
    for path in tree_files(root):
        if path.resolve() in exclude:
            continue
        text = read_text(path)
        if text is None:
            continue
        read += 1
        rel = path.relative_to(base).as_posix()
        refs.extend(scan_text(rel, text, found, allow))
    return refs, read


@dataclass(frozen=True)
class ScanResult:
    superseded: tuple[Superseded, ...]
    references: tuple[StaleRef, ...]
    files_read: int
    warnings: tuple[str, ...] = ()
    recorded: Path | None = None  # where it was recorded for `stackctl report`

    def annotations(self, root: Path) -> tuple[Annotation, ...]:
        """Each reference at its file (under the tree `root` scanned) and line, for CI to show on the diff."""
        base = root if root.is_dir() else root.parent
        return tuple(Annotation(Level.ERROR, f"names superseded {', '.join(r.old)} ({', '.join(r.packages)}): "
                                f"{r.text}", str(base / r.path), r.line) for r in self.references)

    def failure(self, root: Path) -> CheckFailed | None:
        if not self.references:
            return None
        return CheckFailed(f"{count(len(self.references), 'stale reference')} to superseded pins under {root}")


def allow_rules(allow: Path | None, root: Path) -> tuple[AllowRule, ...]:
    """The allow file named by --allow (it must exist), else ROOT/.stackctl-scan-allow when there is one."""
    if allow is not None and not allow.is_file():
        raise InputError(f"{allow}: " + ("a directory, not an allow file" if allow.is_dir() else "no such allow file"))
    allow_file = allow or (root / ".stackctl-scan-allow" if root.is_dir() else None)
    if allow_file is None or not allow_file.is_file():
        return ()
    try:
        text = allow_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{allow_file}: cannot read the allow file: {exc}") from None
    return parse_allow(text, str(allow_file))


def scan_stale(root: Path, new_ref: StackRef, old_ref: StackRef, allow: Path | None = None, *,
               record: Path | None = None, no_record: bool = False, command: str = "") -> ScanResult:
    """`stackctl scan`: every reference under `root` to a pin `new` superseded in `old`; the result also
    written as evidence where `stackctl report` reads it (build/NEW.scan.json, or `record`), unless
    `no_record`."""
    from stackctl.profile.locate import resolve_profile_arg

    new, old, since_arg = new_ref.stack, old_ref.stack, old_ref.arg
    items = superseded(old, new)
    rules = allow_rules(allow, root)
    # The old profile itself is meant to name the old versions.
    since_path = Path(resolve_profile_arg(since_arg))
    exclude = frozenset({since_path.resolve()}) if since_path.exists() else frozenset()
    refs, read = scan_tree(root, needles(items), rules, exclude)
    result = ScanResult(items, tuple(refs), read)
    from stackctl.base.evidence import record_to, write_evidence

    done = record_to(record, no_record, "scan", new.name, lambda at: write_evidence(
        at, "scan", new.name, result, profile_digests=(new.digest(), old.digest()), command=command))
    return dataclasses.replace(result, warnings=done.warnings, recorded=done.at)
