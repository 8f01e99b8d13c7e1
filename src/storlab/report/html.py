"""HTML building blocks for storlab's self-contained reports: tables (sortable, with the
exact value of every number kept in `data-v`), figures embedded as base64 PNG, and one page
with inline CSS and script (no CDN, no network: the file opens anywhere, prints cleanly).

Written with the standard library (html.escape, base64) rather than a template engine: the
page is a handful of fixed parts, and a report must not depend on anything to be viewed.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

#: Pixels per inch a browser assumes: a figure of 6.4 in shows 614 px wide on screen,
#: while the PNG holds 150 dpi so that it stays sharp on HiDPI screens and in print.
CSS_DPI = 96
PNG_DPI = 150


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


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


SI = {6: "M", 9: "G", 12: "T", 15: "P"}


def _si(x: float) -> str:
    """501.3M, 5.932G; beyond peta an exponent (sums of squares get that large)."""
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
               row_classes: Sequence[str] | None = None) -> str:
    """A <table> of a DataFrame. Numeric cells carry their exact value in `data-v`;
    `row_classes` gives each body row a CSS class (e.g. `sig` to highlight it)."""
    headers = headers or {}
    num = set(numeric_cols) if numeric_cols is not None else {
        c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])
        and not pd.api.types.is_bool_dtype(df[c])}
    cls = " ".join(x for x in ("data", "sortable" if sortable else "", css_class) if x)
    out = [f'<div class="scroll"><table class="{cls}"'
           + (f' id="{esc(table_id)}"' if table_id else "") + ">"]
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<thead><tr>")
    for c in df.columns:
        label = _breakable(headers.get(str(c), str(c)))
        inner = f'<button type="button">{label}</button>' if sortable else label
        out.append(f'<th scope="col" data-col="{esc(c)}"'
                   + (' class="num"' if c in num else "") + f">{inner}</th>")
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(df.itertuples(index=False)):
        rc = row_classes[i] if row_classes is not None else ""
        out.append(f'<tr class="{esc(rc)}">' if rc else "<tr>")
        for c, v in zip(df.columns, row):
            if c in num:
                out.append(f'<td class="num" data-v="{esc(_data_v(v))}">{esc(fmt_num(v))}</td>')
            else:
                text = "" if v is None or (isinstance(v, float) and math.isnan(v)) else v
                out.append(f"<td>{esc(fmt_num(text))}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _breakable(name: str) -> str:
    """A column heading that may wrap once, at the underscore nearest its middle, when it is
    long (read_clat_ | p99_us): a wide table then needs less sideways scrolling."""
    if len(name) <= 12 or "_" not in name:
        return esc(name)
    cuts = [i for i, ch in enumerate(name) if ch == "_"]
    i = min(cuts, key=lambda k: abs(k - len(name) / 2))
    return esc(name[:i + 1]) + "<wbr>" + esc(name[i + 1:])


def dl_html(items: Sequence[tuple[str, Any]]) -> str:
    """A definition list of (label, value) pairs; values already HTML when they start '<'."""
    parts = ['<dl class="facts">']
    for k, v in items:
        val = v if isinstance(v, str) and v.startswith("<") else esc(fmt_num(v))
        parts.append(f"<dt>{esc(k)}</dt><dd>{val}</dd>")
    parts.append("</dl>")
    return "".join(parts)


def figure_html(fig: Any, alt: str, caption: str | None = None, close: bool = True) -> str:
    """A matplotlib Figure as an embedded PNG (<figure> with caption)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PNG_DPI, bbox_inches="tight", facecolor="white")
    width = int(round(fig.get_size_inches()[0] * CSS_DPI))
    if close:
        plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}" '
            f'style="width:{width}px">{cap}</figure>')


def json_script(data: Any, element_id: str) -> str:
    """Machine-readable data in the page (`<script type="application/json">`)."""
    text = json.dumps(data, allow_nan=False, default=str).replace("</", "<\\/")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


