"""Effects and ANOVA for two-level designs (full, fractional, Plackett-Burman, with or
without center points and replicates).

An effect is the change in mean response from a term's -1 to its +1 level, computed as
twice the least-squares coefficient on coded columns (the textbook contrast for balanced
designs). statsmodels fits the model and gives the ANOVA; Lenth's pseudo standard error
judges effects when the design is unreplicated; the center points give a curvature test.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
from scipy import stats
from statsmodels.stats.anova import anova_lm

from ..errors import AnalysisError, NotTwoLevel
from ..fileio import BOOKKEEPING
from ..jsonutil import plain, to_jsonable
from ..result_shape import Result
from ..space import Factor, Space
from ..units import to_number

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass
class Coding:
    """How one factor's natural values map to -1/+1 (and 0 at the center)."""

    name: str
    low: Any
    high: Any
    numeric: bool
    center: Any = None
    factor: Factor | None = None

    def code(self, values: pd.Series) -> np.ndarray:
        if self.factor is not None and self.numeric:
            return self.factor.to_coded(values)  # honours log scales
        if self.numeric:
            x = np.array([to_number(v) for v in values], dtype=float)
            lo, hi = to_number(self.low), to_number(self.high)
            return 2.0 * (x - lo) / (hi - lo) - 1.0
        out = np.full(len(values), np.nan)
        s = values.astype(str).to_numpy()
        out[s == str(self.low)] = -1.0
        out[s == str(self.high)] = 1.0
        return out

    def natural(self, level: float) -> Any:
        return self.high if level > 0 else self.low


@dataclass
class Lenth:
    """Lenth's (1989) pseudo standard error and margins for unreplicated designs."""

    pse: float
    me: float
    sme: float
    df: float


def lenth(effects: Sequence[float], alpha: float = 0.05) -> Lenth:
    """PSE = 1.5 * median(|c| : |c| < 2.5 s0), s0 = 1.5 median|c|; ME and SME from t(m/3)."""
    c = np.abs(np.asarray(effects, dtype=float))
    m = len(c)
    if m < 2:
        raise AnalysisError("Lenth's method needs at least two effects")
    s0 = 1.5 * np.median(c)
    trimmed = c[c < 2.5 * s0]
    pse = 1.5 * float(np.median(trimmed)) if len(trimmed) else 1.5 * s0
    d = m / 3.0
    me = float(stats.t.ppf(1 - alpha / 2, d)) * pse
    gamma = (1 + (1 - alpha) ** (1.0 / m)) / 2
    sme = float(stats.t.ppf(gamma, d)) * pse
    return Lenth(pse, me, sme, d)


@dataclass
class EffectsAnalysis(Result):
    """Result of `analyze`: effects, ANOVA, Lenth, curvature, aliasing, recommendation."""

    PLOT_KINDS = ("pareto", "halfnormal", "main", "interaction")
    ERROR = AnalysisError

    response: str
    goal: str
    effects: pd.DataFrame           # term, order, effect, coef, (se, t, p), significant
    anova: pd.DataFrame             # source, ss, df, ms, F, p, pct
    lenth: Lenth | None
    curvature: dict[str, float] | None
    aliases: list[str]
    warnings: list[str]
    recommendation: dict[str, Any]
    codings: list[Coding]
    data: pd.DataFrame = field(repr=False)  # model columns plus the response `_y`
    coded: np.ndarray = field(repr=False, default_factory=lambda: np.empty((0, 0)))
    intercept: float = 0.0
    transform: str = "none"         # the response was analysed as transform(response)
    ss_type: str = "I"              # the ANOVA's sums of squares: I, or II when unbalanced
    balanced: bool = True           # orthogonal, balanced runs: marginal means are the effects

    def adjusted_mean(self, levels: dict[str, float]) -> float:
        """The model's least-squares (estimated marginal) mean at coded `levels` of some
        factors, the others averaged over their two levels: every term with a factor not
        in `levels` averages to zero, so this is the intercept plus the terms within."""
        out = self.intercept
        for r in self.effects.itertuples():
            parts = str(r.term).split(":")
            if all(p in levels for p in parts):
                out += float(r.coef) * float(np.prod([levels[p] for p in parts]))
        return out

    @property
    def label(self) -> str:
        """The analysed quantity: `log(total_iops)` under a transform, else the response."""
        return self.response if self.transform == "none" else f"{self.transform}({self.response})"

    def to_frame(self) -> pd.DataFrame:
        return self.effects

    @property
    def shown_columns(self) -> list[str]:
        """The effects columns a reader is shown (the CLI table and the report)."""
        return ["term", "effect", *(["ratio"] if "ratio" in self.effects else []), "coef",
                "p", "pct", "significant", "basis"]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "response": self.response,
            "goal": self.goal,
            "transform": self.transform,
            "terms": self.effects.to_dict("records"),
            "anova": self.anova.to_dict("records"),
            "intercept": self.intercept,
            "ss_type": self.ss_type,
            "aliases": self.aliases,
            "warnings": self.warnings,
            "recommendation": self.recommendation,
        }
        if self.lenth is not None:
            out.update(pse=self.lenth.pse, me=self.lenth.me, sme=self.lenth.sme,
                       lenth_df=self.lenth.df)
        if self.curvature is not None:
            out["curvature"] = self.curvature
        return to_jsonable(out)

    def to_json(self) -> dict[str, Any]:
        """The old name of `to_dict` (renamed for the one result shape): kept so that code
        written against it keeps working, with a DeprecationWarning."""
        warnings.warn("EffectsAnalysis.to_json() is deprecated; use to_dict(), which "
                      "returns the same dictionary", DeprecationWarning, stacklevel=2)
        return self.to_dict()

    def plot(self, kind: str | None = None) -> Figure:
        """A matplotlib Figure: pareto (the default), halfnormal, main, or interaction."""
        from . import plots

        return plots.effects_plot(self, self.plot_kind(kind))


