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
    """Entry point. typer/click handle their own usage errors (standalone mode: their usual
    usage message, exit 2), whichever exception classes the installed typer uses (recent
    typer releases vendor their own copy of click, so catching `click.ClickException`
    here misses them). storlab's own errors become one line and exit 2."""
    try:
        app(args=argv, prog_name="storlab", standalone_mode=True)
    except StorlabError as exc:
        _fail(str(exc), 2)
    except (IsADirectoryError, NotADirectoryError, FileNotFoundError, PermissionError) as exc:
        # A path the user gave that a library opened before storlab could check it.
        _fail(_oserror_line(exc), 2)
    except UnicodeDecodeError as exc:  # a binary file some reader opened as text
        _fail(f"input is not UTF-8 text ({exc.reason} at byte {exc.start})", 2)
    except OSError as exc:  # disk full, I/O error: not bad input, but still one line
        _fail(_oserror_line(exc), 1)
    except KeyboardInterrupt:
        _fail("interrupted", 130)


def _oserror_line(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"


def _fail(message: str, code: int) -> None:
    print(f"storlab: error: {message}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
