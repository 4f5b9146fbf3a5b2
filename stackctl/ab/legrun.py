#!/usr/bin/env python3
"""One run of a trial inside a leg (a container of the leg's image, or the host's interpreter).

Standard library only, Python 3.8 or newer: this file is sent into the leg as it is and run there by the leg's
own interpreter, so an image needs nothing of stackctl's. It reads a job, runs the trial's argv with the
job's environment in the work directory, and writes one JSON result: exit status, seconds, stdout, stderr,
the files the trial wrote under its output directory that the job asked for (base64), and the devices the
leg sees (nvidia-smi, when the leg has it).

    python legrun.py JOB.json RESULT.json
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

OUTPUT_LIMIT = 4 << 20  # bytes of stdout/stderr kept: a benchmark's JSON lines, a test run's summary
FILE_LIMIT = 16 << 20


def substitute(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def devices_seen() -> list[str]:
    """One line per device the leg sees, as its vendor's tool prints name and driver; [] without one."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return []
    try:
        out = subprocess.run([tool, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [ln.strip() for ln in out.stdout.splitlines() if ln.strip()] if out.returncode == 0 else []


def die_with_parent() -> None:
    """In a child before it runs: on Linux, killed when the process that started it dies, however it dies (a
    cancelled cluster task's worker is killed outright), so a trial never outlives its run."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (ImportError, OSError, AttributeError):
        pass  # not Linux: the run's own process group still ends with it where the caller ends that


def visible_devices(env: dict[str, str]) -> list[str]:
    """The cards this run may use, as the run's CUDA_VISIBLE_DEVICES names them (a cluster's scheduler sets it),
    each by its UUID where nvidia-smi maps the index to one; [] when the variable is unset."""
    given = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    tool = shutil.which("nvidia-smi")
    if not given or tool is None:
        return given
    try:
        out = subprocess.run([tool, "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return given
    uuids = {}
    for line in out.stdout.splitlines():
        index, _, uuid = line.partition(",")
        uuids[index.strip()] = uuid.strip()
    return [uuids.get(d, d) for d in given]


def main(argv: list[str]) -> int:
    job_path, result_path = argv
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    work, out = job["work"], job["out"]
    os.makedirs(work, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    values = {"python": sys.executable, "out": out, "work": work, "leg": job["leg"], "run": str(job["run"])}
    command = [substitute(a, values) for a in job["argv"]]
    env = dict(os.environ)
    env.update({k: substitute(v, values) for k, v in job["env"].items()})
    result: dict[str, Any] = {"python": sys.version.split()[0], "argv": command, "timed_out": False, "error": None}
    if job.get("devices"):
        result["devices"] = devices_seen()
    result["visible"] = visible_devices(env)
    start = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=work, env=env, capture_output=True, timeout=job["timeout"],
                              preexec_fn=die_with_parent)
        status, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        status, stdout, stderr = -9, exc.stdout or b"", exc.stderr or b""
        result["timed_out"] = True
    except OSError as exc:
        status, stdout, stderr = 127, b"", b""
        result["error"] = f"cannot run {command[0]}: {exc.strerror or exc}"
    result["seconds"] = time.monotonic() - start
    result["exit"] = status
    result["stdout"] = stdout[-OUTPUT_LIMIT:].decode("utf-8", "replace")
    result["stderr"] = stderr[-OUTPUT_LIMIT:].decode("utf-8", "replace")
    files: dict[str, str | None] = {}
    for name in job["collect"]:
        path = os.path.join(out, name)
        try:
            if os.path.getsize(path) > FILE_LIMIT:
                files[name] = None
                continue
            with open(path, "rb") as f:
                files[name] = base64.b64encode(f.read()).decode("ascii")
        except OSError:
            files[name] = None
    result["files"] = files
    tmp = result_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