# --------------------------------------------------------------------------- helpers
def infer_codings(results: pd.DataFrame, response: str, space: Space | None = None,
                  factors: Sequence[str] | None = None,
                  is_metric: Callable[[str], bool] | None = None) -> list[Coding]:
    """Codings of the factor columns: from the space, or read off the data.

    Without a space or a factor list, a factor column is one (other than the response,
    bookkeeping columns and the measurement columns `is_metric` names, which on a small
    design can have two values too; None: the columns storlab's runners declare,
    `storlab.metrics.is_metric`) with two distinct values, or three where the
    middle numeric value is the center.
    """
    if space is not None:
        names = list(factors) if factors else [n for n in space.names if n in results.columns]
        missing = [n for n in names if n not in results.columns]
        if missing:
            raise AnalysisError(f"results lack factor column(s) {missing}")
        out = []
        for n in names:
            if n in space:
                f = space[n]
                out.append(Coding(n, f.low, f.high, f.numeric, f.center, f))
            else:
                out.append(_coding_from_data(results[n], n))
        return out
    if factors:
        missing = [n for n in factors if n not in results.columns]
        if missing:
            raise AnalysisError(f"results lack factor column(s) {missing}")
        return [_coding_from_data(results[n], n) for n in factors]
    if is_metric is None:
        from ..metrics import is_metric
    out = []
    for col in results.columns:
        if col == response or col in BOOKKEEPING or col.startswith("_") or is_metric(col):
            continue
        c = _coding_from_data(results[col], col, strict=True)
        if c is not None:
            out.append(c)
    if not out:
        raise AnalysisError("no two-level factor columns found; name them with --factors or "
                            "give the space with --space")
    return out


def _as_written(v: Any) -> Any:
    """A level as a Python value; whole numbers as ints (a CSV column with a blank cell, or
    a store's column, is read as floats: bs 4 would print as 4.0)."""
    v = plain(v)
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _coding_from_data(col: pd.Series, name: str, strict: bool = False) -> Coding | None:
    vals = col.dropna().unique()
    try:
        # each level as the data writes it (4, "64k"), not as the float it compares as
        given = {to_number(v): _as_written(v) for v in vals}
        nums = sorted(given)
        numeric = True
    except ValueError:
        nums, numeric = [], False
    if numeric and nums:  # (an empty column has no levels: refused below)
        lo, hi = given[nums[0]], given[nums[-1]]
        if len(nums) == 2 or (len(nums) == 3 and math.isclose(nums[1], (nums[0] + nums[2]) / 2)):
            return Coding(name, lo, hi, True, given[nums[1]] if len(nums) == 3 else None)
        if len(nums) == 3 and not strict:  # log-scale center
            return Coding(name, lo, hi, True, given[nums[1]])
    else:
        levels = sorted({str(v) for v in vals})
        if len(levels) == 2:
            return Coding(name, levels[0], levels[1], False)
    if strict:
        return None
    raise AnalysisError(f"factor column {name!r} has {len(vals)} distinct values; a two-level "
                        "analysis needs two (plus an optional center)")


def _term_name(term: tuple[int, ...], names: Sequence[str]) -> str:
    return ":".join(names[i] for i in term)


# --------------------------------------------------------------------------- analysis
#: Increasing transforms of the response and their inverses. Throughput and latency are
#: multiplicative (a knob doubles IOPS rather than adding to it), so their effects are
#: additive, and comparable, on the log scale.
TRANSFORMS: dict[str, tuple[Any, Any]] = {
    "none": (lambda v: v, lambda v: v),
    "log": (np.log, np.exp),
    "log10": (np.log10, lambda v: 10.0 ** v),
    "sqrt": (np.sqrt, np.square),
}


