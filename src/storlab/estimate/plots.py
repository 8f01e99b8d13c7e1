"""Figures of the f_rw model: the model against its measurements, the capacity's
invariance, and one prediction's curve. Figures come from `plotstyle` (no pyplot state)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from ..plotstyle import (LINESTYLES, MARKERS, PALETTE, axis_label, eng, format_axis, styled,
                         subplots)
from .cells import size_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .cells import Cell
    from .fit import SizeFit
    from .predict import Prediction
    from .rwmodel import RWModel


def iops_legend(ax: Any) -> None:
    """The IOPS panel's legend, under the panel (the data fill it): every labelled line and
    what filled and hollow points mean."""
    from matplotlib.lines import Line2D

    extra = [Line2D([], [], marker="o", ls="", color="#555555", label="measured, used in fit"),
             Line2D([], [], marker="o", ls="", color="#555555", mfc="white",
                    label="measured, not used")]
    h, _ = ax.get_legend_handles_labels()
    ax.legend(handles=h + extra, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)


def plot_prediction(pred: Prediction, points: int = 101) -> Figure:
    """Total IOPS of this size mix against read percentage, the interval band, and
    the requested read percentage marked."""
    xs = np.linspace(0, 100, points)
    ys, lo, hi = [], [], []
    for x in xs:
        pr = pred.model.predict(x, pred.proportions, mix=pred.mix,
                                confidence=pred.confidence)
        ys.append(pr.value())
        lo.append(pr.value("total_iops_lo"))
        hi.append(pr.value("total_iops_hi"))
    with styled():
        fig, ax = subplots(figsize=(6.8, 4.2))
        name = ", ".join(f"{size_label(s)}:{p:g}" for s, p in pred.proportions.items())
        ax.plot(xs, ys, color=PALETTE[0], label=f"model: {name} (mix rule {pred.mix})")
        top = max(ys) * 1.25
        if np.all(np.isfinite(lo)):
            ax.fill_between(xs, np.clip(lo, 0, top), np.clip(hi, 0, top), color=PALETTE[0],
                            alpha=0.18, lw=0, label=f"{pred.confidence:.0%} interval")
        ax.plot([pred.read_pct], [pred.value()], "o", color="black",
                label=f"{pred.read_pct:g} % read: {eng(pred.value())} IO/s")
        ax.set_xlabel("read share of the I/O (%)")
        ax.set_ylabel(axis_label("total_iops"))
        format_axis(ax.yaxis, "total_iops")
        ax.set_xlim(0, 100)
        ax.set_ylim(0, top)
        ax.set_title("Predicted total IOPS of the size mix", fontsize=9.5)
        ax.legend(loc="best")
    return fig


def plot_model(model: RWModel, confidence: float = 0.95, points: int = 101) -> Figure:
    """Left: measured total IOPS (cell means, error bars = interval of the mean; hollow
    markers = not used in the fit) and the model's line per I/O size, the y-range set
    by the data (an interval running off it is an arrow with its half-width written).
    Right: C = T_read + f_rw * T_write of every measured mix relative to the size's mean
    C, against read percentage: the invariance the model rests on (flat lines)."""
    with styled():
        fig, (ax, axc) = subplots(1, 2, figsize=(11.5, 4.4), width_ratios=[1.25, 1])
        plot_iops(model, ax, confidence, points)
        plot_capacity(model, axc)
    return fig


def plot_iops(model: RWModel, ax: Any, confidence: float, points: int) -> None:
    """The IOPS panel: measured cells with their intervals and each size's model line."""
    xs = np.linspace(0, 100, points)
    lines: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    bars: list[tuple[SizeFit, Cell, float | None]] = []
    for sf in model.fits.values():
        ys, lo, hi = [], [], []
        for x in xs:
            pr = model.predict_size(sf.size, x, confidence)
            ys.append(pr.value())
            lo.append(pr.value("total_iops_lo"))
            hi.append(pr.value("total_iops_hi"))
        lines[sf.size] = (np.array(ys), np.array(lo), np.array(hi))
        for c in sf.cells:
            err = None
            cov = c.mean_cov()
            if cov is not None:
                se = math.sqrt(max(cov.sum(), 0.0))  # var(r + w) of the means
                err = float(stats.t.ppf(0.5 + confidence / 2, c.n - 1) * se)
            bars.append((sf, c, err))
    # The y-range comes from what was measured and predicted, not from the intervals:
    # one size measured twice with a wide spread must not flatten every other line.
    data = np.concatenate([v[0] for v in lines.values()]
                          + [np.array([c.total_iops for _, c, _ in bars])])
    data = data[np.isfinite(data) & (data > 0)]
    log = data.size > 0 and data.max() / data.min() > 20  # sizes decades apart
    if log:
        ax.set_yscale("log")
        ylo, yhi = data.min() / 1.6, data.max() * 1.6
    else:
        ylo, yhi = 0.0, (data.max() if data.size else 1.0) * 1.15
    for i, sf in enumerate(model.fits.values()):
        col = PALETTE[i % len(PALETTE)]
        ys, lo, hi = lines[sf.size]
        label = f"{sf.label}: model, f_rw = {sf.f_rw:.3g}"
        # A band wider than the value itself says "unknown": it is named, not drawn.
        wide = bool(np.any(hi - ys > ys))
        if np.all(np.isfinite(lo)) and not wide:
            ax.fill_between(xs, np.clip(lo, ylo, yhi), np.clip(hi, ylo, yhi), color=col,
                            alpha=0.13, lw=0)
        elif wide:
            label += " (interval > ±100 %, band not drawn)"
        ax.plot(xs, ys, color=col, label=label)
    for i, (sf, c, err) in enumerate(bars):
        col = PALETTE[list(model.fits).index(sf.size) % len(PALETTE)]
        y = c.total_iops
        lo_e = min(err, y - ylo) if err is not None else None
        hi_e = min(err, yhi - y) if err is not None else None
        if log and err is not None:  # a log axis has no room below zero
            lo_e = min(err, y - ylo * 1.01)
        ax.errorbar([c.read_pct], [y], yerr=None if err is None else [[lo_e], [hi_e]],
                    fmt="o", color=col, mfc=col if sf.used(c) else "white", capsize=3,
                    zorder=3)
        if err is not None and (y + err > yhi or y - err < ylo):
            off = y + err > yhi
            edge = yhi if off else ylo
            ax.annotate("", (c.read_pct, edge), xytext=(c.read_pct, y),
                        arrowprops={"arrowstyle": "-|>", "color": col, "lw": 1.0})
            ax.annotate(f"±{eng(err)}", (c.read_pct, edge), xytext=(4, -10 if off else 4),
                        textcoords="offset points", fontsize=7, color=col)
    ax.set_ylim(ylo, yhi)
    ax.set_xlim(-3, 103)
    ax.set_xlabel("read share of the I/O (%)")
    ax.set_ylabel(axis_label("total_iops"))
    if not log:
        format_axis(ax.yaxis, "total_iops")
    ax.set_title(f"Measured (points, {confidence:.0%} interval) and modelled total IOPS",
                 fontsize=9.5)
    iops_legend(ax)


