"""The validation plan: the trials `stackctl ab` runs in both legs, read from a TOML file beside the stacks.

Checked as profiles are (`profile.loader.read_checked`): every problem collected, each naming FILE:LINE and the
key path, the nearest known key suggested for a typo. Values only; the runs live in `legs` and `run`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any

from stackctl.errors import InputError, Problem, ProfileError
from stackctl.profile.loader import CheckedToml, read_checked

# beside the candidate's profile, in a directory of its own: stacks/*.toml are profiles (`build --all` builds each)
DEFAULT_PLAN = "validation/plan.toml"
PLACEHOLDERS = ("python", "out", "work", "leg", "run")
_PLACEHOLDER = re.compile(r"\{([a-z_]*)\}")
_SWEEP_KEY = re.compile(r"[a-z][a-z0-9_]{0,31}")
MATRIX_CELLS = 64  # a sweep of more cells is a typo more often than a plan
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class TrialKind(str, Enum):
    TESTS = "tests"  # a test suite that writes JUnit XML
    BENCH = "bench"  # a benchmark that prints its metrics as JSON lines


class Better(str, Enum):
    HIGHER = "higher"  # tok/s
    LOWER = "lower"  # ms


_METRIC: dict[str, Any] = {"name": str, "unit": str, "better": Better, "band": float, "statistic": str}
STATISTICS = ("median", "best", "mean")  # what one run says of a metric (stats.run_statistic)
_TRIAL: dict[str, Any] = {"name": str, "kind": TrialKind, "command": [str], "env": {"*": str}, "timeout": int,
                          "repeat": int, "devices": int, "config": str, "junit": str, "rerun": int,
                          "outputs": [str], "metrics_from": str, "metric": [_METRIC], "max_repeat": int,
                          "matrix": {"*": [(str, int, float)]}}
SCHEMA: dict[str, Any] = {
    "plan": {"name": str, "description": str, "files": [str], "workdir": str, "env": {"*": str}, "python": str,
             "gate": bool, "alpha": float, "allow_undecided": bool},
    "trial": [_TRIAL],
}


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    better: Better
    band: float  # percent: a delta within ±band is neutral
    statistic: str = "median"  # what one run says of it: the median, the best or the mean of its samples


@dataclass(frozen=True)
class Trial:
    name: str
    kind: TrialKind
    command: tuple[str, ...]  # argv, placeholders {python} {out} {work} {leg} {run} and the sweep's keys
    env: tuple[tuple[str, str], ...] = ()
    timeout: int = 600
    repeat: int = 1  # runs of the candidate; the control runs one more, bracketing them
    max_repeat: int = 1  # bench: brackets added one by one while a metric is undecided, up to this many
    devices: int = 0  # devices the trial needs; a leg with fewer skips it
    config: str = ""  # the configuration column of the summary
    junit: str = "junit.xml"  # tests: the JUnit XML file, under {out}
    rerun: int = 1  # tests: a run with failures is run again this many times (a node that then passes is flaky)
    outputs: tuple[str, ...] = ()  # files under {out} whose bytes must be the same in every run of both legs
    metrics_from: str = "stdout"  # bench: "stdout" or a file under {out}, JSON lines either way
    metrics: tuple[Metric, ...] = ()
    sweep: str = ""  # a cell of a sweep: the trial's name in the plan (`name` is "NAME[key=value,...]")
    cell: tuple[tuple[str, str], ...] = ()  # the sweep's values for this cell, in the matrix's key order

    @property
    def label(self) -> str:
        """A sweep cell as the pull request writes it (`BS1`, `BS4 TP2`); "" for a trial that is no cell."""
        return " ".join(f"{k.upper()}{v}" for k, v in self.cell)


@dataclass(frozen=True)
class Plan:
    name: str
    description: str
    path: str  # as named, for messages and records
    root: str  # the directory `files` are relative to
    files: tuple[str, ...]  # sent into every leg's work directory
    workdir: str  # in an image: where the files go and the trials run
    env: tuple[tuple[str, str], ...]
    python: str  # the interpreter of an image leg
    gate: bool  # run the stacks' gate (and its device phase) in each leg first
    alpha: float  # the error a verdict may make: a benchmark's interval is at 1 - alpha (split over its looks)
    allow_undecided: bool  # an undecided benchmark is reported, not failed
    trials: tuple[Trial, ...]
    digest: str  # sha256 of the plan file: a record made from another plan is another experiment

    def trial(self, name: str) -> Trial | None:
        return next((t for t in self.trials if name in (t.name, t.sweep)), None)

    def select(self, names: tuple[str, ...]) -> Plan:
        """Only the trials named (`--trial`; a sweep's name selects all its cells), in the plan's order; an unknown
        name is an error naming the known."""
        from dataclasses import replace

        unknown = [n for n in names if self.trial(n) is None]
        if unknown:
            known = ", ".join(dict.fromkeys(t.sweep or t.name for t in self.trials))
            raise InputError(f"{self.path}: no trial {unknown[0]!r} in the plan (trials: {known})")
        return replace(self, trials=tuple(t for t in self.trials if not names or t.name in names
                                          or t.sweep in names))

    def repeated(self, repeat: int | None, max_repeat: int | None = None, allow_undecided: bool = False) -> Plan:
        """Every trial with `repeat` runs (`--repeat N`) and up to `max_repeat` brackets (`--max-repeat N`; never
        fewer than `repeat`); undecided benchmarks allowed (`--allow-undecided`) where the plan does not already."""
        from dataclasses import replace

        for opt, value in (("--repeat", repeat), ("--max-repeat", max_repeat)):
            if value is not None and value < 1:
                raise InputError(f"{opt} {value}: give 1 or more")
        trials = []
        for t in self.trials:
            first = repeat or t.repeat
            most = max_repeat or t.max_repeat
            trials.append(replace(t, repeat=first, max_repeat=max(first, most)))
        return replace(self, trials=tuple(trials), allow_undecided=self.allow_undecided or allow_undecided)


def load_plan(path: str | Path) -> Plan:
    """Read and check a plan file; `ProfileError` (exit 2) with every problem otherwise."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: no validation plan there",
                         hint="write one (docs/ab.md) or name it with --plan") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read the validation plan ({exc})") from None
    doc = read_checked(str(p), text, SCHEMA)
    plan = _build(doc, p, hashlib.sha256(text.encode("utf-8")).hexdigest())
    if doc.problems or plan is None:
        raise ProfileError(tuple(doc.problems) or (Problem(str(p), None, "", "not a validation plan"),))
    return plan