def analyze(results: pd.DataFrame, response: str, space: Space | None = None,
            factors: Sequence[str] | None = None, goal: str | None = None,
            alpha: float = 0.05, max_order: int = 2,
            transform: str = "none",
            is_metric: Callable[[str], bool] | None = None) -> EffectsAnalysis:
    """Effects, ANOVA, Lenth, curvature and a recommendation for one response, analysed
    as `transform(response)` (none, log, log10, sqrt). Under log and log10 each effect also
    gets its `ratio`: the factor by which the high level multiplies the (geometric mean)
    response; the recommendation's `predicted` is back in the response's units.

    The steps, each its own function: the response's runs (`_response_runs`), the coded
    two-level runs (`_coded_runs`), the runs without the response (`_missing_response_notes`),
    the lost configurations (`_lost_runs`), the model terms and their aliasing
    (`_model_terms`, `_lost_runs_note`), the fit (`_fit_effects`), the ANOVA (`_anova`),
    significance (`_significance`), curvature (`_curvature_step`) and the recommendation
    (`_recommendation`). Without a space or `factors`, the factors are read off the data
    (`infer_codings`, leaving out the columns `is_metric` calls measurements)."""
    df, y, measured = _response_runs(results, response, transform)
    back = TRANSFORMS[transform][1]
    if goal is None:
        goal = space.response(response).goal if space is not None else "maximize"
    codings = infer_codings(df, response, space, factors, is_metric)
    names = [c.name for c in codings]
    x, is_center = _coded_runs(df, codings)
    factorial = ~is_center
    xf, yf = x[factorial], y[factorial]
    notes = _missing_response_notes(results, df, response, space, factors, names, xf,
                                    factorial, is_metric)
    lost = _lost_runs(results, df, codings, xf)
    terms = _model_terms(xf, names, max_order, lost, notes)
    if terms.partial:
        why = ("runs are missing from the design" if lost.regular_plan
               else "non-regular design such as Plackett-Burman")
        notes.append("two-factor interactions are partially aliased with main effects "
                     f"({why}): main effects only")
    if terms.correlated or terms.no_room or terms.unroomed:
        notes.append(_lost_runs_note(terms, lost, codings, response))
    fit = _fit_effects(xf, yf, terms.kept, names, notes)
    anova, data, p_of, saturated, pooled = _anova(x, y, is_center, terms.kept, fit, names)
    eff = fit.effects
    eff["coef"] = eff["effect"] / 2.0
    eff["p"] = [p_of.get(t, np.nan) for t in eff["term"]]
    len_res = _significance(eff, df, names, is_center, xf, yf, alpha, saturated, pooled,
                            notes)
    eff["pct"] = [float(anova.loc[anova["source"] == t, "pct"].iloc[0])
                  if (anova["source"] == t).any() else np.nan for t in eff["term"]]
    if transform in ("log", "log10"):
        eff["ratio"] = back(eff["effect"].to_numpy(dtype=float))
    eff = eff.sort_values("effect", key=np.abs, ascending=False).reset_index(drop=True)
    curvature = _curvature_step(x, y, is_center, codings, p_of, notes)
    for a in terms.aliases:
        notes.append(f"aliased: {a} (the effect reported for one is the sum of both)")
    rec = _recommendation(results, df, response, eff, codings, terms.kept, names,
                          fit.intercept, goal, space, transform, curvature, measured, alpha,
                          notes)
    return EffectsAnalysis(response, goal, eff, anova, len_res, curvature, terms.aliases,
                           notes, rec, codings, data, x, fit.intercept, transform,
                           "I" if fit.orthogonal or saturated else "II", fit.orthogonal)


