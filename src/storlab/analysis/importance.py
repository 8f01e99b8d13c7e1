"""Carver's variance-based parameter importance (Cao, Kuenning, Zadok, FAST 2020).

Given a results table (factor columns plus response columns), compute for every parameter

* PI(P) = Var(S) - sum_i |S_{P=p_i}|/|S| Var(S_{P=p_i})  (eq. 2, population variance),
  i.e. the between-value variance of the response: how much knowing P explains;
* CPI(Q | selected): the variance reduction Q brings inside each subset that fixes the
  selected parameters to one value combination occurring in the data (eq. 3), aggregated
  over those subsets either by the **maximum** (eq. 4, Carver's choice) or by the
  **size-weighted mean**.

Which aggregate to use: the maximum finds a parameter that matters strongly under one
setting of the others (an interaction, e.g. a journal mode only relevant on HDDs), and it is
what the paper does; use it on complete or dense data. With sampled data the subsets are
small, and a maximum over many two- or three-row subsets is dominated by noise: then the
weighted mean (the reduction in pooled within-subset variance, as a regression-tree split
measures it) is the steadier choice. Its step shares also add up: sum of shares = fraction
of total variance explained by the selected parameters.

Greedy selection (Algorithm 1) picks the parameter with the largest PI, then repeatedly the
one with the largest CPI given those already selected, until a stop rule fires:
`top:N`, `rsd:X` (eq. 5, RSD of the subset left by fixing the selected parameters at their
best values <= X; default 0.02 as in the paper) or `gain:X` (no remaining parameter reduces
variance by more than X of the total). Rules combine with commas: `top:4,rsd:0.02`.

Repeated runs of one configuration are averaged first (as the paper does); their spread is
kept in `ImportanceResult.configs` and summarised as `noise_rsd`. Numeric parameters with
more than `max_levels` distinct values are binned into quantile strata (`binned` says so).

Everything is computed on small integer codes with `np.bincount` rather than pandas groupby:
one pass per candidate over the rows, which is what makes the evaluation harness (thousands
of repeated selections, `storlab.analysis.importance_eval`) affordable.

Sampling a study for Carver is the core LHS: `storlab design SPACE.yaml --kind lhs --runs N`
(library: `storlab.design.lhs.lhs_design`; analysis and design stay independent).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np
import pandas as pd

from ..errors import AnalysisError
from ..fileio import BOOKKEEPING
from ..jsonutil import plain

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

Aggregate = Literal["max", "mean"]
Goal = Literal["maximize", "minimize"]



# --------------------------------------------------------------------------- encoding
@dataclass
class Encoded:
    """A results table reduced to one row per configuration, parameters as integer codes."""

    params: list[str]
    codes: np.ndarray            # (n_configs, k) int64, code of each parameter's value
    levels: list[list[Any]]      # value labels per parameter, indexed by code
    y: np.ndarray                # mean response per configuration
    configs: pd.DataFrame        # parameter values + mean, std, n_runs per configuration
    binned: dict[str, str] = field(default_factory=dict)
    n_rows: int = 0
    n_dropped: int = 0

    @property
    def nlev(self) -> np.ndarray:
        return np.array([len(lv) for lv in self.levels], dtype=np.int64)


def encode(df: pd.DataFrame, response: str, params: Sequence[str] | None = None,
           max_levels: int = 10, bins: int = 4, source: str = "results") -> Encoded:
    """Validate, bin numeric many-valued parameters, code values, average repeated runs."""
    if response not in df.columns:
        raise AnalysisError(f"{source}: response column {response!r} not found "
                            f"(columns: {', '.join(map(str, df.columns))})")
    if params is None:
        params = default_params(df, response, max_levels)
    params = list(params)
    if not params:
        raise AnalysisError(f"{source}: no parameter columns to analyse (pass --params)")
    for p in params:
        if p not in df.columns:
            raise AnalysisError(f"{source}: parameter column {p!r} not found")
        if p == response:
            raise AnalysisError(f"{source}: {p!r} is the response, not a parameter")
    if len(set(params)) != len(params):
        raise AnalysisError(f"{source}: parameter listed twice in {', '.join(params)}")
    y_all = pd.to_numeric(df[response], errors="coerce")
    bad = df[response].notna() & y_all.isna()
    if bad.any():
        v = df.loc[bad, response].iloc[0]
        raise AnalysisError(f"{source}: response {response!r} has a non-numeric value {v!r}")
    keep = y_all.notna().to_numpy() & np.isfinite(y_all.to_numpy(dtype=float, na_value=np.nan))
    n_dropped = int((~keep).sum())
    if keep.sum() == 0:
        raise AnalysisError(f"{source}: response {response!r} has no numeric values")
    data = df.loc[keep, params]
    y_rows = y_all.to_numpy(dtype=float)[keep]

    codes = np.empty((len(data), len(params)), dtype=np.int64)
    levels: list[list[Any]] = []
    binned: dict[str, str] = {}
    for j, p in enumerate(params):
        col = data[p]
        if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col) \
                and col.nunique(dropna=True) > max_levels:
            cut = pd.qcut(col, q=bins, duplicates="drop")
            binned[p] = f"{col.nunique()} distinct values binned into {len(cut.cat.categories)} quantile strata"
            c = cut.cat.codes.to_numpy().astype(np.int64)
            labels: list[Any] = [f"[{iv.left:.4g}, {iv.right:.4g}]" for iv in cut.cat.categories]
            if (c < 0).any():  # NaN parameter values become their own stratum
                c = np.where(c < 0, len(labels), c)
                labels.append("NA")
        else:
            c, uniq = pd.factorize(col, sort=True, use_na_sentinel=False)
            labels = [plain(v) for v in uniq]
        codes[:, j] = c
        levels.append(labels)

    # Average repeated runs per configuration (paper, sec. 5.1); keep their spread.
    key, _ = combine(codes, np.array([len(lv) for lv in levels], dtype=np.int64))
    uniq_key, first, inv = np.unique(key, return_index=True, return_inverse=True)
    n_cfg = len(uniq_key)
    cnt = np.bincount(inv, minlength=n_cfg).astype(float)
    mean = np.bincount(inv, y_rows, minlength=n_cfg) / cnt
    dev = y_rows - mean[inv]
    var = np.bincount(inv, dev * dev, minlength=n_cfg) / np.maximum(cnt - 1, 1)
    std = np.where(cnt > 1, np.sqrt(var), np.nan)
    ccodes = codes[first]
    configs = pd.DataFrame({p: np.asarray(levels[j], dtype=object)[ccodes[:, j]]
                            for j, p in enumerate(params)})
    configs[response] = mean
    configs["std"] = std
    configs["n_runs"] = cnt.astype(np.int64)
    return Encoded(params, ccodes, levels, mean, configs, binned, len(data), n_dropped)


def default_params(df: pd.DataFrame, response: str, max_levels: int = 10) -> list[str]:
    """Parameter columns when none are named: every column except the response and the
    bookkeeping ones, and except numeric columns with many distinct values (those are
    most likely other responses; name them in `params` to have them binned)."""
    out = []
    for c in df.columns:
        if c == response or str(c) in BOOKKEEPING or str(c).startswith("_"):
            continue
        col = df[c]
        if pd.api.types.is_float_dtype(col) and col.nunique() > max_levels:
            continue
        out.append(c)
    return out


def combine(codes: np.ndarray, nlev: np.ndarray) -> tuple[np.ndarray, int]:
    """One int64 key per row for the joint value of several coded columns."""
    n, k = codes.shape
    if k == 0:
        return np.zeros(n, dtype=np.int64), 1
    total = 1
    for L in nlev:
        total *= max(int(L), 1)
    if total < 2**62:
        key = np.zeros(n, dtype=np.int64)
        for j in range(k):
            key = key * max(int(nlev[j]), 1) + codes[:, j]
        return key, total
    # Too many joint values for a mixed-radix key: number the distinct rows instead.
    _, inv = np.unique(codes, axis=0, return_inverse=True)
    inv = inv.ravel().astype(np.int64)
    return inv, int(inv.max()) + 1


# --------------------------------------------------------------------------- core numbers
def population_var(y: np.ndarray) -> float:
    """Var(S) of eq. 1 (population variance, 0 for fewer than two values)."""
    return float(np.var(y)) if len(y) > 1 else 0.0


def rsd(y: np.ndarray) -> float:
    """RSD of eq. 5: sqrt(Var(S) * N / (N - 1)) / mean, i.e. sample SD over |mean|."""
    n = len(y)
    if n < 2:
        return math.nan
    mu = float(np.mean(y))
    sd = math.sqrt(population_var(y) * n / (n - 1))
    return sd / abs(mu) if mu != 0 else (0.0 if sd == 0 else math.inf)


def conditional_reduction(g: np.ndarray, n_groups: int, q: np.ndarray, n_q: int,
                          y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per subset g (rows sharing the selected parameters' values): the variance reduction
    that splitting by q brings inside it (eq. 3), and the subset sizes.

    CPI_g = Var(S_g) - sum_j |S_gj|/|S_g| Var(S_gj) = sum_j |S_gj| (mean_gj - mean_g)^2 / |S_g|,
    computed in the second (between-means) form, which avoids cancellation.
    """
    cell = g * n_q + q
    m = n_groups * n_q
    cnt = np.bincount(cell, minlength=m).reshape(n_groups, n_q)
    sums = np.bincount(cell, weights=y, minlength=m).reshape(n_groups, n_q)
    ng = cnt.sum(axis=1)
    # Empty cells have cnt == 0, so their (meaningless) mean never counts; no NaN either.
    mc = sums / np.maximum(cnt, 1)
    mg = sums.sum(axis=1) / np.maximum(ng, 1)
    dev = mc - mg[:, None]
    red = (cnt * dev * dev).sum(axis=1) / np.maximum(ng, 1)
    return red, ng


