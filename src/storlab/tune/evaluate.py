"""Offline evaluation of tuning strategies on a complete measured table (`storlab
tune-eval`): the table is the oracle, each strategy tunes against it from scratch many
times, and we count the runs it needed to measure a configuration within 1 % / 5 % of the
table's optimum.

Strategies: storlab's own (`storlab` = auto, or any of `STRATEGIES`), and two baselines run
as their libraries run them: `optuna-tpe` (Optuna's TPESampler with its defaults; every
trial is a run, repeats included) and `random` (uniform draws from the feasible table,
repeats included). Configurations outside the table are infeasible: never run, never
counted (a proposal outside it is told as failed and asked again).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..campaign.sources import Observation, config_key
from ..errors import AnalysisError
from ..jsonutil import plain, to_jsonable
from ..result import Result
from ..space import Factor, Space
from .domain import Domain
from .strategies import STRATEGIES, Objective, TuneSettings, make_strategy

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BASELINES = ("optuna-tpe", "random")

#: When the median of runs-to-target is a number. A repeat that never reaches the target
#: counts as infinitely many runs, so the median is finite only when more than half the
#: repeats reach it: at exactly half (2 of 4) the two middle values are a count and
#: infinity, and their midpoint is infinite.
MEDIAN_RULE = "n/a unless more than half the repeats reach it"
DEFAULT_STRATEGIES = ("storlab", "optuna-tpe", "random")


@dataclass
class TuneEvalResult(Result):
    """Strategies replayed on a measured table: runs each needed to come near the optimum."""

    PLOT_KINDS = ("gap",)
    ERROR = AnalysisError

    response: str
    goal: str
    budget: int
    repeats: int
    targets: tuple[float, ...]
    optimum: float
    n_configs: int
    curves: pd.DataFrame        # strategy, repeat, run, best_gap
    seconds: dict[str, float] = field(default_factory=dict)
    params: list[str] = field(default_factory=list)  # the columns taken as parameters

    def runs_to(self, gap: float) -> pd.DataFrame:
        """Per strategy and repeat, the first run whose best-so-far is within `gap`."""
        ok = self.curves[self.curves["best_gap"] <= gap + 1e-12]
        first = ok.groupby(["strategy", "repeat"])["run"].min()
        idx = pd.MultiIndex.from_product([self.strategies, range(self.repeats)],
                                         names=["strategy", "repeat"])
        return first.reindex(idx).reset_index()

    @property
    def strategies(self) -> list[str]:
        return list(dict.fromkeys(self.curves["strategy"]))

    def to_frame(self) -> pd.DataFrame:
        rows = []
        final = self.curves.sort_values("run").groupby(["strategy", "repeat"])["best_gap"].last()
        for t in self.targets:
            r = self.runs_to(t)
            for s in self.strategies:
                runs = r.loc[r["strategy"] == s, "run"]
                share = float(runs.notna().mean())
                # A repeat that never got there counts as infinitely many runs (MEDIAN_RULE).
                med = float(np.median(runs.fillna(np.inf).to_numpy())) if share > 0.5 \
                    else math.inf
                rows.append({"strategy": s, "target": t,
                             "median_runs": med if math.isfinite(med) else math.nan,
                             "reached_share": share,
                             "median_final_gap": float(final.loc[s].median()),
                             "seconds": self.seconds.get(s, math.nan)})
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        return {"response": self.response, "goal": self.goal, "budget": self.budget,
                "repeats": self.repeats, "optimum": self.optimum, "n_configs": self.n_configs,
                "params": list(self.params), "table": to_jsonable(self.to_frame())}

    def plot(self, kind: str | None = None) -> Figure:
        """`gap` (the only kind): median gap of the best-so-far to the optimum against runs,
        per strategy."""
        self.plot_kind(kind)
        from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

        from ..plotstyle import LINESTYLES, PALETTE, legend_outside, metric_name, styled, subplots

        with styled():
            fig, ax = subplots(figsize=(8.4, 4.3))
            for i, s in enumerate(self.strategies):
                c = self.curves[self.curves["strategy"] == s]
                med = c.groupby("run")["best_gap"].median()
                q1 = c.groupby("run")["best_gap"].quantile(0.25)
                q3 = c.groupby("run")["best_gap"].quantile(0.75)
                col = PALETTE[i % len(PALETTE)]
                ax.plot(med.index, 100 * med.to_numpy(), LINESTYLES[i % 4], color=col,
                        label=f"{s}: median")
                ax.fill_between(med.index, 100 * q1.to_numpy(), 100 * q3.to_numpy(),
                                color=col, alpha=0.15, lw=0, label=f"{s}: quartiles")
            for j, t in enumerate(self.targets):
                ax.axhline(100 * t, color="#777777", lw=0.8, ls=":",
                           label="target gaps" if j == 0 else None)
            ax.set_yscale("symlog", linthresh=1.0)
            ax.set_ylim(bottom=0)  # a gap is never negative
            ax.yaxis.set_major_locator(FixedLocator([0, 1, 2, 5, 10, 20, 50, 100, 200, 500]))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("runs executed (count)")
            ax.set_ylabel(f"gap of the best {metric_name(self.response)} so far\n"
                          "to the optimum (%, symlog)")
            ax.set_title(f"Tuning on {self.n_configs} measured configurations "
                         f"({self.repeats} repeats)", fontsize=9.5)
            legend_outside(ax)
        return fig


def space_from_table(df: pd.DataFrame, params: Sequence[str]) -> Space:
    """Each parameter's measured values as its levels: numbers ordered, text categorical."""
    factors = []
    for p in params:
        vals = [plain(v) for v in pd.unique(df[p].dropna())]
        if len(vals) < 2:
            continue
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            factors.append(Factor(p, "ordinal", sorted(vals), low=min(vals), high=max(vals)))
        else:
            vals = sorted(vals, key=str)
            factors.append(Factor(p, "categorical", vals, low=vals[0], high=vals[-1]))
    if not factors:
        raise AnalysisError("no parameter takes two or more values in the table")
    return Space(factors)