def _response_runs(results: pd.DataFrame, response: str, transform: str
                   ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The runs with a value of `response`, that value transformed, and as measured; a
    missing, non-numeric, non-finite or out-of-domain response is an AnalysisError."""
    if transform not in TRANSFORMS:
        raise AnalysisError(f"transform {transform!r} must be one of {', '.join(TRANSFORMS)}")
    if response not in results.columns:
        raise AnalysisError(f"no response column {response!r} (columns: "
                            f"{', '.join(map(str, results.columns))})")
    df = results[results[response].notna()].reset_index(drop=True)
    if df.empty:
        raise AnalysisError(f"no run has a value of {response!r}")
    y = pd.to_numeric(df[response], errors="coerce")
    if y.isna().any():
        raise AnalysisError(f"response {response!r} has non-numeric values")
    if not np.isfinite(y.to_numpy(dtype=float)).all():
        row = int(np.flatnonzero(~np.isfinite(y.to_numpy(dtype=float)))[0])
        raise AnalysisError(f"response {response!r} row {row + 1} is {y.iloc[row]}: "
                            "not a finite number")
    with np.errstate(over="ignore", invalid="ignore"):
        spread = np.sum(np.square(y.to_numpy(dtype=float) - y.mean()))
    if not np.isfinite(spread):  # least squares would return nan: say why instead
        raise AnalysisError(f"response {response!r}: values up to {y.abs().max():g} overflow "
                            "the sums of squares; rescale the column")
    if transform in ("log", "log10") and (y <= 0).any():
        row = int(np.flatnonzero((y <= 0).to_numpy())[0])
        raise AnalysisError(f"--transform {transform} needs {response} > 0; row {row + 1} "
                            f"has {y.iloc[row]:g}")
    if transform == "sqrt" and (y < 0).any():
        raise AnalysisError(f"--transform sqrt needs {response} >= 0")
    measured = y.to_numpy(dtype=float)
    return df, np.asarray(TRANSFORMS[transform][0](measured), dtype=float), measured


def _coded_runs(df: pd.DataFrame, codings: Sequence[Coding]) -> tuple[np.ndarray, np.ndarray]:
    """The coded run matrix and which runs are center points; a run neither at the
    factors' two levels nor at the center is an AnalysisError."""
    x = np.column_stack([c.code(df[c.name]) for c in codings])
    # Log-scale centers round to integers, so "at the center" allows a little slack.
    is_center = np.all(np.abs(x[:, [j for j, c in enumerate(codings) if c.numeric]]) < 0.05,
                       axis=1) if any(c.numeric for c in codings) else np.zeros(len(df), bool)
    if "center" in df.columns:
        is_center |= df["center"].astype(bool).to_numpy()
    factorial = ~is_center
    bad = np.isnan(x[factorial]).any(axis=1) | ~np.isclose(np.abs(x[factorial]), 1.0).all(axis=1)
    if bad.any():
        row = int(np.flatnonzero(factorial)[np.flatnonzero(bad)[0]])
        raise NotTwoLevel(f"row {row + 1} is neither at the factors' low/high levels nor a "
                          "center point; this analysis is for two-level designs")
    if int(factorial.sum()) < 2:
        raise AnalysisError("need at least two factorial runs")
    return x, is_center


def _missing_response_notes(results: pd.DataFrame, df: pd.DataFrame, response: str,
                            space: Space | None, factors: Sequence[str] | None,
                            names: list[str], xf: np.ndarray, factorial: np.ndarray,
                            is_metric: Callable[[str], bool] | None = None) -> list[str]:
    """Notes for a response some runs do not produce (read latency on write-only runs, a
    failed run): the analysis is of the runs that have it, and the reader must know that."""
    notes: list[str] = []
    if len(df) == len(results):
        return notes
    notes.append(f"{response} is present on {len(df)} of {len(results)} runs: analysed "
                 "on those runs only")
    try:
        every = [c.name for c in infer_codings(results, response, space, factors, is_metric)]
    except AnalysisError:
        every = names
    held = [f"{n}={df[n].iloc[0]}" for n in every if n not in names and n in df.columns]
    held += [f"{names[j]}={df[names[j]].iloc[int(np.flatnonzero(factorial)[0])]}"
             for j in range(len(names)) if np.allclose(xf[:, j], xf[0, j])]
    if held:
        notes.append(f"constant on the runs with {response}, so not estimated: "
                     f"{', '.join(held)}")
    return notes


@dataclass
class _LostRuns:
    """The design's distinct configurations against the planned ones."""

    xu: np.ndarray  # distinct coded configurations with the response
    planned: np.ndarray | None  # distinct planned configurations (when runs lack it)
    regular_plan: bool  # the planned ones form a regular fraction
    incomplete: int  # configurations of the design lost (no run with the response)


def _lost_runs(results: pd.DataFrame, df: pd.DataFrame, codings: Sequence[Coding],
               xf: np.ndarray) -> _LostRuns:
    """Which configurations of the design have no run with the response.

    Which terms the model can hold is a property of the DESIGN, the distinct
    configurations, not of how often each ran: uneven repeats or one failed run of a
    replicated configuration leave every interaction estimable, and the fit (least squares
    on all runs) adjusts for the unevenness. Correlations are therefore taken over the
    distinct configuration rows."""
    xu = np.unique(xf, axis=0)
    planned_runs = (_planned_runs(results, codings) if len(df) < len(results) else None)
    planned = np.unique(planned_runs, axis=0) if planned_runs is not None else None
    # The planned configurations form a regular fraction (a full factorial or a 2^(k-p)):
    # those without a run with the response are lost ones, not a non-regular design.
    regular_plan = planned is not None and len(planned) == _gf2_span(planned)
    incomplete = _lost_configurations(xu, planned_runs if planned_runs is not None else xf,
                                      planned if regular_plan else None)
    return _LostRuns(xu, planned, regular_plan, incomplete)


@dataclass
class _Terms:
    """The model's terms (factor index tuples) and what was left out, and why."""

    kept: list[tuple[int, ...]] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    partial: bool = False  # interactions partially aliased with main effects: left out
    correlated: list[str] = field(default_factory=list)  # kept, correlated by lost runs
    no_room: list[str] = field(default_factory=list)  # left out: no error df to judge them
    unroomed: list[str] = field(default_factory=list)  # left out: lost runs took their df


def _model_terms(xf: np.ndarray, names: list[str], max_order: int, lost: _LostRuns,
                 notes: list[str]) -> _Terms:
    """Candidate terms (main effects, then interactions up to `max_order`), kept when their
    column is orthogonal to every kept one; fully aliased terms are reported instead."""
    xu, incomplete = lost.xu, lost.incomplete
    n_u = len(xu)
    cand = [t for r in range(1, max_order + 1)
            for t in itertools.combinations(range(len(names)), r)]
    out = _Terms()
    kept, kept_cols = out.kept, []
    resid_room = len(xf) - 1  # parameters (mean included) the runs can carry with error df
    # Interactions the lost configurations left no degree of freedom for (`unroomed`) are
    # named in the note only. They must not feed the all-or-none rule below, which is about
    # correlated terms competing for error df (it would drop the kept ones and bias main
    # effects).
    for t in cand:
        col = np.prod(xu[:, list(t)], axis=1)
        if np.allclose(col, col[0]):
            continue  # constant over the configurations: part of the defining relation
        corr = [float(col @ c) / n_u for c in kept_cols]
        full = [i for i, r in enumerate(corr) if abs(abs(r) - 1) < 1e-9]
        if full:
            out.aliases.append(f"{_term_name(t, names)} = "
                               f"{'-' if corr[full[0]] < 0 else ''}"
                               f"{_term_name(kept[full[0]], names)}")
            continue
        skewed = abs(col.sum()) > 1e-9 or any(abs(r) > 1e-9 for r in corr)
        if skewed:
            if len(t) == 1:
                notes.append(f"main effect {names[t[0]]} is correlated with another; "
                             "estimates are not independent")
            elif len(t) > 1 and not incomplete:
                # A non-regular design (Plackett-Burman): interactions are partially
                # aliased with main effects by construction and cannot be separated.
                out.partial = True
                continue
            elif len(t) > 1 and len(kept) + 2 > resid_room:
                out.no_room.append(_term_name(t, names))
                continue  # a correlated term needs error df left to be judged
        if len(kept) + 1 >= n_u:
            if incomplete and len(t) > 1:
                # The lost configurations took the room this interaction needed: say so,
                # as for the interactions left out above, not drop it unseen.
                out.unroomed.append(_term_name(t, names))
            continue  # keep at least one degree of freedom for the mean
        if skewed:
            # Missing configurations: a column can be a combination of the kept ones (and
            # the mean) without equalling any one of them; it then has no estimate of its own.
            xk = np.column_stack([np.ones(n_u), *kept_cols, col])
            if np.linalg.matrix_rank(xk) < xk.shape[1]:
                out.aliases.append(f"{_term_name(t, names)} = a combination of the terms "
                                   "kept on these runs")
                continue
            if incomplete and len(t) > 1:
                out.correlated.append(_term_name(t, names))
        kept.append(t)
        kept_cols.append(col)
    if out.no_room and out.correlated:
        # Not every correlated interaction fits: keeping the first ones in list order would
        # blame a left-out active interaction (D:E) on those kept (A:B, A:C, ...) and on the
        # main effects. All or none: main effects and the still orthogonal terms only.
        drop = set(out.correlated)
        out.kept = [t for t in kept if _term_name(t, names) not in drop]
        out.no_room = out.correlated + out.no_room
        out.correlated = []
    return out


def _lost_runs_note(terms: _Terms, lost: _LostRuns, codings: Sequence[Coding],
                    response: str) -> str:
    """The note naming the lost configurations and the interactions they correlated or
    left out."""
    have = {tuple(r) for r in lost.xu}
    gone = [", ".join(f"{c.name}={plain(c.natural(v))}" for c, v in zip(codings, row))
            for row in (lost.planned if lost.planned is not None else [])
            if tuple(row) not in have]
    correlated, no_room, unroomed = terms.correlated, terms.no_room, terms.unroomed
    return (
        f"{lost.incomplete} configuration(s) of the design have no run with {response}"
        + (f" ({'; '.join(gone)})" if gone else "")
        + ": the design is no longer orthogonal"
        + (", so the interactions " + ", ".join(correlated) + " are partially aliased "
           "(correlated) with other terms; they are kept and every effect is adjusted "
           "for the others (least squares), with wider standard errors"
           if correlated else "")
        + ("; left out, for want of runs to estimate and test it: " + no_room[0]
           if len(no_room) == 1 else
           "; left out, for want of runs to estimate and test them all (keeping some "
           "would blame the others' effects on them): " + ", ".join(no_room)
           if no_room else "")
        + ("; left out, the lost configuration(s) leaving no degree of freedom for "
           + ("it: " if len(unroomed) == 1 else "them: ") + ", ".join(unroomed)
           if unroomed else ""))


@dataclass
class _Fit:
    """Effects of the kept terms on the factorial runs."""

    effects: pd.DataFrame  # term, order, effect
    coefs: list[float]
    intercept: float
    orthogonal: bool


def _fit_effects(xf: np.ndarray, yf: np.ndarray, kept: list[tuple[int, ...]],
                 names: list[str], notes: list[str]) -> _Fit:
    """Effects of every kept term, on the factorial runs: twice the least-squares
    coefficient. On an orthogonal, balanced design that is the difference of the term's
    marginal means (the textbook contrast, kept exact here); when a configuration is
    missing (a failed run, a response some runs lack) or replicated unevenly, marginal
    means mix in the other factors' effects, so only the joint fit is unbiased."""
    n_f = len(xf)
    kept_cols = [np.prod(xf[:, list(t)], axis=1) for t in kept]  # one row per run
    xk = np.column_stack([np.ones(n_f)] + kept_cols) if kept_cols else np.ones((n_f, 1))
    gram = xk.T @ xk
    orthogonal = bool(np.allclose(gram, np.diag(np.diag(gram)), atol=1e-9 * n_f))
    if orthogonal:
        coefs = [float(yf[col > 0].mean() - yf[col < 0].mean()) / 2.0 for col in kept_cols]
        intercept = float(yf.mean())
    else:
        beta = np.linalg.lstsq(xk, yf, rcond=None)[0]
        coefs = [float(b) for b in beta[1:]]
        intercept = float(beta[0])
        notes.append("the design is not balanced on these runs (a configuration missing or "
                     "repeated unevenly): effects are least-squares estimates adjusted for "
                     "each other, not differences of marginal means; the ANOVA uses "
                     "type II (adjusted) sums of squares where it has error df")
    effects = pd.DataFrame([{"term": _term_name(t, names), "order": len(t), "effect": 2.0 * c}
                            for t, c in zip(kept, coefs)])
    return _Fit(effects, coefs, intercept, orthogonal)


def _anova(x: np.ndarray, y: np.ndarray, is_center: np.ndarray,
           kept: list[tuple[int, ...]], fit: _Fit, names: list[str]
           ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float], bool, list[str]]:
    """The OLS model on all runs (center points included, with a curvature indicator) and
    its ANOVA table; also the model's data, each source's p, whether the model is
    saturated and the terms pooled into its error row.

    One coded column per factor (X0, X1, ...) and interactions as patsy products of them,
    so that the type II sums of squares respect marginality (a main effect is adjusted for
    the other main effects and the interactions without it, as statsmodels' `A*B*C`
    formula does), not for its own interactions."""
    used = sorted({j for t in kept for j in t})
    data = pd.DataFrame({f"X{j}": x[:, j] for j in used})
    data["_y"] = y
    n_c, n_f = int(is_center.sum()), int((~is_center).sum())
    tname = [":".join(f"X{j}" for j in t) for t in kept]
    terms = list(tname)
    if n_c and n_f:
        data["_curv"] = is_center.astype(float)
        terms.append("_curv")
    resid_df = len(data) - 1 - len(terms)
    saturated = resid_df < 1
    pooled: list[str] = []
    if saturated:
        # Every run spent on a term: no error of its own. Pooling a term as "error" would
        # test the others against one effect that may be real (a 2^(5-1) with an active
        # D:E pooled called A, B, C and A:B noise), so the table pools the smallest
        # interactions only to show sums of squares, and significance comes from Lenth's
        # margin on every contrast (Montgomery's approach for unreplicated designs).
        order = [i for i in sorted(range(len(kept)), key=lambda i: abs(fit.coefs[i]))
                 if len(kept[i]) > 1]
        drop = set(order[: 1 - resid_df])
        pooled = [_term_name(kept[i], names) for i in sorted(drop)]
        terms = [t for t in terms if t not in {tname[i] for i in drop}]
    model = smf.ols("_y ~ " + (" + ".join(terms) if terms else "1"), data=data).fit()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Sequential (type I) sums of squares are the textbook ones on orthogonal
        # designs; without orthogonality they depend on the term order, so each term is
        # adjusted for the others instead.
        # (With no error df there is no test to adjust: F and p are blanked below.)
        typ = 1 if fit.orthogonal or saturated else 2
        table = anova_lm(model, typ=typ)
    if saturated:  # no error df of its own: F and p would be noise
        table["F"] = np.nan
        table["PR(>F)"] = np.nan
    ss_total = float(((data["_y"] - data["_y"].mean()) ** 2).sum())
    label = {tname[i]: _term_name(t, names) for i, t in enumerate(kept)}
    label["_curv"] = "curvature"
    label["Residual"] = "error"
    anova = pd.DataFrame({
        "source": [label.get(i, i) for i in table.index],
        "ss": table["sum_sq"].to_numpy(),
        "df": table["df"].to_numpy(),
        "ms": (table["sum_sq"] / table["df"]).to_numpy(),
        "F": table["F"].to_numpy(),
        "p": table["PR(>F)"].to_numpy(),
    })
    anova["pct"] = 100.0 * anova["ss"] / ss_total if ss_total > 0 else np.nan
    if not fit.orthogonal:  # adjusted sums of squares overlap: they are not shares of a whole
        anova.loc[anova["source"] != "error", "pct"] = np.nan
    anova = pd.concat([anova, pd.DataFrame([{"source": "total", "ss": ss_total,
                                             "df": float(len(data) - 1)}])],
                      ignore_index=True)
    return anova, data, dict(zip(anova["source"], anova["p"])), saturated, pooled


