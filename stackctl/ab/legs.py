"""The two legs of an A/B, at the edge: an image on the engine (through the engine adapter, with the devices the
profile declares) or an interpreter on the host (`--python`, a GPU host without an engine).

Both run the same runner (`legrun.py`) with the same job, so a trial sees the same work directory, output
directory and environment either way; each run starts afresh (a new container, a new temporary directory). The
stacks' gate in a leg is one more run of that runner (`run._gate_in_leg`), so it sees what the trials see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from stackctl.ab.runs import Leg
from stackctl.errors import InputError
from stackctl.image.record import build_entry

if TYPE_CHECKING:
    from stackctl.engine.docker import DockerEngine
    from stackctl.profile.locate import StackRef
    from stackctl.profile.model import Devices

RUN_DIR = "/tmp/stackctl-ab"  # in an image: the runner, its job and result, the output directory
RUNNER = Path(__file__).with_name("legrun.py")
FILES_LIMIT = 32 << 20  # bytes of plan files sent into each run


class LegRunner(Protocol):
    leg: Leg

    def run(self, job: dict[str, Any], files: Mapping[str, bytes], timeout: float) -> dict[str, Any]:
        """Run the runner with `job` (work, out and the rest filled in here), `files` (relative to the work
        directory) laid down first; the runner's result document."""
        ...


def plan_files(root: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """The plan's `files` (files or directories beside it) as relative path → bytes, read once."""
    out: dict[str, bytes] = {}
    for name in names:
        top = root / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()
                                                  and "__pycache__" not in p.parts)
        for p in paths:
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    if sum(len(v) for v in out.values()) > FILES_LIMIT:
        raise InputError(f"{root}: the plan's files come to more than {FILES_LIMIT >> 20} MiB; "
                         "put large inputs in the image")
    return out


def _failed_result(status: int, why: str, stderr: str = "") -> dict[str, Any]:
    return {"exit": status, "seconds": 0.0, "stdout": "", "stderr": stderr, "files": {}, "error": why}


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


@dataclass
class ImageLeg:
    """A container of the leg's image per run, on the engine, with no network and the profile's devices."""

    leg: Leg
    engine: DockerEngine
    devices: Devices | None
    python: str = "python3"
    workdir: str = f"{RUN_DIR}/work"

    def run(self, job: dict[str, Any], files: Mapping[str, bytes], timeout: float) -> dict[str, Any]:
        job = {**job, "work": self.workdir, "out": f"{RUN_DIR}/out"}
        sent = {f"{self.workdir}/{k}": v for k, v in files.items()}
        sent[f"{RUN_DIR}/legrun.py"] = RUNNER.read_bytes()
        sent[f"{RUN_DIR}/job.json"] = json.dumps(job).encode("utf-8")
        argv = [self.python, "-B", f"{RUN_DIR}/legrun.py", f"{RUN_DIR}/job.json", f"{RUN_DIR}/result.json"]
        status, _out, err, fetched = self.engine.run_with_files(
            self.leg.ref, sent, argv, fetch=f"{RUN_DIR}/result.json", timeout=timeout + 60, devices=self.devices)
        if fetched is None:
            return _failed_result(status, f"the runner left no result (exit {status}): {_last_line(err)}", err)
        return _result(fetched)


@dataclass
class PythonLeg:
    """The host's interpreter `leg.ref` per run, in a fresh temporary directory; `env` (the profile's device
    variables) set for the trial."""

    leg: Leg
    env: Mapping[str, str]

    def run(self, job: dict[str, Any], files: Mapping[str, bytes], timeout: float) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="stackctl-ab-") as tmp:
            work, out = Path(tmp, "work"), Path(tmp, "out")
            for rel, data in files.items():
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                (work / rel).write_bytes(data)
            job = {**job, "work": str(work), "out": str(out), "env": {**self.env, **job["env"]}}
            Path(tmp, "job.json").write_text(json.dumps(job), encoding="utf-8")
            result = Path(tmp, "result.json")
            argv = [self.leg.ref, "-B", str(RUNNER), str(Path(tmp, "job.json")), str(result)]
            try:
                status, stderr = _run_group(argv, timeout + 60)
            except FileNotFoundError:
                raise InputError(f"{self.leg.ref}: no such interpreter") from None
            except subprocess.TimeoutExpired:
                return _failed_result(-9, f"the runner did not finish in {timeout + 60:g} s")
            try:
                return _result(result.read_bytes())
            except FileNotFoundError:
                return _failed_result(status, f"the runner left no result (exit {status}): {_last_line(stderr)}",
                                      stderr)