def aggregate_cpi(red: np.ndarray, ng: np.ndarray, how: Aggregate) -> float:
    """Eq. 4 (max over the occurring subsets) or the size-weighted mean."""
    occ = ng > 0
    if not occ.any():
        return 0.0
    if how == "max":
        return float(red[occ].max())
    return float((red * ng).sum() / ng.sum())


def pi_all(codes: np.ndarray, nlev: np.ndarray, y: np.ndarray) -> np.ndarray:
    """PI (eq. 2) of every parameter."""
    g = np.zeros(len(y), dtype=np.int64)
    return candidate_scores(codes, nlev, range(codes.shape[1]), g, 1, y - y.mean())


def candidate_scores(codes: np.ndarray, nlev: np.ndarray, cols: Sequence[int],
                     g: np.ndarray, n_groups: int, y: np.ndarray,
                     aggregate: Aggregate = "max") -> np.ndarray:
    """CPI (eq. 3, aggregated by eq. 4 or the weighted mean) of each column in `cols` given
    the subsets `g`; PI (eq. 2) when there is one subset.

    All candidates share two `np.bincount` passes over (subset, candidate, value) cells,
    which is what keeps thousands of repeated selections cheap."""
    cols = list(cols)
    L = nlev[cols]
    C = int(L.sum())
    if n_groups * C > 4_000_000:  # very fine subsets: one candidate at a time bounds memory
        return np.array([aggregate_cpi(*conditional_reduction(g, n_groups, codes[:, j],
                                                              int(nlev[j]), y), aggregate)
                         for j in cols])
    off = np.concatenate([[0], np.cumsum(L)[:-1]]).astype(np.int64)
    cell = (g * C)[:, None] + (codes[:, cols] + off[None, :])
    m = n_groups * C
    cnt = np.bincount(cell.ravel(), minlength=m).reshape(n_groups, C)
    sums = np.bincount(cell.ravel(), weights=np.repeat(y, len(cols)),
                       minlength=m).reshape(n_groups, C)
    ng = np.bincount(g, minlength=n_groups)
    mg = np.bincount(g, weights=y, minlength=n_groups) / np.maximum(ng, 1)
    dev = sums / np.maximum(cnt, 1) - mg[:, None]  # empty cells have cnt 0: never count
    red = np.add.reduceat(cnt * dev * dev, off, axis=1) / np.maximum(ng, 1)[:, None]
    occ = ng > 0
    if aggregate == "max":
        return red[occ].max(axis=0)
    return (red * ng[:, None]).sum(axis=0) / ng.sum()


