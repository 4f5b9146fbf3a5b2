"""The pure parts of resolve: tag ranking, lines, trains, lock diff, closure parsing and rendering."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from stackctl.errors import CheckFailed, ServiceError
from stackctl.index.pages import IndexedFile
from stackctl.profile.model import Index, Stack, Target
from stackctl.resolve.closure import entries_from_pylock, uv_failure, uv_platform
from stackctl.resolve.export import render_closure
from stackctl.resolve.lock import ClosureEntry, Lock, LockedFile, LockedPin, dumps, loads
from stackctl.resolve.newest import newest_in_line
from stackctl.resolve.targets import best_wheel, platform_tags, ranked_tags
from stackctl.resolve.trains import train_reports
from stackctl.review.diff import diff_locks

T310 = Target("3.10", "linux_x86_64")
T312 = Target("3.12", "linux_x86_64")
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def wheel(filename: str, *, yanked: bool = False, requires_python: str | None = None,
          at: datetime | None = None) -> IndexedFile:
    name, version, build, tags = parse_wheel_filename(filename)
    return IndexedFile(filename=filename, url=f"http://i.test/files/{filename}", name=name, version=version,
                       sha256="a" * 64, tags=frozenset(tags), build=build, yanked=yanked,
                       requires_python=requires_python, upload_time=at)


def test_platform_tags_follow_pips_order() -> None:
    tags = platform_tags("linux_x86_64", (2, 28))
    assert tags[0] == "manylinux_2_28_x86_64"
    assert tags.index("manylinux_2_17_x86_64") + 1 == tags.index("manylinux2014_x86_64")
    assert tags[-2:] == ["manylinux1_x86_64", "linux_x86_64"]


def test_ranked_tags_are_for_the_target_not_the_running_python() -> None:
    ranks = ranked_tags(T310)
    best = min(ranks, key=ranks.__getitem__)
    assert str(best) == "cp310-cp310-manylinux_2_35_x86_64"
    assert any(str(t) == "py3-none-any" for t in ranks)
    assert not any(t.interpreter == "cp312" for t in ranks)


@pytest.mark.parametrize(("target", "expected"), [
    (T310, "x-1.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
    (T312, "x-1.0-cp312-abi3-manylinux_2_28_x86_64.whl"),
])
def test_best_wheel(target: Target, expected: str) -> None:
    files = [wheel("x-1.0-py3-none-any.whl"),
             wheel("x-1.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
             wheel("x-1.0-cp312-abi3-manylinux_2_28_x86_64.whl"),
             wheel("x-1.0-cp310-cp310-manylinux_2_39_x86_64.whl"),  # needs a newer glibc than the target's
             wheel("x-1.0-cp310-cp310-linux_aarch64.whl")]
    assert best_wheel(files, target).filename == expected  # type: ignore[union-attr]


def test_best_wheel_respects_requires_python_and_build_numbers() -> None:
    assert best_wheel([wheel("x-1.0-py3-none-any.whl", requires_python=">=3.11")], T310) is None
    files = [wheel("x-1.0-1-py3-none-any.whl"), wheel("x-1.0-2-py3-none-any.whl")]
    assert best_wheel(files, T310).filename == "x-1.0-2-py3-none-any.whl"  # type: ignore[union-attr]


def test_best_wheel_prefers_a_file_that_is_not_yanked() -> None:
    """pip ranks yanked files below every other candidate, whatever their tags."""
    files = [wheel("x-1.0-cp310-cp310-manylinux_2_17_x86_64.whl", yanked=True), wheel("x-1.0-py3-none-any.whl")]
    assert best_wheel(files, T310).filename == "x-1.0-py3-none-any.whl"  # type: ignore[union-attr]
    assert best_wheel(files[:1], T310) is files[0]  # an exact pin may still take a yanked file


def test_newest_in_line_and_other_lines() -> None:
    files = [wheel(f"torch-2.11.0.post2+musa5.2.0-{t}.whl") for t in ("cp310-cp310-linux_x86_64",
                                                                     "cp312-cp312-linux_x86_64")]
    files += [wheel(f"torch-2.11.0.post3+musa5.2.0-{t}.whl") for t in ("cp310-cp310-linux_x86_64",
                                                                     "cp312-cp312-linux_x86_64")]
    files += [wheel("torch-2.11.0.post3+musa5.2.1mp22-cp310-cp310-linux_aarch64.whl"),
              wheel("torch-2.11.0.post5+musa5.2.0-cp310-cp310-linux_x86_64.whl"),  # cp310 only
              wheel("torch-2.11.0.post6+musa5.2.0-cp310-cp310-linux_x86_64.whl", yanked=True),
              wheel("torch-2.12.0rc1+musa5.2.0-cp310-cp310-linux_x86_64.whl"),
              wheel("torch-2.12.0+musa5.2.0-cp310-cp310-linux_x86_64.whl")]
    r = newest_in_line("2.11.0.post2+musa5.2.0", files, [T310, T312])
    assert str(r.newest_in_line) == "2.11.0.post3+musa5.2.0"
    assert r.other_lines == ("2.12.0+musa5.2.0 (no wheel for cp312-linux_x86_64; series 2.12)",
                             "2.11.0.post5+musa5.2.0 (no wheel for cp312-linux_x86_64)",
                             "2.11.0.post3+musa5.2.1mp22 (local label +musa5.2.1mp22; platform linux_aarch64)")


def test_other_lines_list_a_build_pep440_orders_below_the_pin() -> None:
    """`+musa5.2.1mp22` sorts below `+musa5.2.0` (a number outranks a string in a local label), yet the
    aarch64 build of the same release is another line a reviewer must see, never an upgrade."""
    files = [wheel(f"torch-2.11.0.post2+musa5.2.0-{t}.whl") for t in ("cp310-cp310-linux_x86_64",
                                                                     "cp312-cp312-linux_x86_64")]
    files += [wheel("torch-2.11.0.post2+musa5.2.1mp22-cp310-cp310-linux_aarch64.whl"),
              wheel("torch-2.11.0.post1+musa5.2.0-cp310-cp310-linux_x86_64.whl")]
    assert Version("2.11.0.post2+musa5.2.1mp22") < Version("2.11.0.post2+musa5.2.0")
    r = newest_in_line("2.11.0.post2+musa5.2.0", files, [T310, T312])
    assert str(r.newest_in_line) == "2.11.0.post2+musa5.2.0"
    assert r.other_lines == ("2.11.0.post2+musa5.2.1mp22 (local label +musa5.2.1mp22; platform linux_aarch64)",)


def test_an_old_release_of_another_series_is_no_other_line() -> None:
    """torch 2.1.2's wheels cover other platforms than 2.11.0's: still an old release, not a line to move to."""
    files = [wheel(f"torch-2.11.0-{t}.whl") for t in ("cp310-cp310-linux_x86_64", "cp312-cp312-linux_x86_64")]
    files += [wheel("torch-2.1.2-cp310-cp310-manylinux1_x86_64.whl"),
              wheel("torch-2.11.0-cp310-cp310-linux_aarch64.whl"),
              wheel("torch-2.12.0-cp310-cp310-linux_aarch64.whl")]
    r = newest_in_line("2.11.0", files, [T310, T312])
    assert r.other_lines == ("2.12.0 (platform linux_aarch64; series 2.12)",)


def test_outdated_never_offers_what_another_pin_forbids() -> None:
    from stackctl.resolve.lock import ClosureEntry, Lock, LockedFile, LockedPin
    from stackctl.resolve.run import held_by

    def f(name: str, requires: tuple[str, ...] = ()) -> LockedFile:
        return LockedFile("cp312-linux_x86_64", f"{name}.whl", f"http://i.test/{name}.whl", "a" * 64,
                          requires_dist=requires)

    torch = LockedPin("torch", "2.11.0", "public", (f("torch", (
        'nvidia-cudnn-cu13==9.19.0.56; platform_system == "Linux"', "cuda-toolkit[cublas]==13.0.2")),))
    cudnn = LockedPin("nvidia-cudnn-cu13", "9.19.0.56", "public", (f("cudnn"),))
    toolkit = ClosureEntry("cp312-linux_x86_64", "cuda-toolkit", "13.0.2",
                           f("toolkit", ('nvidia-cublas==13.1.0.3; extra == "cublas"',)))
    lk = Lock("s", "sha256:0", (torch, cudnn), (toolkit,))
    assert held_by(lk, "nvidia_cudnn_cu13", "9.19.1.2") == "torch==2.11.0"
    assert held_by(lk, "nvidia-cublas", "13.1.2.11") == "cuda-toolkit==13.0.2"
    assert held_by(lk, "nvidia-cudnn-cu13", "9.19.0.56") is None
    assert held_by(lk, "numpy", "2.5.5") is None


def test_trains_flag_the_trailing_member() -> None:
    published = {"torch": T0, "torch_musa": T0 + timedelta(minutes=10), "torchaudio": T0 + timedelta(hours=3),
                 "x": None}
    [r] = train_reports({"musa": ["torchaudio", "torch", "torch_musa"]}, published, window=3600)
    assert r.members == ("torch", "torch_musa", "torchaudio")
    assert r.spread_seconds == 3 * 3600 and r.trailing == ("torchaudio",)
    assert r.earliest == "2026-03-01T00:00:00Z"
    [unknown] = train_reports({"t": ["x"]}, published)
    assert unknown.spread_seconds is None and unknown.trailing == ()


def _file(target: str, sha: str, when: str = "2026-03-01T00:00:00Z") -> LockedFile:
    return LockedFile(target=target, filename=f"x-1.0-{target}.whl", url="http://i.test/x.whl", sha256=sha,
                      size=10, upload_time=when, upload_time_source="index", requires_dist=())


def test_lock_round_trip_and_diff() -> None:
    a = Lock("s", "sha256:p", (LockedPin("x", "1.0", "vendor", (_file("cp310-linux_x86_64", "a" * 64),)),),
             closure=(ClosureEntry("cp310-linux_x86_64", "numpy", "1.26.4", None, ("sha256:" + "c" * 64,)),))
    assert loads(dumps(a)) == a
    b = Lock("s", "sha256:p", (LockedPin("x", "1.0", "vendor", (_file("cp310-linux_x86_64", "b" * 64,
                                                                       "2026-03-02T00:00:00Z"),)),
                               LockedPin("y", "2.0", "vendor", ())),
             closure=(ClosureEntry("cp310-linux_x86_64", "numpy", "2.0.0"),))
    d = diff_locks(a, b)
    got = {(c.package, c.field, c.before, c.after) for c in d.changes}
    assert got == {("x", "sha256", "a" * 64, "b" * 64),
                   ("x", "upload_time", "2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"),
                   ("y", "pin", None, "2.0"), ("numpy", "closure", "1.26.4", "2.0.0")}
    assert len(d.changes) == len(got)
    moved = Lock("s", "sha256:p", (LockedPin("x", "1.0", "mirror", a.pins[0].files),), closure=a.closure)
    assert [(c.package, c.field, c.before, c.after) for c in diff_locks(a, moved).changes] == [
        ("x", "index", "vendor", "mirror")]
    assert diff_locks(a, a).changes == ()


def test_closure_from_pylock_and_rendering() -> None:
    pylock = {"packages": [
        {"name": "torch", "version": "2.11.0"},  # a pin: not part of the closure
        {"name": "numpy", "version": "1.26.4",
         "wheels": [{"url": "http://u:p@i.test/f/numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.whl",
                     "size": 5, "hashes": {"sha256": "d" * 64}, "upload-time": T0},
                    {"url": "http://i.test/f/numpy-1.26.4-py3-none-any.whl", "hashes": {"sha256": "e" * 64}}],
         "sdist": {"url": "http://i.test/f/numpy-1.26.4.tar.gz", "hashes": {"sha256": "f" * 64}}},
    ]}
    [entry] = entries_from_pylock(pylock, T310, {"torch"})  # type: ignore[arg-type]
    assert entry.name == "numpy" and entry.file is not None
    assert entry.file.filename == "numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.whl"
    assert entry.file.url == "http://i.test/f/numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.whl"  # no userinfo
    assert entry.hashes == tuple(f"sha256:{c * 64}" for c in "def")
    stack = Stack("s", "", (T310, T312), (Index("public", None, from_pip=True),), ())
    lock = Lock("s", "sha256:p", (), closure=(entry, ClosureEntry("cp312-linux_x86_64", "numpy", "2.0.0", None,
                                                                   ("sha256:" + "9" * 64,))))
    text = render_closure(stack, lock)
    assert 'numpy==1.26.4 ; python_version == "3.10" and platform_machine == "x86_64" \\\n' in text
    assert 'numpy==2.0.0 ; python_version == "3.12" and platform_machine == "x86_64" \\\n' in text
    assert uv_platform(T310) == "x86_64-manylinux_2_35"


def test_uv_failures_are_classified_by_what_failed() -> None:
    unsolvable = ("  x No solution found when resolving dependencies:\n  `-> Because nosuchdep was not found in the "
                  "package registry and you require nosuchdep, we can conclude that your requirements are "
                  "unsatisfiable.\n")
    e = uv_failure("cp310-linux_x86_64", unsolvable)
    assert isinstance(e, CheckFailed) and "nosuchdep was not found" in str(e)
    denied = unsolvable + ("\n  hint: An index URL (http://127.0.0.1:9/simple/) could not be queried due to a lack "
                           "of valid authentication credentials (401 Unauthorized).\n")
    e = uv_failure("cp310-linux_x86_64", denied)
    assert isinstance(e, ServiceError)
    assert str(e) == ("closure for cp310-linux_x86_64: uv could not read an index: An index URL "
                      "(http://127.0.0.1:9/simple/) could not be queried due to a lack of valid authentication "
                      "credentials (401 Unauthorized).")
    e = uv_failure("cp312-linux_x86_64", "error: Failed to fetch: `http://127.0.0.1:9/simple/numpy/`\n")
    assert isinstance(e, ServiceError) and str(e).startswith("closure for cp312-linux_x86_64: uv pip compile failed")