def _build(doc: CheckedToml, path: Path, digest: str) -> Plan | None:
    if not doc.well_typed:  # a value of the wrong type: its problem is reported, the checks below need types
        return None
    plan_t: dict[str, Any] = doc.data.get("plan", {}) if isinstance(doc.data.get("plan"), dict) else {}
    name = plan_t.get("name", path.stem)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        doc.add(("plan", "name"), f"{name!r} is not a plan name (letters, digits, . _ -)")
    files = tuple(plan_t.get("files", ()))
    for i, f in enumerate(files):
        if (why := _relative(f)) is None:
            why = _missing(path.parent / f, f)
        if why is not None:
            doc.add(("plan", "files", str(i)), why)
    workdir = plan_t.get("workdir", "/tmp/stackctl-ab/work")
    if not PurePosixPath(workdir).is_absolute():
        doc.add(("plan", "workdir"), f"{workdir!r} must be an absolute path (in the image)")
    alpha = float(plan_t.get("alpha", 0.05))
    if not 0 < alpha < 1:
        doc.add(("plan", "alpha"), f"{alpha} is not a significance level between 0 and 1")
    env = _env(plan_t.get("env", {}), ("plan", "env"), doc)
    raw_trials = doc.data.get("trial", [])
    if not raw_trials:
        doc.add(("trial",), "missing: a plan has at least one [[trial]]")
    seen: set[str] = set()
    trials: list[Trial] = []
    for i, raw in enumerate(raw_trials):
        if (t := _trial(raw, i, doc)) is None:
            continue
        if t.name in seen:
            doc.add(("trial", str(i), "name"), f"trial {t.name!r} is named twice")
        seen.add(t.name)
        trials += _cells(t, raw.get("matrix", {}))
    if doc.problems:
        return None
    return Plan(name, plan_t.get("description", ""), str(path), str(path.parent), files, workdir, env,
                plan_t.get("python", "python3"), plan_t.get("gate", True), alpha,
                plan_t.get("allow_undecided", False), tuple(trials), "sha256:" + digest)