def _regroup(g: np.ndarray, n_groups: int, q: np.ndarray, n_q: int) -> tuple[np.ndarray, int]:
    """Refine the subsets by one more parameter; renumber when the key space grows large."""
    g2 = g * n_q + q
    n2 = n_groups * n_q
    if n2 > max(2 * len(g), 1024):
        _, g2 = np.unique(g2, return_inverse=True)
        g2 = g2.ravel().astype(np.int64)
        n2 = int(g2.max()) + 1 if len(g2) else 1
    return g2, n2


def greedy_order(codes: np.ndarray, nlev: np.ndarray, y: np.ndarray, steps: int,
                 aggregate: Aggregate = "max") -> list[tuple[int, float]]:
    """The first `steps` parameters of Algorithm 1 (no other stop rule): [(column, PI/CPI)].

    The lean loop the evaluation harness repeats thousands of times; ties go to the
    earlier column."""
    k = codes.shape[1]
    g = np.zeros(len(y), dtype=np.int64)
    n_groups = 1
    remaining = list(range(k))
    out: list[tuple[int, float]] = []
    y = y - y.mean() if len(y) else y  # centring keeps the bincount sums small
    for _ in range(min(steps, k)):
        sc = candidate_scores(codes, nlev, remaining, g, n_groups, y, aggregate)
        i = int(np.argmax(sc))
        best_j = remaining.pop(i)
        out.append((best_j, float(sc[i])))
        g, n_groups = _regroup(g, n_groups, codes[:, best_j], int(nlev[best_j]))
    return out


