"""`check`, the one command CI runs: the lock matches the profile, and the requirement files match both.

A requirement file that drifted fails once per thing wrong with it (see `reqcheck`), each line naming the
export that fixes it; a file that only differs in form (order, header, hashes) fails once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stackctl.base.annotations import Annotation, Level
from stackctl.base.words import count
from stackctl.errors import CheckFailed, InputError, StackctlError
from stackctl.profile.locate import StackRef
from stackctl.profile.model import Stack
from stackctl.resolve.export import drift, read_existing, render_requirements
from stackctl.resolve.gatelock import require_installable
from stackctl.resolve.lock import EditedLock, Lock, read_lock
from stackctl.resolve.reqcheck import pin_findings


@dataclass(frozen=True)
class Failure:
    """One failed check and the file it is about (the lock, a requirement file), with a line where known."""

    text: str
    file: str
    line: int | None = None


@dataclass(frozen=True)
class CheckReport:
    stack: str
    passed: tuple[str, ...]
    failures: tuple[Failure, ...]

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(f.text for f in self.failures)
    warnings: tuple[str, ...] = ()

    def failure(self) -> CheckFailed | None:
        if not self.failed:
            return None
        return CheckFailed(f"{count(len(self.failed), 'check')} failed for {self.stack}")

    def annotations(self) -> tuple[Annotation, ...]:
        """For CI: each failed check at the file (and line) it is about."""
        return tuple(Annotation(Level.ERROR, f.text, f.file, f.line) for f in self.failures)


def pin_drift(stack: Stack, lock: Lock) -> list[str]:
    """Where the lock's pins are not the profile's: a lock whose profile digest matches yet whose pins,
    versions, indexes, targets or files were changed afterwards."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
    from packaging.version import Version

    out: list[str] = []
    locked = {canonicalize_name(p.name): p for p in lock.pins}
    for pin in stack.pins:
        lp = locked.pop(pin.key, None)
        if lp is None:
            out.append(f"pin {pin.name} {pin.version} is in the profile, not in the lock")
            continue
        if lp.version != pin.version:
            out.append(f"pin {pin.name} is {lp.version} in the lock, {pin.version} in the profile")
        if lp.index != pin.index:
            out.append(f"pin {pin.name} is from index {lp.index} in the lock, {pin.index} in the profile")
        want = {t.label for t in pin.targets(stack.targets)}
        have = {f.target for f in lp.files}
        if have != want:
            out.append(f"pin {pin.name} has files for {', '.join(sorted(have)) or 'no target'} in the lock, "
                       f"the profile wants {', '.join(sorted(want))}")
        for f in lp.files:
            try:
                name, version, _, _ = parse_wheel_filename(f.filename)
            except InvalidWheelFilename:
                out.append(f"pin {pin.name}: {f.filename} in the lock is not a wheel file name")
                continue
            if name != pin.key or version != Version(pin.version):
                out.append(f"pin {pin.name} {pin.version}: the lock's {f.target} file is {f.filename}")
    out += [f"pin {p.name} {p.version} is in the lock, not in the profile" for p in locked.values()]
    return out


