"""Plots of an effects analysis (Pareto, half-normal, main-effect and interaction plots)
and of Carver's importance (the greedy steps, the subsets, the selection path), drawn in
storlab's one figure style.

Each function returns a detached matplotlib Figure (no pyplot, no backend switch); nothing
here opens a window. The shared style and the metric labels are in `storlab.plotstyle`.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import TYPE_CHECKING, Any

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
    from .importance import ImportanceResult

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


# --------------------------------------------------------------------------- importance
def importance_figure(res: ImportanceResult, kind: str, unit: str | None = None) -> Figure:
    """Carver's figures for an importance result (`ImportanceResult.plot` says which
    `kind` is which), unstyled: the caller draws inside `styled()`."""
    if kind == "pi":
        fig, ax = subplots(figsize=(6.4, 0.3 * len(res.pi) + 1.6))
        _imp_pi(ax, res)
        return fig
    if kind == "cpi":
        n = max(len(res.steps), 1)
        fig, axes = subplots(n, 1, figsize=(max(6.4, 0.55 * len(res.pi) + 2.5),
                                            2.1 * n + 1.0), squeeze=False)
        _imp_cpi([r[0] for r in axes], res)
        return fig
    if kind == "subsets":
        fig, ax = subplots(figsize=(7.6, 4.8))
        _imp_subsets(ax, res, unit)
        return fig
    if kind == "path":
        fig, ax = subplots(figsize=(6.4, 4.2))
        _imp_path(ax, res, unit)
        return fig
    n = min(max(len(res.steps), 1), 4)
    fig = Figure(figsize=(max(11.0, 0.5 * len(res.pi) * n), 8.6), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.15])
    _imp_cpi(list(np.atleast_1d(top.subplots(1, n))), res)
    top.suptitle("Importance of each parameter at each greedy step "
                 "(PI, then CPI given the parameters already selected)"
                 + (f"\n{res.subset_note}" if res.subset_note else ""),
                 fontsize=10.5, fontweight="bold")
    ax3, ax4 = bottom.subplots(1, 2, width_ratios=[1.25, 1])
    _imp_subsets(ax3, res, unit)
    _imp_path(ax4, res, unit)
    return fig


def _imp_pi(ax: Any, res: ImportanceResult) -> None:
    """Every parameter's PI share; the selected ones in the accent colour."""
    pt = res.pi_table()
    sel = set(res.selected)
    ax.barh(pt["param"][::-1], 100 * pt["share"][::-1], height=0.65,
            color=[STYLE["sig"] if p in sel else STYLE["bar"] for p in pt["param"][::-1]])
    ax.grid(axis="y", visible=False)
    ax.set_xlabel(f"PI: share of the variance of {metric_name(res.response)} (%)")
    ax.set_title(f"Parameter importance: {metric_name(res.response)}")


def _imp_cpi(axes: list[Any], res: ImportanceResult) -> None:
    """Figure 2: one bar panel per step; the chosen parameter in the accent colour."""
    order = list(res.pi_table()["param"])  # the same x order in every panel
    var = res.variance
    if not res.steps:
        axes[0].bar(order, [100 * res.pi[p] / var if var > 0 else 0.0 for p in order],
                    color=STYLE["bar"])
        axes[0].set_ylabel("PI (% of variance)")
        axes[0].set_title(f"no parameter selected: {res.stop_reason}", fontsize=9,
                          fontweight="normal")
        return
    before: list[str] = []
    for ax, s in zip(axes, res.steps):
        vals = [100 * s.candidates[p] / var if p in s.candidates and var > 0 else 0.0
                for p in order]
        colors = [STYLE["sig"] if p == s.param else STYLE["muted"] if p in before
                  else STYLE["bar"] for p in order]
        ax.bar(range(len(order)), vals, color=colors, width=0.7)
        for x, p in enumerate(order):
            if p in before:  # already fixed: no bar, say why
                ax.annotate("fixed", (x, 0), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=7, color="#777777")
        tilt = sum(len(p) for p in order) > 24  # long names would run into each other
        ax.set_xticks(range(len(order)), order, rotation=30 if tilt else 0,
                      ha="right" if tilt else "center", rotation_mode="anchor")
        ax.grid(axis="x", visible=False)
        given = f" | {', '.join(before)}" if before else ""
        ax.set_ylabel(("PI" if not before else "CPI") + " (% of variance)")
        title = f"step {s.rank}: {'PI' if not before else 'CPI'}(X{given})"
        ax.set_title(textwrap.fill(title, 34), fontsize=9, fontweight="normal")
        before.append(s.param)
    axes[0].legend(handles=[Patch(facecolor=STYLE["sig"], label="selected at this step"),
                            Patch(facecolor=STYLE["bar"], label="other candidates")],
                   loc="upper right")
    for ax in axes[len(res.steps):]:
        ax.axis("off")