def _cells(trial: Trial, matrix: dict[str, list[str | int | float]]) -> list[Trial]:
    """A trial with a `[trial.matrix]` is one trial a cell, each with its values in place of the placeholders
    (`{bs}`), named `NAME[bs=4]`; the cells in the order of the matrix's keys and values."""
    from dataclasses import replace
    from itertools import product

    if not matrix:
        return [trial]
    keys = list(matrix)
    out = []
    for values in product(*(matrix[k] for k in keys)):
        cell = tuple((k, _sweep_value(v)) for k, v in zip(keys, values, strict=True))
        out.append(replace(trial, name=f"{trial.name}[{','.join(f'{k}={v}' for k, v in cell)}]", sweep=trial.name,
                           cell=cell, command=tuple(_fill(a, cell) for a in trial.command),
                           env=tuple((k, _fill(v, cell)) for k, v in trial.env),
                           config=_fill(trial.config, cell)))
    return out


def _sweep_value(value: str | int | float) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _fill(text: str, cell: tuple[tuple[str, str], ...]) -> str:
    for key, value in cell:
        text = text.replace("{" + key + "}", value)
    return text


def _matrix(raw: dict[str, Any], path: tuple[str, ...], doc: CheckedToml) -> tuple[str, ...]:
    """The sweep's keys, checked: each a placeholder name of its own with distinct values, the cells bounded."""
    cells = 1
    for key, values in raw.items():
        where = (*path, key)
        if not _SWEEP_KEY.fullmatch(key) or key in PLACEHOLDERS:
            doc.add(where, f"{key!r} cannot name a sweep (lower-case letters, digits, _; "
                           f"not {', '.join(PLACEHOLDERS)})")
        if not values:
            doc.add(where, "an empty sweep: give its values, e.g. [1, 4, 16]")
        elif any(isinstance(v, bool) for v in values):
            doc.add(where, "must be strings or numbers, not true or false")
        elif len({_sweep_value(v) for v in values}) != len(values):
            doc.add(where, "a value is named twice")
        cells *= max(len(values), 1)
    if cells > MATRIX_CELLS:
        doc.add(path, f"{cells} cells: a sweep runs at most {MATRIX_CELLS}")
    return tuple(raw)


def _missing(path: Path, value: str) -> str | None:
    """Why `value`, a path beside the plan, names nothing there (a name too long, a NUL, a link to itself), or
    None."""
    try:
        path.stat()
    except FileNotFoundError:
        return f"{value[:200]}: no such file or directory beside the plan"
    except (OSError, ValueError) as exc:
        return f"{value[:200]!r}: {getattr(exc, 'strerror', None) or exc}"
    return None


def _relative(value: str) -> str | None:
    p = PurePosixPath(value)
    if not value or p.is_absolute() or ".." in p.parts or "\\" in value:
        return f"{value[:200]!r} must be a path beside the plan, relative to its directory"
    return None