def _significance(eff: pd.DataFrame, df: pd.DataFrame, names: list[str],
                  is_center: np.ndarray, xf: np.ndarray, yf: np.ndarray, alpha: float,
                  saturated: bool, pooled: list[str], notes: list[str]) -> Lenth | None:
    """Mark each effect significant (columns `significant`, `basis`, and `lenth_active`
    with Lenth): the ANOVA F test where the model has error df (pure error, or pooled
    higher-order terms); Lenth's ME for terms the saturated model leaves without a test.
    Lenth runs on the full set of orthogonal contrasts when the design is unreplicated."""
    len_res = None
    pure_error_df = _pure_error_df(df, names, is_center)
    if pure_error_df == 0 or saturated:
        contrasts = _saturated_effects(xf, yf)
        if len(contrasts) >= 2:
            len_res = lenth(contrasts, alpha)
    has_p = np.isfinite(eff["p"].to_numpy(dtype=float))
    sig = np.where(has_p, eff["p"].to_numpy(dtype=float) < alpha, False)
    basis = np.where(has_p, "ANOVA", "")
    if len_res is not None:
        eff["lenth_active"] = np.abs(eff["effect"]) > len_res.me
        sig = np.where(has_p, sig, eff["lenth_active"].to_numpy())
        basis = np.where(has_p, basis, "Lenth ME")
        if pure_error_df == 0 and has_p.any():
            notes.append("unreplicated: the ANOVA error pools the terms left out of the "
                         "model; Lenth's margins are given for comparison")
    if saturated:
        notes.append("saturated: every run is spent on a term, so there is no error to test "
                     "against; significance is Lenth's margin of error on every contrast"
                     + (f" (the ANOVA's error row holds the smallest interaction, "
                        f"{', '.join(pooled)}, for its sums of squares only)" if pooled else ""))
    eff["significant"] = sig.astype(bool)
    eff["basis"] = basis
    return len_res