def tune_eval(table: pd.DataFrame, response: str, goal: str = "maximize",
              params: Sequence[str] | None = None,
              strategies: Sequence[str] = DEFAULT_STRATEGIES, budget: int = 60,
              repeats: int = 30, seed: int = 0, targets: Sequence[float] = (0.01, 0.05),
              noise: float = 0.0, confirm_runs: int = 3,
              progress: Callable[[str, int], None] | None = None) -> TuneEvalResult:
    """Replay each strategy `repeats` times against the table (one row per configuration;
    repeated rows are averaged). `noise` adds that relative Gaussian noise to each measured
    run (the gap is always judged on the table's true values)."""
    if response not in table.columns:
        raise AnalysisError(f"response {response!r} is not a column of the table")
    if goal not in ("maximize", "minimize"):
        raise AnalysisError(f"goal {goal!r} must be maximize or minimize")
    if budget < 2 or repeats < 1:
        raise AnalysisError("need --budget >= 2 and --repeats >= 1")
    for s in strategies:
        if s != "storlab" and s not in STRATEGIES and s not in BASELINES:
            raise AnalysisError(f"strategy {s!r} must be storlab, one of "
                                f"{', '.join(STRATEGIES)} or a baseline "
                                f"({', '.join(BASELINES)})")
    y = pd.to_numeric(table[response], errors="coerce")
    if params is None:
        params = [c for c in table.columns if c != response and not str(c).startswith("_")]
    elif response in params:
        raise AnalysisError(f"--params names the response {response!r}: list the "
                            "configuration's parameters only")
    missing = [p for p in params if p not in table.columns]
    if missing:
        raise AnalysisError(f"parameter(s) {missing} are not columns of the table")
    if not params:
        raise AnalysisError(f"the table has no parameter column besides the response "
                            f"{response!r}")
    df = table.loc[y.notna() & np.isfinite(y), list(params)].copy()
    df[response] = y[df.index].astype(float)
    df = df.groupby(list(params), dropna=False, sort=False)[response].mean().reset_index()
    space = space_from_table(df, params)
    names = space.names
    truth = {config_key({n: plain(r[n]) for n in names}): float(r[response])
             for r in df.to_dict("records")}
    optimum = max(truth.values()) if goal == "maximize" else min(truth.values())
    if optimum == 0:  # 1 % of 0 is 0: no relative target exists (it was silently absolute)
        raise AnalysisError(f"the optimum {response} is 0: the gap to it (1 %, 5 %) is "
                            "relative and undefined there; shift or invert the response")
    scale = abs(optimum)
    domain = Domain(space, [dict(zip(names, k)) for k in
                            df[names].itertuples(index=False, name=None)])
    obj = Objective(response, goal)

    def gap(v: float) -> float:
        return max(0.0, (optimum - v) / scale if goal == "maximize" else (v - optimum) / scale)

    rows: list[tuple[str, int, int, float]] = []
    seconds: dict[str, float] = {}
    for s in strategies:
        t0 = time.perf_counter()
        for r in range(repeats):
            rng = np.random.default_rng([seed, r, 11])
            measured = _replay(s, domain, obj, budget, seed * 100_003 + r, truth, noise, rng,
                               confirm_runs)
            best = math.inf
            for i, k in enumerate(measured, 1):
                best = min(best, gap(truth[k]))
                rows.append((s, r, i, best))
            if progress is not None:
                progress(s, r)
        seconds[s] = time.perf_counter() - t0
    curves = pd.DataFrame(rows, columns=["strategy", "repeat", "run", "best_gap"])
    return TuneEvalResult(response, goal, budget, repeats, tuple(targets), optimum, len(truth),
                          _pad(curves, budget), seconds, list(names))


