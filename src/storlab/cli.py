"""The `storlab` command. Thin: each command module under `storlab.commands` parses its
options, calls the library and prints. Bad input exits 2 with one line, no traceback."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer
from typer.core import TyperCommand, TyperGroup

from . import commands
from .errors import StorlabError

class _NoBoolMetavar:
    """A flag shows no `<bool>` value it does not take (typer's rich help prints one for
    every flag, --help included)."""

    def get_help_option(self, ctx: typer.Context) -> object:
        opt = super().get_help_option(ctx)  # type: ignore[misc]
        if opt is not None and opt.metavar is None:
            opt.metavar = ""
        return opt


class StorlabGroup(_NoBoolMetavar, TyperGroup):
    """storlab's command groups (the root, `cluster`, `estimate`)."""


app = typer.Typer(
    cls=StorlabGroup,
    name="storlab",
    help="Design, run, analyse and simulate storage performance experiments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



class StorlabCommand(_NoBoolMetavar, TyperCommand):
    """typer's command with the help conventions storage people know from click, fio and
    GNU tools: the usage line names arguments `CAMPAIGN_FILE` / `[SPACE_FILE]` (typer
    writes `{campaign_file}`), and a flag shows no `<bool>` value it does not take."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        for p in self.params:
            if getattr(p, "is_flag", False) and p.metavar is None:
                p.metavar = ""  # rich's type column prints the metavar when it is set

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if p.param_type_name != "argument":
                continue
            name = (p.metavar or p.name or "").upper()
            name = name if p.required else f"[{name}]"
            pieces.append(name + ("..." if p.nargs != 1 else ""))
        return pieces


def _use_storlab_command(t: typer.Typer) -> None:
    for info in t.registered_commands:
        if info.cls in (None, TyperCommand):  # typer fills in its own class
            info.cls = StorlabCommand
    for group in t.registered_groups:
        if group.typer_instance is not None:
            for info in (group, group.typer_instance.info):
                # unset, typer's default marker or its own class: storlab's
                if not isinstance(info.cls, type) or info.cls is TyperGroup:
                    info.cls = StorlabGroup
            _use_storlab_command(group.typer_instance)


for _info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
    _mod = importlib.import_module(f"{commands.__name__}.{_info.name}")
    if hasattr(_mod, "register"):
        _mod.register(app)
_use_storlab_command(app)


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
