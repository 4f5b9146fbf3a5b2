"""ab's pure parts: the statistics against scipy's own, the verdicts of recorded runs, JUnit XML and JSON-line
metrics, the schedule, the plan's checks; the profile's [devices] and the device phase of the gate spec; the
engine's device options as the docker CLI sends them."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackctl.ab.plan import Better, Metric, Trial, TrialKind, load_plan
from stackctl.ab.runs import FAILED, PASSED, SKIPPED, Node, Run, parse_junit, parse_metrics
from stackctl.ab.stats import delta_pct, drift_pct, mann_whitney, summarize
from stackctl.ab.verdicts import schedule, trial_verdict
from stackctl.ab.verdicts import tests_verdict as verdict_of_tests
from stackctl.errors import ProfileError

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.test_a" name="test_ok" time="0.01"/>
<testcase classname="tests.test_a" name="test_bad[1]" time="0.01">
<failure message="assert 1 == 2&#10;more">x</failure></testcase>
<testcase classname="tests.test_a" name="test_err"><error message="fixture blew up"/></testcase>
<testcase classname="tests.test_b" name="test_skip"><skipped type="pytest.skip" message="no GPU"/></testcase>
</testsuite></testsuites>"""


def _run(leg: str, order: int, nodes: dict[str, str], rerun: int = 0, samples: tuple[float, ...] = (),
         outputs: tuple[tuple[str, str], ...] = ()) -> Run:
    return Run("t", leg, order, order // 2, rerun, "2026-01-01T00:00:00Z", 1.0, 0,
               nodes=tuple(Node(k, v) for k, v in nodes.items()),
               samples=(("ms", samples),) if samples else (), outputs=outputs)


def test_junit_statuses_and_first_lines() -> None:
    nodes = parse_junit(JUNIT)
    assert [(n.id, n.status) for n in nodes] == [
        ("tests.test_a::test_ok", PASSED), ("tests.test_a::test_bad[1]", FAILED),
        ("tests.test_a::test_err", FAILED), ("tests.test_b::test_skip", SKIPPED)]
    assert nodes[1].message == "assert 1 == 2" and nodes[3].message == "no GPU"


def test_metrics_from_json_lines_skip_chatter_and_non_numbers() -> None:
    text = 'warming up\n{"ms": 1.5, "tok": 3}\n{"ms": "fast"}\n[1]\n{"ms": NaN}\n{"ms": 2}\n{"ms": true}\n'
    assert parse_metrics(text, ("ms", "tok", "ttft")) == (("ms", (1.5, 2.0)), ("tok", (3.0,)), ("ttft", ()))


def test_summary_and_delta() -> None:
    s = summarize([1.0, 2.0, 3.0, 10.0])
    assert (s.n, s.mean, s.median, s.minimum, s.maximum) == (4, 4.0, 2.5, 1.0, 10.0)
    assert delta_pct(50.0, 49.0) == pytest.approx(-2.0)
    assert delta_pct(0.0, 0.0) == 0.0


def test_mann_whitney_is_scipys_two_sided_test() -> None:
    from scipy.stats import mannwhitneyu

    a, b = [1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]
    u, p = mann_whitney(a, b)
    want = mannwhitneyu(b, a, alternative="two-sided")
    assert (u, p) == (float(want.statistic), float(want.pvalue))
    assert p == pytest.approx(2 / 252)  # exact: 2 of the C(10, 5) orderings are this extreme
    assert mann_whitney([1.0, 1.0], [1.0, 1.0]) == (2.0, 1.0)  # no difference at all: no evidence of one


def test_drift_is_the_median_change_between_adjacent_control_runs() -> None:
    assert drift_pct([100.0, 100.0]) == 0.0
    assert drift_pct([100.0, 102.0, 100.0, 100.0]) == pytest.approx(2.0)
    assert drift_pct([100.0]) == 0.0


def test_schedule_brackets_a_benchmark_with_the_control() -> None:
    assert schedule(TrialKind.BENCH, 2) == (("control", 0), ("candidate", 0), ("control", 1), ("candidate", 1),
                                            ("control", 2))
    assert schedule(TrialKind.TESTS, 1) == (("control", 0), ("candidate", 0))


def test_tests_verdict_names_what_differs() -> None:
    control = [_run("control", 0, {"a": PASSED, "b": PASSED, "gone": PASSED, "f": FAILED, "both": FAILED})]
    candidate = [_run("candidate", 1, {"a": PASSED, "b": FAILED, "new": PASSED, "f": PASSED, "both": FAILED}),
                 _run("candidate", 1, {"a": FAILED, "b": FAILED, "new": PASSED, "f": PASSED, "both": FAILED}, 1)]
    v = verdict_of_tests(control, candidate)
    assert not v.same_inventory and v.only_control == ("gone",) and v.only_candidate == ("new",)
    assert [s.node for s in v.regressions] == ["b"]  # failed on every candidate run
    assert [(s.node, s.candidate) for s in v.flaky] == [("a", "flaky")]  # passed once, failed on the rerun
    assert [s.node for s in v.fixed] == ["f"] and [s.node for s in v.failing_both] == ["both"]