CSS = """
:root { --fg:#1d1d1f; --muted:#5f6368; --line:#dadce0; --accent:#0072B2; --bad:#B3261E;
  --ok:#1E7B4F; --bg2:#f6f7f9; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { font-family: "DejaVu Sans", "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
  color: var(--fg); margin: 0; line-height: 1.45; font-size: 15px; background: #fff; }
main { max-width: 1120px; margin: 0 auto; padding: 0 24px 48px; }
header.top { border-bottom: 3px solid var(--accent); padding: 18px 0 10px; margin-bottom: 6px; }
header.top h1 { margin: 0 0 2px; font-size: 1.6em; }
header.top p { margin: 0; color: var(--muted); font-size: .92em; }
nav.toc { position: sticky; top: 0; background: rgba(255,255,255,.96); z-index: 2;
  border-bottom: 1px solid var(--line); padding: 6px 0; font-size: .88em; }
nav.toc a { color: var(--accent); text-decoration: none; margin-right: 14px;
  white-space: nowrap; }
nav.toc a:hover { text-decoration: underline; }
h2 { font-size: 1.3em; margin: 34px 0 8px; padding-bottom: 4px;
  border-bottom: 1px solid var(--line); }
h3 { font-size: 1.08em; margin: 22px 0 6px; }
section { scroll-margin-top: 44px; }
p.note, .muted { color: var(--muted); font-size: .9em; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { background: var(--bg2); border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.card b { display: block; font-size: 1.35em; font-variant-numeric: tabular-nums; }
.card span { color: var(--muted); font-size: .82em; }
.card.bad b { color: var(--bad); }
.card.ok b { color: var(--ok); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px;
  margin: 8px 0; font-size: .93em; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.scroll { overflow-x: auto; margin: 8px 0 14px;
  /* shadows at an edge with more columns beyond it (they scroll away with the content) */
  background: linear-gradient(to right, #fff 30%, rgba(255,255,255,0)),
    linear-gradient(to left, #fff 30%, rgba(255,255,255,0)) 100% 0,
    radial-gradient(farthest-side at 0 50%, rgba(0,0,0,.18), rgba(0,0,0,0)),
    radial-gradient(farthest-side at 100% 50%, rgba(0,0,0,.18), rgba(0,0,0,0)) 100% 0;
  background-repeat: no-repeat; background-size: 40px 100%, 40px 100%, 12px 100%, 12px 100%;
  background-attachment: local, local, scroll, scroll; }
table.data { border-collapse: collapse; font-size: .86em; font-variant-numeric: tabular-nums; }
table.data caption { text-align: left; font-weight: 600; padding: 4px 0; color: var(--fg); }
table.data th, table.data td { padding: 3px 10px; border-bottom: 1px solid var(--line);
  text-align: left; white-space: nowrap; }
table.data th { background: var(--bg2); font-weight: 600; position: relative;
  white-space: normal; vertical-align: bottom; min-width: 3em; }
table.data td.num, table.data th.num { text-align: right; }
table.data tr.sig td { background: #fff4e5; }
table.data th button { all: unset; cursor: pointer; display: block; width: 100%; }
table.data th button:focus-visible { outline: 2px solid var(--accent); }
table.sortable th button::after { content: " \\2195"; color: #aaa; font-size: .85em; }
table.sortable th[aria-sort="ascending"] button::after { content: " \\2191"; color: var(--fg); }
table.sortable th[aria-sort="descending"] button::after { content: " \\2193"; color: var(--fg); }
figure { margin: 10px 0 18px; }
figure img { max-width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: .86em; margin-top: 4px; max-width: 760px; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr));
  gap: 0 24px; align-items: start; }
.rec { border-left: 4px solid var(--ok); background: #f1f8f4; padding: 8px 14px;
  margin: 10px 0; }
.rec b { font-variant-numeric: tabular-nums; }
.warn { border-left: 4px solid #E69F00; background: #fff8ec; padding: 6px 12px;
  margin: 8px 0; font-size: .9em; }
pre.stderr { background: var(--bg2); padding: 6px 10px; font-size: .8em; margin: 2px 0;
  white-space: pre-wrap; max-width: 100%; }
.bar { display: flex; height: 14px; border-radius: 3px; overflow: hidden; margin: 6px 0 2px;
  background: #e8eaed; max-width: 640px; }
.bar i { display: block; height: 100%; }
.legend i { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px;
  border-radius: 2px; vertical-align: -1px; }
details summary { cursor: pointer; color: var(--accent); margin: 6px 0; }
code { font-size: .92em; background: var(--bg2); padding: 0 3px; border-radius: 3px; }
footer { color: var(--muted); font-size: .8em; margin-top: 40px; border-top: 1px solid
  var(--line); padding-top: 8px; }
@media (max-width: 720px) { main { padding: 0 12px 32px; } .grid2 { display: block; } }
@media print {
  @page { size: A4; margin: 14mm 12mm; }
  body { font-size: 10pt; }
  main { max-width: none; padding: 0; }
  nav.toc, .noprint { display: none; }
  h2 { break-after: avoid; } h3 { break-after: avoid; }
  figure, .rec, tr, dl.facts { break-inside: avoid; }
  .scroll { overflow: visible; }
  table.data { font-size: 8pt; }
  table.data th, table.data td { padding: 1px 5px; white-space: normal; }
  table.sortable th button::after { content: ""; }
  .grid2 { display: block; }
  figure img { max-height: 240mm; max-width: 100%; object-fit: contain; }
  a { color: inherit; text-decoration: none; }
}
"""

# Sorting by `data-v` (numbers) or text, toggled per click; printing opens <details>.
SCRIPT = """
(function () {
  function key(td, numeric) {
    if (!td) return numeric ? NaN : "";
    var v = td.hasAttribute("data-v") ? td.getAttribute("data-v") : td.textContent;
    return numeric ? (v === "" ? NaN : parseFloat(v)) : v.toLowerCase();
  }
  function sortBy(table, th) {
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = th.classList.contains("num");
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(th.parentNode.children, function (h) {
      h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[idx], numeric), y = key(b.cells[idx], numeric);
      if (numeric) {
        if (isNaN(x) && isNaN(y)) return 0;
        if (isNaN(x)) return 1;
        if (isNaN(y)) return -1;
        return dir * (x - y);
      }
      return dir * x.localeCompare(y, undefined, {numeric: true});
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable th button").forEach(function (b) {
    b.addEventListener("click", function () {
      var th = b.parentNode;
      sortBy(th.closest("table"), th);
    });
  });
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
})();
"""


def page(title: str, subtitle: str, nav: Sequence[tuple[str, str]], body: str,
         footer: str = "", head_extra: str = "") -> str:
    """The whole document: inline CSS, a sticky table of contents, the body, the script."""
    links = "".join(f'<a href="#{esc(i)}">{esc(t)}</a>' for i, t in nav)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            # An empty icon: the browser would otherwise ask for /favicon.ico.
            '<link rel="icon" href="data:,">'
            f"<title>{esc(title)}</title><style>{CSS}</style>{head_extra}</head><body>"
            f'<main><header class="top"><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header>'
            + (f'<nav class="toc" aria-label="Sections">{links}</nav>' if nav else "")
            + body
            + (f"<footer>{footer}</footer>" if footer else "")
            + f"</main><script>{SCRIPT}</script></body></html>\n")
