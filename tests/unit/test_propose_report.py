"""The pure parts of propose and report: release-train picks, torch-labelled builds, Markdown that renders."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version
from rich.console import Console

from stackctl.cli.app import invoked, output
from stackctl.cli.report import render_markdown
from stackctl.index.pages import IndexedFile
from stackctl.profile.model import Index, Pin, Stack, Target
from stackctl.resolve.propose import Move, Proposal, propose, render_profile, torch_in_label
from stackctl.review.report import Recorded, Report, build_report
from stackctl.review.sections import Section, Table
from tests.support.cli import Cli

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=timezone.utc)
TARGETS = (Target("3.10", "linux_x86_64"),)


def wheel(name: str, version: str, minutes: float, *, yanked: bool = False, platform: str = "linux_x86_64"
          ) -> IndexedFile:
    fn = f"{name}-{version}-cp310-cp310-{platform}.whl"
    return IndexedFile(fn, f"http://index.invalid/files/{fn}", canonicalize_name(name), Version(version), "0" * 64,
                       frozenset({Tag("cp310", "cp310", platform)}), upload_time=T0 + timedelta(minutes=minutes),
                       yanked=yanked)


def stack(*pins: Pin) -> Stack:
    return Stack("s", "", TARGETS, (Index("musa", "http://index.invalid/simple/"),), pins)


def test_torch_in_label_respects_the_version_boundary() -> None:
    assert torch_in_label("musa5.2.0torch2.11.0.post2", "2.11.0.post2")
    assert torch_in_label("musa5.2.0torch2.9.1.post1s5000", "2.9.1.post1")
    assert not torch_in_label("musa5.2.0torch2.11.0.post20", "2.11.0.post2")
    assert not torch_in_label("musa5.2.0torch2.11.0.post1", "2.11.0")
    assert not torch_in_label(None, "2.11.0")


def test_a_train_waits_for_its_last_member_and_a_follower_follows() -> None:
    s = stack(Pin("torch", "2.11.0.post1+musa5.2.0", "musa", train="t"),
              Pin("torchaudio", "2.11.0+musa5.2.0", "musa", train="t"),
              Pin("deep_ep", "1.1.0+musa5.2.0torch2.11.0.post1", "musa"))
    files = {
        canonicalize_name("torch"): [wheel("torch", "2.11.0.post1+musa5.2.0", 0),
                                     wheel("torch", "2.11.0.post2+musa5.2.0", 1000),
                                     wheel("torch", "2.11.0.post3+musa5.2.0", 2000),  # no torchaudio with it
                                     wheel("torch", "2.11.0.post4+musa5.2.0", 3000, yanked=True),
                                     wheel("torch", "2.11.0.post5+musa5.2.1mp22", 3000, platform="linux_aarch64")],
        canonicalize_name("torchaudio"): [wheel("torchaudio", "2.11.0+musa5.2.0", 2),
                                          wheel("torchaudio", "2.11.0.post2+musa5.2.0", 1010)],
        canonicalize_name("deep_ep"): [wheel("deep_ep", "1.1.0+musa5.2.0torch2.11.0.post1", 3),
                                       wheel("deep_ep", "1.1.0+musa5.2.0torch2.11.0.post2", 1020),
                                       wheel("deep_ep", "1.1.0+musa5.2.0torch2.11.0.post3", 2020)],
    }
    p = propose(s, files, name="next")
    after = {m.pin: m.after for m in p.moves}
    assert after == {"torch": "2.11.0.post2+musa5.2.0", "torchaudio": "2.11.0.post2+musa5.2.0",
                     "deep_ep": "1.1.0+musa5.2.0torch2.11.0.post2"}
    [held] = [h for h in p.held if h.subject == "train t"]
    assert held.reason.startswith("torch 2.11.0.post3+musa5.2.0 (published 2026-05-02T18:20:00Z) has no torchaudio")
    assert "torchaudio's newest is 2.11.0.post2+musa5.2.0, published 2026-05-02T01:50:00Z" in held.reason
    text = render_profile(p)
    assert 'extends = "s"' in text and "[pins.deep_ep]" in text and text.count("[pins.") == 3

    # the torch the proposal picks has no deep_ep build: it says so, and blocks
    files[canonicalize_name("deep_ep")] = files[canonicalize_name("deep_ep")][:1]
    blocked = propose(s, files).blocked
    assert [h.subject for h in blocked] == ["deep_ep"] and "built against torch 2.11.0.post2" in blocked[0].reason


def test_a_proposed_profile_reads_like_a_hand_written_one() -> None:
    """The header, then [stack] and one [pins.NAME] table per move: keys bare where TOML allows, quoted where it
    must, values escaped as TOML escapes them; and it parses back to the same values."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    moves = (Move("torch", "2.9.1", "2.11.0+musa5.2.0", "minor", "2026-05-01T09:00:00Z", "newest of its line",
                  "musa-torch"),
             Move("vendor.ext", "1.0", "1.1", "local label (a → b)", None, 'the "fixed" build'))
    text = render_profile(Proposal("musa-2.9", "musa-2.11", moves, (), 3600.0, False))
    assert text == """# Proposed by `stackctl propose musa-2.9`: 2 pins move; everything else is
# inherited from musa-2.9.

[stack]
name = "musa-2.11"
extends = "musa-2.9"
description = "musa-2.9 with torch 2.11.0+musa5.2.0, vendor.ext 1.1"

[pins.torch]
version = "2.11.0+musa5.2.0"
note = "minor; published 2026-05-01T09:00:00Z; newest of its line"

[pins."vendor.ext"]
version = "1.1"
note = "local label (a → b); upload time unknown; the \\"fixed\\" build"
"""
    doc = tomllib.loads(text)
    assert doc["pins"]["vendor.ext"]["note"] == 'local label (a → b); upload time unknown; the "fixed" build'
    assert "pins" not in tomllib.loads(render_profile(Proposal("a", "b", (), (), 3600.0, False)))


