"""The `storlab` command. Thin: each command module under `storlab.commands` parses its
options, calls the library and prints. Bad input exits 2 with one line, no traceback."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from . import commands
from .errors import StorlabError, terminal_safe

class _NoBoolMetavar:
    """A flag shows no `<bool>` value it does not take (typer's rich help prints one for
    every flag, --help included)."""

    def get_help_option(self, ctx: typer.Context) -> object:
        opt = super().get_help_option(ctx)  # type: ignore[misc]
        if opt is not None and opt.metavar is None:
            opt.metavar = ""
        if opt is not None and opt.default is None:
            # Absent, typer's --help is None, which it coerces to a bool through a pydantic
            # adapter: importing pydantic for that took 0.1 s of every `storlab X --help`.
            opt.default = False
        return opt


@contextlib.contextmanager
def _closed_stdout_is_success() -> Iterator[None]:
    """`storlab ... | head` : the reader closing the pipe early is no error. typer turns a
    broken pipe into exit 1; stop writing silently and exit 0 instead, as `cat` or `seq` do
    when `head` has read what it wanted."""
    try:
        yield
    except BrokenPipeError:
        _stdout_to_devnull()
        raise typer.Exit(0) from None


def _stdout_to_devnull() -> None:
    """Send what is still buffered for stdout to /dev/null: flushing it into the closed pipe
    at exit would raise again (Python then prints "Exception ignored" and exits 120)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _stdout_is_devnull() -> bool:
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (OSError, ValueError):  # no stdout, or not a file
        return False


class StorlabGroup(_NoBoolMetavar, TyperGroup):
    """storlab's command groups (the root, `cluster`, `estimate`)."""

    # Help is written while the context is made (`--help`), output while invoking.
    def make_context(  # type: ignore[override]
            self, *args: object, **kwargs: object) -> typer.Context:
        with _closed_stdout_is_success():
            return super().make_context(*args, **kwargs)  # type: ignore[arg-type]

    def invoke(self, ctx: typer.Context) -> object:  # type: ignore[override]
        with _closed_stdout_is_success():
            return super().invoke(ctx)




_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


@functools.cache
def _plain_param_class() -> type | None:
    """typer's RuntimeParam with a converter for plain values (None for a typer whose
    internals moved: its own converters then run)."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer._param_types import coerce_cli_path
    except ImportError:
        return None

    @dataclasses.dataclass(frozen=True)
    class PlainParam(RuntimeParam):  # type: ignore[misc]
        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kind = self.annotation
            if type(value) is kind and kind is not Path:  # a default, already typed
                return value
            if kind is float and type(value) is int:
                return float(value)
            if kind is Path and isinstance(value, Path):
                return coerce_cli_path(value, self.parameter_info, path_type=Path,
                                       param=param, ctx=ctx)
            if isinstance(value, str):
                if kind is str:
                    return value
                if kind is int and _INT.fullmatch(value):
                    return int(value)
                if kind is float and _FLOAT.fullmatch(value):
                    return float(value)
                if kind is Path and value:
                    return coerce_cli_path(Path(value), self.parameter_info, path_type=Path,
                                           param=param, ctx=ctx)
            return build_runtime_param(self.descriptor)._coerce_value(value, param, ctx)

    return PlainParam


def _plain_coercion(param: Any) -> Any:
    """A converter for a plain str, int, float or Path value that gives what typer's
    pydantic TypeAdapter gives, without importing pydantic (about 0.1 s of every command
    that takes a value; `benchmarks/bench_importance.py`). A value it does not recognise
    (`1_000`, ` 5`, `inf`, an empty path) goes to typer's own converter, so every error
    message stays typer's. None for any other parameter."""
    cls = _plain_param_class()
    desc = getattr(param, "type_descriptor", None)
    if cls is None or desc is None or getattr(param, "_runtime_param", 1) is not None:
        return None
    info, kind = desc.parameter_info, desc.annotation
    if (desc.file_annotation is not None or info.parser is not None or info.min is not None
            or info.max is not None or info.clamp or kind not in (str, int, float, Path)):
        return None
    if kind is Path and (info.path_type is not None or info.resolve_path or info.allow_dash):
        return None
    return cls(parameter_info=info, annotation=kind, descriptor=desc)