def _run_group(argv: list[str], timeout: float) -> tuple[int, str]:
    """The runner, killed with the trial it started when it outlasts `timeout` or the run is stopped (Ctrl-C, a
    cluster's task cancelled) and, on Linux, when this process dies outright (`legrun.die_with_parent`): a
    trial never outlives its run."""
    from stackctl.ab.legrun import die_with_parent

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=die_with_parent)
    try:
        _out, err = proc.communicate(timeout=timeout)
    except BaseException:
        proc.kill()  # the trial, its child, dies with it
        proc.communicate()
        raise
    return proc.returncode, err


def _result(raw: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except ValueError:
        return _failed_result(-1, "the runner's result is not JSON")
    return doc if isinstance(doc, dict) else _failed_result(-1, "the runner's result is not a JSON object")


def image_legs(stacks: tuple[StackRef, StackRef], images: tuple[str, ...], record_dir: Path, python: str,
               workdir: str) -> tuple[LegRunner, LegRunner]:
    """Both legs in images: those named (`--image CONTROL --image CANDIDATE`), else each stack's latest build
    (its build record). One engine runs both, so both see the same host and devices."""
    from stackctl.engine.docker import DockerEngine, check_local_ref

    refs: list[tuple[str, str | None]] = []
    for i, stack in enumerate(s.stack for s in stacks):
        if images:
            refs.append((images[i], None))
            continue
        record = record_dir / f"{stack.name}.build.json"
        built, _ = build_entry(record, hint=f"build it (`stackctl build {stacks[i].arg}`) or name the images "
                                            "with --image")
        if not isinstance(built.get("image"), str):
            raise InputError(f"{record}: names no image; build the stack again")
        refs.append((built["image"], str(record)))
    for ref, _ in refs:
        check_local_ref(ref)
    engine = DockerEngine()
    legs: list[LegRunner] = []
    for role, (arg, stack), (ref, record_path) in zip(("control", "candidate"), ((s.arg, s.stack) for s in stacks),
                                                      refs, strict=True):
        facts = engine.facts(ref)
        if facts is None:
            raise InputError(f"image {ref} is not in the engine at {engine.address}", hint="build or pull it first")
        labels = dict(facts.labels)
        digest = next((d.partition("@")[2] for d in facts.repo_digests), None)
        devices = stack.devices
        revision = labels.get("org.opencontainers.image.revision")
        leg = Leg(role, stack.name, arg, "image", ref, facts.id, digest, revision,
                  devices=devices.describe() if devices else "none", device_name=devices.name if devices else None,
                  build_record=record_path)
        legs.append(ImageLeg(leg, engine, devices, python, workdir))
    return legs[0], legs[1]


def python_legs(stacks: tuple[StackRef, StackRef], pythons: tuple[str, ...]) -> tuple[LegRunner, LegRunner]:
    """Both legs on the host's interpreters (`--python CONTROL --python CANDIDATE`)."""
    legs: list[LegRunner] = []
    for role, (arg, stack), py in zip(("control", "candidate"), ((s.arg, s.stack) for s in stacks), pythons,
                                      strict=True):
        path = py if os.sep in py else (_which(py) or py)
        devices = stack.devices
        # an interpreter on the host reaches the host's devices itself: nothing is given to it
        leg = Leg(role, stack.name, arg, "python", path, devices="the host's" if devices else "none",
                  device_name=devices.name if devices else None)
        legs.append(PythonLeg(leg, dict(devices.env) if devices else {}))
    return legs[0], legs[1]


def _which(name: str) -> str | None:
    import shutil

    return shutil.which(name) or (sys.executable if name == "python" else None)


def with_facts(runner: LegRunner, python: str, seen: tuple[str, ...]) -> None:
    """What the leg's first run reported about itself, kept in its `Leg`."""
    runner.leg = replace(runner.leg, python=python, devices_seen=seen,
                         device_name=runner.leg.device_name or (seen[0].split(",")[0].strip() if seen else None))