def _curvature_step(x: np.ndarray, y: np.ndarray, is_center: np.ndarray,
                    codings: Sequence[Coding], p_of: dict[str, float], notes: list[str]
                    ) -> dict[str, Any] | None:
    """The curvature test when the design has center and factorial runs, else None."""
    if not (is_center.any() and (~is_center).any()):
        return None
    curvature = _curvature(x, y, is_center, codings)
    curvature["p"] = float(p_of.get("curvature", np.nan))
    if "confounded" in curvature:
        notes.append(curvature.pop("confounded"))
    return curvature


def _recommendation(results: pd.DataFrame, df: pd.DataFrame, response: str,
                    eff: pd.DataFrame, codings: list[Coding], kept: list[tuple[int, ...]],
                    names: list[str], intercept: float, goal: str, space: Space | None,
                    transform: str, curvature: dict[str, Any] | None,
                    measured: np.ndarray, alpha: float, notes: list[str]) -> dict[str, Any]:
    """The recommended levels (`_recommend`), back in the response's units, with the notes
    that warn against using it blind: no value measured there, curvature, extrapolation."""
    back = TRANSFORMS[transform][1]
    rec = _recommend(eff, codings, kept, names, intercept, goal, space)
    if rec["settings"] and len(df) < len(results):
        # The model may favour exactly the configuration whose runs have no value (they
        # failed, or do not produce this response): say so rather than recommend it blind.
        match = np.ones(len(results), dtype=bool)
        for st in rec["settings"]:
            if st["factor"] in results.columns:
                col = results[st["factor"]]
                same = col.astype(str).to_numpy() == str(st["value"])
                if isinstance(st["value"], (int, float)):
                    same |= pd.to_numeric(col, errors="coerce").to_numpy() == st["value"]
                match &= same
        hits = results[match]
        if len(hits) and hits[response].isna().all():
            notes.append(f"the recommended configuration ran {len(hits)} time(s) without a "
                         f"value of {response} (failed, or not produced there): the model "
                         "extrapolates to it; look at those runs before using it")
    if transform != "none":
        rec["predicted_transformed"] = rec["predicted"]
        rec["predicted"] = float(back(rec["predicted"]))
        notes.append(f"analysed as {transform}({response}): effects, ANOVA, Lenth and "
                     f"curvature are on that scale; the prediction is in {response}'s units")
    if curvature is not None:
        # The test printed beside the curvature line (the model's error), else the center
        # points' own pure error when the model has none.
        p_curv = curvature["p"]
        if not np.isfinite(p_curv):
            p_curv = curvature.get("p_pure_error", math.nan)
        if np.isfinite(p_curv) and p_curv < alpha:
            # A two-level model is flat between its levels: with real curvature its
            # recommendation can be worse than the center runs already measured.
            centre = float(back(curvature["center_mean"]))
            better = (centre > rec["predicted"]) if goal == "maximize" else (
                centre < rec["predicted"])
            notes.append(
                f"curvature is significant (p = {p_curv:.2g}): {response} bends between the "
                "levels, which a two-level model cannot represent, so its recommendation "
                "cannot pick levels"
                + (f"; the center runs measured {centre:.4g}, better than the predicted "
                   f"{rec['predicted']:.4g} at the recommendation" if better else "")
                + "; add axial points (a response-surface design) or tune around the center")
    if rec["settings"] and not measured.min() <= rec["predicted"] <= measured.max():
        notes.append(f"the predicted {response} at the recommendation, "
                     f"{rec['predicted']:.4g}, lies outside the measured "
                     f"{measured.min():.4g}..{measured.max():.4g}: an extrapolation of the "
                     "model; confirm it with runs")
    return rec



