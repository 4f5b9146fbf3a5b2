"""The publication record read back, old and new; skopeo's message and auth file as publish hands them over."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from stackctl.engine import skopeo
from stackctl.publish.publication import read_records


def test_a_record_of_an_earlier_version_is_still_read(tmp_path: Path) -> None:
    old = {"tag": "r/x:t", "digest": "sha256:" + "a" * 64, "image_id": "sha256:" + "b" * 64, "revision": "abc",
           "lock_digest": None, "stack": "x", "time": "2026-01-01T00:00:00Z", "verified": ["x"],
           "engine_digest": "sha256:" + "c" * 64, "layers_read_from": "the engine's layer store"}
    path = tmp_path / "publications.jsonl"
    path.write_text(json.dumps(old) + "\n")
    [pub] = read_records(path)
    assert pub.digest == old["digest"] and pub.verified == ("x",) and pub.pinned_ref == f"r/x@{old['digest']}"


def test_skopeo_says_its_message_without_the_upload_state() -> None:
    line = ('time="2026-12-02T12:24:26Z" level=fatal msg="writing blob: uploading layer to '
            'http://h:1/v2/x/blobs/uploads/9d?_state=AbC-x_y%3D: received unexpected HTTP status: 500 \\"x\\""')
    assert skopeo._last_line("noise\n" + line) == (
        'writing blob: uploading layer to http://h:1/v2/x/blobs/uploads/9d: received unexpected HTTP status: 500 "x"')


def test_the_auth_file_is_private_holds_only_the_login_and_goes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from stackctl.engine import credentials, registry

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(registry, "asks_login", lambda host: True)
    monkeypatch.setattr(credentials, "resolve", lambda host: credentials.Login("robot", "s3cret", host))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    with skopeo.auth_file("reg.example:5000") as path:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert json.loads(path.read_text()) == {"auths": {"reg.example:5000": {"auth": "cm9ib3Q6czNjcmV0"}}}
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(registry, "asks_login", lambda host: False)  # no login asked: none looked up
    monkeypatch.setattr(credentials, "resolve", lambda host: pytest.fail("a login was looked up"))
    with skopeo.auth_file("reg.example:5000") as path:
        assert json.loads(path.read_text()) == {"auths": {}}


def test_loopback_and_marked_registries_go_without_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(skopeo.INSECURE_ENV, "reg.internal:5000, other:1")
    assert skopeo.insecure("127.0.0.1:5000") and skopeo.insecure("localhost:5000") and skopeo.insecure("[::1]:5000")
    assert skopeo.insecure("reg.internal:5000") and not skopeo.insecure("reg.internal:5001")
    assert not skopeo.insecure("registry.example:443")


BAD_RECORDS = [
    (None, False, "no build record"),
    ("{not json", False, "not a build record (Expecting property name"),  # then where, as json says it
    ("[]", False, "not a build record"),
    ("[]", True, "not a build record"),
    ('{"image": "r/x:t"}', True, "names no stack image; build the stack again"),
]


@pytest.mark.parametrize(("text", "stack_image", "said"), BAD_RECORDS)
def test_publish_and_the_layout_made_when_first_needed_read_a_bad_build_record_alike(
        tmp_path: Path, text: str | None, stack_image: bool, said: str) -> None:
    """`publish` reads the build record twice: to make the layout the build left to be made, then to copy it.
    A record missing or malformed gets one message, whichever read meets it first."""
    from stackctl.errors import InputError
    from stackctl.image.build import layout_pending
    from stackctl.publish.publication import build_entry

    path = tmp_path / "x.build.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(InputError) as made:
        layout_pending(path, stack_image)
    with pytest.raises(InputError) as published:
        build_entry(path, stack_image)
    assert str(made.value) == str(published.value)
    assert str(made.value).startswith(f"{path}: {said}") and made.value.exit_code == 2
    assert made.value.hint == published.value.hint == ("run `stackctl build` first" if text is None else None)


@pytest.mark.parametrize(("text", "said"), [*((t, s) for t, stack_image, s in BAD_RECORDS if not stack_image),
                                           ('{"image_id": "sha256:1"}', "names no image; build the stack again")])
def test_ab_reads_a_bad_build_record_as_publish_does_and_says_it_may_name_the_images(
        tmp_path: Path, text: str | None, said: str) -> None:
    """`ab` without --image runs each stack's latest build: its record read as publish reads it; a missing one
    says to build it or name the images."""
    from stackctl.ab.legs import image_legs
    from stackctl.errors import InputError
    from stackctl.profile.locate import stack_ref

    ref = stack_ref(str(Path(__file__).parents[2] / "stacks" / "public-example.toml"))
    path = tmp_path / f"{ref.name}.build.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(InputError) as info:
        image_legs((ref, ref), (), tmp_path, "python3", "/work")
    assert str(info.value).startswith(f"{path}: {said}")
    if text is None:
        assert info.value.hint == f"build it (`stackctl build {ref.arg}`) or name the images with --image"
