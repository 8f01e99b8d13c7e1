"""The f_rw capacity model for mixed read/write performance (Ra & Lee, MSST 2019).

Claim: with hardware, software and workload fixed, the total processing capability

    C = T_read + f_rw * T_write,        f_rw = T_100%read / T_100%write

is invariant for a given I/O size. At a read percentage R (0-100) the slides give

    k = T_100%read / (R + (100 - R) * f_rw),   T_read = k * R,   T_write = k * (100 - R)

and for a mix of sizes S_i with I/O-count proportions P_i (sum 1) two rules:

    1 / T_total = sum_i P_i / T_total^{S_i}                  (mix="harmonic", the default)
    T_total = 100 * sum_i P_i * k^{S_i}                      (mix="slides", the seed's formula)

The read/write part of the model is a harmonic mean of per-operation costs
(1 / T_total = R/100 / T_100%read + (100-R)/100 / T_100%write). `harmonic` applies the same
cost argument to sizes: every I/O takes 1/T^{S_i} of the shared capacity, and the stream keeps
the requested size proportions. The slides' formula averages the per-size throughputs, which
holds only when the sizes do not share the bottleneck; on one device it over-predicts a
4k/64k mix 2.6-2.9x (issue 13), so harmonic is the default and `slides` stays available by
name.

Fitting: from the 0 % and 100 % read cells alone (`method="anchors"`, the slides' two
points), from 0/50/100 % by least squares (`method="anchors3"`, a third anchor that corrects
a bias of the two-point line), or by least squares over every measured mix (`method="lsq"`):
r_j = C - f_rw * w_j over the cell means (r_j, w_j). Either way C_j = r_j + f_rw * w_j is
computed for every measured mix and its spread says how invariant C really is.

Uncertainty: each cell keeps the mean, variance and covariance of its replicate read and
write throughputs. A prediction is a smooth function of the cell means, so its noise variance
comes from the delta method (numerical Jacobian). Model error: when a size has more measured
mixes than its fit needs, every mix is predicted by a fit that did not use it (held out, or
left out and refitted) and the relative errors beyond their own noise give the model's
relative error variance; it is added to the noise variance (Welch-Satterthwaite degrees of
freedom over both parts). With only the two anchors the model error cannot be seen, and the
interval says it is noise-only. It is an interval for the mean throughput, not for a single
future run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from .. import units
from ..errors import EstimateError, StorlabError, UnitsError

METHODS: tuple[str, ...] = ("auto", "anchors", "anchors3", "lsq")
MIXES: tuple[str, ...] = ("harmonic", "slides")
#: The mixing rule measurements support (issue 13); `slides` is the seed's formula.
DEFAULT_MIX = "harmonic"
#: What an interval includes.
NOISE_ONLY = "noise only (two anchors: model error not measured)"
WITH_MODEL = "noise + model error"
MODEL_FORMAT = "storlab-estimate-model"
MODEL_VERSION = 1
#: Outputs of a prediction, per size and in total.
QUANTITIES = ("read_iops", "write_iops", "total_iops",
              "read_bw_bytes", "write_bw_bytes", "total_bw_bytes")


# --------------------------------------------------------------------------- small helpers

def size_bytes(value: Any) -> int:
    """An I/O size ("4k", "64KiB", 4096) as whole bytes (`storlab.units` grammar)."""
    try:
        return units.parse_size(value, "I/O size")
    except UnitsError as exc:
        raise EstimateError(str(exc)) from None


#: 4096 -> '4k' (fio's binary suffixes); `storlab.units.format_size`.
size_label = units.format_size


def check_read_pct(value: Any) -> float:
    """A read percentage in [0, 100] as a float; a clear error otherwise."""
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise EstimateError(f"read percentage {value!r} is not a number") from None
    if not math.isfinite(p) or p < 0 or p > 100:
        raise EstimateError(f"read percentage {value!r} is outside 0-100")
    return p


def parse_size_mix(spec: str | Mapping[Any, float]) -> dict[int, float]:
    """Size proportions from "4k:0.8,64k:0.2" (or a mapping) as {bytes: P}; P sum to 1."""
    try:
        return units.parse_size_mix(spec, "size mix", exact=True)
    except UnitsError as exc:
        raise EstimateError(str(exc)) from None


# --------------------------------------------------------------------------- cells

@dataclass(frozen=True)
class Cell:
    """The replicates measured at one (I/O size, read percentage): means, spread, count.

    Variances are sample variances (ddof=1) of single runs; NaN when n < 2."""

    read_pct: float
    n: int
    read_iops: float
    write_iops: float
    read_var: float = math.nan
    write_var: float = math.nan
    rw_cov: float = math.nan

    @classmethod
    def from_samples(cls, read_pct: float, reads: Sequence[float], writes: Sequence[float]
                     ) -> Cell:
        """Aggregate replicate runs (read and write IOPS of each run)."""
        r = np.asarray(reads, dtype=float)
        w = np.asarray(writes, dtype=float)
        if r.shape != w.shape or r.size == 0:
            raise EstimateError(f"read {read_pct:g}%: need as many read as write values, >= 1")
        for i, (a, b) in enumerate(zip(r, w)):
            check_throughput(float(read_pct), float(a), float(b), f"run {i + 1}")
        if r.size >= 2:
            cov = np.cov(np.vstack([r, w]), ddof=1)
            rv, wv, c = float(cov[0, 0]), float(cov[1, 1]), float(cov[0, 1])
        else:
            rv = wv = c = math.nan
        return cls(float(read_pct), int(r.size), float(r.mean()), float(w.mean()), rv, wv, c)

    @property
    def total_iops(self) -> float:
        return self.read_iops + self.write_iops

    def mean_cov(self) -> np.ndarray | None:
        """Covariance matrix of the two means (read, write), or None without replicates."""
        if self.n < 2 or not math.isfinite(self.read_var):
            return None
        return np.array([[self.read_var, self.rw_cov], [self.rw_cov, self.write_var]]) / self.n

    def to_dict(self) -> dict[str, Any]:
        return {"read_pct": self.read_pct, "n": self.n, "read_iops": self.read_iops,
                "write_iops": self.write_iops, "read_var": _nan_none(self.read_var),
                "write_var": _nan_none(self.write_var), "rw_cov": _nan_none(self.rw_cov)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> Cell:
        try:
            return cls(check_read_pct(d["read_pct"]), int(d.get("n", 1)),
                       float(d["read_iops"]), float(d["write_iops"]),
                       _none_nan(d.get("read_var")), _none_nan(d.get("write_var")),
                       _none_nan(d.get("rw_cov")))
        except KeyError as exc:
            raise EstimateError(f"{where}: cell lacks field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise EstimateError(f"{where}: bad cell {dict(d)!r}: {exc}") from None


def check_throughput(read_pct: float, read: float, write: float, where: str = "") -> None:
    """Refuse what the model cannot use: a negative or non-finite rate, a zero where the mix
    has I/O (100 % read needs reads > 0, 0 % writes > 0, a mix both)."""
    tail = f" ({where})" if where else ""
    for name, v in (("read", read), ("write", write)):
        if not math.isfinite(v) or v < 0:
            raise EstimateError(f"read {read_pct:g}%: {name} throughput {v:g} must be finite "
                                f"and >= 0{tail}")
    if read_pct == 100.0 and not read > 0:
        raise EstimateError(f"100% read throughput is {read:g}{tail}; the capacity "
                            "C = T_100%read needs it > 0")
    if read_pct == 0.0 and not write > 0:
        raise EstimateError(f"100% write throughput is {write:g}{tail}; "
                            "f_rw = T_100%read / T_100%write needs it > 0")
    for name, v, has in (("read", read, read_pct > 0), ("write", write, read_pct < 100)):
        if has and not v > 0:
            raise EstimateError(f"read {read_pct:g}%: {name} throughput is {v:g}{tail}; a "
                                f"mix with {name}s needs it > 0")


def _nan_none(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _none_nan(x: Any) -> float:
    return math.nan if x is None else float(x)


# --------------------------------------------------------------------------- fitting core

def _resolve_method(method: str, pcts: np.ndarray) -> str:
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


def _solve(pcts: np.ndarray, r: np.ndarray, w: np.ndarray, method: str, label: str
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


def _k(capacity: float, f_rw: float, read_pct: float) -> float:
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
        m = _resolve_method(method, pcts)
        cap, f = _solve(pcts, *_means(cs), m, size_label(size))
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
                cap, f = _solve(sub_p, theta[0::2], theta[1::2], method, self.label)
                return np.array([100.0 * _k(cap, f, p)])

            try:
                est, var, _, unknown = _delta_var(fun, sub)
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
        return _k(self.capacity, self.f_rw, check_read_pct(read_pct))

    def capacities(self) -> np.ndarray:
        """C_j = T_read + f_rw * T_write at each measured mix."""
        r, w = _means(self.cells)
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


def _means(cells: Sequence[Cell]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([c.read_iops for c in cells], dtype=float),
            np.array([c.write_iops for c in cells], dtype=float))


def _merge_cells(cells: list[Cell], label: str) -> list[Cell]:
    pcts = [c.read_pct for c in cells]
    if len(set(pcts)) != len(pcts):
        raise EstimateError(f"size {label}: read percentage given twice among cells {pcts}")
    if not cells:
        raise EstimateError(f"size {label}: no measurements")
    return cells


def _shape_warnings(sf: SizeFit) -> list[str]:
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


# --------------------------------------------------------------------------- uncertainty

def _jacobian(fun: Callable[[np.ndarray], np.ndarray], theta: np.ndarray) -> np.ndarray:
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


def _delta_var(fun: Callable[[np.ndarray], np.ndarray], cells: Sequence[Cell]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Estimate, noise variance, Welch-Satterthwaite sum (var_b**2/df_b) and an `unknown`
    flag of fun(cell means), by the delta method.

    theta = (r_1, w_1, r_2, w_2, ...). Each cell is an independent block. A block that
    matters (non-zero gradient) but has no replicates makes the variance unknown.
    """
    theta = np.array([v for c in cells for v in (c.read_iops, c.write_iops)], dtype=float)
    est = fun(theta)
    jac = _jacobian(fun, theta)
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


