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

Repeated runs of one configuration are averaged first (as the paper does); the spread of
truly repeated configurations (identical raw values, before binning) is summarised as
`noise_rsd` (NaN when nothing was repeated). Numeric parameters with
more than `max_levels` distinct values, or fewer than two configurations per value, are
binned into quantile strata (`binned` says so).

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
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence

import numpy as np

from ..errors import AnalysisError
from ..fileio import BOOKKEEPING
from ..jsonutil import plain, to_jsonable
from ..result_shape import Result
from .coded import CodedTable, dense_ids, read_coded_csv

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure

Aggregate = Literal["max", "mean"]
Goal = Literal["maximize", "minimize"]

#: Whether a column is a measurement (never a parameter); None: the columns storlab's runners
#: declare (`storlab.metrics.is_metric`, also `storlab.campaign.runners.is_metric`).
MetricTest = Callable[[str], bool]


# --------------------------------------------------------------------------- encoding
@dataclass
class Encoded:
    """A results table reduced to one row per configuration, parameters as integer codes."""

    params: list[str]
    codes: np.ndarray            # (n_configs, k) int64, code of each parameter's value
    levels: list[list[Any]]      # value labels per parameter, indexed by code
    y: np.ndarray                # mean response per configuration
    std: np.ndarray              # sample SD of its runs per configuration (NaN: one run)
    n_runs: np.ndarray           # runs per configuration
    response: str
    binned: dict[str, str] = field(default_factory=dict)
    n_rows: int = 0
    n_dropped: int = 0
    held: dict[str, Any] = field(default_factory=dict)
    #: Distinct configurations by their raw parameter values (before any binning), and the
    #: median RSD of the runs of those measured more than once (NaN: no repeats).
    n_raw_configs: int = 0
    noise_rsd: float = math.nan
    n_repeated: int = 0

    @property
    def nlev(self) -> np.ndarray:
        return np.array([len(lv) for lv in self.levels], dtype=np.int64)

    @cached_property
    def configs(self) -> pd.DataFrame:
        """Parameter values + mean, std, n_runs per configuration (made when first asked
        for: the selection itself needs only the codes)."""
        import pandas as pd

        configs = pd.DataFrame({p: np.asarray(self.levels[j], dtype=object)[self.codes[:, j]]
                                for j, p in enumerate(self.params)})
        configs[self.response] = self.y
        configs["std"] = self.std
        configs["n_runs"] = self.n_runs
        return configs


def encode(df: pd.DataFrame, response: str, params: Sequence[str] | None = None,
           max_levels: int = 10, bins: int = 4, source: str = "results",
           is_metric: MetricTest | None = None) -> Encoded:
    """Validate, bin numeric many-valued parameters, code values, average repeated runs."""
    import pandas as pd

    params = _parameters(df, response, params, max_levels, source, is_metric)
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
    # A response only some runs have (read latency where half the runs write): the
    # analysis is of those runs, and a parameter that varies in the table but is constant
    # on them (rw=read) explains nothing there; it is left out and named, not ranked last.
    held: dict[str, Any] = {}
    if n_dropped:
        held = {p: plain(data[p].iloc[0]) for p in params
                if data[p].nunique(dropna=False) == 1 and df[p].nunique(dropna=False) > 1}
        params = [p for p in params if p not in held]
        if not params:
            raise AnalysisError(f"{source}: {response!r} is present on {int(keep.sum())} of "
                                f"{len(df)} rows, where every parameter is constant "
                                f"({', '.join(f'{k}={v}' for k, v in held.items())})")
        data = data[params]

    # One factorisation per column serves the raw configurations and the codes. Repeats
    # are runs of the same raw configuration, before binning: two distinct configurations
    # that fall into the same strata are two cells of the method's averaging, not a
    # repeat, and their difference is no run-to-run noise.
    factors = [pd.factorize(data[p], sort=True, use_na_sentinel=False) for p in params]
    cols = [c.astype(np.int64, copy=False) for c, _ in factors]
    raw = _raw_configs(cols, [len(u) for _, u in factors], y_rows)
    n_raw = raw[1]

    levels: list[list[Any]] = []
    binned: dict[str, str] = {}
    for j, p in enumerate(params):
        col = data[p]
        labels: list[Any] = [plain(v) for v in factors[j][1]]
        if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
            nu = col.nunique(dropna=True)
            if _to_bin(nu, n_raw, max_levels, bins):
                cut = pd.qcut(col, q=bins, duplicates="drop")
                binned[p] = (f"{nu} distinct values"
                             + (f" among {n_raw} configurations" if nu <= max_levels else "")
                             + f" binned into {len(cut.cat.categories)} quantile strata")
                c = cut.cat.codes.to_numpy().astype(np.int64)
                labels = [f"[{iv.left:.4g}, {iv.right:.4g}]" for iv in cut.cat.categories]
                if (c < 0).any():  # NaN parameter values become their own stratum
                    c = np.where(c < 0, len(labels), c)
                    labels.append("NA")
                cols[j] = c
        levels.append(labels)
    return _averaged(params, cols, levels, binned, y_rows, raw, response, n_dropped, held)


