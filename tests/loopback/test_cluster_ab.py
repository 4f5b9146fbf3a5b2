"""`ab --cluster` on a Ray cluster of two GPU nodes with two (declared) cards each, every node on loopback: a sweep
of four cells runs side by side, each cell's whole schedule on one node and one card; the same plan run here gives
the same kinds of verdicts; and the cluster's failures a user meets first (no Ray, no head) are one line each."""

from __future__ import annotations

import json
import socket
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Cli
from tests.support.raycluster import LocalCluster, run, start_cluster, sweep_project


def project(root: Path, **plan: Any) -> Path:
    return sweep_project(root, **plan)


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from start_cluster(tmp_path_factory.mktemp("ray"), {}, gpu_nodes=2, gpus=2)


def ab(cluster: LocalCluster | None, root: Path, *extra: str, env: dict[str, str] | None = None) -> dict:
    r = run(cluster, "ab", "stacks/control.toml", "stacks/candidate.toml", "--python", sys.executable,
            "--python", sys.executable, "--json", *extra, cwd=root, env=env)
    assert r.code == 0, r.err[-3000:]
    return {**json.loads(r.out), "_err": r.err}


def test_a_sweep_runs_each_cell_on_one_node_and_one_card_side_by_side(
        gpu_cluster: LocalCluster, tmp_path: Path, fake_gpus: dict[str, str]) -> None:
    doc = ab(gpu_cluster, project(tmp_path))
    cells = [t["trial"] for t in doc["trials"]]
    assert cells == ["lat[bs=1]", "lat[bs=4]", "lat[bs=16]", "lat[bs=64]"]
    places = {}
    for cell in cells:
        runs = [r for r in doc["runs"] if r["trial"] == cell]
        assert len(runs) >= 5  # C T C T C: the whole schedule
        seen = {(r["node"], tuple(r["devices"])) for r in runs}
        assert len(seen) == 1, seen  # one node and the same card for every bracket
        (node, devices), = seen
        assert node and len(devices) == 1 and devices[0].startswith("GPU-fake-")
        places[cell] = (node.split()[0], devices[0])
    # four cells, four cards of two nodes: side by side, never two cells on one card
    assert len(set(places.values())) == 4 and len({n for n, _ in places.values()}) == 2
    tasks = {t["task"]: t for t in doc["cluster"]["tasks"]}
    assert set(tasks) == set(cells)
    for cell, task in tasks.items():
        assert task["node"] == places[cell][0] and task["devices"] == [places[cell][1]]
        assert task["ray"] and task["stackctl"] and [a["outcome"] for a in task["attempts"]] == ["done"]
    # the markdown a pull request gets (and `report`'s validation section) says where each cell ran
    from stackctl.cli.ab import render_markdown

    md = render_markdown(doc)
    assert "**Where each trial ran**" in md
    for cell, (node, card) in places.items():
        assert f"| {cell} | " in md and node[:8] in md and card in md
    started = [ln for ln in doc["_err"].splitlines() if ": started" in ln]
    assert len(started) == 4 and all(ln.split()[2].startswith("[") for ln in started)  # a line with its node
    assert all(t["verdict"] == "neutral" for t in doc["trials"])
    # and the same plan here, on this host's four (stand-in) cards, one cell after another: the same verdicts
    here = ab(None, tmp_path, "--no-record", env=fake_gpus)
    assert [t["verdict"] for t in here["trials"]] == [t["verdict"] for t in doc["trials"]]
    assert (all(r["node"] is None for r in here["runs"]) and "cluster" not in here) or here["cluster"] is None


def test_a_trial_needing_more_cards_than_any_node_has_is_skipped(gpu_cluster: LocalCluster, tmp_path: Path) -> None:
    root = project(tmp_path, devices=3, cells=(1,))
    doc = ab(gpu_cluster, root, "--no-record")
    (trial,) = doc["trials"]
    assert trial["verdict"] == "skipped"
    assert "needs 3 device(s); no node of the cluster offers more than 2 GPU(s)" in json.dumps(trial)


def test_an_address_that_does_not_answer_is_one_line_and_exit_3(cli: Cli, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    project(tmp_path)
    started = time.monotonic()
    r = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", sys.executable, "--python",
            sys.executable, "--cluster", f"127.0.0.1:{port}", cwd=tmp_path)
    assert time.monotonic() - started < 15
    assert r.code == 3, r.err
    errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: cluster 127.0.0.1:{port}: does not answer (Connection refused)"]
    assert "Traceback" not in r.err


@pytest.mark.parametrize("address", ["", "head", "10.0.0.5", "10.0.0.5:0", "http://10.0.0.5:6379", "auto"])
def test_a_malformed_address_is_a_usage_error(cli: Cli, tmp_path: Path, address: str) -> None:
    project(tmp_path)
    r = cli("build", "--all", "--cluster", address or " ", cwd=tmp_path)
    assert r.code == 2, r.err
    assert "give a Ray head's HOST:PORT or ray://HOST:PORT" in r.err and "Traceback" not in r.err


def test_cluster_without_the_extra_says_how_to_install_it(cli: Cli, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where the extra is not installed
    project(tmp_path)
    r = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", sys.executable, "--python",
            sys.executable, "--cluster", "127.0.0.1:6379", cwd=tmp_path)
    assert r.code == 2, r.err
    assert "error: --cluster: Ray is not installed in this Python environment" in r.err
    assert "pip install 'stackctl[cluster]'" in r.err


def test_stackctl_cluster_names_the_cluster_too(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKCTL_CLUSTER", "not an address")
    project(tmp_path)
    r = cli("ab", "stacks/control.toml", "stacks/candidate.toml", "--python", sys.executable, "--python",
            sys.executable, cwd=tmp_path)
    assert r.code == 2 and "STACKCTL_CLUSTER 'not an address': give a Ray head's HOST:PORT" in r.err


def test_ray_is_not_imported_without_a_cluster(tmp_path: Path) -> None:
    project(tmp_path)
    code = textwrap.dedent("""\
        import sys
        from stackctl.cli import main
        sys.argv = ["stackctl", "ab", "stacks/control.toml", "stacks/candidate.toml", "--python", sys.executable,
                    "--python", sys.executable, "--no-record", "--json"]
        try:
            main()
        except SystemExit:
            pass
        print("RAY", "ray" in sys.modules, file=sys.stderr)
        """)
    import subprocess

    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "RAY False" in p.stderr, p.stderr[-2000:]


def test_ctrl_c_cancels_the_clusters_tasks_and_leaves_no_run_behind(
        gpu_cluster: LocalCluster, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import uuid

    marker = f"cancel-{uuid.uuid4().hex[:12]}"
    root = project(tmp_path, sleep=60, cells=(1, 4), tag=marker)
    argv = [sys.executable, "-m", "stackctl", "ab", "stacks/control.toml", "stacks/candidate.toml", "--python",
            sys.executable, "--python", sys.executable, "--cluster", gpu_cluster.address]
    proc = subprocess.Popen(argv, cwd=root, env=gpu_cluster.env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:
        said.append(line)
        if line.rstrip().endswith(": started"):
            time.sleep(2)  # the run has begun on its node
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.communicate(timeout=90)[1]
    text = "".join(said) + rest
    assert proc.returncode == 130, text[-3000:]
    assert "error: interrupted" in text and "Traceback" not in text
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the cancelled tasks ended their runs' processes
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
        if not [p for p in left if int(p) != os.getpid()]:
            break
        time.sleep(1)
    else:
        raise AssertionError(f"runs of the cancelled trials still alive: {left}")
