"""The cluster stage's pure parts: the address a user names, and a node's error as the caller sees it."""

from __future__ import annotations

import pytest

from stackctl.cluster.address import cluster_address, parse_address
from stackctl.cluster.tasks import _error_of, _rebuilt
from stackctl.errors import CheckFailed, InputError, ServiceError, StackctlError


@pytest.mark.parametrize(("given", "host", "port", "client"), [
    ("10.0.0.5:6379", "10.0.0.5", 6379, False),
    ("ray://head.internal:10001", "head.internal", 10001, True),
    ("[fd00::5]:6379", "fd00::5", 6379, False),
    (" 127.0.0.1:6379 ", "127.0.0.1", 6379, False),
])
def test_an_address_is_a_heads_host_and_port(given: str, host: str, port: int, client: bool) -> None:
    address = parse_address(given)
    assert (address.host, address.port, address.client, str(address)) == (host, port, client, given.strip())


@pytest.mark.parametrize("given", ["", "head", "10.0.0.5", "10.0.0.5:0", "10.0.0.5:65536", "http://h:1", "auto",
                                   "local", "h:1/path", "u:p@h:1"])
def test_anything_else_is_a_usage_error_naming_the_option(given: str) -> None:
    with pytest.raises(InputError, match=r"--cluster .*give a Ray head.s HOST:PORT or ray://HOST:PORT"):
        parse_address(given)


def test_the_option_wins_over_the_environment_and_neither_is_no_cluster() -> None:
    assert cluster_address(None, {}) is None
    assert cluster_address(None, {"STACKCTL_CLUSTER": "  "}) is None
    assert str(cluster_address(None, {"STACKCTL_CLUSTER": "h:1"})) == "h:1"
    assert str(cluster_address("g:2", {"STACKCTL_CLUSTER": "h:1"})) == "g:2"
    with pytest.raises(InputError, match="STACKCTL_CLUSTER 'x'"):
        cluster_address(None, {"STACKCTL_CLUSTER": "x"})


class _Gate(CheckFailed):
    """A stage's own failure, which a node raises and the caller never unpickles."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(f"{len(lines)} lines", hint="see the gate")


@pytest.mark.parametrize(("raised", "kind", "code"), [
    (_Gate(["FAIL import x"]), CheckFailed, 1), (InputError("bad"), InputError, 2),
    (ServiceError("down"), ServiceError, 3), (StackctlError("odd"), StackctlError, 2)])
def test_a_nodes_error_comes_back_with_its_kind_words_hint_and_exit_code(
        raised: StackctlError, kind: type[StackctlError], code: int) -> None:
    back = _rebuilt(*_error_of(raised))
    assert type(back) is kind and str(back) == str(raised) and back.hint == raised.hint
    assert back.exit_code == code


def test_a_trial_whose_runs_were_not_on_one_node_and_card_is_an_error_not_a_verdict() -> None:
    from stackctl.ab.plan import Trial, TrialKind
    from stackctl.ab.run import same_place
    from stackctl.ab.runs import Run

    trial = Trial("speed", TrialKind.BENCH, ("{python}", "bench.py"), devices=1)

    def run(order: int, node: str | None, card: str) -> Run:
        return Run("speed", ("control", "candidate")[order % 2], order, order // 2, 0, "", 1.0, 0,
                   devices=(card,), node=node)

    assert same_place(trial, [run(i, "n1 host", "GPU-a") for i in range(5)]) is None
    assert same_place(trial, [run(i, None, "") for i in range(3)]) is None  # one machine, no cards named
    moved = same_place(trial, [run(0, "n1 host", "GPU-a"), run(1, "n1 host", "GPU-b"), run(2, "n1 host", "GPU-a")])
    assert moved is not None and moved.verdict == "broken" and moved.failing
    assert "2 different places" in moved.errors[0] and "GPU-b" in moved.errors[0]