def _imp_subsets(ax: Any, res: ImportanceResult, unit: str | None = None) -> None:
    """Figure 3: each point a set fixed by N = 1 or 2 parameter values; best values of
    the greedy steps ringed."""
    t = res.subsets()
    for n, color, size in ((2, PALETTE[4], 14), (1, PALETTE[3], 46)):
        g = t[t["n_fixed"] == n]
        if not g.empty:
            ax.scatter(g["mean"], 100 * g["rsd"], s=size, color=color, alpha=0.8,
                       edgecolors="white", linewidths=0.4, zorder=3 if n == 1 else 2,
                       label=f"{len(g)} sets fixing {n} parameter{'s' * (n > 1)}")
    lo, hi = (float(t["mean"].min()), float(t["mean"].max())) if len(t) else (0.0, 1.0)
    for s in res.steps[:2]:  # the greedy choice among these sets, named
        want = ", ".join(f"{p}={s.best_values[p]}" for p in res.selected[:s.rank])
        hit = t[t["fixed"] == want]
        if not hit.empty:
            r = hit.iloc[0]
            ax.scatter([r["mean"]], [100 * r["rsd"]], s=140, facecolors="none",
                       edgecolors="black", linewidths=1.2, zorder=4)
            # Labels point inwards (one at the left edge ran off the axes) and sit on
            # their own rows of the axes (the two steps' sets often sit on top of
            # each other, and labels offset from each point then overlapped), with a
            # line to their set.
            left = r["mean"] <= (lo + hi) / 2
            ax.annotate(f"step {s.rank}: {want}", (r["mean"], 100 * r["rsd"]),
                        xytext=(r["mean"] + (0.04 if left else -0.04) * (hi - lo or 1),
                                0.16 + 0.08 * (s.rank - 1)),
                        textcoords=("data", "axes fraction"),
                        ha="left" if left else "right", va="center", fontsize=7.5,
                        arrowprops={"arrowstyle": "-", "color": "0.4", "lw": 0.7},
                        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none",
                              "alpha": 0.85})
    ax.axhline(100 * res.rsd, color="#777777", lw=0.9, ls=":",
               label=f"RSD of all {res.n_cells} cells")
    ax.set_xlabel("mean " + axis_label(res.response, unit) + " of the set")
    format_axis(ax.xaxis, res.response, unit)
    ax.set_ylabel("RSD within the set (%, lower is steadier)")
    ax.set_ylim(bottom=0)
    corner = "bottom right" if res.goal == "maximize" else "bottom left"
    ax.set_title(f"Sets fixing 1 or 2 parameters (best: {corner})", fontsize=9)
    ax.legend(loc="best")


def _imp_path(ax2: Any, res: ImportanceResult, unit: str | None = None) -> None:
    """The selection path: mean and RSD of the subset left after each step."""
    xs = [0] + [s.rank for s in res.steps]
    means = [res.mean] + [s.subset_mean for s in res.steps]
    rsds = [res.rsd] + [s.subset_rsd for s in res.steps]
    h1 = ax2.plot(xs, means, "o-", color=PALETTE[2], label="mean (left axis)")
    tilt = len(xs) > 3
    ax2.set_xticks(xs, ["all"] + [f"+{s.param}" for s in res.steps],
                   rotation=25 if tilt else 0, ha="right" if tilt else "center",
                   rotation_mode="anchor")
    ax2.set_xlim(-0.4, xs[-1] + 0.4)
    ax2.set_ylabel("mean " + axis_label(res.response, unit) + " of the subset")
    format_axis(ax2.yaxis, res.response, unit)
    ax3 = ax2.twinx()
    ax3.grid(False)
    ax3.spines["right"].set_visible(True)
    h2 = ax3.plot(xs, [100 * r for r in rsds], "s--", color=PALETTE[5],
                  label="RSD (right axis)")
    for r in res.stop:
        if r.kind == "rsd":
            h2 += [ax3.axhline(100 * r.value, color=PALETTE[5], lw=0.8, ls=":",
                               label=f"RSD stop {100 * r.value:g} %")]
    ax3.set_ylim(bottom=0)
    ax3.set_ylabel("RSD of the subset (%)")
    ax2.set_title("Selection path: the chosen parameters fixed at their best values",
                  fontsize=9)
    ax2.legend(handles=h1 + h2, loc="center right")
