"""Plots of an effects analysis (Pareto, half-normal, main-effect and interaction plots)
(drawn in storlab's one figure style).

Each function returns a detached matplotlib Figure (no pyplot, no backend switch); nothing
here opens a window. The shared style and the metric labels are in `storlab.plotstyle`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from scipy import stats

# The style lives in storlab.plotstyle (low-level, shared by every package); these names
# stay importable from here for existing callers.
from ..plotstyle import (  # noqa: F401
    PALETTE,
    RC,
    STYLE,
    axis_label,
    eng,
    format_axis,
    legend_outside,
    metric_name,
    metric_unit,
    styled,
    styled_plot,
    subplots,
)

if TYPE_CHECKING:
    from .effects import EffectsAnalysis

KINDS = ("pareto", "halfnormal", "main", "interaction")


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
    fig, ax = subplots(figsize=(6.8, 0.3 * len(e) + 1.7))
    sig = e["significant"].to_numpy(dtype=bool)
    ax.barh(e["term"], np.abs(e["effect"]), color=[STYLE["sig"] if s else STYLE["bar"]
                                                   for s in sig], height=0.65)
    ax.grid(axis="y", visible=False)
    # Legend entries built from explicit handles, one per colour actually drawn, so the
    # swatch always shows the colour of the bars it names.
    handles: list = []
    if sig.any():
        handles.append(Patch(facecolor=STYLE["sig"], label="significant"))
    if (~sig).any():
        handles.append(Patch(facecolor=STYLE["bar"], label="not significant"
                             if a.lenth is not None or sig.any() else "effect"))
    if a.lenth is not None:
        handles.append(ax.axvline(a.lenth.me, color=STYLE["line"], ls="--", lw=1,
                                  label=f"Lenth ME {eng(a.lenth.me)}"))
        handles.append(ax.axvline(a.lenth.sme, color=STYLE["line"], ls=":", lw=1,
                                  label=f"Lenth SME {eng(a.lenth.sme)}"))
    ax.legend(handles=handles, loc="lower right")
    ax.set_xlabel("|effect| on " + axis_label(a.response, unit))
    format_axis(ax.xaxis, a.response, unit)
    ax.set_title(f"Pareto of effects: {metric_name(a.response)}")
    return fig


@styled_plot
def _halfnormal(a: EffectsAnalysis, unit: str | None = None) -> Figure:
    e = a.effects.assign(abs=np.abs(a.effects["effect"])).sort_values("abs")
    m = len(e)
    q = stats.norm.ppf(0.5 + 0.5 * (np.arange(1, m + 1) - 0.5) / m)
    fig, ax = subplots(figsize=(6.4, 4.2))
    ax.scatter(e["abs"], q, color=[STYLE["sig"] if s else STYLE["bar"] for s in e["significant"]],
               zorder=3)
    for (_, r), qq in zip(e.iterrows(), q):
        if r["significant"]:
            ax.annotate(r["term"], (r["abs"], qq), textcoords="offset points", xytext=(5, -3),
                        fontsize=8)
    sig = e["significant"].to_numpy(dtype=bool)
    handles: list = [Line2D([], [], ls="", marker="o", color=c, label=t)
                     for c, t, show in ((STYLE["sig"], "significant", sig.any()),
                                        (STYLE["bar"], "not significant", (~sig).any()))
                     if show]
    if a.lenth is not None:  # null effects fall on |effect| = PSE * quantile
        handles += ax.plot(a.lenth.pse * q, q, color=STYLE["line"], ls="--", lw=1,
                           label=f"null line (PSE {eng(a.lenth.pse)})")
        handles.append(ax.axvline(a.lenth.me, color=STYLE["line"], ls=":", lw=1,
                                  label=f"Lenth ME {eng(a.lenth.me)}"))
    ax.legend(handles=handles, loc="lower right")
    ax.set_xlabel("|effect| on " + axis_label(a.response, unit))
    format_axis(ax.xaxis, a.response, unit)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("half-normal quantile")
    ax.set_title(f"Half-normal plot: {metric_name(a.response)}")
    return fig


@styled_plot
def _main(a: EffectsAnalysis, unit: str | None = None) -> Figure:
    k = len(a.codings)
    cols = min(k, 4)
    rows = (k + cols - 1) // cols
    fig, axes = subplots(rows, cols, figsize=(2.6 * cols + 0.6, 2.4 * rows + 0.5),
                             sharey=True, squeeze=False)
    y = a.data["_y"].to_numpy()
    for j, c in enumerate(a.codings):
        ax = axes[j // cols][j % cols]
        if a.balanced:
            xs = _coded_column(a, j)
            lo, hi, mid = y[xs < -0.5].mean(), y[xs > 0.5].mean(), y.mean()
        else:
            # Unbalanced runs: a raw marginal mean mixes in the other factors' effects
            # (B's line spanned -5.5 where the table's effect is -8.1), so the model's
            # adjusted means are drawn, whose difference is the table's effect.
            lo, hi = (a.adjusted_mean({c.name: s}) for s in (-1.0, 1.0))
            mid = a.intercept
        ax.axhline(mid, color=STYLE["muted"], lw=0.9, ls=":")
        ax.plot([0, 1], [lo, hi], marker="o", color=STYLE["bar"])
        ax.set_xticks([0, 1], [_level(c.low), _level(c.high)])
        ax.set_xlim(-0.3, 1.3)
        ax.set_title(c.name, fontsize=9, fontweight="normal")
        format_axis(ax.yaxis, a.response, unit)
    for j in range(k, rows * cols):
        axes[j // cols][j % cols].axis("off")
    for r in range(rows):
        axes[r][0].set_ylabel(axis_label(a.response, unit))
    if a.balanced:
        fig.suptitle(f"Main effects: mean {metric_name(a.response)} at each factor's low "
                     "and high level")
    else:
        fig.suptitle(f"Main effects: least-squares (adjusted) mean {metric_name(a.response)} "
                     "at each factor's low and high level\n(unbalanced runs: raw means would "
                     "mix in the other factors' effects)")
    return fig


def _coded_column(a: EffectsAnalysis, j: int) -> np.ndarray:
    return a.coded[:, j]


@styled_plot
def _interaction(a: EffectsAnalysis, unit: str | None = None) -> Figure:
    two = a.effects[a.effects["order"] == 2]
    two = two.reindex(two["effect"].abs().sort_values(ascending=False).index).head(6)
    names = [c.name for c in a.codings]
    if two.empty:  # e.g. Plackett-Burman: say why instead of an empty frame
        fig, ax = subplots(figsize=(6.4, 2.2))
        ax.axis("off")
        ax.text(0.5, 0.5, "No two-factor interactions were estimated: this design aliases\n"
                "them with the main effects (resolution III, e.g. Plackett-Burman).\n"
                "A follow-up factorial on the key factors can estimate them.",
                ha="center", va="center", transform=ax.transAxes)
        fig.suptitle(f"Interactions: {metric_name(a.response)}")
        return fig
    n = len(two)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = subplots(rows, cols, figsize=(3.1 * cols + 0.6, 2.7 * rows + 0.5),
                         squeeze=False, sharey=True)
    y = a.data["_y"].to_numpy()
    flat = [ax for row in axes for ax in row]
    for ax, (_, r) in zip(flat, two.iterrows()):
        i, j = (names.index(p) for p in r["term"].split(":"))
        xi, xj = _coded_column(a, i), _coded_column(a, j)
        for lvl, style, color in ((-1, "--", PALETTE[0]), (1, "-", PALETTE[1])):
            if a.balanced:
                m = [y[(xi * s > 0.5) & (xj * lvl > 0.5)].mean() for s in (-1, 1)]
            else:  # the model's adjusted cell means, as for the main effects
                m = [a.adjusted_mean({names[i]: s, names[j]: lvl}) for s in (-1, 1)]
            ax.plot([0, 1], m, marker="o", ls=style, color=color,
                    label=f"{names[j]} = {_level(a.codings[j].natural(lvl))}")
        ax.set_xticks([0, 1], [_level(a.codings[i].low), _level(a.codings[i].high)])
        ax.set_xlim(-0.3, 1.3)
        ax.set_xlabel(names[i])
        sig = " (significant)" if r["significant"] else ""
        ax.set_title(r["term"] + sig, fontsize=9, fontweight="normal")
        ax.legend(loc="best", fontsize=7)
        format_axis(ax.yaxis, a.response, unit)
    for ax in flat[n:]:
        ax.axis("off")
    for r in range(rows):
        axes[r][0].set_ylabel(axis_label(a.response, unit))
    fig.suptitle(f"Interactions: {metric_name(a.response)} (largest first; lines that are "
                 "not parallel interact)" + ("" if a.balanced else
                                             "\nleast-squares (adjusted) means: unbalanced runs"))
    return fig


def _level(v: object) -> str:
    """A factor level as a tick label: 1 rather than 1.0."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