# --------------------------------------------------------------------------- stop rules
@dataclass(frozen=True)
class StopRule:
    """One stop rule: `top` (N parameters), `rsd` (best subset's RSD <= value) or `gain`
    (no remaining parameter reduces variance by more than `value` of the total)."""

    kind: Literal["top", "rsd", "gain"]
    value: float

    def __str__(self) -> str:
        return f"{self.kind}:{int(self.value) if self.kind == 'top' else self.value:g}"


_STOP_RE = re.compile(r"^\s*(top|rsd|gain)\s*[:=]\s*([0-9.eE+-]+)\s*(%?)\s*$")


def parse_stop(spec: str | Sequence[StopRule] | StopRule | None) -> list[StopRule]:
    """`"rsd:0.02"`, `"top:3"`, `"gain:0.01"` (a trailing % divides by 100), comma-combined."""
    if spec is None:
        return [StopRule("rsd", 0.02)]
    if isinstance(spec, StopRule):
        return [spec]
    if not isinstance(spec, str):
        return list(spec)
    rules = []
    for part in spec.split(","):
        m = _STOP_RE.match(part)
        if not m:
            raise AnalysisError(f"--stop: {part.strip()!r} is not one of top:N, rsd:X, gain:X")
        kind, num, pct = m.group(1), m.group(2), m.group(3)
        try:
            value = float(num) / (100.0 if pct else 1.0)
        except ValueError:
            raise AnalysisError(f"--stop: {part.strip()!r} has a malformed number") from None
        if kind == "top" and (value < 1 or value != int(value)):
            raise AnalysisError(f"--stop: {part.strip()!r} needs a whole number >= 1")
        if kind != "top" and not (0 <= value < math.inf):
            raise AnalysisError(f"--stop: {part.strip()!r} needs a non-negative number")
        rules.append(StopRule(kind, value))  # type: ignore[arg-type]
    return rules


# --------------------------------------------------------------------------- result
@dataclass
class Step:
    """One greedy step: the parameter chosen and the subset its best value leaves."""

    rank: int
    param: str
    importance: float            # PI for rank 1, CPI afterwards
    share: float                 # importance / Var(S) of the whole table
    best_values: dict[str, Any]  # best value combination of all parameters selected so far
    subset_size: int
    subset_mean: float
    subset_rsd: float
    candidates: dict[str, float]  # every remaining parameter's PI/CPI at this step