def _bounds(est: np.ndarray, var: np.ndarray, wsum: np.ndarray, unknown: np.ndarray,
            confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Student-t bounds with Welch-Satterthwaite degrees of freedom var**2 / wsum."""
    half = np.zeros(est.size)
    pos = var > 0
    df = np.where(pos & (wsum > 0), var**2 / np.where(wsum > 0, wsum, 1.0), np.inf)
    half[pos] = stats.t.ppf(0.5 + confidence / 2, df[pos]) * np.sqrt(var[pos])
    half[unknown] = np.nan
    return est - half, est + half


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise EstimateError(f"confidence {confidence!r} must be between 0 and 1")


def _delta_interval(fun: Callable[[np.ndarray], np.ndarray], cells: Sequence[Cell],
                    confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate, lower and upper bounds of fun(cell means): the noise part only."""
    _check_confidence(confidence)
    est, var, wsum, unknown = _delta_var(fun, cells)
    lo, hi = _bounds(est, var, wsum, unknown, confidence)
    return est, lo, hi


# --------------------------------------------------------------------------- prediction

def _predict_flat(fits: Sequence[SizeFit], props: Sequence[float], read_pct: float, mix: str
                  ) -> Callable[..., np.ndarray]:
    """theta (cell means of every size in order) -> flat outputs: per size then total,
    each with QUANTITIES. Refits each size from theta so fit uncertainty propagates.
    `scales` multiplies each size's k: the derivative in log-scale is how a relative model
    error of that size moves each output."""
    slices, start = [], 0
    for sf in fits:
        slices.append(slice(start, start + 2 * len(sf.cells)))
        start += 2 * len(sf.cells)
    pcts = [np.array([c.read_pct for c in sf.cells]) for sf in fits]
    p = read_pct

    def fun(theta: np.ndarray, scales: np.ndarray | None = None) -> np.ndarray:
        ks = []
        for sf, sl, pc in zip(fits, slices, pcts):
            t = theta[sl]
            cap, f = _solve(pc, t[0::2], t[1::2], sf.method, sf.label)
            ks.append(_k(cap, f, p))
        ks_a = np.array(ks)
        if scales is not None:
            ks_a = ks_a * scales
        pr = np.asarray(props, dtype=float)
        if mix == "slides":
            per_total = 100.0 * pr * ks_a  # size i's I/O rate as the slides' sum has it
        else:
            # each size's I/O costs 1/T_i of the capacity; a P-weighted stream of them
            # runs at 1 / sum(P_i / T_i), split among sizes in the proportions P_i
            t_i = 100.0 * ks_a
            total = 1.0 / np.sum(pr / t_i)
            per_total = total * pr
        rd = per_total * p / 100.0
        wr = per_total * (100.0 - p) / 100.0
        sizes = np.array([sf.size for sf in fits], dtype=float)
        rows = np.column_stack([rd, wr, rd + wr, rd * sizes, wr * sizes, (rd + wr) * sizes])
        return np.concatenate([rows.ravel(), rows.sum(axis=0)])

    return fun


@dataclass
class Prediction:
    """Predicted read, write and total IOPS and bandwidth at one read percentage for one
    size mix, each with a confidence interval (NaN bounds when replicates are missing)."""

    read_pct: float
    proportions: dict[int, float]
    mix: str
    confidence: float
    frame: pd.DataFrame
    model: RWModel = field(repr=False)
    interval: str = NOISE_ONLY

    def table(self) -> pd.DataFrame:
        """One row per size and a `total` row: estimates and `_lo`/`_hi` bounds."""
        return self.frame.copy()

    def value(self, quantity: str = "total_iops", size: str = "total") -> float:
        """One number of the table, e.g. value("read_bw_bytes", "4k")."""
        row = self.frame.loc[self.frame["size"] == size]
        if row.empty:
            raise EstimateError(f"no row {size!r} in this prediction")
        return float(row.iloc[0][quantity])

    def to_dict(self) -> dict[str, Any]:
        return {"read_pct": self.read_pct, "mix": self.mix, "confidence": self.confidence,
                "interval": self.interval, "proportions": {size_label(s): p for s, p in self.proportions.items()},
                "rows": self.frame.to_dict("records")}

    def plot(self, points: int = 101):
        """Total IOPS of this size mix against read percentage, the interval band, and
        the requested read percentage marked."""
        from ..plotstyle import PALETTE, axis_label, eng, format_axis, styled, subplots

        xs = np.linspace(0, 100, points)
        ys, lo, hi = [], [], []
        for x in xs:
            pr = self.model.predict(x, self.proportions, mix=self.mix,
                                    confidence=self.confidence)
            ys.append(pr.value())
            lo.append(pr.value("total_iops_lo"))
            hi.append(pr.value("total_iops_hi"))
        with styled():
            fig, ax = subplots(figsize=(6.8, 4.2))
            name = ", ".join(f"{size_label(s)}:{p:g}" for s, p in self.proportions.items())
            ax.plot(xs, ys, color=PALETTE[0], label=f"model: {name} (mix rule {self.mix})")
            top = max(ys) * 1.25
            if np.all(np.isfinite(lo)):
                ax.fill_between(xs, np.clip(lo, 0, top), np.clip(hi, 0, top), color=PALETTE[0],
                                alpha=0.18, lw=0, label=f"{self.confidence:.0%} interval")
            ax.plot([self.read_pct], [self.value()], "o", color="black",
                    label=f"{self.read_pct:g} % read: {eng(self.value())} IO/s")
            ax.set_xlabel("read share of the I/O (%)")
            ax.set_ylabel(axis_label("total_iops"))
            format_axis(ax.yaxis, "total_iops")
            ax.set_xlim(0, 100)
            ax.set_ylim(0, top)
            ax.set_title("Predicted total IOPS of the size mix", fontsize=9.5)
            ax.legend(loc="best")
        return fig


def iops_legend(ax: Any) -> None:
    """The IOPS panel's legend, under the panel (the data fill it): every labelled line and
    what filled and hollow points mean."""
    from matplotlib.lines import Line2D

    extra = [Line2D([], [], marker="o", ls="", color="#555555", label="measured, used in fit"),
             Line2D([], [], marker="o", ls="", color="#555555", mfc="white",
                    label="measured, not used")]
    h, _ = ax.get_legend_handles_labels()
    ax.legend(handles=h + extra, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)


# --------------------------------------------------------------------------- the model

@dataclass
class RWModel:
    """Per-I/O-size f_rw fits plus everything needed to predict, check and save them."""

    fits: dict[int, SizeFit]
    spread_threshold: float = 0.10
    meta: dict[str, Any] = field(default_factory=dict)

    # -- construction ---------------------------------------------------------------
    @classmethod
    def from_cells(cls, cells: Mapping[Any, Iterable[Cell]], method: str = "auto",
                   spread_threshold: float = 0.10, meta: Mapping[str, Any] | None = None
                   ) -> RWModel:
        """Fit every size from its cells ({size: [Cell, ...]})."""
        if not cells:
            raise EstimateError("no measurements to fit")
        fits: dict[int, SizeFit] = {}
        for s, cs in cells.items():
            b = size_bytes(s)
            if b in fits:
                raise EstimateError(f"size {size_label(b)} given twice")
            fits[b] = SizeFit.fit(b, cs, method)
        return cls(dict(sorted(fits.items())), float(spread_threshold), dict(meta or {}))

    @classmethod
    def from_anchors(cls, anchors: Mapping[Any, tuple[float, float]], **kw: Any) -> RWModel:
        """The slides' two-point model from {size: (T_100%read, T_100%write)} in IOPS."""
        return cls.from_cells({s: [Cell(100.0, 1, float(r), 0.0), Cell(0.0, 1, 0.0, float(w))]
                               for s, (r, w) in anchors.items()}, method="anchors", **kw)

    # -- queries --------------------------------------------------------------------
    @property
    def sizes(self) -> list[int]:
        return list(self.fits)

    def fit_for(self, size: Any) -> SizeFit:
        b = size_bytes(size)
        if b not in self.fits:
            known = ", ".join(size_label(s) for s in self.fits)
            raise EstimateError(f"size {size_label(b)} is not in the model (it has {known})")
        return self.fits[b]

    @property
    def warnings(self) -> list[str]:
        """One line per size whose C is not invariant across its measured mixes."""
        out = []
        for sf in self.fits.values():
            if len(sf.cells) >= 3 and sf.c_spread > self.spread_threshold:
                out.append(f"size {sf.label}: C = T_read + f_rw*T_write varies by "
                           f"{sf.c_spread:.1%} across its {len(sf.cells)} measured mixes "
                           f"(threshold {self.spread_threshold:.0%}); the capacity is not "
                           "invariant, so predictions between them are doubtful")
            out += _shape_warnings(sf)
        return out

    def predict(self, read_pct: float, proportions: Mapping[Any, float] | str | None = None,
                mix: str = DEFAULT_MIX, confidence: float = 0.95,
                model_error: bool = True) -> Prediction:
        """Read, write, total IOPS and bandwidth at `read_pct` for a size mix given as
        {size: P} or "4k:0.8,64k:0.2" (I/O-count proportions summing to 1). It may be
        omitted only when the model has a single size. The intervals include the model's
        error when every size of the mix has one measured (`Prediction.interval` says)."""
        p = check_read_pct(read_pct)
        if mix not in MIXES:
            raise EstimateError(f"mix rule {mix!r} is not one of {', '.join(MIXES)}")
        if proportions is None:
            if len(self.fits) != 1:
                raise EstimateError("the model has several sizes: give their proportions, "
                                    "e.g. 4k:0.8,64k:0.2")
            props = {self.sizes[0]: 1.0}
        else:
            props = parse_size_mix(proportions)
        fits = [self.fit_for(s) for s in props]
        cells = [c for sf in fits for c in sf.cells]
        fun = _predict_flat(fits, list(props.values()), p, mix)
        _check_confidence(confidence)
        est, var, wsum, unknown = _delta_var(fun, cells)
        sds = np.array([sf.model_sd for sf in fits]) if model_error else np.array([math.nan])
        interval = NOISE_ONLY
        if np.all(np.isfinite(sds)):
            # d output / d ln k_i; sizes' model errors taken as fully correlated (the sum of
            # their effects), the cautious choice: nothing says they cancel
            theta = np.array([v for c in cells for v in (c.read_iops, c.write_iops)])
            elas = _jacobian(lambda s: fun(theta, np.exp(s)), np.zeros(len(fits)))
            msd = np.abs(elas) @ sds
            mvar = msd**2
            mdf = max(1, min(sf.model_df for sf in fits))
            var = var + mvar
            wsum = wsum + mvar**2 / mdf
            interval = WITH_MODEL
        lo, hi = _bounds(est, var, wsum, unknown, confidence)
        nq = len(QUANTITIES)
        rows = []
        labels = [sf.label for sf in fits] + ["total"]
        shares = list(props.values()) + [sum(props.values())]
        for i, (lab, share) in enumerate(zip(labels, shares)):
            row: dict[str, Any] = {"size": lab, "proportion": share}
            for j, q in enumerate(QUANTITIES):
                row[q] = est[i * nq + j]
                row[f"{q}_lo"] = lo[i * nq + j]
                row[f"{q}_hi"] = hi[i * nq + j]
            rows.append(row)
        return Prediction(p, props, mix, confidence, pd.DataFrame(rows), self, interval)

    def predict_size(self, size: Any, read_pct: float, confidence: float = 0.95,
                     model_error: bool = True) -> Prediction:
        """Shortcut for one size alone."""
        return self.predict(read_pct, {size_bytes(size): 1.0}, confidence=confidence,
                            model_error=model_error)

    # -- result tables --------------------------------------------------------------
    def table(self, confidence: float = 0.95) -> pd.DataFrame:
        """One row per size: anchors, f_rw and C with intervals, fit method, C spread."""
        rows = []
        for sf in self.fits.values():
            pcts = np.array([c.read_pct for c in sf.cells])

            def params(theta: np.ndarray, sf: SizeFit = sf, pcts: np.ndarray = pcts
                       ) -> np.ndarray:
                return np.array(_solve(pcts, theta[0::2], theta[1::2], sf.method, sf.label))

            (cap, f), lo, hi = _delta_interval(params, sf.cells, confidence)
            r100, w0 = sf.anchor(100.0), sf.anchor(0.0)
            rows.append({
                "size": sf.label, "method": sf.method, "mixes": len(sf.cells),
                "T100_read": r100.read_iops if r100 else math.nan,
                "T100_write": w0.write_iops if w0 else math.nan,
                "f_rw": f, "f_rw_lo": lo[1], "f_rw_hi": hi[1],
                "C": cap, "C_lo": lo[0], "C_hi": hi[0],
                "C_spread": sf.c_spread, "C_cv": sf.c_cv,
                "model_sd": sf.model_sd, "model_df": sf.model_df,
                "invariant": bool(len(sf.cells) < 3 or sf.c_spread <= self.spread_threshold),
            })
        return pd.DataFrame(rows)

    def capacity_table(self) -> pd.DataFrame:
        """One row per measured mix: the means, C_j and its deviation from the fitted C."""
        rows = []
        for sf in self.fits.values():
            for c, cj in zip(sf.cells, sf.capacities()):
                rows.append({"size": sf.label, "read_pct": c.read_pct, "n": c.n,
                             "read_iops": c.read_iops, "write_iops": c.write_iops,
                             "total_iops": c.total_iops, "C": cj,
                             "C_dev": cj / sf.capacity - 1.0, "used_in_fit": sf.used(c)})
        return pd.DataFrame(rows)

    def validation(self, confidence: float = 0.95) -> pd.DataFrame:
        """Predicted against measured total IOPS at every measured mix of every size."""
        rows = []
        for sf in self.fits.values():
            for c in sf.cells:
                pr = self.predict_size(sf.size, c.read_pct, confidence)
                pred = pr.value()
                rows.append({
                    "size": sf.label, "read_pct": c.read_pct, "used_in_fit": sf.used(c),
                    "n": c.n, "measured_iops": c.total_iops, "predicted_iops": pred,
                    "pred_lo": pr.value("total_iops_lo"), "pred_hi": pr.value("total_iops_hi"),
                    "error_pct": 100.0 * (pred - c.total_iops) / c.total_iops
                    if c.total_iops > 0 else math.nan,
                })
        return pd.DataFrame(rows)

    def plot(self, confidence: float = 0.95, points: int = 101):
        """Left: measured total IOPS (cell means, error bars = interval of the mean; hollow
        markers = not used in the fit) and the model's line per I/O size, the y-range set
        by the data (an interval running off it is an arrow with its half-width written).
        Right: C = T_read + f_rw * T_write of every measured mix relative to the size's mean
        C, against read percentage: the invariance the model rests on (flat lines)."""
        from ..plotstyle import styled, subplots

        with styled():
            fig, (ax, axc) = subplots(1, 2, figsize=(11.5, 4.4), width_ratios=[1.25, 1])
            self._plot_iops(ax, confidence, points)
            self._plot_capacity(axc)
        return fig

    def _plot_iops(self, ax: Any, confidence: float, points: int) -> None:
        from ..plotstyle import PALETTE, axis_label, eng, format_axis

        xs = np.linspace(0, 100, points)
        lines: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        bars: list[tuple[SizeFit, Cell, float | None]] = []
        for sf in self.fits.values():
            ys, lo, hi = [], [], []
            for x in xs:
                pr = self.predict_size(sf.size, x, confidence)
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
        for i, sf in enumerate(self.fits.values()):
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
            col = PALETTE[list(self.fits).index(sf.size) % len(PALETTE)]
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

    def _plot_capacity(self, ax: Any) -> None:
        from ..plotstyle import LINESTYLES, MARKERS, PALETTE, eng

        ct = self.capacity_table()
        for i, sf in enumerate(self.fits.values()):
            g = ct[ct["size"] == sf.label].sort_values("read_pct")
            rel = 100 * g["C"] / g["C"].mean()
            ax.plot(g["read_pct"], rel, LINESTYLES[i % 4], marker=MARKERS[i % len(MARKERS)],
                    color=PALETTE[i % len(PALETTE)],
                    label=f"{sf.label}: C ≈ {eng(g['C'].mean())} IO/s, spread "
                          f"{100 * sf.c_spread:.1f} %")
        half = 50 * self.spread_threshold
        ax.axhspan(100 - half, 100 + half, color="#E3E3E3", alpha=0.6, lw=0,
                   label=f"±{half:g} %: spread ≤ {100 * self.spread_threshold:g} % counts as "
                         "invariant")
        ax.axhline(100, color="#777777", lw=0.8)
        ax.set_xlim(-3, 103)
        ax.set_xlabel("read share of the I/O (%)")
        ax.set_ylabel("C at this mix / mean C of the size (%)")
        ax.set_title("C = T_read + f_rw·T_write per mix (flat = invariant)", fontsize=9.5)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)

    # -- persistence ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": MODEL_FORMAT, "version": MODEL_VERSION,
            "spread_threshold": self.spread_threshold, "meta": self.meta,
            "sizes": [{"size": sf.label, "size_bytes": sf.size, "method": sf.method,
                       "f_rw": sf.f_rw, "capacity": sf.capacity, "c_spread": sf.c_spread,
                       "cells": [c.to_dict() for c in sf.cells]}
                      for sf in self.fits.values()],
        }

    def save(self, path: str | Path) -> Path:
        from ..fileio import write_text

        return write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")  # temp + rename

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "model") -> RWModel:
        """Rebuild from `to_dict` output. A size may instead give just `read_iops` and
        `write_iops` (the two anchors) for a hand-written model. Saved f_rw and capacity
        are checked against the refit so an edited file cannot silently disagree."""
        if not isinstance(d, Mapping) or d.get("format", MODEL_FORMAT) != MODEL_FORMAT:
            raise EstimateError(f"{source}: not a storlab estimate model "
                                f"(expected format {MODEL_FORMAT!r})")
        entries = d.get("sizes")
        if not isinstance(entries, list) or not entries:
            raise EstimateError(f"{source}: field 'sizes' must be a non-empty list")
        fits: dict[int, SizeFit] = {}
        for i, e in enumerate(entries):
            where = f"{source}: sizes[{i}]"
            if not isinstance(e, Mapping) or "size" not in e:
                raise EstimateError(f"{where}: needs a 'size'")
            b = size_bytes(e.get("size_bytes", e["size"]))
            if "cells" in e:
                cells = [Cell.from_dict(c, f"{where}.cells[{j}]")
                         for j, c in enumerate(e["cells"])]
                method = str(e.get("method", "auto"))
            elif "read_iops" in e and "write_iops" in e:
                try:
                    r, w = float(e["read_iops"]), float(e["write_iops"])
                except (TypeError, ValueError):
                    raise EstimateError(f"{where}: read_iops/write_iops must be numbers") from None
                cells = [Cell(100.0, 1, r, 0.0), Cell(0.0, 1, 0.0, w)]
                method = "anchors"
            else:
                raise EstimateError(f"{where}: needs 'cells' or 'read_iops' and 'write_iops'")
            try:
                sf = SizeFit.fit(b, cells, method)
            except EstimateError as exc:
                raise EstimateError(f"{where}: {exc}") from None
            for key, val in (("f_rw", sf.f_rw), ("capacity", sf.capacity)):
                if key in e and not math.isclose(float(e[key]), val, rel_tol=1e-6):
                    raise EstimateError(f"{where}: saved {key}={e[key]} disagrees with its "
                                        f"cells (refit gives {val:.6g})")
            if b in fits:
                raise EstimateError(f"{where}: size {size_label(b)} given twice")
            fits[b] = sf
        thr = float(d.get("spread_threshold", 0.10))
        return cls(dict(sorted(fits.items())), thr, dict(d.get("meta") or {}))

    @classmethod
    def load(cls, path: str | Path) -> RWModel:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise EstimateError(f"{path}: no such model file") from None
        except json.JSONDecodeError as exc:
            raise EstimateError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
        return cls.from_dict(data, str(path))


