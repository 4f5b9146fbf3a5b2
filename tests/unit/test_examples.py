"""examples/musa-twin/ is the twin of stacks/' MUSA upgrade that docs/bisect.md runs: its profiles are what
`python examples/musa_twin.py write` makes from stacks/ today, so a moved pin there moves in the twin too."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples import musa_twin


def test_the_twins_profiles_are_written_from_stacks() -> None:
    for name, text in musa_twin.twin_profiles().items():
        assert (musa_twin.TWIN / "stacks" / name).read_text(encoding="utf-8") == text, \
            f"examples/musa-twin/stacks/{name} differs from stacks/: run `python examples/musa_twin.py write`"


def test_write_check_says_which_twin_drifted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    twin = tmp_path / "musa-twin"
    (twin / "stacks").mkdir(parents=True)
    monkeypatch.setattr(musa_twin, "TWIN", twin)
    assert musa_twin.main(["write", "--check"]) == 1
    assert "torch-2.11-post1.toml differs" in capsys.readouterr().err
    assert musa_twin.main(["write"]) == 0 and musa_twin.main(["write", "--check"]) == 0


def test_a_stack_the_twin_cannot_adjust_is_named(tmp_path: Path) -> None:
    for name in musa_twin.PROFILES:
        (tmp_path / name).write_text((musa_twin.REPO / "stacks" / name).read_text().replace(
            'repository = "vllm-musa"', 'repository = "elsewhere"'))
    with pytest.raises(musa_twin.Drifted, match="repository"):
        musa_twin.twin_profiles(tmp_path)