def test_markdown_report_escapes_and_folds_long_tables() -> None:
    rows = tuple((f"lib{i}.so.*", "<dist-info>", "a|b") for i in range(12))
    rep = Report("new", "old", "2 pins move", (
        Section("abi", "ABI", "stale", "stackctl abi new --record build/new.abi.json", "2026-05-01T09:00:00Z",
                (Table(("file", "needed", "where"), rows, "resolutions"),), text="recorded for another lock"),))
    md = render_markdown(rep)
    assert "### ABI ⚠️ stale" in md and "_from `stackctl abi new --record build/new.abi.json` at" in md
    assert "<details><summary>resolutions (12 rows)</summary>" in md
    assert "| lib0.so.\\* | &lt;dist-info&gt; | a\\|b |" in md


def test_a_record_quotes_the_command_without_credentials() -> None:
    output.argv = ("abi", "s", "--index", "musa=https://robot:s3cret@vendor.invalid/simple/")
    try:
        assert invoked() == "stackctl abi s --index musa=https://vendor.invalid/simple/"
    finally:
        output.argv = ()


def _recorded(build_time: str, pub_time: str, pub_image: str, overrides: tuple = ()) -> Recorded:  # type: ignore[type-arg]
    from stackctl.profile.loader import load_stack
    from stackctl.publish.publication import Publication
    from stackctl.resolve.lock import Lock
    from tests.conftest import STACKS

    new = load_stack(STACKS / "public-example.toml")
    lock = Lock(new.name, new.digest(), (), overrides=overrides)
    build = {"stack": new.name, "time": build_time, "lock_digest": lock.digest(), "image": "r/p:t",
             "image_id": "sha256:" + "b" * 64, "labels": {"org.opencontainers.image.revision": "2" * 40},
             "gate": ["PASS import pycparser version=2.22"], "steps": 20, "cached_steps": 0}
    pub = Publication("r/p:t", "sha256:" + "d" * 64, pub_image, "1" * 40, lock.digest(), new.name, pub_time)
    return Recorded(new, "public-example", lock=lock, lock_path="stacks/public-example.lock",
                    lock_time="2026-05-01T09:00:00Z", build=build, build_path="build/public-example.build.json",
                    publications=(pub,), publications_path="build/publications.jsonl", now="2026-05-02T09:00:00Z")


