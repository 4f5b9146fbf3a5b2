"""The fuzz campaign: mutated profiles, locks, index pages (HTML and JSON), wheels, ELF files and signed
statements (DSSE envelopes) fed to the real parsing and command code, many times per kind, on every core.

    python benchmarks/fuzz.py [--cases 100000] [--kinds profile,lock,html,json,wheel,elf,envelope] [--jobs 2]
                              [--case-seconds 5] [--memory-mb 2048] [--cli-every 50] [--findings DIR]

The targets and mutations are tests/fuzz/targets.py's, which the test suite runs through `hypothesis` for
a few hundred examples per kind; here the same mutations are drawn from `random` with a fixed seed per
chunk, because a campaign must count every failure instead of stopping at the first. The rule for every
case: the target returns or raises a StackctlError (anything else is a crash), within --case-seconds
(else it hung), in a worker whose address space is capped with RLIMIT_AS (a MemoryError is a crash).
Every --cli-every-th profile and lock also goes through the command line (`validate`, `diff A.lock
B.lock` with --json): exit 0, 1 or 2, one JSON object on stdout, `error:` lines and no traceback.
Each crash or hang is written to --findings as the input that caused it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz.targets import KINDS, Corpus, apply, cli_case, make_corpus, random_mutations, run_case  # noqa: E402

CHUNK = 500

_corpus: Corpus | None = None
_options: argparse.Namespace | None = None


class _Hung(Exception):
    pass


def _alarm(*_: object) -> None:
    raise _Hung()


def _init(corpus: Corpus, options: argparse.Namespace) -> None:
    global _corpus, _options
    _corpus, _options = corpus, options
    limit = options.memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _alarm)
    os.nice(0)


def _chunk(job: tuple[str, int, int]) -> dict[str, object]:
    kind, start, count = job
    assert _corpus is not None and _options is not None
    rng = random.Random(f"{kind}:{start}")
    seeds = _corpus.seeds(kind)
    crashed: list[str] = []
    hung: list[str] = []
    cli_checked = 0
    cli_bad: list[str] = []
    findings = Path(_options.findings)
    workdir = Path(tempfile.mkdtemp(prefix=f"stackctl-fuzz-{kind}-"))
    for n in range(start, start + count):
        si = rng.randrange(len(seeds))
        mutations = random_mutations(rng, kind, len(seeds[si]))
        signal.setitimer(signal.ITIMER_REAL, _options.case_seconds)
        try:
            run_case(_corpus, kind, si, mutations)
            if kind in ("profile", "lock") and n % _options.cli_every == 0:
                cli_checked += 1
                problem = cli_case(_corpus, kind, apply(seeds[si], mutations, kind), workdir)
                if problem is not None:
                    cli_bad.append(problem)
                    _save(findings, kind, n, "cli", seeds[si], mutations, problem)
        except _Hung:
            hung.append(f"case {n}")
            _save(findings, kind, n, "hung", seeds[si], mutations, "")
        except BaseException as exc:  # the rule: nothing but StackctlError leaves a target
            if isinstance(exc, KeyboardInterrupt):
                raise
            where = traceback.extract_tb(exc.__traceback__)[-1]
            crashed.append(f"{type(exc).__name__} at {Path(where.filename).name}:{where.lineno}")
            _save(findings, kind, n, "crash", seeds[si], mutations, traceback.format_exc())
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return {"kind": kind, "tried": count, "crashed": crashed, "hung": hung, "cli_checked": cli_checked,
            "cli_bad": cli_bad}


def _save(findings: Path, kind: str, n: int, what: str, seed: bytes, mutations: list[tuple[object, ...]],
          detail: str) -> None:
    findings.mkdir(parents=True, exist_ok=True)
    (findings / f"{kind}-{n}-{what}.bin").write_bytes(apply(seed, mutations, kind))
    (findings / f"{kind}-{n}-{what}.txt").write_text(f"{mutations!r}\n\n{detail}\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000, help="cases per kind")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--case-seconds", type=float, default=5.0, help="a case that takes longer hung")
    parser.add_argument("--memory-mb", type=int, default=2048, help="RLIMIT_AS of each worker")
    parser.add_argument("--cli-every", type=int, default=50)
    parser.add_argument("--findings", default=str(ROOT / "build" / "fuzz-findings"))
    options = parser.parse_args()
    kinds = [k for k in options.kinds.split(",") if k]
    corpus = make_corpus(Path(tempfile.mkdtemp(prefix="stackctl-fuzz-corpus-")))
    jobs = [(kind, start, min(CHUNK, options.cases - start)) for kind in kinds
            for start in range(0, options.cases, CHUNK)]
    totals = {k: {"tried": 0, "crashed": [], "hung": [], "cli_checked": 0, "cli_bad": [], "seconds": 0.0}
              for k in kinds}
    began = time.monotonic()
    started = dict.fromkeys(kinds, 0.0)
    with multiprocessing.get_context("fork").Pool(options.jobs, _init, (corpus, options),
                                                  maxtasksperchild=40) as pool:
        for kind in kinds:
            started[kind] = time.monotonic()
            for r in pool.imap_unordered(_chunk, [j for j in jobs if j[0] == kind]):
                t = totals[kind]
                t["tried"] += r["tried"]  # type: ignore[operator]
                t["crashed"] += r["crashed"]  # type: ignore[operator]
                t["hung"] += r["hung"]  # type: ignore[operator]
                t["cli_checked"] += r["cli_checked"]  # type: ignore[operator]
                t["cli_bad"] += r["cli_bad"]  # type: ignore[operator]
            totals[kind]["seconds"] = time.monotonic() - started[kind]
            t = totals[kind]
            print(f"{kind:8} tried {t['tried']:>7}  crashed {len(t['crashed']):>4}  hung {len(t['hung']):>3}  "
                  f"cli {t['cli_checked']:>5} checked, {len(t['cli_bad'])} bad  {t['seconds']:7.1f} s", flush=True)
            for what in sorted(set(t["crashed"]))[:10]:  # type: ignore[call-overload]
                print(f"           crash: {what}")
    wall = time.monotonic() - began
    print("\n| kind | tried | crashed | hung | through the CLI | wall time |\n| --- | --- | --- | --- | --- | --- |")
    for kind in kinds:
        t = totals[kind]
        print(f"| {kind} | {t['tried']:,} | {len(t['crashed'])} | {len(t['hung'])} | "
              f"{t['cli_checked']:,} ({len(t['cli_bad'])} bad) | {t['seconds']:.0f} s |")
    print(f"\ntotal wall time {wall:.0f} s on {options.jobs} workers")
    bad = sum(len(t["crashed"]) + len(t["hung"]) + len(t["cli_bad"]) for t in totals.values())  # type: ignore[arg-type]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
