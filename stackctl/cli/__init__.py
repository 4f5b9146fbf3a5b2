"""The command line. Commands live in one module each; this module wires them and owns error output."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

import typer

from stackctl.cli import annotate
from stackctl.cli.app import app, console_err, markdown_text, output
from stackctl.cli.options import add_verbose
from stackctl.errors import EXIT_INPUT, Problems, ProfileError, StackctlError

# Each module registers its commands on `app` when imported; a run imports only the module of the
# command it runs (start-up is a visible share of a quick command), `--help` imports them all. The
# order is the upgrade's workflow, which `stackctl --help` follows.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "profiles": ("validate", "show", "export", "schema"),
    "propose": ("propose",),
    "review": ("diff", "scan"),
    "resolve": ("resolve", "lock", "outdated", "fetch"),
    "check": ("check",),
    "abi": ("abi", "inventory", "wheel-diff"),
    "image": ("tag", "gate", "render", "build", "publish", "inspect"),
    "provenance": ("verify",),
    "ab": ("ab",),
    "bisect": ("bisect",),
    "report": ("report",),

}


def register(args: list[str]) -> str | None:
    """Import the command modules this run needs; the command it runs, when it names a known one."""
    wanted = next((a for a in args if not a.startswith("-")), None)
    modules = [m for m, commands in COMMAND_MODULES.items() if wanted in commands] or list(COMMAND_MODULES)
    for module in modules:
        importlib.import_module(f"stackctl.cli.{module}")
    # --help lists commands in the workflow's order, whichever module was imported first
    order = [c for commands in COMMAND_MODULES.values() for c in commands]
    app.registered_commands.sort(key=lambda c: order.index(n) if (n := _name(c)) in order else len(order))
    return wanted if any(wanted in commands for commands in COMMAND_MODULES.values()) else None


def _name(command: typer.models.CommandInfo) -> str:
    return command.name or typer.main.get_command_name(command.callback.__name__ if command.callback else "")


@contextmanager
def only_command(wanted: str | None) -> Iterator[None]:
    """While typer builds its click group: for a run of one known command, that command alone is registered
    (typer turns every parameter of every registered command into a click parameter first; the group, its
    options and the command's own help and errors are the same)."""
    commands = app.registered_commands
    keep = [c for c in commands if wanted is not None and _name(c) == wanted]
    saved = list(commands)
    if keep:
        commands[:] = keep
    try:
        yield
    finally:
        commands[:] = saved


__all__ = ["app", "main"]

# Recent typer releases carry their own copy of click, whose exceptions are not click's own classes; older
# ones use click itself. Either way typer's BadParameter derives from the ClickException that typer raises,
# so it is found there, and the click package (a visible share of every start-up) is not imported only to
# name it.
_CLICK_EXCEPTION: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_USAGE_ERRORS: tuple[type[Exception], ...] = tuple(
    {_CLICK_EXCEPTION, getattr(typer, "TyperException", _CLICK_EXCEPTION)})
_ABORTS: tuple[type[BaseException], ...] = (typer.Abort,)  # click's own Abort under older typer releases


def _print_error(lines: list[str], hint: str | None, payload: dict[str, object] | None) -> None:
    """The JSON error document (with --json, when no report was printed), then `error:` and `hint:` lines."""
    if payload is not None and not output.json_emitted:
        import json

        print(json.dumps(payload, indent=2))
    from rich.text import Text

    # Messages quote user input ([image], key paths): never read them as rich markup. One `error:` line is one
    # line, on a terminal too: rich's wrapping split a hint's command (`bash .ci/services.sh`) over two lines
    # padded with spaces; the terminal folds a long line for the eye and a copy gets it whole.
    for line in lines:
        console_err.print(Text.assemble(("error:", "bold red"), " ", line), soft_wrap=True)
    if hint:
        console_err.print(Text.assemble(("hint:", "yellow"), " ", hint), soft_wrap=True)


def _report(exc: StackctlError, as_json: bool, markdown: bool = False) -> None:
    payload: dict[str, object] = {"error": str(exc), "exit_code": exc.exit_code}
    lines = [str(exc)]
    if isinstance(exc, ProfileError):
        payload["problems"] = [str(p) for p in exc.problems]
        lines = [str(p) for p in exc.problems]
    if isinstance(exc, Problems):
        payload["problems"] = [{"error": str(e), "exit_code": e.exit_code} for e in exc.errors]
        lines = [str(e) for e in exc.errors]
        if markdown and not as_json:
            print(f"**{len(exc.errors)} problems** (exit {exc.exit_code})\n")
            print("\n".join(f"- {markdown_text(str(e))}" for e in exc.errors))
    _print_error(lines, exc.hint, payload if as_json else None)


def _report_usage(exc: Exception, as_json: bool) -> int:
    """click's usage errors as one `error:` line and a pointer to the command's --help, not its usage block."""
    code = int(getattr(exc, "exit_code", EXIT_INPUT) or EXIT_INPUT)
    show = getattr(exc, "show", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and callable(show):
        show()  # a bare `stackctl` (or group): the help is the message, not an error
        return code
    format_message = getattr(exc, "format_message", None)
    message = str(format_message() if callable(format_message) else exc).strip()
    ctx = getattr(exc, "ctx", None)
    hint = f"see `{ctx.command_path} --help`" if ctx is not None else None
    _print_error([message], hint, {"error": message, "exit_code": code} if as_json else None)
    return code


def print_version(verbose: bool) -> None:
    """`stackctl --version`; with --verbose also the engine API and the uv that a build and a resolve would use
    (each asked for; one that cannot be reached says why instead of failing)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        print(f"stackctl {version('stackctl')}")
    except PackageNotFoundError:
        print("stackctl (not installed: run from a source tree)")
    if not verbose:
        return
    try:
        from stackctl.engine import DockerEngine

        api = DockerEngine().api_version()
    except StackctlError as exc:
        api = f"unavailable ({exc})"
    print(f"engine API {api}")
    try:
        import subprocess

        from stackctl.resolve import uv_binary

        done = subprocess.run([uv_binary(), "--version"], capture_output=True, text=True, timeout=30, check=False)
        uv = done.stdout.strip() or f"unavailable (exit {done.returncode})"
    except (StackctlError, OSError, subprocess.TimeoutExpired) as exc:
        uv = f"unavailable ({exc})"
    print(f"uv {uv.removeprefix('uv ')}")


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def _interrupted(args: list[str]) -> None:
    from stackctl.base import end_children, remove_scratch
    from stackctl.cli.app import Phase

    end_children()  # uv, a gate's interpreter, buildx: nothing stackctl started outlives it
    # a build's scratch, which the build's own thread, left behind by the interrupt, would never remove
    remove_scratch()
    command = next((a for a in args if not a.startswith("-")), None)
    during = Phase.now or (f"stackctl {command}" if command else None)
    said = f"interrupted during {during}" if during else "interrupted"
    _print_error([said], None, {"error": said, "exit_code": EXIT_INTERRUPTED} if output.as_json else None)


def click_group(args: list[str]) -> typer.core.TyperGroup:
    """The command group a run of `stackctl ARGS` parses with (every command when ARGS names none): what its
    --help prints, and what docs/commands.md is written from."""
    with only_command(register(args)):
        command = typer.main.get_command(app)
    add_verbose(command)
    return command  # type: ignore[return-value]


class _ClosedPipeSafe:
    """stdout for a reader that may stop reading (`stackctl inspect REF | head -2`): a write to a closed pipe
    sends the rest to /dev/null and the command runs on, so its exit code is its result's. Left to click, a
    closed pipe ended the run with exit 1 and no word, as if a check had failed."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self) -> None:
        # what is still buffered, and every later write and the interpreter's last flush, go nowhere quietly
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if argv is None and not isinstance(sys.stdout, _ClosedPipeSafe):  # a process of its own, not a test's call
        sys.stdout = cast(TextIO, _ClosedPipeSafe(sys.stdout))
    output.reset(args)
    from stackctl.cli.app import Phase

    Phase.now = None
    if "--version" in args and set(args) <= {"--version", "--verbose"}:
        print_version("--verbose" in args)
        sys.exit(0)
    command = click_group(args)
    annotate.reset()
    failure: StackctlError | None = None
    try:
        result = command.main(args=args, prog_name="stackctl", standalone_mode=False)
        code = result if isinstance(result, int) else 0
        if code == EXIT_INTERRUPTED:  # typer turns KeyboardInterrupt into Exit(130) before click sees it
            _interrupted(args)
    except StackctlError as exc:
        failure = exc
        if output.verbose:
            traceback.print_exc()
        _report(exc, output.as_json, output.markdown)
        code = exc.exit_code
    except _USAGE_ERRORS as exc:
        # The arguments did not parse, so no option was read: --json is looked for as it was typed.
        code = _report_usage(exc, output.as_json or "--json" in args)
        annotate.reset()  # the command never ran: there is nothing to report where CI looks
    except _ABORTS:  # click turns Ctrl-C (SIGINT) into Abort
        _interrupted(args)
        code = EXIT_INTERRUPTED
    code = max(code, annotate.finish(failure))
    from stackctl.base import workers_alive

    if workers_alive():
        # A worker still blocked on a hanging index (Ctrl-C): finalizing the interpreter under a daemon
        # thread can abort it ("exception not rethrown"). Every write is atomic, so leave at once.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if argv is None:
        # The process is about to end and every object still alive goes with it; the interpreter's exit
        # would first search them all for reference cycles, more than once: a visible share of a warm
        # resolve (benchmarks/README.md). Frozen objects are left out of that search (exit handlers, flushes
        # and the modules' own teardown still run). Not for a caller in this process (tests): its objects
        # live on.
        import gc

        gc.freeze()
    sys.exit(code)