def _gf2_span(xu: np.ndarray) -> int:
    """Points in the smallest regular fraction holding the configurations `xu`: 2^r, r the
    GF(2) rank of their differences from the first one."""
    m = ((xu[1:] < 0) ^ (xu[0] < 0)).astype(np.uint8)
    rank = 0
    for c in range(m.shape[1]):  # Gaussian elimination over GF(2)
        if rank == len(m):
            break
        piv = np.flatnonzero(m[rank:, c])
        if len(piv) == 0:
            continue
        p = rank + int(piv[0])
        m[[rank, p]] = m[[p, rank]]
        hit = np.flatnonzero(m[:, c])
        m[hit[hit != rank]] ^= m[rank]
        rank += 1
    return 2 ** rank


def _lost_configurations(xu: np.ndarray, runs: np.ndarray,
                         regular_plan: np.ndarray | None) -> int:
    """How many configurations a regular fraction (a full factorial or a 2^(k-p)) lost
    (every run of them failed) when the distinct two-level configurations `xu` are one such
    fraction less some; 0 when they are the whole fraction or none.

    `runs` are the coded runs as planned (failed ones included when the table lists them);
    `regular_plan` their distinct configurations when those form a regular fraction (the
    caller has them), else None. A regular plan less some configurations is that case.
    Otherwise a set of more than half of its smallest regular fraction is read as such,
    unless the plan is an orthogonal array (main-effect columns balanced and orthogonal
    over the runs or the configurations): a non-regular design such as Plackett-Burman,
    whose interactions stay out of the model.
    """
    n = len(xu)
    size = _gf2_span(xu)
    if n == size:
        return 0
    # Without a regular plan of their own the runs' configurations are `xu` itself, which
    # is no regular fraction here (n != size): nothing to compare with.
    if regular_plan is not None and ({tuple(r) for r in xu}
                                     <= {tuple(r) for r in regular_plan}):
        return len(regular_plan) - n

    def strength2(m: np.ndarray) -> bool:
        gram = m.T @ m
        return bool(np.allclose(m.sum(axis=0), 0)
                    and np.allclose(gram, np.diag(np.diag(gram))))

    if 2 * n > size and not (strength2(runs) or strength2(xu)):
        return size - n
    return 0


def _planned_runs(results: pd.DataFrame, codings: Sequence[Coding]) -> np.ndarray | None:
    """The coded factorial runs of `results`, those without a value included (failed
    runs), or None when they cannot be coded."""
    try:
        xa = np.column_stack([c.code(results[c.name]) for c in codings])
    except (KeyError, ValueError, TypeError):
        return None
    xa = xa[np.isclose(np.abs(xa), 1.0).all(axis=1)]
    return xa if len(xa) else None