def _env(raw: dict[str, Any], path: tuple[str, ...], doc: CheckedToml,
         sweep: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    for key, value in raw.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            doc.add((*path, key), "not an environment variable name")
        elif isinstance(value, str):
            _placeholders(value, (*path, key), doc, sweep)
    return tuple(sorted((k, v) for k, v in raw.items() if isinstance(v, str)))


def _placeholders(text: str, path: tuple[str, ...], doc: CheckedToml, sweep: tuple[str, ...] = ()) -> None:
    known = (*PLACEHOLDERS, *sweep)
    for found in _PLACEHOLDER.findall(text):
        if found not in known:
            doc.add(path, f"{{{found}}} is not a placeholder; known: " + ", ".join(f"{{{p}}}" for p in known))


def _positive(raw: dict[str, Any], key: str, default: int, path: tuple[str, ...], doc: CheckedToml,
              least: int = 1) -> int:
    value = raw.get(key, default)
    if isinstance(value, int) and value < least:
        doc.add((*path, key), f"{value} must be {least} or more")
    return int(value) if isinstance(value, int) else default


def _trial(raw: dict[str, Any], i: int, doc: CheckedToml) -> Trial | None:
    path = ("trial", str(i))
    name = raw.get("name")
    if name is None:
        doc.add((*path, "name"), "missing: every trial has a name")
    elif not _NAME.fullmatch(name):
        doc.add((*path, "name"), f"{name!r} is not a trial name (letters, digits, . _ -)")
    kind_raw = raw.get("kind")
    kind = None
    if kind_raw is None:
        doc.add((*path, "kind"), 'missing: "tests" or "bench"')
    else:
        try:
            kind = TrialKind(kind_raw)
        except ValueError:
            doc.add((*path, "kind"), f'{kind_raw!r} is not a trial kind; use "tests" or "bench"')
    command = tuple(raw.get("command", ()))
    if not command:
        doc.add((*path, "command"), "missing: the argv each leg runs, e.g. [\"{python}\", \"-m\", \"pytest\"]")
    sweep = _matrix(raw.get("matrix", {}), (*path, "matrix"), doc)
    for j, arg in enumerate(command):
        _placeholders(arg, (*path, "command", str(j)), doc, sweep)
    env = _env(raw.get("env", {}), (*path, "env"), doc, sweep)
    _placeholders(raw.get("config", ""), (*path, "config"), doc, sweep)
    for key in ("junit", "metrics_from"):
        if key in raw and raw[key] != "stdout" and (why := _relative(raw[key])) is not None:
            doc.add((*path, key), why.replace("beside the plan", "under {out}").replace("its directory", "{out}"))
    outputs = tuple(raw.get("outputs", ()))
    for j, out in enumerate(outputs):
        if (why := _relative(out)) is not None:
            doc.add((*path, "outputs", str(j)), why.replace("beside the plan", "under {out}"))
    metrics = tuple(m for j, m_raw in enumerate(raw.get("metric", ()))
                    if (m := _metric(m_raw, (*path, "metric", str(j)), doc)) is not None)
    if kind is TrialKind.BENCH and not raw.get("metric"):
        doc.add((*path, "metric"), "missing: a bench trial names its metrics ([[trial.metric]])")
    if kind is TrialKind.TESTS:
        for key in ("metric", "metrics_from"):
            if key in raw:
                doc.add((*path, key), "a tests trial has no metrics; make a bench trial for them")
    if kind is TrialKind.BENCH and "junit" in raw:
        doc.add((*path, "junit"), "a bench trial writes no JUnit XML; make a tests trial for the suite")
    repeat = _positive(raw, "repeat", 5 if kind is TrialKind.BENCH else 1, path, doc)
    # a benchmark adds brackets while undecided: by default up to three times the brackets it starts with
    max_repeat = _positive(raw, "max_repeat", 3 * repeat if kind is TrialKind.BENCH else repeat, path, doc)
    if max_repeat < repeat:
        doc.add((*path, "max_repeat"), f"{max_repeat} is fewer than repeat ({repeat})")
    if kind is TrialKind.TESTS and "max_repeat" in raw:
        doc.add((*path, "max_repeat"), "a tests trial adds no brackets; its failures are rerun (rerun = N)")
    timeout = _positive(raw, "timeout", 600, path, doc)
    devices = _positive(raw, "devices", 0, path, doc, least=0)
    rerun = _positive(raw, "rerun", 1, path, doc, least=0)
    if name is None or kind is None or not command:
        return None
    return Trial(name, kind, command, env, timeout, repeat, max_repeat, devices, raw.get("config", ""),
                 raw.get("junit", "junit.xml"), rerun, outputs, raw.get("metrics_from", "stdout"), metrics)


def _metric(raw: dict[str, Any], path: tuple[str, ...], doc: CheckedToml) -> Metric | None:
    for key in ("name", "better", "band"):
        if key not in raw:
            doc.add((*path, key), "missing: a metric has a name, better = \"higher\"|\"lower\" and a band in percent")
    better = None
    if "better" in raw:
        try:
            better = Better(raw["better"])
        except ValueError:
            doc.add((*path, "better"), f'{raw["better"]!r}: use "higher" or "lower"')
    band = raw.get("band")
    if isinstance(band, (int, float)) and not 0 <= band < 100:
        doc.add((*path, "band"), f"{band} is not a band in percent (0 to 100)")
    statistic = raw.get("statistic", "median")
    if statistic not in STATISTICS:
        doc.add((*path, "statistic"), f"{statistic!r}: use " + ", ".join(f'"{s}"' for s in STATISTICS))
    if better is None or "name" not in raw or band is None:
        return None
    return Metric(raw["name"], raw.get("unit", ""), better, float(band), statistic)
