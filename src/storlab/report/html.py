"""HTML building blocks for storlab's self-contained reports: tables (sortable, with the
exact value of every number kept in `data-v`), figures embedded as base64 PNG, and one page
with inline CSS and script (no CDN, no network: the file opens anywhere, prints cleanly).

All HTML comes out of Jinja2 templates (package data, autoescaping on): the page
(`templates/page.html.j2`, with `report.css` and `report.js`), its building blocks (the
macros of `templates/parts.html.j2`: tables, fact lists, figures, cards, the status bar, the
JSON block) and the sections (`templates/sections.html.j2`). Python passes text, numbers and
the Markup that other macros returned; it never writes a tag or escapes by hand
(tests/report/test_no_html_in_python.py holds this). Nothing is fetched to view the result.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import io
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

#: Pixels per inch a browser assumes: a figure of 6.4 in shows 614 px wide on screen,
#: while the PNG holds 150 dpi so that it stays sharp on HiDPI screens and in print.
CSS_DPI = 96
PNG_DPI = 150
#: Whether `figure_html` draws: off inside `figures(False)` (a report of the numbers alone;
#: drawing and encoding the PNGs is most of a report's time).
_DRAW: contextvars.ContextVar[bool] = contextvars.ContextVar("storlab_report_figures",
                                                             default=True)


@contextlib.contextmanager
def figures(draw: bool) -> Iterator[None]:
    """Within: `figure_html` draws its figures (True) or leaves each out (False: None)."""
    token = _DRAW.set(draw)
    try:
        yield
    finally:
        _DRAW.reset(token)


def fmt_num(v: Any) -> str:
    """A number for a reader: whole numbers with thousands separators from 1,000 to
    10,000,000, an SI prefix and 4 significant digits above (501.3M, 5.932G), 4 significant
    digits below (0.01888); empty for NaN/None; booleans as yes/no."""
    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}" if abs(int(v)) >= 10000 else str(int(v))
    if isinstance(v, (float, np.floating)):
        x = float(v)
        if not math.isfinite(x):
            return "" if math.isnan(x) else ("∞" if x > 0 else "−∞")
        if abs(x) >= 1e7:  # digits beyond the fourth are noise to a reader; data-v has them
            return _si(x)
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        if x == 0:
            return "0"
        return f"{x:.4g}"
    return str(v)


SI = {6: "M", 9: "G", 12: "T", 15: "P", 18: "E", 21: "Z", 24: "Y"}


def _si(x: float) -> str:
    """501.3M, 5.932G, 2.565E (sums of squares and variances get that large: a column once
    read 2.565e+18 beside 667.8P); beyond yotta an exponent."""
    e = int(math.floor(math.log10(abs(x)) / 3) * 3)
    m = x / 10.0 ** e
    if abs(float(f"{m:.4g}")) >= 1000:
        e, m = e + 3, m / 1000
    return f"{m:.4g}{SI[e]}" if e in SI else f"{x:.4g}"


def _data_v(v: Any) -> str:
    """The exact value behind a cell (what sorting and tests read)."""
    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        x = float(v)
        return "" if math.isnan(x) else repr(x)
    return str(v)


def table_html(df: pd.DataFrame, caption: str | None = None, sortable: bool = True,
               table_id: str | None = None, numeric_cols: Iterable[str] | None = None,
               headers: dict[str, str] | None = None, css_class: str = "",
               row_classes: Sequence[str] | None = None) -> Any:
    """A <table> of a DataFrame (the `table` macro). Numeric cells carry their exact value
    in `data-v`; `row_classes` gives each body row a CSS class (e.g. `sig` to highlight it)."""
    headers = headers or {}
    num = set(numeric_cols) if numeric_cols is not None else {
        c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])
        and not pd.api.types.is_bool_dtype(df[c])}
    head = [{"col": str(c), "num": c in num, "label": _breakable(headers.get(str(c), str(c)))}
            for c in df.columns]
    rows = []
    for i, row in enumerate(df.itertuples(index=False)):
        cells = []
        for c, v in zip(df.columns, row):
            if c in num:
                cells.append((fmt_num(v), _data_v(v), True))
            else:
                text = "" if v is None or (isinstance(v, float) and math.isnan(v)) else v
                cells.append((fmt_num(text), "", False))
        rows.append({"cls": row_classes[i] if row_classes is not None else "", "cells": cells})
    cls = " ".join(x for x in ("data", "sortable" if sortable else "", css_class) if x)
    return macro("table")({"cls": cls, "id": table_id, "caption": caption,
                               "sortable": sortable, "head": head, "rows": rows})


def _breakable(name: str) -> list[str]:
    """A column heading that may wrap once, at the underscore nearest its middle, when it is
    long (read_clat_ | p99_us): a wide table then needs less sideways scrolling. The pieces
    are joined by <wbr> in the template."""
    if len(name) <= 12 or "_" not in name:
        return [name]
    cuts = [i for i, ch in enumerate(name) if ch == "_"]
    i = min(cuts, key=lambda k: abs(k - len(name) / 2))
    return [name[:i + 1], name[i + 1:]]


def dl_html(items: Sequence[tuple[str, Any]]) -> Any:
    """A definition list of (label, value) pairs: a value a macro made (Markup) is shown as
    it is, any other is text (numbers formatted by `fmt_num`)."""
    from markupsafe import Markup

    return macro("dl")([(k, v if isinstance(v, Markup) else fmt_num(v)) for k, v in items])


def figure_html(fig: Any | Callable[[], Any], alt: str, caption: str | None = None,
                close: bool = True) -> Any:
    """A matplotlib Figure as an embedded PNG (<figure> with caption). `fig` may be a function
    that draws it, called only where figures are drawn (`figures`); else None."""
    from ..plotstyle import close as close_figure
    from ..plotstyle import saving

    if not _DRAW.get():
        return None
    if callable(fig):
        fig = fig()
    buf = io.BytesIO()
    with saving():
        fig.savefig(buf, format="png", dpi=PNG_DPI, bbox_inches="tight", facecolor="white")
    width = int(round(fig.get_size_inches()[0] * CSS_DPI))
    if close:
        close_figure(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return macro("figure")(f"data:image/png;base64,{data}", alt, width, caption)


def page(title: str, subtitle: str, nav: Sequence[tuple[str, str]], body: Any,
         footer: Any = "", head_extra: Any = "") -> str:
    """The whole document from `templates/page.html.j2` (inline CSS and script, a sticky
    table of contents): `title`, `subtitle` and `nav` are text; `body`, `footer` and
    `head_extra` are shown as HTML when macros made them (Markup), else escaped as text."""
    return _env().get_template("page.html.j2").render(
        title=title, subtitle=subtitle, nav=list(nav), body=body, footer=footer,
        head_extra=head_extra) + "\n"


def _env() -> Any:
    """The Jinja2 environment of the report templates (package data), autoescaping."""
    global _ENV
    if _ENV is None:
        import jinja2

        _ENV = jinja2.Environment(loader=jinja2.PackageLoader("storlab.report", "templates"),
                                  autoescape=True, keep_trailing_newline=False,
                                  # an absent part (None: no figure, no table) shows nothing
                                  finalize=lambda v: "" if v is None else v)
        _ENV.filters["num"] = fmt_num
        # `tojson` as the report's JSON was always written: keys in the analyses' order,
        # strict JSON (no NaN), anything else as its text.
        _ENV.policies["json.dumps_kwargs"] = {"allow_nan": False, "default": str}
    return _ENV


def macro(name: str, template: str = "parts.html.j2") -> Any:
    """A macro of a template: `parts.html.j2` (table, dl, figure, cards, status_bar,
    failed_runs, json_script, body, footer) by default, or `sections.html.j2` (one per
    section). Call it with text and Markup, get escaped HTML (Markup) back."""
    return getattr(_env().get_template(template).module, name)


_ENV: Any = None
