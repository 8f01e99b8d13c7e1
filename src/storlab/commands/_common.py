"""Small helpers the command modules share: JSON output and writing to -o files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from ..jsonutil import to_jsonable

console = Console()


def emit_json(data: Any, output: Path | None = None) -> None:
    """Print `data` as JSON, or write it to `output`."""
    text = json.dumps(to_jsonable(data), indent=2)
    if output is not None:
        Path(output).write_text(text + "\n")
    else:
        print(text)


def frame_table(df: pd.DataFrame, title: str | None = None, floatfmt: str = "{:.4g}") -> Table:
    """A rich Table of a DataFrame, numbers formatted compactly."""
    t = Table(title=title, title_justify="left")
    for c in df.columns:
        t.add_column(str(c), justify="right" if pd.api.types.is_numeric_dtype(df[c]) else "left")
    for row in df.itertuples(index=False):
        t.add_row(*[_fmt(v, floatfmt) for v in row])
    return t


def _fmt(v: Any, floatfmt: str) -> str:
    if isinstance(v, (float, np.floating)):
        return "" if not math.isfinite(v) else floatfmt.format(v)
    return str(v)
