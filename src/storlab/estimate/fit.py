"""Fitting one I/O size: (C, f_rw) from its cells by the anchors, three anchors or least
squares, the cross-validated model error, and the capacity's invariance checks."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import EstimateError
from .cells import Cell, check_read_pct, check_throughput, size_label
from .uncertainty import delta_var

METHODS: tuple[str, ...] = ("auto", "anchors", "anchors3", "lsq")


def resolve_method(method: str, pcts: np.ndarray) -> str:
    if method not in METHODS:
        raise EstimateError(f"fit method {method!r} is not one of {', '.join(METHODS)}")
    if method == "auto":
        return "anchors" if set(pcts.tolist()) <= {0.0, 100.0} else "lsq"
    return method


def fit_mask(pcts: np.ndarray, method: str) -> np.ndarray:
    """Which cells (by read percentage) a resolved method fits."""
    if method == "anchors":
        return np.isin(pcts, (0.0, 100.0))
    if method == "anchors3":
        return np.isin(pcts, (0.0, 50.0, 100.0))
    return np.ones(pcts.shape, dtype=bool)


def solve(pcts: np.ndarray, r: np.ndarray, w: np.ndarray, method: str, label: str
           ) -> tuple[float, float]:
    """(C, f_rw) from cell means. Pure, so the delta method can call it on perturbed means."""
    if method == "anchors3":
        missing = [f"{p:g}%" for p in (0.0, 50.0, 100.0) if p not in pcts]
        if missing:
            raise EstimateError(f"size {label}: the three-anchor fit needs read "
                                f"{', '.join(missing)} measured")
        m = fit_mask(pcts, method)
        pcts, r, w = pcts[m], r[m], w[m]
        method = "lsq"
    if method == "anchors":
        i_r = np.flatnonzero(pcts == 100.0)
        i_w = np.flatnonzero(pcts == 0.0)
        if i_r.size == 0:
            raise EstimateError(f"size {label}: no 100% read measurement (read_pct 100)")
        if i_w.size == 0:
            raise EstimateError(f"size {label}: no 100% write measurement (read_pct 0)")
        t_read, t_write = float(r[i_r[0]]), float(w[i_w[0]])
        if not t_write > 0:
            raise EstimateError(f"size {label}: 100% write throughput is {t_write:g}; "
                                "f_rw = T_100%read / T_100%write needs it > 0")
        if not t_read > 0:
            raise EstimateError(f"size {label}: 100% read throughput is {t_read:g}; "
                                "the capacity C = T_100%read needs it > 0")
        return t_read, t_read / t_write
    # Least squares r_j = C - f * w_j: both unknowns enter linearly, so an ordinary
    # linear solve is exact; with only the two anchors it reduces to the two-point fit.
    if np.unique(pcts).size < 2:
        raise EstimateError(f"size {label}: least squares needs >= 2 different read percentages")
    a = np.column_stack([np.ones_like(w), -w])
    (c, f), *_ = np.linalg.lstsq(a, r, rcond=None)
    if not (c > 0 and f > 0):
        raise EstimateError(f"size {label}: the measured mixes give C={c:.4g}, f_rw={f:.4g}; "
                            "the model needs both > 0 (does any direction have 0 throughput?)")
    return float(c), float(f)


def k_at(capacity: float, f_rw: float, read_pct: float) -> float:
    return capacity / (read_pct + (100.0 - read_pct) * f_rw)


@dataclass
class SizeFit:
    """The model for one I/O size: its measured cells, fit method, f_rw and C."""

    size: int
    cells: tuple[Cell, ...]
    method: str
    f_rw: float
    capacity: float

    @classmethod
    def fit(cls, size: int, cells: Iterable[Cell], method: str = "auto") -> SizeFit:
        cs = _merge_cells(sorted(cells, key=lambda c: c.read_pct), size_label(size))
        for c in cs:
            try:
                check_throughput(c.read_pct, c.read_iops, c.write_iops)
            except EstimateError as exc:
                raise EstimateError(f"size {size_label(size)}: {exc}") from None
        pcts = np.array([c.read_pct for c in cs])
        m = resolve_method(method, pcts)
        cap, f = solve(pcts, *cell_means(cs), m, size_label(size))
        return cls(size, tuple(cs), m, f, cap)

    @property
    def label(self) -> str:
        return size_label(self.size)

    def used(self, cell: Cell) -> bool:
        """Whether a cell entered the fit."""
        return bool(fit_mask(np.array([cell.read_pct]), self.method)[0])

    def cv_errors(self) -> pd.DataFrame:
        return self._cv.copy()

    @cached_property
    def _cv(self) -> pd.DataFrame:
        """Each measured mix predicted by a fit that did not use it: held-out mixes by the
        fit itself, fitted mixes (lsq, anchors3) by a refit without them. Columns: read_pct,
        measured, predicted, rel_err (pred/meas - 1) and noise_var (the part of rel_err**2
        that the replicates' noise explains; 0 without replicates)."""
        pcts = np.array([c.read_pct for c in self.cells])
        used = fit_mask(pcts, self.method)
        rows = []
        for j, c in enumerate(self.cells):
            keep = np.ones(len(self.cells), dtype=bool)
            method = self.method
            if used[j]:
                if self.method == "anchors":
                    continue  # a two-point fit has nothing left without one of its points
                keep = used.copy()
                keep[j] = False
                if np.unique(pcts[keep]).size < 2 or not (
                        {0.0, 100.0} <= set(pcts[keep].tolist()) or self.method == "lsq"):
                    continue
                method = "lsq"
            sub = [cc for cc, k in zip(self.cells, keep) if k]
            sub_p = pcts[keep]
            if method == "anchors3":
                method = "lsq"
                m3 = fit_mask(sub_p, "anchors3")
                sub = [cc for cc, k in zip(sub, m3) if k]
                sub_p = sub_p[m3]
            if method == "anchors" and not {0.0, 100.0} <= set(sub_p.tolist()):
                continue
            p = c.read_pct

            def fun(theta: np.ndarray, sub_p: np.ndarray = sub_p, method: str = method,
                    p: float = p) -> np.ndarray:
                cap, f = solve(sub_p, theta[0::2], theta[1::2], method, self.label)
                return np.array([100.0 * k_at(cap, f, p)])

            try:
                est, var, _, unknown = delta_var(fun, sub)
            except EstimateError:
                continue  # the reduced fit is degenerate (e.g. f_rw <= 0): no error to learn
            pred = float(est[0])
            meas = c.total_iops
            nv = 0.0 if unknown[0] else float(var[0]) / pred**2
            cov = c.mean_cov()
            if cov is not None:
                nv += float(cov.sum()) / meas**2
            rows.append({"read_pct": p, "measured": meas, "predicted": pred,
                         "rel_err": pred / meas - 1.0, "noise_var": nv})
        return pd.DataFrame(rows, columns=["read_pct", "measured", "predicted", "rel_err",
                                           "noise_var"])

    @cached_property
    def model_sd(self) -> float:
        """Relative SD of the model's error beyond noise, from `cv_errors`; NaN when no
        mix can be predicted without its own data (the two anchors alone)."""
        cv = self._cv
        if cv.empty:
            return math.nan
        excess = cv["rel_err"].to_numpy() ** 2 - cv["noise_var"].to_numpy()
        return float(math.sqrt(max(0.0, float(excess.mean()))))

    @property
    def model_df(self) -> int:
        """Degrees of freedom of `model_sd`: the number of cross-validated mixes."""
        return len(self._cv)

    def k(self, read_pct: float) -> float:
        """The slides' k at this read percentage (IOPS per percentage point)."""
        return k_at(self.capacity, self.f_rw, check_read_pct(read_pct))

    def capacities(self) -> np.ndarray:
        """C_j = T_read + f_rw * T_write at each measured mix."""
        r, w = cell_means(self.cells)
        return r + self.f_rw * w

    @property
    def c_spread(self) -> float:
        """(max - min) / mean of C over the measured mixes; 0 with fewer than 2 mixes."""
        c = self.capacities()
        return float((c.max() - c.min()) / c.mean()) if c.size >= 2 else 0.0

    @property
    def c_cv(self) -> float:
        """Coefficient of variation of C over the measured mixes (ddof=1)."""
        c = self.capacities()
        return float(c.std(ddof=1) / c.mean()) if c.size >= 2 else 0.0

    def anchor(self, read_pct: float) -> Cell | None:
        return next((c for c in self.cells if c.read_pct == read_pct), None)


def cell_means(cells: Sequence[Cell]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([c.read_iops for c in cells], dtype=float),
            np.array([c.write_iops for c in cells], dtype=float))


def _merge_cells(cells: list[Cell], label: str) -> list[Cell]:
    pcts = [c.read_pct for c in cells]
    if len(set(pcts)) != len(pcts):
        raise EstimateError(f"size {label}: read percentage given twice among cells {pcts}")
    if not cells:
        raise EstimateError(f"size {label}: no measurements")
    return cells


def shape_warnings(sf: SizeFit) -> list[str]:
    """The model's total IOPS lies between the two endpoints' (it is monotone in the read
    percentage): say so when a measured mix is above both or below both, beyond its noise."""
    r100, w0 = sf.anchor(100.0), sf.anchor(0.0)
    if r100 is None or w0 is None:
        return []
    lo_end, hi_end = sorted((r100.total_iops, w0.total_iops))
    out = []
    for c in sf.cells:
        if c.read_pct in (0.0, 100.0):
            continue
        half = 0.0
        cov = c.mean_cov()
        if cov is not None:
            half = float(stats.t.ppf(0.975, c.n - 1) * math.sqrt(max(cov.sum(), 0.0)))
        t = c.total_iops
        if t - half > hi_end or t + half < lo_end:
            where = "above both" if t > hi_end else "below both"
            out.append(f"size {sf.label}: measured {c.read_pct:g}% read ({t:,.0f} IOPS) is "
                       f"{where} endpoints ({lo_end:,.0f}-{hi_end:,.0f}); the model's total "
                       "always lies between them, so its shape does not fit this device")
    return out
