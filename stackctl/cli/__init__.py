"""The command line. Commands live in one module each; this module wires them and owns error output."""

from __future__ import annotations

import sys
import traceback

import click
import typer
from rich.text import Text

from stackctl.cli.app import app, console_err, output
from stackctl.errors import EXIT_INPUT, ProfileError, StackctlError

# Each module registers its commands on `app` when imported.
from stackctl.cli import abi, check, image, profiles, resolve, review  # noqa: F401  isort: skip

__all__ = ["app", "main"]


def _report(exc: StackctlError, as_json: bool) -> None:
    if as_json and not output.json_emitted:
        import json

        payload: dict[str, object] = {"error": str(exc), "exit_code": exc.exit_code}
        if isinstance(exc, ProfileError):
            payload["problems"] = [str(p) for p in exc.problems]
        print(json.dumps(payload, indent=2))
    lines = [str(p) for p in exc.problems] if isinstance(exc, ProfileError) else [str(exc)]
    # Messages quote user input ([image], key paths): never read them as rich markup.
    for line in lines:
        console_err.print(Text.assemble(("error:", "bold red"), " ", line), soft_wrap=True)
    if exc.hint:
        console_err.print(Text.assemble(("hint:", "yellow"), " ", exc.hint), soft_wrap=True)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    output.json_emitted = False
    command = typer.main.get_command(app)
    try:
        result = command.main(args=args, prog_name="stackctl", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except StackctlError as exc:
        if "--verbose" in args:
            traceback.print_exc()
        _report(exc, "--json" in args)
        code = exc.exit_code
    except click.exceptions.ClickException as exc:
        exc.show()
        code = EXIT_INPUT
    except click.exceptions.Abort:
        console_err.print("aborted")
        code = 130
    sys.exit(code)