def test_trial_verdicts_and_what_fails_the_run() -> None:
    tests = Trial("t", TrialKind.TESTS, ("x",))
    same = trial_verdict(tests, [_run("control", 0, {"a": PASSED}), _run("candidate", 1, {"a": PASSED})], 0.05)
    assert (same.verdict, same.failing) == ("pass", False)
    flaky = trial_verdict(tests, [_run("control", 0, {"a": PASSED}), _run("candidate", 1, {"a": FAILED}),
                                  _run("candidate", 1, {"a": PASSED}, 1)], 0.05)
    assert (flaky.verdict, flaky.failing) == ("flaky", False)
    bench = Trial("t", TrialKind.BENCH, ("x",), metrics=(Metric("ms", "ms", Better.LOWER, 5.0),),
                  outputs=("answer.txt",))
    c = [10.0, 10.1, 9.9, 10.0, 10.05]
    runs = [_run("control" if i % 2 == 0 else "candidate", i, {},
                 samples=tuple(x * (1.3 if i % 2 else 1) * 1.01 ** i for x in c), outputs=(("answer.txt", "aa"),))
            for i in range(7)]  # C T C T C T C, the host slowing 1% a run
    slow = trial_verdict(bench, runs, 0.05)
    assert (slow.verdict, slow.failing) == ("regressed", True)
    assert slow.metrics[0].delta_pct == pytest.approx(30.0) and slow.outputs[0].equal
    assert len(slow.metrics[0].brackets) == 3
    one = trial_verdict(bench, runs[:3], 0.05)  # one bracket has no spread: undecided, and that fails
    assert (one.verdict, one.failing) == ("undecided", True)
    assert trial_verdict(bench, runs[:3], 0.05, allow_undecided=True).failing is False
    other = _run("control", 6, {}, samples=tuple(c), outputs=(("answer.txt", "bb"),))
    differ = trial_verdict(bench, [*runs[:6], other], 0.05)
    assert differ.outputs[0].control == ("aa", "bb") and differ.failing


def test_plan_checks_name_file_line_and_key(tmp_path: Path) -> None:
    plan = tmp_path / "validation.toml"
    plan.write_text('[plan]\nfiles = ["../outside"]\nalpha = 2\n\n[[trial]]\nname = "b"\nkind = "bench"\n'
                    'command = ["{python}"]\noutputs = ["/abs"]\n\n[[trial.metric]]\nname = "tok_s"\n'
                    'better = "up"\nband = 0.5\n')
    with pytest.raises(ProfileError) as err:
        load_plan(plan)
    got = [str(p) for p in err.value.problems]
    assert f"{plan}:2 plan.files.0: '../outside' must be a path beside the plan, relative to its directory" in got
    assert f"{plan}:3 plan.alpha: 2.0 is not a significance level between 0 and 1" in got
    assert f"{plan}:9 trial.0.outputs.0: '/abs' must be a path under {{out}}, relative to its directory" in got
    assert f"{plan}:13 trial.0.metric.0.better: 'up': use \"higher\" or \"lower\"" in got


def test_profile_devices_and_probes_are_checked(tmp_path: Path) -> None:
    from stackctl.profile.loader import load_stack

    p = tmp_path / "s.toml"
    p.write_text('[stack]\nname = "s"\n[targets]\npython = ["3.11"]\nplatforms = ["linux_x86_64"]\n'
                 '[indexes.public]\nfrom_pip = true\n[pins.torch]\nversion = "2.11.0"\nindex = "public"\n'
                 'gate = { order = 1, phase = "device" }\n'
                 '[devices]\ngpus = "most"\ncdi = ["nvidia.com/gpu"]\nnodes = ["mtgpu0"]\n'
                 '[[gate.probe]]\nname = "p"\nkind = "parity"\nsetup = "x = ("\nop = "x"\ndevice = "cuda"\n'
                 'atol = -1\n')
    with pytest.raises(ProfileError) as err:
        load_stack(p)
    got = "\n".join(str(x) for x in err.value.problems)
    for want in ('pins.torch.gate.phase: an entry whose import needs a device takes mode = "spec"',
                 "devices.gpus: 'most' is not a --gpus value",
                 "devices.cdi.0: 'nvidia.com/gpu' is not a CDI device name",
                 "devices.nodes.0: 'mtgpu0' is not a device node",
                 "gate.probe.0.setup: not a Python statement",
                 "gate.probe.0.atol: a tolerance is 0 or more",
                 'gate.probe.0.phase: a parity probe runs on a device: give it phase = "device"'):
        assert want in got, got


