"""Predictions of the f_rw model: read, write and total IOPS and bandwidth of a size mix at
a read percentage, with intervals (noise by the delta method, plus the model's error when it
was measured)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import EstimateError
from ..jsonutil import to_jsonable
from ..result_shape import Result
from .cells import size_label
from .fit import SizeFit, k_at, solve
from .mixrule import per_size_rates
from .uncertainty import check_confidence, combined_df, delta_var, jacobian, t_bounds

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .rwmodel import RWModel

#: What an interval includes.
NOISE_ONLY = "noise only (two anchors: model error not measured)"
WITH_MODEL = "noise + model error"
#: Outputs of a prediction, per size and in total.
QUANTITIES = ("read_iops", "write_iops", "total_iops",
              "read_bw_bytes", "write_bw_bytes", "total_bw_bytes")


def predict_flat(fits: Sequence[SizeFit], props: Sequence[float], read_pct: float, mix: str
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
            cap, f = solve(pc, t[0::2], t[1::2], sf.method, sf.label)
            ks.append(k_at(cap, f, p))
        ks_a = np.array(ks)
        if scales is not None:
            ks_a = ks_a * scales
        per_total = per_size_rates(ks_a, np.asarray(props, dtype=float), mix)
        rd = per_total * p / 100.0
        wr = per_total * (100.0 - p) / 100.0
        sizes = np.array([sf.size for sf in fits], dtype=float)
        rows = np.column_stack([rd, wr, rd + wr, rd * sizes, wr * sizes, (rd + wr) * sizes])
        return np.concatenate([rows.ravel(), rows.sum(axis=0)])

    return fun


def predict_frame(fits: Sequence[SizeFit], props: Mapping[int, float], read_pct: float,
                  mix: str, confidence: float,
                  errors: Sequence[tuple[float, float]] | None) -> tuple[pd.DataFrame, str]:
    """The prediction's table (one row per size and a `total` row: estimates and `_lo`/`_hi`
    bounds) and what its intervals include. `errors` gives each fit's model error (relative
    SD, degrees of freedom; `modelerror`), None for noise only; it enters when every size of
    the mix has one; sizes' model errors are taken as fully correlated."""
    p = read_pct
    cells = [c for sf in fits for c in sf.cells]
    fun = predict_flat(fits, list(props.values()), p, mix)
    check_confidence(confidence)
    est, var, wsum, unknown = delta_var(fun, cells)
    max_df: np.ndarray | None = None
    interval = NOISE_ONLY
    sds = np.array([e[0] for e in errors]) if errors else np.array([math.nan])
    if np.all(np.isfinite(sds)):
        assert errors is not None
        # floored at 1 df, a choice (`modelerror`): below it the t quantile explodes
        mdf = max(1.0, min(float(e[1]) for e in errors))
        # d output / d ln k_i; sizes' model errors taken as fully correlated (the sum of
        # their effects), the cautious choice: nothing says they cancel
        theta = np.array([v for c in cells for v in (c.read_iops, c.write_iops)])
        elas = jacobian(lambda s: fun(theta, np.exp(s)), np.zeros(len(fits)))
        msd = np.abs(elas) @ sds
        mvar = msd**2
        max_df = combined_df(var, wsum, mdf)
        var = var + mvar
        wsum = wsum + mvar**2 / mdf
        interval = WITH_MODEL
    lo, hi = t_bounds(est, var, wsum, unknown, confidence, max_df)
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
    return pd.DataFrame(rows), interval


@dataclass
class Prediction(Result):
    """Predicted read, write and total IOPS and bandwidth at one read percentage for one
    size mix, each with a confidence interval (NaN bounds when replicates are missing)."""

    PLOT_KINDS = ("curve",)
    ERROR = EstimateError

    read_pct: float
    proportions: dict[int, float]
    mix: str
    confidence: float
    frame: pd.DataFrame
    model: RWModel = field(repr=False)
    interval: str = NOISE_ONLY

    def to_frame(self) -> pd.DataFrame:
        """One row per size and a `total` row: estimates and `_lo`/`_hi` bounds."""
        return self.frame.copy()

    def value(self, quantity: str = "total_iops", size: str = "total") -> float:
        """One number of the table, e.g. value("read_bw_bytes", "4k")."""
        row = self.frame.loc[self.frame["size"] == size]
        if row.empty:
            raise EstimateError(f"no row {size!r} in this prediction")
        return float(row.iloc[0][quantity])

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({"read_pct": self.read_pct, "mix": self.mix, "confidence": self.confidence,
                "interval": self.interval,
                "proportions": {size_label(s): p for s, p in self.proportions.items()},
                "rows": self.frame.to_dict("records")})

    def plot(self, kind: str | None = None, points: int = 101) -> Figure:
        """`curve` (the only kind): total IOPS of this size mix against read percentage,
        the interval band, and the requested read percentage marked."""
        self.plot_kind(kind)
        from .plots import plot_prediction

        return plot_prediction(self, points)
