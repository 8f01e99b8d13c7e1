"""The `storlab` command. Thin: each command module under `storlab.commands` parses its
options, calls the library and prints. Bad input exits 2 with one line, no traceback."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from . import commands
from .errors import StorlabError

app = typer.Typer(
    name="storlab",
    help="Design, run, analyse and simulate storage performance experiments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
    _mod = importlib.import_module(f"{commands.__name__}.{_info.name}")
    if hasattr(_mod, "register"):
        _mod.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning storlab's own errors into one line and exit 2."""
    try:
        # In non-standalone mode click returns a command's exit code instead of exiting.
        code = app(args=argv, standalone_mode=False)
    except StorlabError as exc:
        print(f"storlab: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("storlab: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # click usage errors carry their own exit code
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
