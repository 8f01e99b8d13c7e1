"""Intervals of the f_rw model: the delta method over the cells' means (numerical
Jacobian), with Student-t bounds and Welch-Satterthwaite degrees of freedom."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

from ..errors import EstimateError
from .cells import Cell


def jacobian(fun: Callable[[np.ndarray], np.ndarray], theta: np.ndarray) -> np.ndarray:
    """Central-difference Jacobian; the functions here are smooth rationals in theta."""
    f0 = fun(theta)
    jac = np.zeros((f0.size, theta.size))
    for j in range(theta.size):
        h = 1e-6 * max(abs(theta[j]), 1.0)
        tp, tm = theta.copy(), theta.copy()
        tp[j] += h
        tm[j] -= h
        jac[:, j] = (fun(tp) - fun(tm)) / (2 * h)
    return jac


def delta_var(fun: Callable[[np.ndarray], np.ndarray], cells: Sequence[Cell]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Estimate, noise variance, Welch-Satterthwaite sum (var_b**2/df_b) and an `unknown`
    flag of fun(cell means), by the delta method.

    theta = (r_1, w_1, r_2, w_2, ...). Each cell is an independent block. A block that
    matters (non-zero gradient) but has no replicates makes the variance unknown.
    """
    theta = np.array([v for c in cells for v in (c.read_iops, c.write_iops)], dtype=float)
    est = fun(theta)
    jac = jacobian(fun, theta)
    var = np.zeros(est.size)
    wsum = np.zeros(est.size)
    unknown = np.zeros(est.size, dtype=bool)
    for b, c in enumerate(cells):
        g = jac[:, 2 * b: 2 * b + 2]
        matters = np.any(np.abs(g) > 1e-12 * np.maximum(np.abs(est), 1.0)[:, None], axis=1)
        cov = c.mean_cov()
        if cov is None:
            unknown |= matters
            continue
        vb = np.einsum("ij,jk,ik->i", g, cov, g)
        var += vb
        wsum += vb**2 / (c.n - 1)
    return est, var, wsum, unknown


def ws_df(var: np.ndarray, wsum: np.ndarray) -> np.ndarray:
    """Welch-Satterthwaite degrees of freedom var**2 / wsum (inf where nothing is estimated)."""
    return np.where((var > 0) & (wsum > 0), var**2 / np.where(wsum > 0, wsum, 1.0), np.inf)


def t_bounds(est: np.ndarray, var: np.ndarray, wsum: np.ndarray, unknown: np.ndarray,
            confidence: float, max_df: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Student-t bounds with Welch-Satterthwaite degrees of freedom var**2 / wsum, capped
    at `max_df` when given (see `combined_df`)."""
    half = np.zeros(est.size)
    pos = var > 0
    df = ws_df(var, wsum)
    if max_df is not None:
        df = np.minimum(df, max_df)
    half[pos] = stats.t.ppf(0.5 + confidence / 2, df[pos]) * np.sqrt(var[pos])
    half[unknown] = np.nan
    return est - half, est + half


def combined_df(noise_var: np.ndarray, noise_wsum: np.ndarray, model_df: float) -> np.ndarray:
    """Degrees of freedom for noise + model-error variance: the smaller of the two
    components' own (the noise's Welch-Satterthwaite df, the model error's df).

    Why not Welch-Satterthwaite over the sum: its df can exceed the noise's own (two
    one-df components give about two), and the smaller t quantile then more than cancels
    the added variance, so adding a variance component narrowed the interval (5,000
    +-6,353 noise only, +-3,238 with model error, on the same anchors). With the smallest
    component df the t quantile never falls when a component is added and the variance
    only grows, so the interval can only widen: conservative, as a bound from a
    one-degree-of-freedom noise estimate should be."""
    return np.minimum(ws_df(noise_var, noise_wsum), float(model_df))


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise EstimateError(f"confidence {confidence!r} must be between 0 and 1")


def delta_interval(fun: Callable[[np.ndarray], np.ndarray], cells: Sequence[Cell],
                    confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate, lower and upper bounds of fun(cell means): the noise part only."""
    check_confidence(confidence)
    est, var, wsum, unknown = delta_var(fun, cells)
    lo, hi = t_bounds(est, var, wsum, unknown, confidence)
    return est, lo, hi
