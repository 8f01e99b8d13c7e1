"""The analyses' figures, drawn in storlab's one figure style: an effects analysis
(Pareto, half-normal, main-effect and interaction plots), Carver's importance (the greedy
steps, the subsets, the selection path) and its evaluation (Figure 5), the comparison of
importance methods, and benchmark coverage (components, dendrogram, clusters reached).

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

from ..plotstyle import (
    LINESTYLES,
    PALETTE,
    STYLE,
    axis_label,
    eng,
    format_axis,
    legend_outside,
    metric_name,
    styled_plot,
    subplots,
)

if TYPE_CHECKING:
    from .compare import MethodComparison
    from .coverage import CoverageResult
    from .effects import EffectsAnalysis
    from .importance import ImportanceResult
    from .importance_eval import EvalResult

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


# --------------------------------------------------------------------------- coverage
def coverage_figure(r: CoverageResult, kind: str) -> Figure:
    """scatter, dendrogram or coverage (see `CoverageResult.plot`), unstyled: the caller
    draws inside `styled()`."""
    return {"scatter": _cov_scatter, "dendrogram": _cov_dendrogram,
            "coverage": _cov_bars}[kind](r)


def _cov_colors(r: CoverageResult) -> dict[str, str]:
    return {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(r.groups)}


def _cov_scatter(r: CoverageResult) -> Figure:
    # Two panels when there are three or more components: clusters that overlap on
    # IC1 x IC2 separate on the next pair.
    nc = r.scores.shape[1]
    pairs = [(0, 1)] if nc < 3 else [(0, 1), (2, 3 if nc > 3 else 0)]
    if nc == 1:
        pairs = [(0, -1)]
    fig, axes = subplots(1, len(pairs), figsize=(5.2 * len(pairs) + 0.6, 4.6),
                         squeeze=False)
    for ax, (i, j) in zip(axes[0], pairs):
        _cov_panel(r, ax, i, j)
    # Below the panels: clusters fill the axes, so a legend inside would cover runs.
    h, lab = axes[0][-1].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside lower center", ncol=min(len(lab), 4), title=r.by,
               title_fontsize=8)
    fig.suptitle(f"Runs on the independent components, by {r.by}")
    return fig


def _cov_panel(r: CoverageResult, ax: Any, i: int, j: int) -> None:
    from scipy.spatial import ConvexHull, QhullError

    if j >= 0:
        s = np.column_stack([r.scores[:, i], r.scores[:, j]])
    else:  # one component: a strip per group
        gi = np.array([r.groups.index(g) for g in r.labels], dtype=float)
        jitter = np.random.default_rng(0).uniform(-0.15, 0.15, len(gi))
        s = np.column_stack([r.scores[:, i], gi + jitter])
    for c in range(r.k):  # clusters as grey outlines, numbered at their centre
        pts = s[r.kmeans == c]
        if len(pts) >= 3:
            try:
                h = ConvexHull(pts)
                v = np.append(h.vertices, h.vertices[0])
                ax.fill(pts[v, 0], pts[v, 1], color=STYLE["muted"], alpha=0.3, lw=0)
            except QhullError:  # collinear points
                pass
        cx, cy = pts.mean(axis=0)
        ax.annotate(f"C{c + 1}", (cx, cy), xytext=(0, 12), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8.5, color="#222222",
                    fontweight="bold", zorder=5,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                          "alpha": 0.8})
    colors = _cov_colors(r)
    markers = "osD^vP*X"
    for n, g in enumerate(r.groups):
        m = r.labels == g
        ax.scatter(s[m, 0], s[m, 1], s=26, color=colors[g], marker=markers[n % len(markers)],
                   label=f"{g} ({len(set(r.kmeans[m]))}/{r.k} clusters)", alpha=0.85,
                   edgecolors="white", linewidths=0.4, zorder=3)
    ax.set_xlabel(f"IC{i + 1} (standardised score)")
    if j >= 0:
        ax.set_ylabel(f"IC{j + 1} (standardised score)")
    else:
        ax.set_yticks(range(len(r.groups)), r.groups)
        ax.set_ylim(-0.6, len(r.groups) - 0.4)
        ax.set_ylabel(r.by)


def _cov_dendrogram(r: CoverageResult) -> Figure:
    from scipy.cluster.hierarchy import dendrogram

    n = len(r.labels)
    fig, ax = subplots(figsize=(max(6.4, min(0.12 * n + 2, 12)), 4.4))
    colors = _cov_colors(r)
    cut = None
    if r.k > 1:  # the height that cuts the tree into k clusters
        h = r.linkage[:, 2]
        cut = float((h[-r.k] + h[-r.k + 1]) / 2) if r.k < len(h) + 1 else None
    many = n > 2000  # beyond this even the colour strip is mush: show the top of the tree
    # Links in one neutral colour; the groups are a colour strip under the leaves (text
    # labels, one per run, are unreadable beyond a few dozen runs and repeat one name).
    d = dendrogram(r.linkage, ax=ax, no_labels=True, truncate_mode="lastp" if many else None,
                   p=40, link_color_func=lambda _: "#555555")
    top = float(r.linkage[:, 2].max()) if len(r.linkage) else 1.0
    handles: list = []
    if not many:
        leaves = np.asarray(d["leaves"])
        xs = 5.0 + 10.0 * np.arange(len(leaves))
        groups = [str(r.labels[i]) for i in leaves]
        ax.bar(xs, 0.05 * top, width=10.0, bottom=-0.075 * top,
               linewidth=0.5 if n <= 200 else 0, edgecolor="white",  # one cell per run
               color=[colors.get(g, "#000000") for g in groups])
        ax.set_ylim(-0.09 * top, top * 1.06)
        ax.set_yticks([t for t in ax.get_yticks() if 0 <= t <= top * 1.06])
        ax.spines["left"].set_bounds(0, top * 1.06)
        ax.spines["bottom"].set_visible(False)
        handles = [Patch(facecolor=colors[g], label=str(g)) for g in r.groups]
        ax.set_xlabel(f"{n} runs, coloured by {r.by}")
    if cut is not None:
        handles.append(ax.axhline(cut, color="#555555", ls="--", lw=0.9,
                                  label=f"cut into {r.k} clusters"))
    if handles:
        ax.legend(handles=handles, loc="best", title=r.by, title_fontsize=8)
    ax.grid(axis="x", visible=False)
    ax.set_ylabel("Ward linkage distance (standardised units)")
    ax.set_title("Cluster dendrogram of runs" + ("; top 40 merges" if many else ""))
    return fig


def _cov_bars(r: CoverageResult) -> Figure:
    t = r.group_rows()
    ct = r.cluster_table()
    colors = _cov_colors(r)
    fig, (ax1, ax2) = subplots(1, 2, figsize=(9.6, 0.35 * len(t) + 2.6),
                               gridspec_kw={"width_ratios": [1, 1.2]})
    y = np.arange(len(t))
    ax1.barh(y, t["clusters"], color=[colors[g] for g in t[r.by]], height=0.6)
    ax1.axvline(r.k, color="#555555", ls="--", lw=0.9, label=f"all clusters ({r.k})")
    for yi, (c, sp) in enumerate(zip(t["clusters"], t["spread"])):
        ax1.annotate(f"spread {sp:.2f}", (c, yi), xytext=(4, 0), textcoords="offset points",
                     va="center", fontsize=7.5)
    ax1.set_yticks(y, t[r.by])
    ax1.invert_yaxis()
    ax1.set_xlim(0, r.k * 1.45 + 0.5)
    ax1.set_xlabel("k-means clusters reached (count)")
    ax1.grid(axis="y", visible=False)
    ax1.legend(loc="lower right")
    ax1.set_title("Clusters reached per " + r.by)
    im = ax2.imshow(ct.to_numpy(), aspect="auto", cmap="Blues")
    for (i, j), v in np.ndenumerate(ct.to_numpy()):
        if v:
            ax2.text(j, i, str(v), ha="center", va="center", fontsize=8,
                     color="white" if v > ct.to_numpy().max() / 2 else "black")
    ax2.set_xticks(range(r.k), [f"C{c}" for c in ct.columns])
    ax2.set_yticks(range(len(ct)), ct.index)
    ax2.grid(False)
    ax2.set_xlabel("cluster")
    ax2.set_title("Runs per cluster (count)")
    fig.colorbar(im, ax=ax2, shrink=0.8, label="runs")
    return fig


# --------------------------------------------------------------------------- comparison
def comparison_figure(comp: MethodComparison) -> Figure:
    """Each parameter's share of importance by every method (`MethodComparison.plot`),
    unstyled: the caller draws inside `styled()`."""
    names = {"pi_share": "Carver PI", "anova_share": "ANOVA sum of squares",
             "sobol_s1": "Sobol first order S1", "sobol_st": "Sobol total ST"}
    cols = [c for c in ("pi_share", "anova_share", "sobol_s1", "sobol_st")
            if comp.frame[c].notna().any()]
    fig, ax = subplots(figsize=(8, 0.45 * len(comp.frame) + 1.6))
    y = np.arange(len(comp.frame))
    h = 0.8 / len(cols)
    for i, c in enumerate(cols):
        ax.barh(y + i * h, 100 * comp.frame[c].fillna(0), height=h, label=names[c])
    ax.set_yticks(y + 0.4 - h / 2, comp.frame["param"])
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("share of the variance (%)")
    ax.set_title(f"Importance of each parameter for {metric_name(comp.response)}")
    legend_outside(ax, title="method", title_fontsize=8)
    return fig


# --------------------------------------------------------------------------- evaluation
def evaluation_figure(ev: EvalResult) -> Figure:
    """Figure 5 of Carver's evaluation (`EvalResult.plot`), unstyled: the caller draws
    inside `styled()`."""
    from matplotlib.ticker import NullLocator, PercentFormatter

    fig, ax = subplots(figsize=(7.4, 4.2))
    pct = np.asarray(ev.fractions) * 100
    for r, p in enumerate(ev.truth):
        ax.plot(pct, 100 * ev.correct[:, r], LINESTYLES[r % 4], marker="o", ms=3.5,
                color=PALETTE[r % len(PALETTE)], label=f"{_ordinal(r + 1)}: {p}")
    # Ticks at the measured fractions, on both axes: the top one says how many
    # configurations that fraction is (what a user would have to benchmark).
    ax.set_xscale("log", base=2)
    ax.set_xlim(pct.min() / 1.25, pct.max() * 1.25)
    ax.set_xticks(pct, [f"{p:.3g}" for p in pct])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("share of the dataset used (%, log2 scale)")
    ax.set_ylabel(f"runs that found the parameter (% of {ev.repeats})")
    ax.yaxis.set_major_formatter(PercentFormatter(decimals=0))
    ax.set_ylim(-2, 102)
    top = ax.twiny()
    top.set_xscale("log", base=2)
    top.set_xlim(ax.get_xlim())
    top.set_xticks(pct, [str(s) for s in ev.sizes])
    top.xaxis.set_minor_locator(NullLocator())
    top.grid(False)
    top.spines["top"].set_visible(True)
    top.set_xlabel("configurations evaluated (count)")
    ax.set_title(f"Finding the top {len(ev.truth)} parameters of "
                 f"{metric_name(ev.response)} from part of the data", fontsize=9.5)
    legend_outside(ax, title="rank: parameter", title_fontsize=8)
    return fig


def _ordinal(i: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(i, f"{i}th")