def test_a_build_and_a_publication_of_two_images_are_not_both_proved() -> None:
    # published from revision 1's image, then built again from revision 2: the publication is not of this build
    rep = build_report(_recorded("2026-05-01T12:00:00Z", "2026-05-01T10:00:00Z", "sha256:" + "a" * 64))
    assert rep.section("build").status == "ok" and rep.section("publication").status == "stale"
    assert rep.section("publication").text == (
        f"the build record is of image sha256:{'b' * 12} (revision {'2' * 12}), the publication of image "
        f"sha256:{'a' * 12} (revision {'1' * 12}): published before that build; run `stackctl publish "
        "public-example --repository r/p`")  # the repository the build record's image r/p:t was built for
    assert f"; image r/p:t @ sha256:{'d' * 64} published for this lock, then built again as another image (r/p:t), " \
           "not published." in rep.summary
    assert "Publication" in rep.summary.split("Not proved here:")[1]
    # built, then another image published: the build record is the older of the two
    rep = build_report(_recorded("2026-05-01T10:00:00Z", "2026-05-01T12:00:00Z", "sha256:" + "a" * 64))
    assert rep.section("build").status == "stale" and rep.section("publication").status == "ok"
    # one image: both proved
    rep = build_report(_recorded("2026-05-01T10:00:00Z", "2026-05-01T12:00:00Z", "sha256:" + "b" * 64))
    assert rep.section("build").status == "ok" and rep.section("publication").status == "ok"
    # the engine's id of the build and the published config digest are two ids, named apart
    rows = dict(rep.section("publication").tables[0].rows)
    assert rows["built as (engine id)"] == "sha256:" + "b" * 64 and "image id" not in rows
    assert dict(rep.section("build").tables[0].rows)["engine id"] == "sha256:" + "b" * 64


def test_a_lock_resolved_through_an_override_says_so_in_the_report() -> None:
    from stackctl.resolve.lock import IndexOverride

    rep = build_report(_recorded("2026-05-01T10:00:00Z", "2026-05-01T12:00:00Z", "sha256:" + "b" * 64,
                                 (IndexOverride("public", "http://127.0.0.1:8651/simple/", "--index public"),)))
    said = ("the lock for public-example was resolved through an index override: public at "
            "http://127.0.0.1:8651/simple/ (--index public)")
    assert said in rep.summary and said in rep.section("files").text
    assert said in render_markdown(rep)


def test_counted_nouns_agree_with_one() -> None:
    from stackctl.profile.model import Probe

    assert Probe("data", "file-count", "corelib", "data/*.json", 1).describe() == "1 file corelib/data/*.json"
    one = Move("torchada", "0.1.102", "0.1.103", "patch", None, "newest in line")
    assert "`stackctl propose a`: 1 pin move;" in render_profile(Proposal("a", "b", (one,), (), 3600.0, False))