def encode_coded(table: CodedTable, response: str, params: Sequence[str] | None = None,
                 max_levels: int = 10, bins: int = 4, source: str = "results",
                 is_metric: MetricTest | None = None) -> Encoded | None:
    """`encode` for a table `read_coded_csv` read, without pandas; None when the table
    needs what only `encode` does (a response missing or not a number on some rows, a
    many-valued numeric parameter to bin)."""
    params = _parameters(table, response, params, max_levels, source, is_metric)
    ycol = table.columns[response]
    if not ycol.numeric:
        return None
    y_rows = ycol.floats()
    chosen = [table.columns[p] for p in params]
    if not np.isfinite(y_rows).all() or any(c.codes is None for c in chosen):
        return None
    cols = [c.codes for c in chosen]
    raw = _raw_configs(cols, [len(c.values) for c in chosen], y_rows)  # type: ignore[misc]
    if any(c.numeric and _to_bin(len(c.values), raw[1], max_levels, bins) for c in chosen):
        return None
    return _averaged(params, cols, [list(c.values) for c in chosen], {}, y_rows,  # type: ignore[arg-type]
                     raw, response, 0, {})


def _parameters(table: Any, response: str, params: Sequence[str] | None, max_levels: int,
                source: str, is_metric: MetricTest | None = None) -> list[str]:
    """The parameter columns (named, or `default_params`), checked against the table's
    columns (a DataFrame's or a CodedTable's)."""
    if response not in table.columns:
        raise AnalysisError(f"{source}: response column {response!r} not found "
                            f"(columns: {', '.join(map(str, table.columns))})")
    if params is None:
        params = default_params(table, response, max_levels, source, is_metric)
    params = list(params)
    if not params:
        raise AnalysisError(f"{source}: no parameter columns to analyse (pass --params)")
    for p in params:
        if p not in table.columns:
            raise AnalysisError(f"{source}: parameter column {p!r} not found")
        if p == response:
            raise AnalysisError(f"{source}: {p!r} is the response, not a parameter")
    if len(set(params)) != len(params):
        raise AnalysisError(f"{source}: parameter listed twice in {', '.join(params)}")
    return params


def _to_bin(nu: int, n_raw: int, max_levels: int, bins: int) -> bool:
    """Whether a numeric parameter with `nu` distinct values among `n_raw` configurations
    is binned: more than `max_levels` values, or fewer than two configurations per value
    (a small space-filling sample, e.g. a tuning campaign's screening). Each value then
    holds one configuration and "explains" it, so its PI is nearly the whole variance
    whatever its effect (a no-effect factor came first on 10 LHS runs)."""
    return nu > max_levels or (nu > bins and 2 * nu > n_raw)


def _raw_configs(cols: list[np.ndarray], sizes: list[int], y_rows: np.ndarray
                 ) -> tuple[np.ndarray, int, tuple[np.ndarray, np.ndarray, np.ndarray],
                            float, int]:
    """The raw configurations (before binning): each row's id, how many, their
    (count, mean, squared deviations), the median RSD of the repeated ones and their
    number."""
    raw_inv, n_raw = dense_ids(*combine(cols, sizes))
    raw_stats = group_stats(raw_inv, n_raw, y_rows)
    return (raw_inv, n_raw, raw_stats, *repeat_noise(*raw_stats))