# --------------------------------------------------------------------------- tables in

READ_PCT_NAMES = ("read_pct", "rwmixread", "read_percent", "read_percentage", "readpct",
                  "read%", "pct_read")
SIZE_NAMES = ("size", "bs", "io_size", "iosize", "block_size", "blocksize", "bs_bytes")


def _find(df: pd.DataFrame, given: str | None, names: Sequence[str], what: str,
          required: bool = True) -> str | None:
    if given is not None:
        if given not in df.columns:
            raise EstimateError(f"{what} column {given!r} is not in the table "
                                f"(columns: {', '.join(map(str, df.columns))})")
        return given
    lower = {str(c).lower(): c for c in df.columns}
    for n in names:
        if n in lower:
            return lower[n]
    if required:
        raise EstimateError(f"no {what} column (tried {', '.join(names)}; "
                            f"columns: {', '.join(map(str, df.columns))}); name it explicitly")
    return None


def samples_from_table(df: pd.DataFrame, read_pct: str | None = None, size: str | None = None,
                       read: str | None = None, write: str | None = None,
                       total: str | None = None, source: str = "table"
                       ) -> dict[int, dict[float, tuple[list[float], list[float]]]]:
    """Per size and read percentage, the replicate read and write IOPS of a results table.

    Throughput columns, in order of preference: read and write IOPS (`read_iops`,
    `write_iops`); total IOPS split by the read percentage (`total_iops`, `iops`); read and
    write bandwidth in bytes/s (`read_bw_bytes`, `write_bw_bytes`), divided by the size;
    total bandwidth (`total_bw_bytes`, `bw_bytes`). Explicit column names override the
    search; a column name ending in `bw`/`bytes` is read as bandwidth.
    """
    pct_col = _find(df, read_pct, READ_PCT_NAMES, "read percentage")
    size_col = _find(df, size, SIZE_NAMES, "I/O size")
    if read or write:
        if not (read and write):
            raise EstimateError("give both the read and the write throughput columns")
        r_col, w_col, t_col = (_find(df, read, (), "read"), _find(df, write, (), "write"), None)
    elif total:
        r_col, w_col, t_col = None, None, _find(df, total, (), "total")
    else:
        r_col = _find(df, None, ("read_iops",), "read", False)
        w_col = _find(df, None, ("write_iops",), "write", False)
        t_col = None
        if r_col is None or w_col is None:
            r_col = w_col = None
            t_col = _find(df, None, ("total_iops", "iops"), "total", False)
        if r_col is None and t_col is None:
            r_col = _find(df, None, ("read_bw_bytes",), "read", False)
            w_col = _find(df, None, ("write_bw_bytes",), "write", False)
            if r_col is None or w_col is None:
                r_col = w_col = None
                t_col = _find(df, None, ("total_bw_bytes", "bw_bytes"), "throughput", False)
        if r_col is None and t_col is None:
            raise EstimateError(f"{source}: no throughput columns (read_iops/write_iops, "
                                "total_iops, read_bw_bytes/write_bw_bytes or total_bw_bytes)")
    used = [c for c in (r_col, w_col, t_col) if c is not None]
    is_bw = {c: any(t in str(c).lower() for t in ("bw", "bytes", "mbps", "bandwidth"))
             for c in used}
    out: dict[int, dict[float, tuple[list[float], list[float]]]] = {}
    for i, row in enumerate(df.to_dict("records")):
        where = f"{source}: row {i + 1}"
        try:
            p = check_read_pct(row[pct_col])
            b = size_bytes(row[size_col])
        except EstimateError as exc:
            raise EstimateError(f"{where}: {exc}") from None

        def num(col: str) -> float:
            v = row[col]
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise EstimateError(f"{where}: {col}={v!r} is not a number") from None
            if math.isnan(x):
                return math.nan
            if not math.isfinite(x) or x < 0:
                raise EstimateError(f"{where}: {col}={v!r} must be finite and >= 0")
            return x / b if is_bw[col] else x

        if t_col is not None:
            t = num(t_col)
            if math.isnan(t):
                raise EstimateError(f"{where}: {t_col} is empty")
            r, w = t * p / 100.0, t * (100.0 - p) / 100.0
        else:
            assert r_col is not None and w_col is not None
            r, w = num(r_col), num(w_col)
            # A pure run may leave the other direction empty; that means none of it.
            if math.isnan(r) and p == 0.0:
                r = 0.0
            if math.isnan(w) and p == 100.0:
                w = 0.0
            if math.isnan(r) or math.isnan(w):
                raise EstimateError(f"{where}: read or write throughput is empty")
        rs, ws = out.setdefault(b, {}).setdefault(p, ([], []))
        rs.append(r)
        ws.append(w)
    if not out:
        raise EstimateError(f"{source}: the table has no rows")
    return out