def _pad(curves: pd.DataFrame, budget: int) -> pd.DataFrame:
    """A strategy that stops early (its space used up) keeps its last best to the budget."""
    out = []
    for (s, r), g in curves.groupby(["strategy", "repeat"], sort=False):
        last = g.iloc[-1]
        extra = [(s, r, i, last["best_gap"]) for i in range(int(last["run"]) + 1, budget + 1)]
        out.append(g)
        if extra:
            out.append(pd.DataFrame(extra, columns=g.columns))
    return pd.concat(out, ignore_index=True)


def _replay(strategy: str, domain: Domain, obj: Objective, budget: int, seed: int,
            truth: dict[str, float], noise: float, rng: np.random.Generator,
            confirm_runs: int) -> list[str]:
    """The configuration keys one strategy measured, in order."""
    if strategy == "optuna-tpe":
        return _optuna_tpe(domain, obj, budget, seed, truth, noise, rng)
    if strategy == "random":
        keys = list(truth)
        return [keys[i] for i in rng.integers(len(keys), size=budget)]
    name = "auto" if strategy == "storlab" else strategy
    strat = make_strategy(name, domain, [obj], TuneSettings(budget=budget, seed=seed,
                                                            confirm_runs=confirm_runs))
    history: list[Observation] = []
    out: list[str] = []
    while len(history) < budget:
        batch = strat.ask(history)
        if not batch:
            break
        for p in batch:
            for _ in range(p.repetitions):
                k = config_key(p.config)
                v = truth[k] * (1.0 + noise * rng.standard_normal()) if noise else truth[k]
                history.append(Observation(f"r{len(history) + 1}", len(history) + 1, 0, 1,
                                           p.config, "ok", {obj.name: v}, p.phase, p.note))
                out.append(k)
    return out[:budget]


def _optuna_tpe(domain: Domain, obj: Objective, budget: int, seed: int,
                truth: dict[str, float], noise: float, rng: np.random.Generator) -> list[str]:
    """Optuna's TPE as a user would run it: default sampler, one trial per run (a repeated
    configuration is measured again); proposals outside the table told as failed."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {n: domain.distribution(n) for n in domain.names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(direction=obj.goal,
                                    sampler=optuna.samplers.TPESampler(seed=seed))
        out: list[str] = []
        misses = 0
        while len(out) < budget:
            t = study.ask(dists)
            cfg = {n: domain.from_param(n, t.params[n]) for n in domain.names}
            k = config_key(cfg)
            if k not in truth:
                study.tell(t, state=optuna.trial.TrialState.FAIL)
                misses += 1
                if misses > 200 * budget:  # the table is too sparse for the sampler
                    break
                continue
            v = truth[k] * (1.0 + noise * rng.standard_normal()) if noise else truth[k]
            study.tell(t, v)
            out.append(k)
    return out
