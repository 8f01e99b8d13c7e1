"""Carver's PI beside other importance measures on the same results table, so a user sees
where methods agree.

* `pi_share`: Carver's PI / Var(S) (eq. 2), the first-order variance share of each parameter.
* `anova_share`: sum of squares of the parameter's main effect in a statsmodels OLS model with
  every parameter as a categorical main effect (type II ANOVA), over the total sum of squares.
  On a balanced full factorial it equals `pi_share`; on unbalanced or sampled data it
  adjusts for the other parameters, PI does not.
* `sobol_s1`, `sobol_st`: first-order and total Sobol indices. SALib's Sobol analysis needs
  its own Saltelli sample order and gives garbage on other tables (SALib issue #218), so on a
  complete grid (every combination of the parameters measured) they are computed exactly
  from the data instead: S1 = Var(E[Y|X_i]) / Var(Y), ST = E[Var(Y|X_~i)] / Var(Y), with
  the uniform distribution over the grid. On incomplete data they are left empty (NaN).

ST - S1 large means the parameter acts through interactions: exactly the case where
Carver's conditional importance (CPI) ranks it higher than its PI does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from ..errors import AnalysisError
from ..jsonutil import to_jsonable
from ..result_shape import Result
from .importance import combine, encode, importance

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure


@dataclass
class MethodComparison(Result):
    """Importance of each parameter by several methods (`.to_frame()`, `.plot()`)."""

    PLOT_KINDS = ("bars",)
    ERROR = AnalysisError

    response: str
    frame: pd.DataFrame
    complete_grid: bool

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({"response": self.response, "complete_grid": self.complete_grid,
                            "params": self.frame})

    def plot(self, kind: str | None = None) -> Figure:
        """`bars` (the only kind): each parameter's share of importance by every method."""
        self.plot_kind(kind)
        from ..plotstyle import styled
        from .plots import comparison_figure

        with styled():
            return comparison_figure(self)


def compare(df: pd.DataFrame, response: str, params: Sequence[str] | None = None,
            max_levels: int = 10, bins: int = 4, source: str = "results") -> MethodComparison:
    """Carver PI share, ANOVA SS share and (on complete grids) exact Sobol S1/ST."""
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    enc = encode(df, response, params, max_levels=max_levels, bins=bins, source=source)
    res = importance(enc.configs, response, params=enc.params, stop="top:1",
                     max_levels=max_levels, bins=bins, source=source)
    var = res.variance
    names = [f"x{j}" for j in range(len(enc.params))]  # formula-safe column names
    data = pd.DataFrame(enc.codes, columns=names)
    data["y"] = enc.y
    anova = {p: math.nan for p in enc.params}
    if var > 0 and len(data) > int((enc.nlev - 1).sum()) + 1:
        formula = "y ~ " + " + ".join(f"C({x})" for x, L in zip(names, enc.nlev) if L > 1)
        if "C(" in formula:
            table = anova_lm(smf.ols(formula, data=data).fit(), typ=2)
            sst = float(((enc.y - enc.y.mean()) ** 2).sum())
            for x, p in zip(names, enc.params):
                key = f"C({x})"
                anova[p] = float(table.loc[key, "sum_sq"]) / sst if key in table.index else 0.0
    total = int(np.prod(enc.nlev.astype(float)))
    complete = total == len(enc.y)
    s1 = {p: math.nan for p in enc.params}
    st = dict(s1)
    if complete and var > 0:
        for j, p in enumerate(enc.params):
            s1[p] = res.pi[p] / var
            others = [i for i in range(len(enc.params)) if i != j]
            key, _ = combine(enc.codes[:, others], enc.nlev[others])
            _, g = np.unique(key, return_inverse=True)
            g = g.ravel()
            cnt = np.bincount(g)
            mean = np.bincount(g, enc.y) / cnt
            within = np.bincount(g, (enc.y - mean[g]) ** 2) / cnt
            st[p] = float(within.mean()) / var  # every group has the same size on a grid
    frame = pd.DataFrame({"param": enc.params,
                          "pi_share": [res.pi[p] / var if var > 0 else 0.0 for p in enc.params],
                          "anova_share": [anova[p] for p in enc.params],
                          "sobol_s1": [s1[p] for p in enc.params],
                          "sobol_st": [st[p] for p in enc.params]})
    frame = frame.sort_values("pi_share", ascending=False, kind="stable").reset_index(drop=True)
    return MethodComparison(response, frame, complete)