def test_the_plain_report_names_its_fields_and_no_placeholder_paths() -> None:
    import importlib

    rep = build_report(_recorded("2026-05-01T10:00:00Z", "2026-05-01T12:00:00Z", "sha256:" + "b" * 64))
    assert "OLD.build.json" not in rep.section("image-diff").text
    assert rep.section("image-diff").text == ("public-example extends nothing: no old stack to compare with (name "
                                              "one with --since)")
    out = io.StringIO()
    report_cli = importlib.import_module("stackctl.cli.report")
    app = importlib.import_module("stackctl.cli.app")
    made = Console(file=out, width=80, force_terminal=False, color_system=None, soft_wrap=True, highlight=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(app.console, "_console", made)
        report_cli._print_human(rep)
    lines = out.getvalue().splitlines()
    assert "image: r/p:t" in lines and not any(ln.startswith(": ") for ln in lines), lines
    many = Report("s", None, "x", (Section("files", "Files", "ok", "stackctl resolve s", None,
                                           (Table(("a", "b"), tuple((str(i), "x") for i in range(39))),)),))
    md = render_markdown(many)
    assert "<summary>39 rows</summary>" in md and "(39 rows)" not in md


def test_rerun_hints_keep_the_options_the_step_was_run_with() -> None:
    """`stackctl publish public-example` alone fails for an image built with --repository ("names no registry
    host"); a stale ABI check run again without its --inventory checks something else."""
    import dataclasses

    from stackctl.base.evidence import Evidence
    from stackctl.publish.publication import Publication

    ev = _recorded("2026-05-01T10:00:00Z", "2026-05-01T12:00:00Z", "sha256:" + "b" * 64)
    built = "stackctl build public-example --repository 127.0.0.1:5000/pe/public-example"
    other = {**dict(ev.build or {}), "lock_digest": "sha256:" + "9" * 64, "command": built,
             "image": "127.0.0.1:5000/pe/public-example:3.12"}
    abi = Evidence("abi", "stackctl abi public-example --inventory base.json", "2026-05-01T09:30:00Z",
                   "public-example", "sha256:" + "9" * 64, (), {})
    rep = build_report(dataclasses.replace(ev, build=other, publications=(), abi=abi))
    assert rep.section("build").text.endswith(f"run `{built}`")
    assert rep.section("publication").text.endswith(
        "run `stackctl publish public-example --repository 127.0.0.1:5000/pe/public-example`")
    assert rep.section("abi").text.endswith("run `stackctl abi public-example --inventory base.json`")
    # a publication of another lock says how it was published
    published = "stackctl publish public-example --repository 127.0.0.1:5000/pe/public-example --sign-key k.pem"
    pub = Publication("127.0.0.1:5000/pe/public-example:3.12", "sha256:" + "d" * 64, "sha256:" + "b" * 64,
                      "1" * 40, "sha256:" + "9" * 64, "public-example", "2026-05-01T12:00:00Z", command=published)
    rep = build_report(dataclasses.replace(ev, publications=(pub,)))
    assert rep.section("publication").status == "stale"
    assert rep.section("publication").text.endswith(f"run `{published}`")


def test_a_stack_with_no_predecessor_is_not_unproved_for_want_of_one() -> None:
    """public-example extends nothing: the comparisons with an old stack do not apply, and the summary's "not
    proved here" lists only what could have been proved."""
    rep = build_report(_recorded("2026-05-01T10:00:00Z", "2026-05-01T12:00:00Z", "sha256:" + "b" * 64))
    apart = {"profile", "wheel-diff", "image-diff", "scan", "validation"}
    assert {s.key for s in rep.sections if s.status == "not applicable"} == apart
    # the ABI check could have run: it alone is left to prove
    assert rep.summary.endswith("Not proved here: ABI closure and unguarded pins."), rep.summary
    assert "⚫ not applicable" in render_markdown(rep)


def test_the_headline_names_the_image_built_and_published_as_the_sections_below_do() -> None:
    """Built and published with --repository: the headline names that repository, never the profile's, and
    says published for a lock that was, as the publication section does."""
    import dataclasses

    from stackctl.publish.publication import Publication
    from stackctl.review.diff import rendered_tag

    ev = _recorded("2026-05-01T10:00:00Z", "2026-05-01T12:00:00Z", "sha256:" + "b" * 64)
    image = "127.0.0.1:5000/pe/public-example:" + rendered_tag(ev.new)
    built = dataclasses.replace(ev, build={**dict(ev.build or {}), "image": image})
    pub = Publication(image, "sha256:" + "d" * 64, "sha256:" + "b" * 64, "1" * 40, ev.build["lock_digest"],  # type: ignore[index]
                      "public-example", "2026-05-01T12:00:00Z")
    rep = build_report(dataclasses.replace(built, publications=(pub,)))
    assert rep.section("publication").status == "ok"
    assert rep.summary.startswith(f"public-example; image {image} @ sha256:{'d' * 64}. "), rep.summary
    # built, not yet published
    rep = build_report(dataclasses.replace(built, publications=()))
    assert rep.section("publication").status == "not run"
    assert rep.summary.startswith(f"public-example; image {image} built for this lock, not published. "), rep.summary
    # the lock moved on: where its image would go is where the last build put the stack's image
    other = dataclasses.replace(built, build={**dict(built.build or {}), "lock_digest": "sha256:" + "9" * 64},
                                publications=())
    rep = build_report(other)
    assert rep.summary.startswith(f"public-example; image {image} neither built nor published for this lock. "), \
        rep.summary
    assert "stackctl/public-example" not in rep.summary.split(". ")[0]


def test_the_html_page_shows_code_spans_as_code_and_keeps_tables_in_their_box() -> None:
    from stackctl.cli.report import render_html

    rep = Report("s", None, "not proved: run `stackctl abi s`", (
        Section("build", "Build", "stale", "stackctl build s", None,
                (Table(("", ""), (("image", "r/p:t"), ("hint", "``a `b` c``"))),),
                text="build/s.build.json is a build of another lock; run `stackctl build s --repository r/p`"),))
    page = render_html(rep)
    assert "<p>not proved: run <code>stackctl abi s</code></p>" in page
    assert "run <code>stackctl build s --repository r/p</code></p>" in page
    assert "<td><code>a `b` c</code></td>" in page
    assert page.count('<div class="table"><table>') == 1 and "overflow-wrap:anywhere" in page


def test_report_out_is_the_page_or_the_body_never_the_json(cli: Cli, tmp_path: Path) -> None:
    from tests.conftest import STACKS

    r = cli("report", str(STACKS / "public-example.toml"), "--json", "--out", str(tmp_path / "r.html"))
    assert r.code == 2 and "error: --out writes the --html page or the Markdown body; --json prints to stdout" in r.err
    r = cli("report", str(STACKS / "public-example.toml"), "--html", "--out", str(tmp_path / "no" / "r.html"))
    assert r.code == 2 and f"--out {tmp_path / 'no' / 'r.html'}: no directory" in r.err
    assert not (tmp_path / "r.html").exists()
