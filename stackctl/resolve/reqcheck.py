"""What is wrong with requirement files on disk, pin by pin, against the profile they were exported from.

`export --check` and `check` see that a file differs; this says how, in the terms a hand-written
contract test would: a distribution pinned twice (two torch pins), a pin at another stack's version
(an unsupported stack), a pin missing from its file (a private pin, torchada from the public file), a pin
in the wrong file, a line the profile does not pin. Pure: file texts in, findings out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name

from stackctl.profile.model import Stack, Target


@dataclass(frozen=True)
class PinLine:
    file: str
    line: int  # 1-based, the first line of a continued requirement
    text: str  # the requirement without options or comment
    name: NormalizedName | None  # None: not a requirement at all
    version: str | None  # the exact version of `name==VERSION`, None for anything else
    marker: str | None = None  # `; python_version == "3.10"` of a pin limited to some targets


@dataclass(frozen=True)
class Finding:
    file: str
    what: str
    line: int | None = None  # the requirement's first line, where the finding is about one


def parse_lines(file: str, text: str) -> tuple[PinLine, ...]:
    """Requirement lines with continuations joined; comments, blank lines and `--hash` options dropped."""
    out: list[PinLine] = []
    pending: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = n
        line = raw.split(" #", 1)[0] if not raw.lstrip().startswith("#") else ""
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        pending.append(line)
        joined = " ".join(pending).strip()
        pending = []
        if not joined or joined.startswith("-"):  # blank, or an option line (-r, --index-url, ...)
            continue
        requirement = joined.split(" --", 1)[0].strip()  # per-requirement options: --hash=...
        out.append(_pin_line(file, start, requirement))
    return tuple(out)


def _pin_line(file: str, line: int, text: str) -> PinLine:
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return PinLine(file, line, text, None, None)
    specs = list(req.specifier)
    exact = specs[0].version if len(specs) == 1 and specs[0].operator == "==" else None
    return PinLine(file, line, text, canonicalize_name(req.name), exact, str(req.marker) if req.marker else None)


def _marker(text: str | None) -> str | None:
    """A marker in packaging's own spelling, so quoting and spacing do not count as a difference."""
    if text is None:
        return None
    from packaging.markers import InvalidMarker, Marker

    try:
        return str(Marker(text))
    except InvalidMarker:
        return text


def pin_findings(stack: Stack, files: Mapping[str, str | None], target: Target | None = None) -> tuple[Finding, ...]:
    """`files`: each requirement file the profile exports to → its text on disk (None: missing). For one
    `target`, the files are that target's (`export --target`): its pins, bare, and no other."""
    lines = [pl for name, text in files.items() if text is not None for pl in parse_lines(name, text)]
    by_name: dict[NormalizedName, list[PinLine]] = {}
    out: list[Finding] = []
    for pl in lines:
        if pl.name is None:
            out.append(Finding(pl.file, f"line {pl.line}: {pl.text!r} is not a requirement", pl.line))
        else:
            by_name.setdefault(pl.name, []).append(pl)
    for name, found in by_name.items():
        if len(found) > 1:
            where = ", ".join(f"{pl.text} ({pl.file}:{pl.line})" for pl in found)
            out.append(Finding(found[1].file, f"{len(found)} pins for {name}: {where}; a stack pins each "
                                              "distribution once", found[1].line))
    mine = stack.pins if target is None else stack.pins_for(target)
    for pin in mine:
        if pin.file is None or files.get(pin.file) is None:
            continue
        want = f"{pin.name}=={pin.version}"
        found = by_name.get(pin.key, [])
        home = [pl for pl in found if pl.file == pin.file]
        for pl in found:
            if pl.file != pin.file:
                out.append(Finding(pl.file, f"line {pl.line} pins {pl.text}, which {stack.name} exports to "
                                            f"{pin.file}", pl.line))
        if not home:
            out.append(Finding(pin.file, f"no pin for {pin.name} ({stack.name} pins {want})"))
        marker = pin.requirement_marker() if target is None else None
        for pl in home:
            if pl.version != pin.version:
                out.append(Finding(pin.file, f"line {pl.line} pins {pl.text}, {stack.name} pins {want}", pl.line))
            elif _marker(pl.marker) != _marker(marker):
                where = f"only where {marker}" if marker else "for every target"
                out.append(Finding(pin.file, f"line {pl.line} pins {pl.text}; {stack.name} pins {pin.name} {where}",
                                   pl.line))
    pinned, elsewhere = {p.key for p in mine}, {p.key for p in stack.pins}
    for pl in lines:
        if target is not None and pl.name in elsewhere and pl.name not in pinned:
            out.append(Finding(pl.file, f"line {pl.line}: {pl.text}: {stack.name} installs no {pl.name} for "
                                        f"{target.label}", pl.line))
        elif pl.name is not None and pl.name not in pinned:
            kind = "pin" if pl.version is not None else "requirement"
            out.append(Finding(pl.file, f"line {pl.line}: {pl.text} is a {kind} {stack.name} does not declare",
                               pl.line))
    return tuple(out)
