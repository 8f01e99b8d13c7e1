"""The f_rw model's relative error beyond noise, learned from leave-one-out errors
(`SizeFit.cv_errors`): each size's own, pooled over every size, or each size's own shrunk
toward the pooled one by empirical Bayes (the default).

Why shrink. A size has two or three held-out mixes: its own estimate is mostly noise (a
2-df t quantile of 4.3: on zram its 95 % intervals were a third wider than the shrunk
ones for the same coverage), and pooling every size dilutes a size whose error stands
out (on zram 39 of 45 held-out means inside the pooled 95 % intervals). The
random-effects model between them: size s's relative errors are N(0, tau_s^2 + v_i) (v_i
the replicates' noise of held-out mix i), and the sizes' tau_s^2 are drawn from a scaled
inverse chi-square with prior degrees of freedom nu0 and scale s0^2. The data pick nu0
and s0^2 (marginal likelihood, tau_s^2 integrated out on a grid, noise included), so
the sizes' spread decides how far each is pulled: nu0 -> infinity when they look alike
(a common variance, estimated by likelihood: each mix weighted by its noise, where the
pooled average of squared errors minus noise lets a noisy mix cancel a precise one's
error), nu0 -> 0 when they differ beyond chance (each size's own). Given (nu0, s0^2)
each size's posterior of tau_s^2 is prior x likelihood on the grid. Without noise (v_i =
0) it is the conjugate scaled inverse chi-square with nu0 + n_s degrees of freedom and
scale (nu0 s0^2 + sum_i x_i^2) / (nu0 + n_s), so a new error is Student-t with nu0 + n_s
df: the moderated variance of Smyth, "Linear models and empirical Bayes methods for
assessing differential expression in microarray experiments" (Statistical Applications
in Genetics and Molecular Biology, 2004). With noise v_i > 0 the posterior is not
exactly of that family; it is approximated by the scaled inverse chi-square with the
same E[1/tau^2] and E[log tau^2] (exact when v_i = 0; those moments exist for every df,
where the mean of tau^2 does not below 2 df). So a size whose errors fall below its
noise keeps a positive SD (the closed form nu0 s0^2 + sum(x^2 - v) clipped at 0 gave it
exactly 0). The df are capped at the number of held-out mixes over all sizes (the prior
itself was learned from those) and floored at 1: below 1 df the 95 % t quantile explodes
(12.7 at 1 df, 925 at 0.38), an interval of no use, so a size with no held-out mix whose
prior has nu0 < 1 is given 1 df, a choice, not the prior's heavier tail. Mixes whose
error or noise variance is not finite (no replicates) are left out.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize
from scipy.special import digamma, gammaln, logsumexp

from .fit import SizeFit

#: How a prediction's model-error term is estimated (`RWModel.predict(error=...)`).
ERROR_KINDS: tuple[str, ...] = ("shrunk", "pooled", "own")

# Integration grid for tau^2 (relative variance): 1e-10 (0.001 % SD) to 10 (316 % SD),
# uniform in log; the prior is normalised on it, i.e. truncated to that physical range.
_LOG_TAU2 = np.linspace(math.log(1e-10), math.log(10.0), 401)
_S0_2 = np.exp(_LOG_TAU2[36::7])          # candidate prior scales, 1e-9 .. 10 (coarse)
# prior df: 300 already means sizes alike (the pooled error's df is the held-out mixes)
_NU0 = np.concatenate([np.geomspace(0.1, 300.0, 25), [np.inf]])


@dataclass(frozen=True)
class Shrinkage:
    """The empirical-Bayes prior over sizes' error variances and each size's posterior:
    `sizes` maps a size (bytes; any group for `shrink`) to (relative SD, degrees of
    freedom)."""

    prior_df: float
    prior_sd: float
    sizes: dict[Any, tuple[float, float]]


def pooled_model_error(fits: Sequence[SizeFit]) -> tuple[float, int]:
    """The model's relative error beyond noise and its degrees of freedom, pooled over every
    size's cross-validated mixes (each (size, mix) left out in turn: `SizeFit.cv_errors`).
    NaN (and 0 df) when no size has a mix beyond its fit."""
    cv = [c for c in (sf.cv_errors() for sf in fits) if not c.empty]
    if not cv:
        return math.nan, 0
    allcv = pd.concat(cv, ignore_index=True)
    x, v = _finite(allcv["rel_err"].to_numpy(float), allcv["noise_var"].to_numpy(float))
    if not len(x):
        return math.nan, 0
    return float(math.sqrt(max(0.0, float(np.mean(x**2 - v))))), int(len(x))


def _finite(x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mixes whose error and noise variance are both finite (NaN noise: no replicates;
    left in, it made the pooled SD max(0, nan) = 0 and the grid likelihood NaN)."""
    x, v = np.asarray(x, float), np.asarray(v, float)
    ok = np.isfinite(x) & np.isfinite(v)
    return x[ok], v[ok]


def _loglik(x: np.ndarray, v: np.ndarray, tau2: np.ndarray) -> np.ndarray:
    """log prod_i N(x_i; 0, tau^2 + v_i) at every tau^2 given."""
    var = tau2[:, None] + v[None, :]
    return -0.5 * np.sum(np.log(2 * math.pi * var) + x[None, :] ** 2 / var, axis=1)


