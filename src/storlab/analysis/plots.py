"""Plots of an effects analysis: Pareto, half-normal, main-effect and interaction plots.
Each returns a matplotlib Figure; nothing here opens a window."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from scipy import stats  # noqa: E402

if TYPE_CHECKING:
    from .effects import EffectsAnalysis

KINDS = ("pareto", "halfnormal", "main", "interaction")
STYLE = {"bar": "#4C72B0", "sig": "#C44E52", "line": "#555555"}


def effects_plot(a: EffectsAnalysis, kind: str) -> Figure:
    if kind == "pareto":
        return _pareto(a)
    if kind == "halfnormal":
        return _halfnormal(a)
    if kind == "main":
        return _main(a)
    if kind == "interaction":
        return _interaction(a)
    raise ValueError(f"plot kind {kind!r} must be one of {', '.join(KINDS)}")


def _pareto(a: EffectsAnalysis) -> Figure:
    e = a.effects.sort_values("effect", key=np.abs)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(e) + 1.5))
    colors = [STYLE["sig"] if s else STYLE["bar"] for s in e["significant"]]
    ax.barh(e["term"], np.abs(e["effect"]), color=colors)
    if a.lenth is not None:
        ax.axvline(a.lenth.me, color=STYLE["line"], ls="--", label=f"ME {a.lenth.me:.3g}")
        ax.axvline(a.lenth.sme, color=STYLE["line"], ls=":", label=f"SME {a.lenth.sme:.3g}")
        ax.legend(loc="lower right")
    ax.set_xlabel(f"|effect| on {a.response}")
    ax.set_title(f"Pareto of effects: {a.response}")
    fig.tight_layout()
    return fig


def _halfnormal(a: EffectsAnalysis) -> Figure:
    e = a.effects.assign(abs=np.abs(a.effects["effect"])).sort_values("abs")
    m = len(e)
    q = stats.norm.ppf(0.5 + 0.5 * (np.arange(1, m + 1) - 0.5) / m)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.scatter(e["abs"], q, color=[STYLE["sig"] if s else STYLE["bar"] for s in e["significant"]])
    for (_, r), qq in zip(e.iterrows(), q):
        if r["significant"]:
            ax.annotate(r["term"], (r["abs"], qq), textcoords="offset points", xytext=(4, 2))
    if a.lenth is not None:  # null effects fall on |effect| = PSE * quantile
        ax.plot(a.lenth.pse * q, q, color=STYLE["line"], ls="--", lw=1, label="PSE line")
        ax.legend(loc="lower right")
    ax.set_xlabel(f"|effect| on {a.response}")
    ax.set_ylabel("half-normal quantile")
    ax.set_title(f"Half-normal plot: {a.response}")
    fig.tight_layout()
    return fig


def _main(a: EffectsAnalysis) -> Figure:
    names = [c.name for c in a.codings]
    k = len(names)
    cols = min(k, 4)
    rows = (k + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 2.6 * rows), sharey=True,
                             squeeze=False)
    y = a.data["_y"].to_numpy()
    for j, c in enumerate(a.codings):
        ax = axes[j // cols][j % cols]
        xs = _coded_column(a, j)
        lo, hi = y[xs < -0.5].mean(), y[xs > 0.5].mean()
        ax.plot([0, 1], [lo, hi], marker="o", color=STYLE["bar"])
        ax.set_xticks([0, 1], [str(c.low), str(c.high)])
        ax.set_title(c.name, fontsize=9)
        ax.axhline(y.mean(), color=STYLE["line"], lw=0.8, ls=":")
    for j in range(k, rows * cols):
        axes[j // cols][j % cols].axis("off")
    axes[0][0].set_ylabel(a.response)
    fig.suptitle(f"Main effects: {a.response}")
    fig.tight_layout()
    return fig


def _coded_column(a: EffectsAnalysis, j: int) -> np.ndarray:
    return a.coded[:, j]


def _interaction(a: EffectsAnalysis) -> Figure:
    two = a.effects[a.effects["order"] == 2]
    two = two.reindex(two["effect"].abs().sort_values(ascending=False).index).head(6)
    names = [c.name for c in a.codings]
    n = max(len(two), 1)
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 2.8), squeeze=False)
    y = a.data["_y"].to_numpy()
    for ax, (_, r) in zip(axes[0], two.iterrows()):
        i, j = (names.index(p) for p in r["term"].split(":"))
        xi, xj = _coded_column(a, i), _coded_column(a, j)
        for lvl, style in ((-1, "--"), (1, "-")):
            m = [y[(xi * s > 0.5) & (xj * lvl > 0.5)].mean() for s in (-1, 1)]
            ax.plot([0, 1], m, marker="o", ls=style,
                    label=f"{names[j]}={a.codings[j].natural(lvl)}")
        ax.set_xticks([0, 1], [str(a.codings[i].low), str(a.codings[i].high)])
        ax.set_xlabel(names[i])
        ax.set_title(r["term"], fontsize=9)
        ax.legend(fontsize=7)
    if two.empty:
        axes[0][0].text(0.5, 0.5, "no two-factor interactions estimated", ha="center")
        axes[0][0].axis("off")
    axes[0][0].set_ylabel(a.response)
    fig.suptitle(f"Interactions: {a.response}")
    fig.tight_layout()
    return fig