def is_mix(value: Any) -> bool:
    """A size cell that names a size mix ('4k:0.8,64k:0.2'), as `estimate measure --runs`
    writes for its mixed-size runs."""
    return isinstance(value, str) and (":" in value or "," in value)


def split_table(df: pd.DataFrame, size: str | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(single-size rows, mixed-size rows, notes). Rows with a `status` other than ok
    (failed runs, or runs `estimate measure` refused) are left out, and said so."""
    notes = []
    if "status" in df.columns:
        bad = df["status"].astype(str) != "ok"
        if bad.any():
            counts = df.loc[bad, "status"].value_counts().to_dict()
            notes.append(f"{int(bad.sum())} rows left out by their status "
                         f"({', '.join(f'{k}: {v}' for k, v in counts.items())})")
        df = df[~bad]
    size_col = _find(df, size, SIZE_NAMES, "I/O size")
    mixed = df[size_col].map(is_mix).astype(bool)
    if mixed.any():
        notes.append(f"{int(mixed.sum())} mixed-size rows set aside as checks of the "
                     "size-mix rules")
    return df[~mixed], df[mixed], notes


def mixed_checks(model: RWModel, mixed: pd.DataFrame, confidence: float = 0.95,
                 read_pct: str | None = None, size: str | None = None,
                 source: str = "table") -> pd.DataFrame:
    """Measured mixed-size rows (size cell '4k:0.8,64k:0.2') against both mix rules."""
    if mixed.empty:
        return pd.DataFrame()
    pct_col = _find(mixed, read_pct, READ_PCT_NAMES, "read percentage")
    size_col = _find(mixed, size, SIZE_NAMES, "I/O size")
    t_col = next((c for c in ("total_iops", "iops") if c in mixed.columns), None)
    if t_col is None:
        if not {"read_iops", "write_iops"} <= set(mixed.columns):
            raise EstimateError(f"{source}: mixed-size rows need total_iops or read_iops and "
                                "write_iops")
        mixed = mixed.assign(total_iops=mixed["read_iops"] + mixed["write_iops"])
        t_col = "total_iops"
    rows = []
    for (spec, pct), g in mixed.groupby([size_col, pct_col], sort=False):
        p = check_read_pct(pct)
        vals = g[t_col].to_numpy(dtype=float)
        if not np.all(vals > 0):
            raise EstimateError(f"{source}: mix {spec} at {p:g}% read has a throughput <= 0")
        meas = float(vals.mean())
        for rule in MIXES:
            pr = model.predict(p, spec, mix=rule, confidence=confidence)
            pred = pr.value()
            rows.append({"mix": spec, "read_pct": p, "rule": rule, "n": len(vals),
                         "measured_iops": meas, "predicted_iops": pred,
                         "pred_lo": pr.value("total_iops_lo"),
                         "pred_hi": pr.value("total_iops_hi"), "interval": pr.interval,
                         "error_pct": 100.0 * (pred - meas) / meas})
    return pd.DataFrame(rows)


def fit_table(df: pd.DataFrame, method: str = "auto", spread_threshold: float = 0.10,
              read_pct: str | None = None, size: str | None = None, read: str | None = None,
              write: str | None = None, total: str | None = None, source: str = "table",
              meta: Mapping[str, Any] | None = None) -> RWModel:
    """Fit the model from a tidy results table (one row per run; replicates allowed).
    Mixed-size rows and rows whose status is not ok are left out (see `split_table`)."""
    df, _, notes = split_table(df, size)
    if notes:
        meta = {**(meta or {}), "table_notes": notes}
    samples = samples_from_table(df, read_pct, size, read, write, total, source)
    cells: dict[int, list[Cell]] = {}
    for b, by_pct in samples.items():
        try:
            cells[b] = [Cell.from_samples(p, rs, ws) for p, (rs, ws) in sorted(by_pct.items())]
        except EstimateError as exc:
            raise EstimateError(f"{source}: size {size_label(b)}: {exc}") from None
    return RWModel.from_cells(cells, method, spread_threshold,
                              meta={"source": source, **(meta or {})})


def read_results(path: str | Path) -> pd.DataFrame:
    """A results table (CSV, Parquet, JSON) read by `storlab.fileio.read_table`, the one
    table reader; its one-line errors become EstimateErrors."""
    from ..fileio import read_table

    try:
        return read_table(path)
    except EstimateError:
        raise
    except StorlabError as exc:
        raise EstimateError(str(exc)) from None