def _log_prior(nu: float, s2: np.ndarray) -> np.ndarray:
    """log density in log tau^2 of a scaled inverse chi-square(nu, s2) times the grid's
    step, renormalised so it sums to 1 over the grid: shape (len(s2), len(grid)). Mass
    beyond the grid is dropped, a prior truncated to the physical range."""
    lt = _LOG_TAU2[None, :]
    s2c = s2[:, None]
    lp = (0.5 * nu * np.log(0.5 * nu * s2c) - gammaln(0.5 * nu) - 0.5 * nu * lt
          - 0.5 * nu * s2c * np.exp(-lt) + math.log(_LOG_TAU2[1] - _LOG_TAU2[0]))
    # renormalised on the grid (mass beyond it would otherwise count against small nu)
    return lp - logsumexp(lp, axis=1, keepdims=True)


def _marginal(data: Sequence[tuple[np.ndarray, np.ndarray]], ll: np.ndarray, nu: float,
              s2: np.ndarray) -> np.ndarray:
    """Log marginal likelihood of every size's errors at prior (nu, s2), for each s2 given."""
    if math.isinf(nu):  # every size at tau^2 = s0^2
        return np.sum([_loglik(x, v, s2) for x, v in data], axis=0)
    lp = _log_prior(nu, s2)                                          # scales x grid
    # sum over the grid of prior x likelihood as one product, each factor scaled by its max
    lpm, llm = lp.max(axis=1, keepdims=True), ll.max(axis=1, keepdims=True)
    m = np.exp(lp - lpm) @ np.exp(ll - llm).T                        # scales x sizes
    return np.sum(np.log(np.maximum(m, 1e-300)) + lpm + llm.T, axis=1)


def fit_prior(data: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """(nu0, s0^2) maximising the marginal likelihood of every size's held-out errors
    (x, v): tau_s^2 integrated out on the grid; nu0 = inf is the common-variance model.
    A coarse grid over both, then s0^2 refined at the best nu0."""
    ll = np.array([_loglik(x, v, np.exp(_LOG_TAU2)) for x, v in data])  # sizes x grid
    best = (-math.inf, math.inf, float(_S0_2[0]))
    for nu in _NU0[::-1]:  # from inf down
        marg = _marginal(data, ll, float(nu), _S0_2)
        j = int(np.argmax(marg))
        if marg[j] > best[0] + 1e-9:  # a tie keeps the larger-df (more pooled) candidate
            best = (float(marg[j]), float(nu), float(_S0_2[j]))
    _, nu, s2 = best
    res = optimize.minimize_scalar(
        lambda ls: -float(_marginal(data, ll, nu, np.array([math.exp(ls)]))[0]),
        bounds=(math.log(s2) - 0.6, math.log(s2) + 0.6), method="bounded",
        options={"xatol": 1e-3})
    return nu, float(math.exp(res.x))


def shrink(data: Mapping[Hashable, tuple[np.ndarray, np.ndarray]]) -> Shrinkage:
    """Each group's relative errors x with their noise variances v ({group: (x, v)}):
    every group's model error (SD, df) shrunk toward the others' (module docstring). A
    group without errors takes the prior's scale and df; no errors anywhere: NaN."""
    clean = {g: _finite(x, v) for g, (x, v) in data.items()}
    seen = [(x, v) for x, v in clean.values() if len(x)]
    if not seen:
        return Shrinkage(math.nan, math.nan, {g: (math.nan, 0.0) for g in data})
    n_all = sum(len(x) for x, _ in seen)
    nu0, s02 = fit_prior(seen)
    out: dict[Any, tuple[float, float]] = {}
    for g, (x, v) in clean.items():
        if math.isinf(nu0):  # a common variance: every size at s0^2
            var, df = s02, float(n_all)
        else:
            var, df = _posterior(x, v, nu0, s02)
        out[g] = (math.sqrt(var), float(max(1.0, min(df, n_all))))
    return Shrinkage(nu0, math.sqrt(s02), out)


def _posterior(x: np.ndarray, v: np.ndarray, nu0: float, s02: float) -> tuple[float, float]:
    """(scale, df) of the scaled inverse chi-square with the same E[1/tau^2] and
    E[log tau^2] as the grid posterior of tau^2 (prior x likelihood): the scale is
    1/E[1/tau^2], the df solve digamma(df/2) - log(df/2) = E[log 1/tau^2] + log scale."""
    tau2 = np.exp(_LOG_TAU2)
    lw = _log_prior(nu0, np.array([s02]))[0]
    if len(x):
        lw = lw + _loglik(x, v, tau2)
    w = np.exp(lw - logsumexp(lw))
    scale = 1.0 / float(w @ (1.0 / tau2))
    gap = float(w @ -_LOG_TAU2) + math.log(scale)   # <= 0 (Jensen); 0 means a point mass
    if gap > -1e-12:
        return scale, math.inf
    f = lambda ln: float(digamma(0.5 * math.exp(ln)) - math.log(0.5 * math.exp(ln))) - gap
    lo, hi = math.log(1e-3), math.log(1e7)
    if f(hi) < 0:
        return scale, math.exp(hi)
    if f(lo) > 0:
        return scale, math.exp(lo)
    return scale, math.exp(optimize.brentq(f, lo, hi, xtol=1e-6))


def shrunk_model_errors(fits: Sequence[SizeFit]) -> Shrinkage:
    """Each size's model error from its leave-one-out errors, shrunk toward the others'."""
    cvs = {sf.size: sf.cv_errors() for sf in fits}
    return shrink({s: (c["rel_err"].to_numpy(float), c["noise_var"].to_numpy(float))
                   for s, c in cvs.items()})