def check_stack(ref: StackRef, lock_path: Path, requirements: Path | None, *, hashes: bool,
                target: str | None = None, fmt: str = "requirements") -> CheckReport:
    """`ref.arg` is the profile as the user named it, for the commands the failures suggest; `target`
    compares the requirement files with what `export --target` writes for it; `fmt` "pylock": the directory
    holds `export --format pylock`'s lock files, compared with what the lock makes."""
    from stackctl.resolve.export import FORMATS
    from stackctl.resolve.targets import one_target

    stack, profile_arg = ref.stack, ref.arg
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt}: one of {', '.join(FORMATS)}")
    tgt = one_target(stack, target) if target is not None else None
    if requirements is not None and requirements.exists() and not requirements.is_dir():
        raise InputError(f"--requirements {requirements}: not a directory (the one `stackctl export --out` wrote)")
    failures: list[Failure] = []
    passes: list[str] = []
    locked: Lock | None = None
    warnings: list[str] = []
    edited = False
    try:
        locked = read_lock(lock_path, profile_arg)
    except EditedLock as exc:
        # said, and then what the edit changed against the profile, pin by pin, as a reviewer needs it
        failures.append(Failure(str(exc), str(lock_path)))
        locked, edited = read_lock(lock_path, profile_arg, sealed=False), True
    except StackctlError as exc:  # missing (it says which resolve makes it), unreadable, or not a lock
        failures.append(Failure(str(exc), str(lock_path)))
    if locked is not None and (said := locked.override_warning()) is not None:
        warnings.append(said)
    if locked is not None:
        if not locked.made_from(stack):
            failures.append(Failure(f"{lock_path}: made from another version of {stack.name}; "
                                    f"run `stackctl resolve {profile_arg}`", str(lock_path)))
            locked = None
        else:
            hand_edits = pin_drift(stack, locked)
            if hand_edits:
                failures += [Failure(f"{lock_path}: {d}; the lock was edited by hand, run "
                                     f"`stackctl resolve {profile_arg}`", str(lock_path)) for d in hand_edits]
                locked = None
            elif edited:
                locked = None
            else:
                passes.append(f"{lock_path} matches {stack.name}")
                # a gate the lock cannot pass is the profile's mistake, refused like bad input (exit 2)
                require_installable(stack, locked, tuple(t.label for t in stack.targets))
    if requirements is not None and fmt == "pylock":
        if locked is not None:
            passes_, failures_ = _check_pylocks(ref, locked, requirements, target, lock_path)
            passes += passes_
            failures += failures_
    elif requirements is not None and (locked is not None or not hashes):
        expected = render_requirements(stack, locked if hashes else None, target)
        existing = read_existing(requirements, expected)
        drifted = {d.file for d in drift(expected, existing)}
        fix = (f"run `stackctl export {profile_arg} --out {requirements}" + (f" --target {target}" if target else "")
               + (f" --lock {lock_path}`" if hashes else "`"))
        findings = pin_findings(stack, {n: t for n, t in existing.items() if n in stack.requirement_files()}, tgt)
        for name in expected:
            if name not in drifted:
                passes.append(f"{requirements / name} matches {stack.name}")
            elif existing[name] is None:
                failures.append(Failure(f"{requirements / name}: missing; {fix}", str(requirements / name)))
            else:
                mine = [(f.what, f.line) for f in findings if f.file == name] or [("order, header or hashes", None)]
                failures += [Failure(f"{requirements / name}: differs from {stack.name}: {what}; {fix}",
                                     str(requirements / name), line) for what, line in mine]
    return CheckReport(stack.name, tuple(passes), tuple(failures), tuple(warnings))


def _check_pylocks(ref: StackRef, lock: Lock, directory: Path, target: str | None,
                   lock_path: Path) -> tuple[list[str], list[Failure]]:
    """Each PEP 751 file `export --format pylock` writes, as it would write it from this lock: missing,
    not a lock file `packaging.pylock` accepts, other packages (a version, a wheel, a hash), or only its form."""
    from stackctl.resolve.export import lock_index_urls
    from stackctl.resolve.pylock import render_pylocks

    stack = ref.stack
    expected = render_pylocks(stack, lock, lock_index_urls(stack, lock), target)
    existing = read_existing(directory, expected)
    from stackctl.resolve.lock import lock_path as default_lock

    other_lock = f" --lock {lock_path}" if lock_path != default_lock(ref) else ""
    fix = (f"run `stackctl export {ref.arg} --out {directory}" + (f" --target {target}" if target else "")
           + f" --format pylock{other_lock}` and commit it")
    passes: list[str] = []
    failures: list[Failure] = []
    for name, want in expected.items():
        path, have = directory / name, existing[name]
        if have == want:
            passes.append(f"{path} matches {stack.name}")
            continue
        if have is None:
            failures.append(Failure(f"{path}: missing; {fix}", str(path)))
            continue
        try:
            theirs = pylock_packages(have, str(path))
            what = "the lock's packages" if theirs != pylock_packages(want, name) else "its header or form"
        except InputError as exc:
            what = f"not a PEP 751 lock file ({str(exc).split(': ', 1)[-1][:120]})"
        failures.append(Failure(f"{path}: differs from {stack.name}: {what}; {fix}", str(path)))
    return passes, failures


def pylock_packages(text: str, where: str) -> object:
    """The packages of a PEP 751 lock file as `packaging.pylock` reads them; InputError naming `where` when the
    file is not TOML (or TOML beyond the reader's bounds) or the format's rules refuse it."""
    from packaging.pylock import Pylock, PylockValidationError

    from stackctl.base.bounded import read_toml

    data = read_toml(text, where)
    try:
        return Pylock.from_dict(data).to_dict().get("packages")
    except PylockValidationError as exc:
        raise InputError(f"{where}: {exc}") from None
