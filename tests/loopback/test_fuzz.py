"""A bounded run of the fuzz harness (tests/fuzz/targets.py) on every kind of input stackctl reads.

`hypothesis` draws the mutations, shrinks a failure to the fewest and smallest of them, and keeps failing
examples in its database so the next run tries them first. `benchmarks/fuzz.py` runs the same targets
100,000 times or more per kind. The ELF seeds are libraries gcc builds, hence loopback rather than unit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import KINDS, Corpus, cli_case, make_corpus, mutation_strategy, run_case

EXAMPLES = 250  # per kind: the whole module stays well under a minute


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    yield make_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("kind", KINDS)
def test_no_input_crashes_a_parser(corpus: Corpus, kind: str) -> None:
    @settings(max_examples=EXAMPLES, deadline=2000, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 15), mutations=mutation_strategy(kind))
    def case(seed: int, mutations: list[tuple[object, ...]]) -> None:
        run_case(corpus, kind, seed, mutations)  # raises anything that is not a StackctlError

    case()


@pytest.mark.parametrize("kind", ["profile", "lock"])
def test_the_command_line_answers_every_input_with_an_exit_code_and_a_json_object(
        corpus: Corpus, kind: str, tmp_path: Path) -> None:
    from tests.fuzz.targets import apply

    @settings(max_examples=40, deadline=5000, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 15), mutations=mutation_strategy(kind))
    def case(seed: int, mutations: list[tuple[object, ...]]) -> None:
        seeds = corpus.seeds(kind)
        data = apply(seeds[seed % len(seeds)], mutations, kind)
        problem = cli_case(corpus, kind, data, tmp_path / kind)
        assert problem is None, problem

    case()