def _averaged(params: list[str], cols: list[np.ndarray], levels: list[list[Any]],
              binned: dict[str, str], y_rows: np.ndarray, raw: tuple[Any, ...],
              response: str, n_dropped: int, held: dict[str, Any]) -> Encoded:
    """The Encoded table: one row per cell (configuration after binning)."""
    raw_inv, n_raw, raw_stats, noise, n_rep = raw
    # Average repeated runs per configuration (paper, sec. 5.1); keep their spread. With
    # nothing binned, the cells are the raw configurations, already counted.
    if binned:
        inv, n_cfg = dense_ids(*combine(cols, [len(lv) for lv in levels]))
        cnt, mean, ss = group_stats(inv, n_cfg, y_rows)
    else:
        inv, n_cfg, (cnt, mean, ss) = raw_inv, n_raw, raw_stats
    var = ss / np.maximum(cnt - 1, 1)
    std = np.where(cnt > 1, np.sqrt(var), np.nan)
    first = np.empty(n_cfg, dtype=np.int64)
    first[inv] = np.arange(len(inv))  # one row of each configuration (they share codes)
    # Column-major: the selection reads each candidate's column whole.
    ccodes = np.empty((n_cfg, len(params)), dtype=np.int64, order="F")
    for j, c in enumerate(cols):
        ccodes[:, j] = c[first]
    return Encoded(params, ccodes, levels, mean, std, cnt.astype(np.int64), response, binned,
                   len(y_rows), n_dropped, held, n_raw, noise, n_rep)


