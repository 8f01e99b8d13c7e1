"""Plots of an effects analysis (Pareto, half-normal, main-effect and interaction plots)
and the styling every storlab figure shares.

Each function returns a matplotlib Figure; nothing here opens a window. Other modules draw
inside `styled()` (or decorate with `@styled_plot`) so that figures in a notebook and in the
HTML report look alike: one palette, one font size, value axes labelled with their unit and
ticked with engineering prefixes (12k IO/s, 350 MB/s, 1.2 ms).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402
from scipy import stats  # noqa: E402

if TYPE_CHECKING:
    from .effects import EffectsAnalysis

KINDS = ("pareto", "halfnormal", "main", "interaction")

#: Okabe-Ito palette: distinguishable with the common colour-vision deficiencies and in
#: greyscale print.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000"]
STYLE = {"bar": "#0072B2", "sig": "#D55E00", "line": "#555555", "ok": "#009E73",
         "fail": "#D55E00", "muted": "#BBBBBB"}

RC: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
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
    "legend.frameon": False,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "figure.titlesize": 11,
    "figure.titleweight": "bold",
    "lines.linewidth": 1.6,
    "lines.markersize": 5,
}

F = TypeVar("F", bound=Callable[..., Figure])


@contextlib.contextmanager
def styled() -> Iterator[None]:
    """Draw inside this block to get storlab's figure style (fonts are fixed when text is
    created, so the whole figure must be built inside, not just saved)."""
    with plt.rc_context(RC):
        yield


def styled_plot(fn: F) -> F:
    """Decorator: run a plotting function inside `styled()`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        with styled():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


# --------------------------------------------------------------------------- units
#: Units of the metric names storlab's runners write (fio, sysbench, postmark).
_UNIT_RULES: tuple[tuple[str, str], ...] = (
    (r"_iops$|^iops$", "IO/s"),
    (r"_bw_bytes$|^bw_bytes$|^bw$|_bw$", "B/s"),
    (r"_us$", "µs"),
    (r"_ms$", "ms"),
    (r"_ns$", "ns"),
    (r"_cpu$", "%"),
    (r"_per_s$|_ps$", "1/s"),
    (r"_bytes$", "B"),
    (r"_pct$|_percent$", "%"),
)


def metric_unit(name: str, unit: str | None = None) -> str:
    """The unit of a metric: the one given (e.g. from the space's responses), else the one
    its name implies (`total_iops` -> IO/s, `read_clat_p99_us` -> µs), else ''."""
    if unit:
        return unit
    for pattern, u in _UNIT_RULES:
        if re.search(pattern, name):
            return u
    return ""


def axis_label(name: str, unit: str | None = None) -> str:
    """`total_iops (IO/s)`; just the name when no unit is known."""
    u = metric_unit(name, unit)
    return f"{name} ({u})" if u else name


_PREFIX = {-12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T",
           15: "P"}


def eng(value: float) -> str:
    """A number with an engineering prefix and 3 significant digits: 94.9k, 2.27M, 1.5m."""
    x = float(value)
    if x == 0 or not np.isfinite(x):
        return f"{x:g}"
    e = int(np.floor(np.log10(abs(x)) / 3) * 3)
    e = min(max(e, -12), 15)
    m = x / 10.0 ** e
    if abs(float(f"{m:.3g}")) >= 1000 and e + 3 in _PREFIX:  # 999.96k rounds to 1.00M
        e, m = e + 3, m / 1000
    return f"{m:.3g}{_PREFIX[e]}"


def format_axis(axis: Axis, name: str, unit: str | None = None) -> None:
    """Tick labels with engineering prefixes in the metric's unit (10k, 350M, 1.2m)."""
    u = metric_unit(name, unit)
    if u == "%":
        return
    # The unit is in the axis label; ticks carry only the prefix, so they stay short.
    axis.set_major_formatter(EngFormatter(unit="", places=None, sep=""))


# --------------------------------------------------------------------------- effects
def effects_plot(a: EffectsAnalysis, kind: str, unit: str | None = None) -> Figure:
    """One of the effects plots: pareto, halfnormal, main, or interaction. `unit` is the
    response's unit (guessed from its name when not given)."""
    if a.transform != "none":  # axes in transformed units: name them so, no unit
        a, unit = dataclasses.replace(a, response=a.label, transform="none"), None
    if kind == "pareto":
        return _pareto(a, unit)
    if kind == "halfnormal":
        return _halfnormal(a, unit)
    if kind == "main":
        return _main(a, unit)
    if kind == "interaction":
        return _interaction(a, unit)
    raise ValueError(f"plot kind {kind!r} must be one of {', '.join(KINDS)}")


@styled_plot
def _pareto(a: EffectsAnalysis, unit: str | None = None) -> Figure:
    e = a.effects.sort_values("effect", key=np.abs)
    fig, ax = plt.subplots(figsize=(6.4, 0.3 * len(e) + 1.6))
    colors = [STYLE["sig"] if s else STYLE["bar"] for s in e["significant"]]
    ax.barh(e["term"], np.abs(e["effect"]), color=colors, height=0.65)
    ax.grid(axis="y", visible=False)
    if a.lenth is not None:
        ax.axvline(a.lenth.me, color=STYLE["line"], ls="--", lw=1,
                   label=f"Lenth ME {eng(a.lenth.me)}")
        ax.axvline(a.lenth.sme, color=STYLE["line"], ls=":", lw=1,
                   label=f"Lenth SME {eng(a.lenth.sme)}")
    if e["significant"].any():
        ax.barh([], [], color=STYLE["sig"], label="significant")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right")
    ax.set_xlabel("|effect| on " + axis_label(a.response, unit))
    format_axis(ax.xaxis, a.response, unit)
    ax.set_title(f"Pareto of effects: {a.response}")
    fig.tight_layout()
    return fig


