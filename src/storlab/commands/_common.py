"""Small helpers the command modules share: option checks, JSON output, -o files.

The pattern for a command (new commands follow it):

    def my_cmd(
        results: Path = typer.Argument(..., callback=input_file("RESULTS")),
        trials: int = typer.Option(20, "--trials", callback=at_least("--trials", 1)),
        alpha: float = typer.Option(0.05, "--alpha", callback=fraction("--alpha")),
        output: Optional[Path] = typer.Option(None, "-o", callback=output_file("-o")),
    ) -> None:
        table = read_table(results)            # bad file -> one line naming it
        ...
        write_frame(df, output)                # storlab.fileio: temp file + rename
        emit_json(data, output)

Every check runs while the command line is parsed, before the command does anything
(nothing is measured, started or written when an option is bad), and raises
StorlabError: `storlab: error: --trials 0: must be at least 1`, exit 2. Then add the
command's options to tests/test_bad_input.py (a test fails until every numeric and path
option of every command has a bad-input case there).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from collections.abc import Callable, Iterable, Mapping, Sequence
from numbers import Number
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape as escape  # data inside a `markup=True` print
from rich.table import Table

from ..errors import StorlabError, terminal_safe
from ..fileio import check_target, read_yaml, write_text
from ..jsonutil import to_jsonable

if TYPE_CHECKING:  # numpy and pandas load when a table is printed, not at start-up
    import pandas as pd

class SafeConsole(Console):
    """A rich Console for text that is data: markup off unless a call asks for it
    (`markup=True`, the data in it passed through `escape`), so a factor level `[/]` is
    shown, not parsed (it crashed `status`), and `[link=...]` in a run's stderr is no
    hyperlink; every string it renders (printed, a table's cells and titles) has its
    control characters shown as `\\xNN` (`errors.terminal_safe`)."""

    def __init__(self, **kw: Any) -> None:
        kw.setdefault("markup", False)
        super().__init__(**kw)

    def render_str(self, text: str, **kw: Any) -> Any:
        return super().render_str(terminal_safe(text), **kw)


def _console() -> Console:
    """The terminal's width on a terminal; into a pipe or a file (CI logs, `| tee`), rich
    would assume 80 columns and cut numbers to "9.558…": there, wide enough for a table
    (COLUMNS, when set, still wins). Emoji codes off: rich would print the term A:B:C
    as "A🅱C" (`:b:` is an emoji name)."""
    import os
    import sys

    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return SafeConsole(emoji=False)
    return SafeConsole(width=160, emoji=False)


console = _console()


def emit_json(data: Any, output: Path | None = None, private: bool = False) -> None:
    """Print `data` as JSON, or write it (atomically) to `output` (`private`: 0600, for
    what holds keys)."""
    text = json.dumps(to_jsonable(data), indent=2)
    if output is not None:
        write_text(output, text + "\n", what="-o", private=private)
    else:
        print(text)  # json.dumps escapes control characters (ensure_ascii) itself


# ---- option checks (typer callbacks): each returns the value or raises StorlabError ----

def _number(option: str, value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise StorlabError(f"{option} {value}: must be a finite number")
    return value


def _bound(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def at_least(option: str, low: float, high: float | None = None) -> Callable[[Any], Any]:
    """An int or float option that must be >= `low` (and <= `high`); None passes."""
    def check(value: Any) -> Any:
        if value is None:
            return None
        _number(option, value)
        if value < low or (high is not None and value > high):
            rng = (f"at least {_bound(low)}" if high is None
                   else f"between {_bound(low)} and {_bound(high)}")
            raise StorlabError(f"{option} {value:g}: must be {rng}")
        return value
    return check


def positive(option: str) -> Callable[[Any], Any]:
    """A finite number > 0 (seconds, rates); None passes."""
    def check(value: Any) -> Any:
        if value is None:
            return None
        _number(option, value)
        if value <= 0:
            raise StorlabError(f"{option} {value:g}: must be greater than 0")
        return value
    return check


def fraction(option: str, low_closed: bool = False) -> Callable[[Any], Any]:
    """A probability strictly between 0 and 1 (alpha, confidence); [0, 1) with
    `low_closed`."""
    def check(value: Any) -> Any:
        if value is None:
            return None
        _number(option, value)
        if not ((0 <= value if low_closed else 0 < value) and value < 1):
            raise StorlabError(f"{option} {value:g}: must be {'in [0, 1)' if low_closed else 'between 0 and 1 (exclusive)'}")
        return value
    return check


def input_file(what: str, missing: str = "file not found") -> Callable[[Any], Any]:
    """A path that must be an existing file (not a directory); None passes. Reading it
    (storlab.fileio.read_text / read_table) then checks its contents."""
    def check(value: Any) -> Any:
        if value is None:
            return None
        p = Path(value)
        if p.is_dir():
            raise StorlabError(f"{p}: is a directory, expected a file ({what})")
        if not p.exists():
            raise StorlabError(f"{p}: {missing}")
        return value
    return check


def input_dir(what: str) -> Callable[[Any], Any]:
    """A path that, when it exists, must be a directory; None passes."""
    def check(value: Any) -> Any:
        if value is not None and Path(value).exists() and not Path(value).is_dir():
            raise StorlabError(f"{what} {value}: not a directory")
        return value
    return check


def output_file(what: str) -> Callable[[Any], Any]:
    """A file to write: not a directory, in a directory that exists; None passes."""
    def check(value: Any) -> Any:
        if value is not None:
            check_target(value, what)
        return value
    return check


def output_dir(what: str) -> Callable[[Any], Any]:
    """A directory to create or fill (plots): not an existing file, nor under one."""
    def check(value: Any) -> Any:
        if value is None:
            return None
        p = Path(value)
        for q in (p, *p.parents):
            if q.exists():
                if not q.is_dir():
                    raise StorlabError(f"{what} {p}: {q} is not a directory")
                break
        return value
    return check


def frame_table(df: pd.DataFrame | Mapping[str, Sequence[Any]], title: str | None = None,
                floatfmt: str = "{:.4g}") -> Table:
    """A rich Table of a DataFrame, or of columns ({name: values}, without pandas), numbers
    formatted compactly; a column of numbers is aligned right."""
    t = Table(title=title, title_justify="left")
    if isinstance(df, Mapping):
        rows: Iterable[Sequence[Any]] = zip(*df.values())
        right = [bool(v) and all(isinstance(x, Number) for x in v) for v in df.values()]
    else:
        import pandas as pd

        rows = df.itertuples(index=False)
        right = [pd.api.types.is_numeric_dtype(df[c]) for c in df.columns]
    for c, r in zip(df.columns if not isinstance(df, Mapping) else df, right):
        t.add_column(str(c), justify="right" if r else "left")
    for row in rows:
        t.add_row(*[_fmt(v, floatfmt) for v in row])
    return t


def fitted_tables(df: pd.DataFrame, width: int, title: str = "",
                  floatfmt: str = "{:.4g}") -> list[Table]:
    """`df` as one table, or, when it is wider than `width` characters, as several tables
    of consecutive columns that each fit, every one starting with the row's number (`#`):
    rich squeezes a too-wide table into columns of `…` that show nothing."""
    import pandas as pd

    def w(c: Any) -> int:  # the column's text width plus rich's padding and border
        return max([len(str(c))] + [len(_fmt(v, floatfmt)) for v in df[c]]) + 3

    widths = [w(c) for c in df.columns]
    if sum(widths) + 1 <= width or len(df.columns) <= 1:
        return [frame_table(df, title=title or None, floatfmt=floatfmt)]
    num = pd.DataFrame({"#": range(1, len(df) + 1)}, index=df.index)
    room = width - 1 - (len(str(len(df))) + 3)
    chunks: list[list[int]] = [[]]
    used = 0
    for j, cw in enumerate(widths):
        if chunks[-1] and used + cw > room:
            chunks.append([])
            used = 0
        chunks[-1].append(j)
        used += cw
    out = []
    for part in chunks:
        cols = [df.columns[j] for j in part]
        where = (f"columns {part[0] + 1}-{part[-1] + 1} of {len(df.columns)}"
                 if len(part) > 1 else f"column {part[0] + 1} of {len(df.columns)}")
        out.append(frame_table(pd.concat([num, df[cols]], axis=1),
                               title=f"{title + ', ' if title else ''}{where}",
                               floatfmt=floatfmt))
    return out


def common_scale(values: Any, digits: int = 4) -> tuple[list[str], str]:
    """A numeric column in one unit: (texts, scale) where scale is "" or "×1e18" and every
    text is value / scale to `digits` significant digits of the largest (a column once
    showed `2.565e+18` beside `667.8P`). NaN shows as "-"."""
    xs = [float(v) for v in values]
    finite = [abs(x) for x in xs if math.isfinite(x) and x != 0]
    e = int(math.floor(math.log10(max(finite)) / 3) * 3) if finite else 0
    if -3 <= e <= 3:
        e = 0  # plain numbers read best unscaled
    lead = int(math.floor(math.log10(max(finite)))) - e if finite else 0
    decimals = max(0, digits - 1 - lead)
    texts = ["-" if not math.isfinite(x) else f"{x / 10.0 ** e:.{decimals}f}" for x in xs]
    return texts, (f"×1e{e}" if e else "")


def _fmt(v: Any, floatfmt: str) -> str:
    import numpy as np

    if isinstance(v, (float, np.floating)):
        return "" if not math.isfinite(v) else floatfmt.format(v)
    return str(v)


#: the help of `--store` on the commands that read a campaign's store
STORE_HELP = ("Store file to read, next to the campaign file (default: the file's store:); "
              "the one `storlab tune` wrote from a fixed design (NAME-tune.db) is read as "
              "that tuning.")


def campaign_store_note(camp: Any) -> None:
    """Say in one line where the runs are when `storlab tune` put them beside the store."""
    note = camp.source_store_note()
    if note is not None:
        console.print(f"note: {note}", highlight=False)


def is_campaign(path: Path) -> bool:
    """A campaign file names a runner and a design; a space file does not. Read with the
    one YAML reader (its size, depth and duplicate-key checks: a deeply nested file was a
    RecursionError traceback here)."""
    data = read_yaml(path)
    return isinstance(data, dict) and ("runner" in data or "design" in data)


def results_source(source: Path, space_file: Path | None) -> tuple[pd.DataFrame, Any]:
    """The table to analyse and its space (or None): a campaign file gives its run table
    (one row per run, from its store) and its own space; a results table is read as it is,
    with the space of --space if given."""
    from ..errors import AnalysisError
    from ..fileio import read_table

    if source.suffix.lower() in (".yaml", ".yml"):
        if not is_campaign(source):
            raise AnalysisError(f"{source}: not a campaign file (no runner or design); give "
                                "a results table (and --space SPACE.yaml)")
        if space_file is not None:
            raise AnalysisError("--space is for a results table; a campaign has its own space")
        from ..campaign import Campaign

        camp = Campaign.load(source)
        if not camp.store_path.exists():
            raise AnalysisError(f"{source}: no runs yet (run it with `storlab run {source}`)")
        return camp.results("run"), camp.space
    if space_file is None:  # (the space module and its YAML parser load only for a space)
        return read_table(source), None
    from ..space import Space

    space = Space.from_yaml(space_file)
    return read_table(source), space