def group_stats(inv: np.ndarray, n: int, y: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group of `inv` (ids 0..n-1): row count (float), mean of y, and the sum of
    squared deviations from that mean."""
    cnt = np.bincount(inv, minlength=n).astype(float)
    mean = np.bincount(inv, y, minlength=n) / cnt
    dev = y - mean[inv]
    return cnt, mean, np.bincount(inv, dev * dev, minlength=n)


def repeat_noise(cnt: np.ndarray, mean: np.ndarray, ss: np.ndarray) -> tuple[float, int]:
    """The median RSD (sample SD over |mean|) of the runs of each configuration run more
    than once (NaN when none is), and how many configurations were repeated."""
    sd = np.sqrt(ss / np.maximum(cnt - 1, 1))
    rep = cnt > 1
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = sd[rep] / np.abs(mean[rep])
    spread = spread[np.isfinite(spread)]
    return _median(spread) if len(spread) else math.nan, int(rep.sum())


def _median(v: np.ndarray) -> float:
    """`np.median` of finite values, without its NaN check (which imports numpy.ma: 0.02 s
    of the command's start-up)."""
    # kept over statistics.median (its import ~4 ms, 3.7x slower at 300 values) and
    # np.median (numpy.ma ~10-20 ms): benchmarks/bench_median.py
    k = len(v) // 2
    if len(v) % 2:
        return float(np.partition(v, k)[k])
    part = np.partition(v, (k - 1, k))
    return float((part[k - 1] + part[k]) / 2)


def default_params(df: pd.DataFrame | CodedTable, response: str, max_levels: int = 10,
                   source: str = "results", is_metric: MetricTest | None = None) -> list[str]:
    """Parameter columns when none are named (neither a list nor a space): every column
    except the response, storlab's bookkeeping columns and the measurement columns
    `is_metric` names (None: storlab's runners' declared columns, `storlab.metrics.is_metric`;
    pass `lambda name: False` to read every column as a possible parameter). A numeric column with more than `max_levels` distinct values could be a
    continuous parameter or another measurement; rather than guess, that is an error asking
    for the parameters (name them, or give the space)."""
    if is_metric is None:
        from ..metrics import is_metric
    out, unclear = [], []
    for c in df.columns:
        name = str(c)
        if c == response or name in BOOKKEEPING or name.startswith("_") or is_metric(name):
            continue
        if _many_numbers(df, c, max_levels):
            unclear.append(name)
            continue
        out.append(c)
    if unclear:
        shown = ", ".join(unclear[:6]) + (f" and {len(unclear) - 6} more" if len(unclear) > 6
                                          else "")
        raise AnalysisError(f"{source}: cannot tell whether {shown} "
                            f"{'is a parameter or a measurement' if len(unclear) == 1 else 'are parameters or measurements'} "
                            "(many distinct numbers): name the parameters with --params, or "
                            "give the space with --space")
    return out


def _many_numbers(table: pd.DataFrame | CodedTable, name: Any, max_levels: int) -> bool:
    """A numeric column with more than `max_levels` distinct values."""
    if isinstance(table, CodedTable):
        col = table.columns[name]
        return col.numeric and (col.codes is None or len(col.values) > max_levels)
    import pandas as pd

    col = table[name]
    return (pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
            and col.nunique() > max_levels)


def combine(codes: np.ndarray | Sequence[np.ndarray], nlev: Sequence[int] | np.ndarray
            ) -> tuple[np.ndarray, int]:
    """One int64 key per row for the joint value of several coded columns (a 2-D array,
    one column per parameter, or a list of 1-D columns), and the size of the key space."""
    cols = list(codes.T) if isinstance(codes, np.ndarray) else list(codes)
    n = codes.shape[0] if isinstance(codes, np.ndarray) else len(cols[0]) if cols else 0
    if not cols:
        return np.zeros(n, dtype=np.int64), 1
    total = 1
    for L in nlev:
        total *= max(int(L), 1)
    if total < 2**62:
        key = np.zeros(n, dtype=np.int64)
        for c, L in zip(cols, nlev):
            key *= max(int(L), 1)
            key += c
        return key, total
    # Too many joint values for a mixed-radix key: number the distinct rows instead.
    _, inv = np.unique(np.column_stack(cols), axis=0, return_inverse=True)
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
    # One pair of bincounts per candidate over its (subset, value) cells, placed side by
    # side: the same sums, in the same row order, as one pass over every candidate's cells
    # at once, without the rows x candidates temporaries that pass needs.
    cnt = np.empty((n_groups, C), dtype=np.int64)
    sums = np.empty((n_groups, C))
    for j, o, Lj in zip(cols, off, L):
        Lj = int(Lj)
        cell = g * Lj + codes[:, j] if n_groups > 1 else codes[:, j]
        cnt[:, o:o + Lj] = np.bincount(cell, minlength=n_groups * Lj).reshape(n_groups, Lj)
        sums[:, o:o + Lj] = np.bincount(cell, weights=y,
                                        minlength=n_groups * Lj).reshape(n_groups, Lj)
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
        g2, n2 = dense_ids(g2, n2) if len(g2) else (g2, 1)
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
    """One greedy step: the parameter chosen and the subset it leaves.

    `subset_*` describe the configurations that have the *final* recommended values of the
    parameters selected up to this step (so the path ends at the recommendation and every
    row describes the same combination the "best values" name); `best_values` is the
    combination that was best when this step was taken (it can differ from the final one
    when a later parameter changes which combination is best)."""

    rank: int
    param: str
    importance: float            # PI for rank 1, CPI afterwards (the selection criterion)
    share: float                 # share of Var(S) this step explains (0..1, adds up)
    best_values: dict[str, Any]  # best value combination of all parameters selected so far
    subset_size: int
    subset_mean: float
    subset_rsd: float
    candidates: dict[str, float]  # every remaining parameter's PI/CPI at this step


@dataclass
class ImportanceResult(Result):
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
    n_configs: int               # distinct configurations (raw values, before binning)
    n_dropped: int
    noise_rsd: float             # median RSD of repeated runs of one raw configuration
    binned: dict[str, str]
    levels: dict[str, list[Any]]
    #: The encoded table the selection ran on (`configs` comes from it).
    encoded: Encoded = field(repr=False, compare=False)
    #: Why the data are too few for a selection to mean anything ("" when they suffice):
    #: a saturated table (no more configurations than a main-effects model has
    #: coefficients) separates nothing from noise. The PI table is still computed; a
    #: selection from such data must not be presented as a finding.
    too_few: str = ""
    #: Parameters constant on the rows that have the response (when only some have it),
    #: with their value there: left out of the ranking.
    held: dict[str, Any] = field(default_factory=dict)
    #: Cells the method averages: configurations after binning many-valued numeric
    #: parameters (= n_configs when nothing is binned).
    n_cells: int = 0
    #: Configurations measured more than once (what `noise_rsd` is computed from).
    n_repeated: int = 0
    #: What the table is (e.g. only a tuning campaign's screening runs), "" when all rows.
    source_note: str = ""

    @property
    def configs(self) -> pd.DataFrame:
        """One row per configuration: parameter values, mean response, std, n_runs."""
        return self.encoded.configs

    @property
    def noise_note(self) -> str:
        """The run-to-run noise, or that it is unknown (no configuration was repeated)."""
        if self.n_repeated == 0:
            return "no repeated configuration: run-to-run noise unknown"
        return (f"median run-to-run RSD {self.noise_rsd:.2%} "
                f"(over {self.n_repeated} repeated configurations)")

    @property
    def cells_note(self) -> str:
        """How many cells the binning leaves, "" when nothing is binned."""
        if not self.binned:
            return ""
        q = sorted({len(self.levels[p]) for p in self.binned})
        return (f"after binning continuous factors into {'/'.join(map(str, q))} levels, "
                f"{self.n_cells} cells")

    @property
    def subset_note(self) -> str:
        """"" when every row has the response; else on how many it was analysed, and the
        parameters those rows hold constant."""
        if not self.n_dropped:
            return ""
        note = (f"{self._label()}: analysed on the {self.n_rows} of "
                f"{self.n_rows + self.n_dropped} runs that have it")
        if self.held:
            note += ("; constant there, so not ranked: "
                     + ", ".join(f"{k}={v}" for k, v in self.held.items()))
        return note

    @property
    def selected(self) -> list[str]:
        return [s.param for s in self.steps]

    def best_values(self) -> dict[str, Any]:
        """The recommended setting: the best value combination of all selected parameters."""
        return dict(self.steps[-1].best_values) if self.steps else {}

    def to_frame(self) -> pd.DataFrame:
        """One row per selected parameter, in order (the numbers behind Figure 4).

        `best_value` is the parameter's value in the final recommended combination;
        `subset_*` describe the subset left by fixing the selected parameters at the best
        combination found at that step, spelled out in `step_values` (it can differ from
        the final one when a later parameter changes which combination is best)."""
        import pandas as pd

        cols = ["rank", "param", "importance", "share", "best_value", "subset_n",
                "subset_mean", "subset_rsd", "binned"]
        return pd.DataFrame(self.step_rows(), columns=cols)

    def step_rows(self) -> list[dict[str, Any]]:
        """`to_frame`'s rows as dicts (what the command prints, without pandas)."""
        final = self.best_values()
        return [{"rank": s.rank, "param": s.param, "importance": s.importance,
                 "share": s.share, "best_value": final.get(s.param),
                 "subset_n": s.subset_size, "subset_mean": s.subset_mean,
                 "subset_rsd": s.subset_rsd,
                 "binned": "yes" if s.param in self.binned else ""} for s in self.steps]

    def pi_table(self) -> pd.DataFrame:
        """Every parameter's PI (eq. 2) and share of variance, largest first."""
        import pandas as pd

        return pd.DataFrame(self.pi_rows())

    def pi_rows(self) -> list[dict[str, Any]]:
        """`pi_table`'s rows as dicts, largest PI first (ties in parameter order)."""
        rows = [{"param": p, "pi": v, "share": v / self.variance if self.variance > 0 else 0.0,
                 "levels": len(self.levels[p]), "binned": self.binned.get(p, "")}
                for p, v in self.pi.items()]
        return sorted(rows, key=lambda r: -r["pi"])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: `selected` (ordered, with `param`, `importance`, `best_value`), `pi`."""
        final = self.best_values()
        return to_jsonable({
            "response": self.response, "goal": self.goal, "aggregate": self.aggregate,
            "stop": [str(r) for r in self.stop], "stop_reason": self.stop_reason,
            "n_rows": self.n_rows, "n_configs": self.n_configs, "n_dropped": self.n_dropped,
            "mean": self.mean, "variance": self.variance, "rsd": self.rsd,
            "noise_rsd": self.noise_rsd, "n_repeated": self.n_repeated,
            "noise_note": self.noise_note, "n_cells": self.n_cells,
            "cells_note": self.cells_note, "source_note": self.source_note,
            "binned": self.binned, "too_few": self.too_few,
            "held": dict(self.held),
            "selected": [{"rank": s.rank, "param": s.param, "importance": s.importance,
                          "share": s.share, "best_value": final.get(s.param),
                          "step_best_values": s.best_values, "subset_size": s.subset_size,
                          "subset_mean": s.subset_mean, "subset_rsd": s.subset_rsd,
                          "candidates": s.candidates} for s in self.steps],
            "pi": dict(self.pi),
        })

    PLOT_KINDS = ("all", "cpi", "subsets", "path", "pi")
    ERROR = AnalysisError

    def plot(self, kind: str | None = None, unit: str | None = None) -> Figure:
        """The paper's figures for this response. `all` (the default, what `storlab
        importance --plot` writes): Figure 2 (PI, then CPI, of every parameter at each
        greedy step, as bars), Figure 3 (mean against RSD of every subset fixed by one or
        two parameters) and the selection path (mean and RSD left after each step).
        `cpi`, `subsets` and `path` draw one of them alone; `pi` the PI shares only.
        `unit` is the response's unit (guessed from its name when not given)."""
        from ..plotstyle import styled
        from .plots import importance_figure

        kind = self.plot_kind(kind)
        with styled():
            fig = importance_figure(self, kind, unit)
            if self.subset_note and kind != "all":  # "all" says it under its title
                fig.text(0.5, 0.005, self.subset_note, ha="center", va="bottom",
                         fontsize=8, color="0.3")
            return fig

    def _label(self) -> str:
        from ..plotstyle import metric_name

        return metric_name(self.response)

    def subsets(self, max_fixed: int = 2) -> pd.DataFrame:
        """Figure 3's points: every subset of configurations fixed by the values of one or
        two (up to `max_fixed`) parameters, with its size, mean and RSD of the response
        (sets of a single configuration have no RSD and are left out)."""
        import itertools

        import pandas as pd

        params = list(self.pi)
        rows = []
        y = self.configs[self.response].to_numpy(dtype=float)
        for n in range(1, max_fixed + 1):
            for combo in itertools.combinations(params, n):
                keys = self.configs[list(combo)].astype(str)
                by = list(combo) if n > 1 else combo[0]  # a one-name list warns in pandas 3
                for vals, idx in keys.groupby(by, sort=False).groups.items():
                    yy = y[self.configs.index.get_indexer(idx)]
                    if len(yy) < 2:
                        continue
                    vals = vals if isinstance(vals, tuple) else (vals,)
                    rows.append({"n_fixed": n,
                                 "fixed": ", ".join(f"{p}={v}" for p, v in zip(combo, vals)),
                                 "size": len(yy), "mean": float(np.mean(yy)), "rsd": rsd(yy)})
        return pd.DataFrame(rows, columns=["n_fixed", "fixed", "size", "mean", "rsd"])



def importance(df: pd.DataFrame, response: str, params: Sequence[str] | None = None,
               stop: str | Sequence[StopRule] | StopRule | None = "rsd:0.02",
               aggregate: Aggregate = "max", goal: Goal = "maximize",
               max_levels: int = 10, bins: int = 4, min_support: int = 2,
               source: str = "results", is_metric: MetricTest | None = None
               ) -> ImportanceResult:
    """Carver's greedy selection (Algorithm 1) on a results table.

    `goal` says which subset is "best" (highest or lowest mean). Best subsets are chosen
    among those with at least `min_support` configurations (when any has), so that one
    lucky configuration does not make a subset "best" with an undefined RSD. Without
    `params`, the parameters are every column but the response, the bookkeeping and the
    columns `is_metric` calls measurements (`default_params`).
    """
    rules = _checked(stop, aggregate, goal)
    enc = encode(df, response, params, max_levels=max_levels, bins=bins, source=source,
                 is_metric=is_metric)
    return select(enc, response, rules, aggregate, goal, min_support)


def importance_csv(path: str | Path, response: str, params: Sequence[str] | None = None,
                   stop: str | Sequence[StopRule] | StopRule | None = "rsd:0.02",
                   aggregate: Aggregate = "max", goal: Goal = "maximize",
                   max_levels: int = 10, bins: int = 4, min_support: int = 2,
                   source: str = "results", is_metric: MetricTest | None = None
                   ) -> ImportanceResult | None:
    """`importance` on a CSV file read without pandas (`read_coded_csv`, the `storlab
    importance` command's fast path), or None when the file or the analysis needs pandas:
    then read it with `storlab.fileio.read_table` and call `importance`."""
    table = read_coded_csv(path, {response}, max_levels)
    if table is None:
        return None
    rules = _checked(stop, aggregate, goal)
    enc = encode_coded(table, response, params, max_levels, bins, source, is_metric)
    return None if enc is None else select(enc, response, rules, aggregate, goal, min_support)


def _checked(stop: str | Sequence[StopRule] | StopRule | None, aggregate: str,
             goal: str) -> list[StopRule]:
    """The stop rules, after checking the aggregate and the goal."""
    if aggregate not in ("max", "mean"):
        raise AnalysisError(f"aggregate {aggregate!r} must be 'max' or 'mean'")
    if goal not in ("maximize", "minimize"):
        raise AnalysisError(f"goal {goal!r} must be 'maximize' or 'minimize'")
    return parse_stop(stop)


def select(enc: Encoded, response: str, rules: list[StopRule], aggregate: Aggregate = "max",
           goal: Goal = "maximize", min_support: int = 2) -> ImportanceResult:
    """Algorithm 1 on already encoded data, with the full per-step bookkeeping."""
    y = enc.y
    nlev = enc.nlev
    n, k = enc.codes.shape
    total_var = population_var(y)
    mean_all = float(np.mean(y))
    yc = y - mean_all
    codes = np.asfortranarray(enc.codes)  # each candidate's column read whole, contiguous
    pis = pi_all(codes, nlev, yc)
    pi = {p: float(v) for p, v in zip(enc.params, pis)}

    top_n = min((int(r.value) for r in rules if r.kind == "top"), default=k)
    rsd_max = min((r.value for r in rules if r.kind == "rsd"), default=None)
    gain_min = max((r.value for r in rules if r.kind == "gain"), default=None)
    tiny = 1e-12 * total_var if total_var > 0 else 0.0

    steps: list[Step] = []
    final_row = 0
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
            codes, nlev, remaining, g, n_groups, yc, aggregate)
        cand = {enc.params[j]: float(v) for j, v in zip(remaining, sc)}
        best_j, best_v = remaining[int(np.argmax(sc))], float(np.max(sc))
        if best_v <= tiny:
            reason = "no remaining parameter reduces variance"
            break
        gain = best_v / total_var if total_var > 0 else 0.0
        if gain_min is not None and gain <= gain_min:
            reason = (f"best remaining parameter {enc.params[best_j]!r} reduces variance by "
                      f"{gain:.4g} <= {gain_min:g} of the total")
            break
        # The share it explains: the drop in pooled within-subset variance (what the mean
        # aggregate scores). The max aggregate's CPI is one subset's reduction and can
        # exceed the whole table's variance, so it is no share.
        if aggregate == "mean" or not steps:
            explained = best_v
        else:
            red, ng = conditional_reduction(g, n_groups, codes[:, best_j],
                                            int(nlev[best_j]), yc)
            explained = aggregate_cpi(red, ng, "mean")
        share = min(explained / total_var, 1.0) if total_var > 0 else 0.0
        g2, n2 = _regroup(g, n_groups, codes[:, best_j], int(nlev[best_j]))
        rows, supported = _best_subset(g2, n2, y, goal, min_support)
        if not supported:
            reason = (f"adding {enc.params[best_j]!r} would leave no value combination with "
                      f"{min_support} or more configurations: too few to go on")
            break
        if steps:
            # The path is nested: the next best values refine the best subset so far. When
            # no refinement of it keeps min_support configurations, the "best" would jump to
            # a poorly-supported corner elsewhere (on a 12-run PB: the worst level of the top
            # factor, the only pair left), so the selection stops here instead.
            inside = g == g[final_row]
            if not (np.bincount(g2[inside], minlength=n2) >= min_support).any():
                held = ", ".join(f"{p}={v}" for p, v in steps[-1].best_values.items())
                reason = (f"adding {enc.params[best_j]!r} would split the best subset so far "
                          f"({held}) into value combinations of fewer than {min_support} "
                          "configurations: too few to go on")
                break
        remaining.remove(best_j)
        g, n_groups = g2, n2
        chosen = [s.param for s in steps] + [enc.params[best_j]]
        first = final_row = int(rows[0])
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

    _final_path(enc, steps, final_row)
    return ImportanceResult(
        response=response, goal=goal, aggregate=aggregate, stop=rules, stop_reason=reason,
        steps=steps, pi=pi, variance=total_var, mean=mean_all, rsd=rsd_all,
        n_rows=enc.n_rows, n_configs=enc.n_raw_configs, n_cells=n, n_dropped=enc.n_dropped,
        noise_rsd=enc.noise_rsd, n_repeated=enc.n_repeated,
        binned=dict(enc.binned), levels=dict(zip(enc.params, enc.levels)),
        encoded=enc, too_few=too_few(n, nlev), held=dict(enc.held))


def too_few(n_configs: int, nlev: np.ndarray) -> str:
    """Why `n_configs` configurations are too few for a selection over parameters with
    `nlev` levels, or "". A main-effects model has 1 + sum(L - 1) coefficients; with no
    more configurations than that (a saturated design, e.g. 11 factors in a 12-run
    Plackett-Burman) every configuration is explained exactly, no degree of freedom is left
    to tell an effect from noise, and the conditional steps rest on one or two
    configurations each."""
    need = 1 + int(np.maximum(nlev - 1, 0).sum())
    if n_configs > need:
        return ""
    return (f"{n_configs} configurations for {len(nlev)} parameters: a main-effects model "
            f"alone has {need} coefficients, so the table is saturated and a greedy "
            f"selection would rest on one or two configurations per step; measure at least "
            f"{need + 1} (more for the conditional steps), or read only the PI of each "
            "parameter")


def _final_path(enc: Encoded, steps: list[Step], final_row: int) -> None:
    """Each step's subset_* for the final best values of the parameters selected so far
    (`final_row` is a configuration that has them)."""
    y = enc.y
    mask = np.ones(len(y), dtype=bool)
    for st_ in steps:
        j = enc.params.index(st_.param)
        mask &= enc.codes[:, j] == enc.codes[final_row, j]
        sub = y[mask]
        st_.subset_size = int(mask.sum())
        st_.subset_mean = float(sub.mean()) if len(sub) else math.nan
        st_.subset_rsd = rsd(sub)


def _best_subset(g: np.ndarray, n_groups: int, y: np.ndarray, goal: Goal,
                 min_support: int) -> tuple[np.ndarray, bool]:
    """Rows of the subset with the best mean among those with >= min_support rows, and
    whether any subset had that many (else the best of all, which the caller may refuse)."""
    cnt = np.bincount(g, minlength=n_groups)
    sums = np.bincount(g, weights=y, minlength=n_groups)
    ok = cnt >= min_support
    supported = bool(ok.any())
    if not supported:
        ok = cnt > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(ok, sums / np.maximum(cnt, 1), np.nan)
    best = int(np.nanargmax(means) if goal == "maximize" else np.nanargmin(means))
    return np.flatnonzero(g == best), supported