@styled_plot
def _halfnormal(a: EffectsAnalysis, unit: str | None = None) -> Figure:
    e = a.effects.assign(abs=np.abs(a.effects["effect"])).sort_values("abs")
    m = len(e)
    q = stats.norm.ppf(0.5 + 0.5 * (np.arange(1, m + 1) - 0.5) / m)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.scatter(e["abs"], q, color=[STYLE["sig"] if s else STYLE["bar"] for s in e["significant"]],
               zorder=3)
    for (_, r), qq in zip(e.iterrows(), q):
        if r["significant"]:
            ax.annotate(r["term"], (r["abs"], qq), textcoords="offset points", xytext=(5, -3),
                        fontsize=8)
    if a.lenth is not None:  # null effects fall on |effect| = PSE * quantile
        ax.plot(a.lenth.pse * q, q, color=STYLE["line"], ls="--", lw=1,
                label=f"null line (PSE {eng(a.lenth.pse)})")
        ax.axvline(a.lenth.me, color=STYLE["line"], ls=":", lw=1,
                   label=f"Lenth ME {eng(a.lenth.me)}")
        ax.legend(loc="lower right")
    ax.set_xlabel("|effect| on " + axis_label(a.response, unit))
    format_axis(ax.xaxis, a.response, unit)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("half-normal quantile")
    ax.set_title(f"Half-normal plot: {a.response}")
    fig.tight_layout()
    return fig


@styled_plot
def _main(a: EffectsAnalysis, unit: str | None = None) -> Figure:
    k = len(a.codings)
    cols = min(k, 4)
    rows = (k + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols + 0.6, 2.4 * rows + 0.5),
                             sharey=True, squeeze=False)
    y = a.data["_y"].to_numpy()
    for j, c in enumerate(a.codings):
        ax = axes[j // cols][j % cols]
        xs = _coded_column(a, j)
        lo, hi = y[xs < -0.5].mean(), y[xs > 0.5].mean()
        ax.axhline(y.mean(), color=STYLE["muted"], lw=0.9, ls=":")
        ax.plot([0, 1], [lo, hi], marker="o", color=STYLE["bar"])
        ax.set_xticks([0, 1], [str(c.low), str(c.high)])
        ax.set_xlim(-0.3, 1.3)
        ax.set_title(c.name, fontsize=9, fontweight="normal")
        format_axis(ax.yaxis, a.response, unit)
    for j in range(k, rows * cols):
        axes[j // cols][j % cols].axis("off")
    for r in range(rows):
        axes[r][0].set_ylabel(axis_label(a.response, unit))
    fig.suptitle(f"Main effects: mean {a.response} at each factor's low and high level")
    fig.tight_layout()
    return fig


def _coded_column(a: EffectsAnalysis, j: int) -> np.ndarray:
    return a.coded[:, j]


@styled_plot
def _interaction(a: EffectsAnalysis, unit: str | None = None) -> Figure:
    two = a.effects[a.effects["order"] == 2]
    two = two.reindex(two["effect"].abs().sort_values(ascending=False).index).head(6)
    names = [c.name for c in a.codings]
    n = max(len(two), 1)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.1 * cols + 0.6, 2.7 * rows + 0.5),
                             squeeze=False, sharey=True)
    y = a.data["_y"].to_numpy()
    flat = [ax for row in axes for ax in row]
    for ax, (_, r) in zip(flat, two.iterrows()):
        i, j = (names.index(p) for p in r["term"].split(":"))
        xi, xj = _coded_column(a, i), _coded_column(a, j)
        for lvl, style, color in ((-1, "--", PALETTE[0]), (1, "-", PALETTE[1])):
            m = [y[(xi * s > 0.5) & (xj * lvl > 0.5)].mean() for s in (-1, 1)]
            ax.plot([0, 1], m, marker="o", ls=style, color=color,
                    label=f"{names[j]}={a.codings[j].natural(lvl)}")
        ax.set_xticks([0, 1], [str(a.codings[i].low), str(a.codings[i].high)])
        ax.set_xlim(-0.3, 1.3)
        ax.set_xlabel(names[i])
        sig = " (significant)" if r["significant"] else ""
        ax.set_title(r["term"] + sig, fontsize=9, fontweight="normal")
        ax.legend(fontsize=7)
        format_axis(ax.yaxis, a.response, unit)
    if two.empty:
        flat[0].text(0.5, 0.5, "no two-factor interactions estimated", ha="center")
        flat[0].axis("off")
    for ax in flat[len(two):] if not two.empty else []:
        ax.axis("off")
    for r in range(rows):
        axes[r][0].set_ylabel(axis_label(a.response, unit))
    fig.suptitle(f"Interactions: {a.response} (largest first)")
    fig.tight_layout()
    return fig
