"""The one look every storlab figure shares, and readable axis labels with units.

Low-level on purpose (imports only matplotlib and numpy): analysis, estimate, sim, tune and
report draw with it. Figures are built as `matplotlib.figure.Figure` objects (the
object-oriented API), so drawing needs no GUI backend and importing storlab never switches
the backend a notebook user chose: no `matplotlib.use` anywhere in the library. A Figure
saves to PNG/SVG/PDF by itself (`fig.savefig`) and shows inline in Jupyter as it is.

    with styled():
        fig, ax = subplots(figsize=(6.4, 4))
        ax.set_ylabel(axis_label("total_iops"))       # "total I/O rate (IO/s)"
        format_axis(ax.yaxis, "total_iops")           # ticks 10k, 20k ...
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import matplotlib
import numpy as np
from matplotlib.figure import Figure

#: Okabe-Ito palette: distinguishable with the common colour-vision deficiencies and in
#: greyscale print.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000"]
STYLE = {"bar": "#0072B2", "sig": "#D55E00", "line": "#555555", "ok": "#009E73",
         "fail": "#D55E00", "muted": "#BBBBBB"}
#: Line styles that tell lines apart in greyscale as well as by colour.
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = "osD^vP*X"

RC: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.titleweight": "bold",
    "axes.labelsize": 9.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "both",
    "grid.color": "#E3E3E3",
    "grid.linewidth": 0.7,
    "axes.axisbelow": True,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "legend.fontsize": 8,
    "legend.frameon": True,
    "legend.framealpha": 0.85,
    "legend.edgecolor": "#DDDDDD",
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "figure.titlesize": 11,
    "figure.titleweight": "bold",
    "lines.linewidth": 1.6,
    "lines.markersize": 5,
}

F = TypeVar("F", bound=Callable[..., Any])


#: Always, over any style: labels are data (factor names and levels a campaign wrote), so
#: `$...$` is text, not mathtext (a level `$\\frac{1}{$` crashed `report`), and never TeX
#: (a `matplotlibrc` asking for it would hand the labels to `latex`, as root).
SAFE_RC: dict[str, Any] = {"text.usetex": False, "text.parse_math": False}


@functools.cache
def bundled_defaults() -> dict[str, Any]:
    """Matplotlib's own defaults (its bundled `matplotlibrc`), whatever the `matplotlibrc`
    in the working directory, `$MATPLOTLIBRC` or the user's config say: matplotlib obeys
    `./matplotlibrc` first, so any directory storlab is run in (as root, maybe another
    user's) would otherwise choose how its figures are drawn. The backend is left alone
    (a notebook's choice)."""
    return {k: v for k, v in matplotlib.rcParamsDefault.items()
            if not k.startswith("backend") and k != "interactive"}


@contextlib.contextmanager
def styled() -> Iterator[None]:
    """Draw inside this block to get storlab's figure style (fonts are fixed when text is
    created, so the whole figure must be built inside, not just saved): matplotlib's
    bundled defaults, then storlab's `RC`, then `SAFE_RC`."""
    with matplotlib.rc_context({**bundled_defaults(), **RC, **SAFE_RC}):
        yield


@contextlib.contextmanager
def saving() -> Iterator[None]:
    """Wrap `fig.savefig` in this: the settings read while saving come from matplotlib's
    bundled defaults (not a local `matplotlibrc`), except storlab's own `RC`, which stay as
    they are (`styled()` around, or the caller's)."""
    rc = {k: v for k, v in bundled_defaults().items() if k not in RC}
    with matplotlib.rc_context({**rc, **SAFE_RC}):
        yield


def styled_plot(fn: F) -> F:
    """Decorator: run a plotting function inside `styled()`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with styled():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] = (6.4, 4.2),
             layout: str | None = "constrained", **kw: Any) -> tuple[Figure, Any]:
    """`plt.subplots` without pyplot: a detached Figure (no backend, no global state, freed
    with its last reference) and its axes. Call it inside `styled()`."""
    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(nrows, ncols, **kw)


def close(fig: Any) -> None:
    """Release a figure: detached Figures need nothing; one pyplot manages is closed."""
    if getattr(getattr(fig, "canvas", None), "manager", None) is not None:
        import matplotlib.pyplot as plt  # only a pyplot figure has a manager

        plt.close(fig)


def legend_outside(ax: Any, **kw: Any) -> Any:
    """A legend to the right of the axes, so it never covers data."""
    kw.setdefault("loc", "upper left")
    kw.setdefault("bbox_to_anchor", (1.02, 1.0))
    kw.setdefault("borderaxespad", 0.0)
    return ax.legend(**kw)


# --------------------------------------------------------------------------- units
#: Units of the metric names storlab's runners write (fio, Ceph, the simulator, sysbench).
_UNIT_RULES: tuple[tuple[str, str], ...] = (
    (r"_iops$|^iops$", "IO/s"),
    (r"_bw_bytes$|^bw_bytes$", "B/s"),
    (r"_bw$|^bw$", "KiB/s"),          # fio's own bw field is KiB/s
    (r"(^|_)mb_s$", "MB/s"),
    (r"(^|_)ops_s$", "ops/s"),
    (r"_us$", "µs"),
    (r"_ms$", "ms"),
    (r"_ns$", "ns"),
    (r"_cpu$", "%"),
    (r"_per_s$|_ps$", "1/s"),
    (r"_bytes$", "B"),
    (r"_pct$|_percent$", "%"),
)

_DIRECTIONS = {"read": "read", "write": "write", "trim": "trim", "total": "total",
               "get": "GET", "put": "PUT", "delete": "DELETE", "head": "HEAD"}
_STAT = {"mean": "mean", "min": "min", "max": "max", "stddev": "std. dev.", "std": "std. dev."}
_LAT = {"clat": "completion latency", "slat": "submission latency", "lat": "latency"}
_EXACT = {"usr_cpu": "user CPU", "sys_cpu": "system CPU", "ops_s": "throughput",
          "mb_s": "bandwidth", "iops": "I/O rate", "bw_bytes": "bandwidth", "bw": "bandwidth",
          "read_pct": "read share", "rwmixread": "read share", "C": "capacity C"}


def metric_unit(name: str, unit: str | None = None) -> str:
    """The unit of a metric: the one given (e.g. from the space's responses), else the one
    its name implies (`total_iops` -> IO/s, `read_clat_p99_us` -> µs), else ''."""
    if unit:
        return unit
    for pattern, u in _UNIT_RULES:
        if re.search(pattern, name):
            return u
    return ""


def metric_name(name: str) -> str:
    """A readable name for a storlab column: `total_bw_bytes` -> 'total bandwidth',
    `read_clat_p99_us` -> 'read completion latency p99', `ops_s` -> 'throughput',
    `get_lat_mean_ms` -> 'GET mean latency'. Unknown names are returned as they are."""
    if name in _EXACT:
        return _EXACT[name]
    parts = name.split("_")
    if parts and parts[-1] in ("us", "ms", "ns", "bytes", "s", "pct") and len(parts) > 1:
        if parts[-1] == "bytes" and parts[-2] == "bw":
            pass  # keep bw_bytes together
        elif parts[-1] == "s" and parts[-2] in ("ops", "mb"):
            parts = parts[:-2] + [parts[-2] + "_s"]
        else:
            parts = parts[:-1]
    words: list[str] = []
    head = ""
    if parts and parts[0] in _DIRECTIONS:
        head = _DIRECTIONS[parts[0]]
        parts = parts[1:]
    rest = "_".join(parts)
    if rest in ("iops",):
        words = ["I/O rate"]
    elif rest in ("bw_bytes", "bw", "mb_s"):
        words = ["bandwidth"]
    elif rest == "ops_s":
        words = ["throughput"]
    elif parts and parts[0] in _LAT:
        stat = parts[1] if len(parts) > 1 else ""
        if stat in _STAT:
            words = [_STAT[stat], _LAT[parts[0]]]
        elif re.fullmatch(r"p\d+(\.\d+)?", stat):
            words = [_LAT[parts[0]], stat]
        elif not stat:
            words = [_LAT[parts[0]]]
    if not words:
        return name
    return " ".join([head] * bool(head) + words)


def axis_label(name: str, unit: str | None = None) -> str:
    """A readable label with the unit: `total_iops` -> 'total I/O rate (IO/s)',
    `lat_mean_ms` -> 'mean latency (ms)'; an unknown name stays as it is, with its unit
    when one is given or implied."""
    u = metric_unit(name, unit)
    label = metric_name(name)
    return f"{label} ({u})" if u else label


_PREFIX = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P"}


def eng(value: float, digits: int = 3) -> str:
    """A number with an engineering prefix from 1000 up and `digits` significant digits:
    94.9k, 2.27M; below 1000 a plain number (0.5, 0.0015), since a sub-unit prefix reads
    as a unit ("500m" for half a log unit, "m" for milli beside "M" for mega)."""
    x = float(value)
    if not np.isfinite(x) or abs(float(f"{x:.{digits}g}")) < 1000:
        return f"{x:.{digits}g}"
    e = min(int(np.floor(np.log10(abs(x)) / 3) * 3), 15)
    m = x / 10.0 ** e
    if abs(float(f"{m:.{digits}g}")) >= 1000 and e + 3 in _PREFIX:  # 999.96k is 1.00M
        e, m = e + 3, m / 1000
    return f"{m:.{digits}g}{_PREFIX[e]}"


def format_axis(axis: Any, name: str, unit: str | None = None) -> None:
    """Tick labels with engineering prefixes from 1000 up in the metric's unit (10k, 350M)
    and plain numbers below (0.5, not matplotlib's EngFormatter "500m")."""
    from matplotlib.ticker import FuncFormatter

    u = metric_unit(name, unit)
    if u == "%":
        return
    # The unit is in the axis label; ticks carry only the prefix, so they stay short.
    # Six significant digits, as EngFormatter's: a tick at 10,250 reads 10.25k, not 10.2k.
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: eng(v, 6)))
