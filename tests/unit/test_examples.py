"""examples/musa-twin/ is the twin of stacks/' MUSA upgrade that docs/bisect.md runs: its profiles are what
`python examples/musa_twin.py write` makes from stacks/ today, so a moved pin there moves in the twin too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from examples import musa_twin
from stackctl.ab.plan import load_plan


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


def test_bisect_md_names_trials_its_plans_have() -> None:
    """`stackctl bisect torch-2.11-post1 torch-2.11-post2 --trial NAME` reads the plan beside the candidate's
    profile: stacks/validation/plan.toml at the top of docs/bisect.md, the twin's in its section. NAME is one of
    that plan's trials."""
    text = (musa_twin.REPO / "docs" / "bisect.md").read_text(encoding="utf-8")
    intro, twin = text.split("\n## ", 1)[0], text.split("## The MUSA upgrade, on a twin", 1)[1].split("\n## ", 1)[0]
    for section, plan in ((intro, musa_twin.REPO / "stacks"), (twin, musa_twin.TWIN / "stacks")):
        trials = load_plan(plan / "validation" / "plan.toml")
        named = re.findall(r"^stackctl bisect torch-2\.11-post1 torch-2\.11-post2 --trial (\S+)", section, re.M)
        assert named and all(trials.trial(n) is not None for n in named), (named, [t.name for t in trials.trials])