def _curvature(x: np.ndarray, y: np.ndarray, is_center: np.ndarray,
               codings: Sequence[Coding]) -> dict[str, Any]:
    """Center runs against factorial runs. A categorical factor has no center: center
    runs sit at one of its levels, so the plain factorial mean would mix that factor's
    effect into the comparison (center mean 1048 vs factorial mean 1299, all of it the
    engine's effect). The center runs are therefore compared with the factorial runs at
    the same categorical levels (each center group with its own, weighted by its size):
    a one-df contrast, tested against the center runs' pure error within groups."""
    cat = [j for j, c in enumerate(codings) if not c.numeric]
    yc_all, xc = y[is_center], x[is_center]
    xf, yf = x[~is_center], y[~is_center]
    n_c = len(yc_all)
    out: dict[str, Any] = {}
    if not cat:
        groups = [(np.ones(n_c, bool), np.ones(len(yf), bool))]
    else:
        keys = {tuple(r) for r in xc[:, cat]}
        groups = [(np.all(xc[:, cat] == k, axis=1), np.all(xf[:, cat] == k, axis=1))
                  for k in sorted(keys)]
        levels = sorted({", ".join(f"{codings[j].name}={plain(codings[j].natural(v))}"
                                   for j, v in zip(cat, k)) for k in keys})
        out["matched_levels"] = levels
        if any(not gf.any() for _, gf in groups):
            # No factorial run at a center group's levels: nothing to compare it with.
            out.update(center_mean=float(yc_all.mean()), factorial_mean=float(yf.mean()),
                       ss=math.nan)
            out["confounded"] = (
                "the center runs sit at " + "; ".join(levels) + ", where no factorial run "
                "is: their comparison with the factorial mean is confounded with those "
                "factors' effects (the ANOVA's curvature test adjusts for them)")
            return out
    w = np.array([gc.sum() for gc, _ in groups], dtype=float) / n_c
    yf_means = np.array([yf[gf].mean() for _, gf in groups])
    matched = float(w @ yf_means)
    d = float(yc_all.mean()) - matched
    var_unit = 1.0 / n_c + float(sum(wi ** 2 / gf.sum() for wi, (_, gf) in zip(w, groups)))
    out.update(center_mean=float(yc_all.mean()), factorial_mean=matched,
               ss=d * d / var_unit, n_factorial=int(sum(gf.sum() for _, gf in groups)))
    pe_df = n_c - len(groups)
    if pe_df >= 1:
        ss_pe = sum(float(((yc_all[gc] - yc_all[gc].mean()) ** 2).sum()) for gc, _ in groups)
        ms_pe = ss_pe / pe_df
        f_stat = out["ss"] / ms_pe if ms_pe > 0 else math.inf
        out["F_pure_error"] = f_stat
        out["p_pure_error"] = float(stats.f.sf(f_stat, 1, pe_df))
    return out

def _pure_error_df(df: pd.DataFrame, names: Sequence[str], is_center: np.ndarray) -> int:
    """Degrees of freedom from repeated configurations (center points included)."""
    keys = df[list(names)].astype(str).agg("|".join, axis=1)
    counts = keys.value_counts()
    return int((counts - 1).sum())


def _saturated_effects(xf: np.ndarray, yf: np.ndarray) -> list[float]:
    """Effects of a full set of orthogonal contrasts of the (averaged) factorial runs:
    every interaction order, one term per alias class, at most one per run less the mean."""
    keys = [tuple(r) for r in xf]
    uniq: dict[tuple, list[float]] = {}
    for kk, v in zip(keys, yf):
        uniq.setdefault(kk, []).append(float(v))
    xu = np.array(list(uniq.keys()))
    yu = np.array([np.mean(v) for v in uniq.values()])
    n, k = xu.shape
    cols: list[np.ndarray] = []
    out: list[float] = []
    max_order = k if k <= 10 else 3
    for r in range(1, max_order + 1):
        for t in itertools.combinations(range(k), r):
            col = np.prod(xu[:, list(t)], axis=1)
            if abs(col.sum()) > 1e-9 or any(abs(col @ c) > 1e-9 for c in cols):
                continue
            cols.append(col)
            out.append(float(yu[col > 0].mean() - yu[col < 0].mean()))
            if len(cols) == n - 1:
                return out
    return out


def _recommend(eff: pd.DataFrame, codings: list[Coding], kept: list[tuple[int, ...]],
               names: list[str], intercept: float, goal: str, space: Space | None
               ) -> dict[str, Any]:
    """Levels of the significant factors that optimise the model of significant terms
    (interaction-aware: every combination is scored when there are few factors)."""
    sig = eff[eff["significant"]]
    term_of = {_term_name(t, names): t for t in kept}
    sig_terms = [(term_of[r.term], r.coef) for r in sig.itertuples() if r.term in term_of]
    factors = sorted({i for t, _ in sig_terms for i in t})
    sign = 1.0 if goal == "maximize" else -1.0

    def predict(levels: dict[int, float]) -> float:
        return intercept + sum(c * np.prod([levels[i] for i in t]) for t, c in sig_terms)

    best: dict[int, float] = {}
    if factors:
        if len(factors) <= 16:
            combos = itertools.product((-1.0, 1.0), repeat=len(factors))
            best_val = -math.inf
            for combo in combos:
                lv = dict(zip(factors, combo))
                v = sign * predict(lv)
                if v > best_val:
                    best_val, best = v, lv
        else:  # coordinate ascent from the main-effect signs
            best = {i: 1.0 for i in factors}
            for _ in range(5):
                for i in factors:
                    for s in (-1.0, 1.0):
                        trial = dict(best, **{i: s})
                        if sign * predict(trial) > sign * predict(best):
                            best = trial
    settings = []
    for i in factors:
        c = codings[i]
        settings.append({"factor": c.name, "level": int(best[i]),
                         "value": plain(c.natural(best[i]))})
    # Seed 000's level-direction table: per significant term (largest effect first), the
    # coded level of each of its factors at the recommendation and the natural value.
    table = []
    for t, _ in sig_terms:
        lv = [int(best[i]) for i in t]
        vals = [plain(codings[i].natural(best[i])) for i in t]
        one = len(t) == 1
        table.append({
            "term": _term_name(t, names),
            "kind": "factor" if one else "interaction",
            "direction": f"{lv[0]:+d}" if one else " * ".join(f"({v:+d})" for v in lv),
            "value": str(vals[0]) if one else " * ".join(f"({v})" for v in vals)})
    return {
        "goal": goal,
        "settings": settings,
        "directions": table,
        "predicted": float(predict(best)) if factors else intercept,
        "terms": [r.term for r in sig.itertuples()],
        "others": "no significant effect: set for cost or convenience",
    }