@dataclass
class ImportanceResult:
    """Carver's selection on one response. `.table()` / `.pi_table()` / `.plot()`."""

    response: str
    goal: Goal
    aggregate: Aggregate
    stop: list[StopRule]
    stop_reason: str
    steps: list[Step]
    pi: dict[str, float]
    variance: float
    mean: float
    rsd: float
    n_rows: int
    n_configs: int
    n_dropped: int
    noise_rsd: float             # median RSD of repeated runs within one configuration
    binned: dict[str, str]
    levels: dict[str, list[Any]]
    configs: pd.DataFrame

    @property
    def selected(self) -> list[str]:
        return [s.param for s in self.steps]

    def best_values(self) -> dict[str, Any]:
        """The recommended setting: the best value combination of all selected parameters."""
        return dict(self.steps[-1].best_values) if self.steps else {}

    def table(self) -> pd.DataFrame:
        """One row per selected parameter, in order (the numbers behind Figure 4).

        `best_value` is the parameter's value in the final recommended combination;
        `subset_*` describe the subset left by fixing the selected parameters at the best
        combination found at that step, spelled out in `step_values` (it can differ from
        the final one when a later parameter changes which combination is best)."""
        final = self.best_values()
        rows = [{"rank": s.rank, "param": s.param, "importance": s.importance,
                 "share": s.share, "best_value": final.get(s.param),
                 "subset_n": s.subset_size, "subset_mean": s.subset_mean,
                 "subset_rsd": s.subset_rsd,
                 "step_values": ", ".join(f"{k}={v}" for k, v in s.best_values.items()),
                 "binned": "yes" if s.param in self.binned else ""} for s in self.steps]
        cols = ["rank", "param", "importance", "share", "best_value", "subset_n",
                "subset_mean", "subset_rsd", "step_values", "binned"]
        return pd.DataFrame(rows, columns=cols)

    def pi_table(self) -> pd.DataFrame:
        """Every parameter's PI (eq. 2) and share of variance, largest first."""
        rows = [{"param": p, "pi": v, "share": v / self.variance if self.variance > 0 else 0.0,
                 "levels": len(self.levels[p]), "binned": self.binned.get(p, "")}
                for p, v in self.pi.items()]
        return pd.DataFrame(rows).sort_values("pi", ascending=False, kind="stable") \
            .reset_index(drop=True)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: `selected` (ordered, with `param`, `importance`, `best_value`), `pi`."""
        final = self.best_values()
        return {
            "response": self.response, "goal": self.goal, "aggregate": self.aggregate,
            "stop": [str(r) for r in self.stop], "stop_reason": self.stop_reason,
            "n_rows": self.n_rows, "n_configs": self.n_configs, "n_dropped": self.n_dropped,
            "mean": self.mean, "variance": self.variance, "rsd": self.rsd,
            "noise_rsd": self.noise_rsd, "binned": self.binned,
            "selected": [{"rank": s.rank, "param": s.param, "importance": s.importance,
                          "share": s.share, "best_value": final.get(s.param),
                          "step_best_values": s.best_values, "subset_size": s.subset_size,
                          "subset_mean": s.subset_mean, "subset_rsd": s.subset_rsd,
                          "candidates": s.candidates} for s in self.steps],
            "pi": dict(self.pi),
        }

    def plot(self) -> Figure:
        """Left: every parameter's share of variance (PI); right: mean and RSD of the subset
        left after each step (Figure 4's path), the RSD stop threshold dashed."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
        pt = self.pi_table()
        ax1.barh(pt["param"][::-1], pt["share"][::-1], color="tab:blue")
        ax1.set_xlabel("PI / Var(S)  (share of variance)")
        ax1.set_title(f"Parameter importance: {self.response}")
        xs = [0] + [s.rank for s in self.steps]
        means = [self.mean] + [s.subset_mean for s in self.steps]
        rsds = [self.rsd] + [s.subset_rsd for s in self.steps]
        ax2.plot(xs, means, "o-", color="tab:green", label="mean of subset")
        ax2.set_xticks(xs, ["all"] + [f"+{s.param}" for s in self.steps], rotation=30,
                       ha="right")
        ax2.set_ylabel(f"mean {self.response}")
        ax3 = ax2.twinx()
        ax3.plot(xs, [100 * r for r in rsds], "s--", color="tab:red", label="RSD")
        for r in self.stop:
            if r.kind == "rsd":
                ax3.axhline(100 * r.value, color="tab:red", lw=0.8, ls=":")
        ax3.set_ylabel("RSD of subset (%)")
        ax2.set_title("Fixing selected parameters at their best values")
        return fig


def importance(df: pd.DataFrame, response: str, params: Sequence[str] | None = None,
               stop: str | Sequence[StopRule] | StopRule | None = "rsd:0.02",
               aggregate: Aggregate = "max", goal: Goal = "maximize",
               max_levels: int = 10, bins: int = 4, min_support: int = 2,
               source: str = "results") -> ImportanceResult:
    """Carver's greedy selection (Algorithm 1) on a results table.

    `goal` says which subset is "best" (highest or lowest mean). Best subsets are chosen
    among those with at least `min_support` configurations (when any has), so that one
    lucky configuration does not make a subset "best" with an undefined RSD.
    """
    if aggregate not in ("max", "mean"):
        raise AnalysisError(f"aggregate {aggregate!r} must be 'max' or 'mean'")
    if goal not in ("maximize", "minimize"):
        raise AnalysisError(f"goal {goal!r} must be 'maximize' or 'minimize'")
    rules = parse_stop(stop)
    enc = encode(df, response, params, max_levels=max_levels, bins=bins, source=source)
    return select(enc, response, rules, aggregate, goal, min_support)


def select(enc: Encoded, response: str, rules: list[StopRule], aggregate: Aggregate = "max",
           goal: Goal = "maximize", min_support: int = 2) -> ImportanceResult:
    """Algorithm 1 on already encoded data, with the full per-step bookkeeping."""
    y = enc.y
    nlev = enc.nlev
    n, k = enc.codes.shape
    total_var = population_var(y)
    mean_all = float(np.mean(y))
    yc = y - mean_all
    pis = pi_all(enc.codes, nlev, yc)
    pi = {p: float(v) for p, v in zip(enc.params, pis)}

    top_n = min((int(r.value) for r in rules if r.kind == "top"), default=k)
    rsd_max = min((r.value for r in rules if r.kind == "rsd"), default=None)
    gain_min = max((r.value for r in rules if r.kind == "gain"), default=None)
    tiny = 1e-12 * total_var if total_var > 0 else 0.0

    steps: list[Step] = []
    reason = "every parameter selected"
    rsd_all = rsd(y)
    g = np.zeros(n, dtype=np.int64)
    n_groups = 1
    remaining = list(range(k))
    if rsd_max is not None and rsd_all <= rsd_max:
        reason = f"RSD of the whole table {rsd_all:.4g} <= {rsd_max:g}: nothing to select"
        remaining = []
    while remaining:
        if len(steps) >= top_n:
            reason = f"top {top_n} selected"
            break
        sc = pis[remaining] if not steps else candidate_scores(
            enc.codes, nlev, remaining, g, n_groups, yc, aggregate)
        cand = {enc.params[j]: float(v) for j, v in zip(remaining, sc)}
        best_j, best_v = remaining[int(np.argmax(sc))], float(np.max(sc))
        if best_v <= tiny:
            reason = "no remaining parameter reduces variance"
            break
        share = best_v / total_var if total_var > 0 else 0.0
        if gain_min is not None and share <= gain_min:
            reason = (f"best remaining parameter {enc.params[best_j]!r} reduces variance by "
                      f"{share:.4g} <= {gain_min:g} of the total")
            break
        remaining.remove(best_j)
        g, n_groups = _regroup(g, n_groups, enc.codes[:, best_j], int(nlev[best_j]))
        chosen = [s.param for s in steps] + [enc.params[best_j]]
        rows = _best_subset(g, n_groups, y, goal, min_support)
        first = rows[0]
        best_values = {p: enc.levels[enc.params.index(p)][enc.codes[first, enc.params.index(p)]]
                       for p in chosen}
        sub = y[rows]
        steps.append(Step(len(steps) + 1, enc.params[best_j], best_v, share, best_values,
                          len(rows), float(sub.mean()), rsd(sub), cand))
        r = steps[-1].subset_rsd
        if rsd_max is not None and not math.isnan(r) and r <= rsd_max:
            reason = f"RSD of the best subset {r:.4g} <= {rsd_max:g}"
            break
    else:
        if steps and len(steps) == k:
            reason = "every parameter selected"

    spread = enc.configs["std"].to_numpy() / np.abs(enc.configs[response].to_numpy())
    spread = spread[np.isfinite(spread)]
    return ImportanceResult(
        response=response, goal=goal, aggregate=aggregate, stop=rules, stop_reason=reason,
        steps=steps, pi=pi, variance=total_var, mean=mean_all, rsd=rsd_all,
        n_rows=enc.n_rows, n_configs=n, n_dropped=enc.n_dropped,
        noise_rsd=float(np.median(spread)) if len(spread) else math.nan,
        binned=dict(enc.binned), levels=dict(zip(enc.params, enc.levels)),
        configs=enc.configs)


def _best_subset(g: np.ndarray, n_groups: int, y: np.ndarray, goal: Goal,
                 min_support: int) -> np.ndarray:
    """Rows of the subset with the best mean among those with >= min_support rows."""
    cnt = np.bincount(g, minlength=n_groups)
    sums = np.bincount(g, weights=y, minlength=n_groups)
    ok = cnt >= min_support
    if not ok.any():
        ok = cnt > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(ok, sums / np.maximum(cnt, 1), np.nan)
    best = int(np.nanargmax(means) if goal == "maximize" else np.nanargmin(means))
    return np.flatnonzero(g == best)