class StorlabCommand(_NoBoolMetavar, TyperCommand):
    """typer's command with the help conventions storage people know from click, fio and
    GNU tools: the usage line names arguments `CAMPAIGN_FILE` / `[SPACE_FILE]` (typer
    writes `{campaign_file}`), and a flag shows no `<bool>` value it does not take. Plain
    values are converted without pydantic (`_plain_coercion`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        for p in self.params:
            if getattr(p, "is_flag", False) and p.metavar is None:
                p.metavar = ""  # rich's type column prints the metavar when it is set
            conv = _plain_coercion(p)
            if conv is not None:
                p._runtime_param = conv  # type: ignore[attr-defined]

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


#: The module under storlab.commands of each top-level command and group. `storlab NAME
#: ...` imports only NAME's module: where byte code is not cached (a source tree with
#: PYTHONDONTWRITEBYTECODE) compiling all nine took 0.1-0.15 s of every command
#: (`benchmarks/bench_importance.py`). tests/test_startup.py holds it equal to what the
#: modules register; a name missing here only costs that time.
COMMAND_MODULES = {
    "run": "campaign", "results": "campaign", "status": "campaign", "cluster": "cluster",
    "design": "design", "analyze": "design", "estimate": "estimate",
    "fio-server": "fioserver", "importance": "importance", "importance-eval": "importance",
    "report": "report", "coverage": "report", "simulate": "simulate", "tune": "tune",
    "confirm": "tune", "tune-eval": "tune",
}


def build_app(modules: list[str] | None = None) -> typer.Typer:
    """The `storlab` program with the commands of `modules` (names under
    storlab.commands; None: every command)."""
    t = typer.Typer(
        cls=StorlabGroup,
        name="storlab",
        help="Design, run, analyse and simulate storage performance experiments.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    if modules is None:
        modules = sorted(m.name for m in pkgutil.iter_modules(commands.__path__))
    for name in modules:
        mod = importlib.import_module(f"{commands.__name__}.{name}")
        if hasattr(mod, "register"):
            mod.register(t)
    _use_storlab_command(t)
    return t


app: typer.Typer  # (annotation only: the value comes from __getattr__ below)


def __getattr__(name: str) -> Any:
    """`storlab.cli.app`, the whole program (every command), built on first use."""
    if name == "app":
        globals()["app"] = build_app()
        return globals()["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _app_for(argv: list[str]) -> typer.Typer:
    """The program for `argv`: only its command's module when argv starts with a command
    name (and that module makes a group: typer runs a lone command as the program
    itself), else every command (help, errors, suggestions for a mistyped name)."""
    if "app" in globals():  # already built (a test's server, an embedding program)
        return globals()["app"]
    module = COMMAND_MODULES.get(argv[0]) if argv else None
    if module is not None:
        t = build_app([module])
        if len(t.registered_commands) > 1 or t.registered_groups:
            return t
    return __getattr__("app")  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> None:
    """Entry point: storlab's own errors and click's usage errors become one line and exit
    2; output cut short by its reader (`| head`) exits 0."""
    stdout_was_devnull = _stdout_is_devnull()
    try:
        code = _run(argv)
    except SystemExit as exc:
        # rich meets a broken pipe by sending stdout to /dev/null and exiting 1
        if exc.code != 1 or stdout_was_devnull or not _stdout_is_devnull():
            raise
        code = 0
    try:
        sys.stdout.flush()  # the last buffered output, while a broken pipe can be caught
    except BrokenPipeError:
        _stdout_to_devnull()
    sys.exit(code)


def _is_click_error(exc: BaseException, name: str) -> bool:
    """Whether `exc` is click's exception class `name`, from click itself or the copy that
    recent typer releases vendor (catching `click.ClickException` misses the latter)."""
    return any(c.__name__ == name for c in type(exc).__mro__)


def _usage_error_line(exc: Exception) -> str:
    """click's usage error on one line: its message, then the command's usage line."""
    message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return message
    usage = " ".join(ctx.get_usage().split())
    return f"{message} ({usage})"


def _run(argv: list[str] | None) -> int:
    """Run the command; its exit status (the errors below exit with theirs)."""
    try:
        # Not standalone: click's errors come here instead of being printed in a box
        args = sys.argv[1:] if argv is None else argv
        rv = _app_for(args)(args=args, prog_name="storlab", standalone_mode=False)
        # an Exit raised by the command comes back as its code; a command returns None
        return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0
    except StorlabError as exc:  # bad input: 2; runs that all failed (RunsFailed): 1
        _fail(str(exc), getattr(exc, "exit_code", 2))
    except (IsADirectoryError, NotADirectoryError, FileNotFoundError, PermissionError) as exc:
        # A path the user gave that a library opened before storlab could check it.
        _fail(_oserror_line(exc), 2)
    except UnicodeDecodeError as exc:  # a binary file some reader opened as text
        _fail(f"input is not UTF-8 text ({exc.reason} at byte {exc.start})", 2)
    except OSError as exc:  # disk full, I/O error: not bad input, but still one line
        _fail(_oserror_line(exc), 1)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as exc:
        if _is_click_error(exc, "NoArgsIsHelpError"):  # `storlab`: typer printed the help
            return int(exc.exit_code)  # type: ignore[attr-defined]
        if _is_click_error(exc, "ClickException"):  # a usage error
            _fail(_usage_error_line(exc), int(exc.exit_code))  # type: ignore[attr-defined]
        if _is_click_error(exc, "Abort"):  # click's prompt answered with ^C or ^D
            _fail("aborted", 1)
        raise  # a bug: its traceback
    return 0  # not reached: _fail exits


def _oserror_line(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"


def _fail(message: str, code: int) -> None:
    print(f"storlab: error: {terminal_safe(message)}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