def plot_capacity(model: RWModel, ax: Any) -> None:
    """The invariance panel: C at each measured mix relative to the size's mean C."""
    ct = model.capacity_table()
    for i, sf in enumerate(model.fits.values()):
        g = ct[ct["size"] == sf.label].sort_values("read_pct")
        rel = 100 * g["C"] / g["C"].mean()
        ax.plot(g["read_pct"], rel, LINESTYLES[i % 4], marker=MARKERS[i % len(MARKERS)],
                color=PALETTE[i % len(PALETTE)],
                label=f"{sf.label}: C ≈ {eng(g['C'].mean())} IO/s, spread "
                      f"{100 * sf.c_spread:.1f} %")
    half = 50 * model.spread_threshold
    ax.axhspan(100 - half, 100 + half, color="#E3E3E3", alpha=0.6, lw=0,
               label=f"±{half:g} %: spread ≤ {100 * model.spread_threshold:g} % counts as "
                     "invariant")
    ax.axhline(100, color="#777777", lw=0.8)
    ax.set_xlim(-3, 103)
    ax.set_xlabel("read share of the I/O (%)")
    ax.set_ylabel("C at this mix / mean C of the size (%)")
    ax.set_title("C = T_read + f_rw·T_write per mix (flat = invariant)", fontsize=9.5)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)