def test_device_phase_imports_spec_entries_and_the_whole_gate_leaves_device_probes_out() -> None:
    from stackctl.image.gatespec import gate_spec
    from stackctl.profile import load_profile

    stack = load_profile(str(Path(__file__).parents[2] / "benchmarks" / "gpu-host" / "stacks" / "h200.toml"))
    device = gate_spec(stack, phase=stack.probes[0].phase)
    assert [(e["dist"], e["mode"]) for e in device["entries"]] == [("torch", "import"), ("triton", "import"),
                                                                   ("numpy", "import")]
    assert [p["kind"] for p in device["probes"]] == ["expr", "parity"]
    whole = gate_spec(stack)
    assert [(e["dist"], e["mode"]) for e in whole["entries"]][:2] == [("torch", "spec"), ("triton", "spec")]
    assert whole["probes"] == []
    assert stack.devices is not None and stack.devices.describe() == "--gpus all"


def test_device_options_are_what_docker_run_sends() -> None:
    import docker.types

    from stackctl.engine.docker import device_options
    from stackctl.profile.model import Devices

    def host_config(devices: Devices) -> dict[str, object]:
        options = device_options(devices)
        options.pop("environment")
        return dict(docker.types.HostConfig(version="1.41", **options))

    assert host_config(Devices(gpus="all"))["DeviceRequests"] == [
        {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}]
    assert host_config(Devices(gpus="device=0,2"))["DeviceRequests"][0]["DeviceIDs"] == ["0", "2"]
    assert host_config(Devices(cdi=("nvidia.com/gpu=all",)))["DeviceRequests"][0]["Driver"] == "cdi"
    musa = Devices(nodes=("/dev/mtgpu0", "/dev/dri:/dev/dri:rw"), runtime="mthreads",
                   env=(("MTHREADS_VISIBLE_DEVICES", "all"),))
    hc = host_config(musa)
    assert hc["Runtime"] == "mthreads"
    assert [(d["PathOnHost"], d["PathInContainer"], d["CgroupPermissions"]) for d in hc["Devices"]] == [
        ("/dev/mtgpu0", "/dev/mtgpu0", "rwm"), ("/dev/dri", "/dev/dri", "rw")]
    assert device_options(musa)["environment"] == {"MTHREADS_VISIBLE_DEVICES": "all"}
    assert device_options(None) == {"environment": {}}


def test_the_reference_plan_and_the_gpu_hosts_load() -> None:
    root = Path(__file__).parents[2]
    plan = load_plan(root / "stacks" / "validation" / "plan.toml")
    assert [t.name for t in plan.trials] == ["unfiltered-ut", "layername-matcher", "device-ops", "qwen3-8b-decode"]
    assert [m.band for m in plan.trials[-1].metrics] == [0.5, 1.0, 0.5]
    gpu = load_plan(root / "benchmarks" / "gpu-host" / "stacks" / "validation" / "plan.toml")
    assert gpu.files == ("suite",) and gpu.trial("matmul-step") is not None


@pytest.mark.parametrize("text", [
    'plan = 3', '[plan]\nalpha = "x"\nfiles = [3]', 'trial = {name = "x"}', '[[trial]]\nname = 3\nkind = []',
    '[[trial]]\nname = "b"\nkind = "bench"\ncommand = ["x"]\n[[trial.metric]]\nname = "m"\nband = "wide"',
    '[[trial]]\nname = "t"\nkind = "tests"\ncommand = ["x"]\nrepeat = 0\nmetric = []', 'x = [[[[[[[[[[1]]]]]]]]]]',
    '[plan\n',
])
def test_a_malformed_plan_is_problems_never_a_crash(tmp_path: Path, text: str) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(text)
    with pytest.raises(ProfileError) as err:
        load_plan(plan)
    assert err.value.problems and all(str(p).startswith(str(plan)) for p in err.value.problems)


def test_report_names_an_unreadable_ab_record_instead_of_failing() -> None:
    from stackctl.base.evidence import Evidence
    from stackctl.review.validation import validation_section

    ev = Evidence("ab", "stackctl ab a b", "2026-12-02T00:00:00Z", "b", None, (),
                  {"control": {"kind": "image"}, "candidate": 3})
    section = validation_section(ev, "build/b.ab.json", {}, "b")
    assert section.status == "failed"
    assert section.text == "build/b.ab.json is not a readable ab record (KeyError: 'ref'); run `stackctl ab a b` again"
