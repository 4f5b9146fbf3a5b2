"""The twin of the MUSA post1 → post2 upgrade, on the project's own base image, for `stackctl bisect` on a CPU host
(docs/bisect.md, "The MUSA upgrade, on a twin").

    python examples/musa_twin.py serve --port 8650    # the example indexes, built from the twin
    python examples/musa_twin.py write [--check]      # examples/musa-twin/stacks/ from stacks/

examples/musa-twin/ is a project to copy: `stacks/torch-2.11-post1.toml` and `torch-2.11-post2.toml` with the pins,
release trains and gate of stacks/, adjusted to the base image `stackctl-base:bookworm` (one target, cp311, its
Python; deep_ep built for it too; deep_ep's extension checked by `find_spec` in post1 as post2 does; the MUSA run
time `libmusart.so.5` taken as coming with the device, which a CPU host lacks), and `stacks/validation/`, the plan
whose `dispatch` trial times `torchada.dispatch`.

`write` makes the twin's two profiles from stacks/ (`--check`: exit 1 when the files differ from what it would
write). `serve` serves the example indexes of examples/vendor_index.py built from the twin's profiles, with
torchada's wheels replaced by the twin's own under the same names and upload times: 0.1.90 does 40 % more work in
`dispatch` than 0.1.83.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere: the builders live beside the tests
    sys.path.insert(0, str(REPO))

from examples.vendor_index import ExampleIndexes, build_indexes, serve_indexes  # noqa: E402
from tests.support.wheels import build_wheel  # noqa: E402

TWIN = REPO / "examples" / "musa-twin"
BASE_IMAGE = "stackctl-base:bookworm"  # the image .ci/services.sh builds
REPOSITORY = "stackctl-twin"
PROFILES = ("torch-2.11-post1.toml", "torch-2.11-post2.toml")

# torchada patches torch at import; `dispatch(n)` stands for the work its shims add to every call
TORCHADA = '''\
__version__ = {version!r}
EXTRA = {extra}


def dispatch(n):
    total = sum(i * i for i in range(n + 1))
    if EXTRA:  # the slow release: the same answer, more work
        sum(i * i for i in range(n // 2, n // 2 + int(n * EXTRA)))
    return total
'''
SLOWER = {"0.1.83": 0, "0.1.90": 0.4}
CONFIGS = "torchada/triton/autotune/fused_moe/configs"  # post2's gate probe counts 100 of them

_HEAD = """\
# The twin of stacks/{name} on the project's own base image, written by `python examples/musa_twin.py write`
# from that file: the same pins, release trains and gate, one target (the base image's Python). Do not edit.

"""


class Drifted(Exception):
    """stacks/ no longer has a line the twin adjusts."""


def _once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise Drifted(f"stacks/torch-2.11-post1.toml no longer has {old!r} once: adjust examples/musa_twin.py")
    return text.replace(old, new)


def twin_post1(text: str) -> str:
    """stacks/torch-2.11-post1.toml with its pins and trains as they are, its targets and image those of the base
    image here."""
    for old, new in (
            ('python = ["3.10", "3.12"]', 'python = ["3.11"]  # the twin: the base image\'s Python'),
            ('python = ["3.10"]                   # the vendor builds deep_ep for cp310 only',
             'python = ["3.11"]                   # the twin builds deep_ep for its one target'),
            # its extension needs the MUSA run time, which a CPU host lacks: found, as post2 checks it
            ("gate = { order = 14 }", 'gate = { order = 14, mode = "spec" }'),
            ('provides = { rdma = ["libmlx5.so*", "libibverbs.so*"] }',
             'provides = { rdma = ["libmlx5.so*", "libibverbs.so*"], musa = ["libmusart.so*"] }'),
            ('base = "musa-runtime:5.2.0-ubuntu22.04"', f'base = "{BASE_IMAGE}"'),
            ('repository = "vllm-musa"', f'repository = "{REPOSITORY}"'),
            ('python = "3.10"', 'python = "3.11"')):
        text = _once(text, old, new)
    return text


def twin_profiles(stacks: Path = REPO / "stacks") -> dict[str, str]:
    """The twin's profiles by file name, as `write` writes them; post2 is stacks/' own (it extends post1)."""
    post1, post2 = (stacks / name for name in PROFILES)
    return {post1.name: _HEAD.format(name=post1.name) + twin_post1(post1.read_text(encoding="utf-8")),
            post2.name: _HEAD.format(name=post2.name) + post2.read_text(encoding="utf-8")}


def twin_indexes(root: Path, stacks: Path = TWIN / "stacks") -> ExampleIndexes:
    """The example indexes built from the twin's profiles under `root`, torchada's wheels the twin's own;
    servers not started."""
    ex = build_indexes(root / "indexes", stacks)
    for version, extra in SLOWER.items():
        files: dict[str, bytes | str] = {"torchada/__init__.py": TORCHADA.format(version=version, extra=extra)}
        files.update({f"{CONFIGS}/E={e},N={n}.json": "{}\n" for e in range(10) for n in range(10)})
        wheel = build_wheel(root / "torchada", "torchada", version, files=files, requires_dist=("packaging",))
        ex.public.add(wheel, upload_time=ex.public.files[wheel.name].upload_time, metadata=True)
    return ex


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    served = sub.add_parser("serve", help="build the twin's wheels and serve both indexes until Ctrl-C")
    served.add_argument("--port", type=int, default=8650, help="vendor index port; the public one is PORT+1")
    served.add_argument("--dir", type=Path, help="build here (default: a temporary directory)")
    written = sub.add_parser("write", help="write the twin's profiles from stacks/")
    written.add_argument("--check", action="store_true", help="exit 1 when they differ from what would be written")
    args = parser.parse_args(argv)
    if args.command == "write":
        try:
            profiles = twin_profiles()
        except Drifted as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        stale = [n for n, text in profiles.items() if not (TWIN / "stacks" / n).is_file()
                 or (TWIN / "stacks" / n).read_text(encoding="utf-8") != text]
        if args.check:
            for name in stale:
                print(f"examples/musa-twin/stacks/{name} differs from stacks/: run `python examples/musa_twin.py "
                      "write`", file=sys.stderr)
            return 1 if stale else 0
        for name in stale:
            (TWIN / "stacks" / name).write_text(profiles[name], encoding="utf-8")
            print(f"wrote examples/musa-twin/stacks/{name}")
        return 0
    from tests.support.elf_fixtures import have_gcc

    if not have_gcc():
        print("error: gcc and g++ build the example's libraries; install them (Debian: apt-get install g++)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="stackctl-twin-") as tmp:
        serve_indexes(twin_indexes(args.dir or Path(tmp)), args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
