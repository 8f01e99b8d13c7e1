"""Offline evaluation of tuning strategies on a complete measured table (`storlab
tune-eval`): the table is the oracle, each strategy tunes against it from scratch many
times, and we count the runs it needed to measure a configuration within 1 % / 5 % of the
table's optimum.

Strategies: storlab's own (`storlab` = auto, or any of `STRATEGIES`), and two baselines run
as their libraries run them: `optuna-tpe` (Optuna's TPESampler with its defaults; every
trial is a run, repeats included) and `random` (uniform draws from the feasible table,
repeats included). Configurations outside the table are infeasible: never run, never
counted (a proposal outside it is told as failed and asked again).

storlab's strategies are replayed through the campaign loop `storlab tune` runs: a campaign
file written as a user writes it (numeric levels ordinal, text categorical, the table's
constraints), its store in a temporary directory and `TableOracle` as its runner, an
in-process runner that looks each configuration up in the table. Batches, their shuffle,
the store's history, resume bookkeeping and the recommendation are the CLI's own.
"""

from __future__ import annotations

import ast
import math
import os
import re
import tempfile
import time
import uuid
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..campaign.sources import config_key
from ..errors import AnalysisError, SpaceError
from ..jsonutil import plain, to_jsonable
from ..result_shape import Result
from ..space import Factor, Space, reserved_name
from .domain import Domain
from .strategies import STRATEGIES, Objective, TuneSettings, make_strategy

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..campaign.runners import RunResult
    from .result import TuneResult

BASELINES = ("optuna-tpe", "optuna-tpe-norepeat", "random")

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
    #: strategy, repeat, rec_gap: the true gap of the configuration each tuning recommends
    #: (storlab's answer; a baseline's best observation, what its user acts on)
    recommended: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["strategy", "repeat", "rec_gap"]))
    noise: float = 0.0
    #: baselines only: the true gap of what each would recommend after each run
    rec_curve: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["strategy", "repeat", "run", "rec_gap"]))

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
                rec = self.recommended
                rec = rec.loc[rec["strategy"] == s, "rec_gap"].astype(float)
                rows.append({"strategy": s, "target": t,
                             "median_runs": med if math.isfinite(med) else math.nan,
                             "reached_share": share,
                             "median_final_gap": float(final.loc[s].median()),
                             # what the user acts on: the recommendation's true gap
                             "recommended_share": float((rec <= t + 1e-12).mean())
                             if len(rec) else math.nan,
                             "median_recommended_gap": float(rec.median())
                             if len(rec) else math.nan,
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
              noise: float = 0.0, confirm_runs: int = 3, confirm_share: float = 0.5,
              progress: Callable[[str, int], None] | None = None,
              constraints: Sequence[str] = ()) -> TuneEvalResult:
    """Replay each strategy `repeats` times against the table (one row per configuration;
    repeated rows are averaged). `noise` multiplies each measured run by lognormal noise
    exp(noise * N(0, 1)) (the gap is always judged on the table's true values; storlab's
    runs draw it from (seed, run key): `run_noise`). storlab's strategies run as `storlab
    tune` runs them (`replay_tuning`: a campaign file with the space as a user writes it
    and `constraints`, the campaign loop and store, tuning seed `seed * 100003 + repeat`)
    and are scored on the true value of the configuration the CLI recommends
    (`TuneResult.best`). A table that is neither every combination of its levels nor,
    with `constraints`, every feasible one is replayed with its rows as the feasible set
    (which no campaign file can say). Columns named as storlab names its own (`block`,
    `seed`, `_x`) take neutral factor names in the replay (`factor_names`); the result,
    `constraints` and messages use the table's column names."""
    if response not in table.columns:
        raise AnalysisError(f"response {response!r} is not a column of the table")
    if goal not in ("maximize", "minimize"):
        raise AnalysisError(f"goal {goal!r} must be maximize or minimize")
    if budget < 2 or repeats < 1:
        raise AnalysisError("need --budget >= 2 and --repeats >= 1")
    if not 0 < confirm_share < 1:
        raise AnalysisError(f"confirm share {confirm_share:g} must be between 0 and 1, both "
                            "excluded")
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
    # the replay's factors take neutral names when a column's is reserved for a factor
    alias = factor_names(params, response)
    back = {a: p for p, a in alias.items()}
    df = df.rename(columns=alias)
    space = space_from_table(df, [alias[p] for p in params])
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

    # The space as a user writes it (numeric levels ordinal, text categorical, the
    # constraints given); a table that is not every feasible configuration keeps its rows
    # as the feasible set (no constraint language says "a row of this table").
    moved = any(a != p for p, a in alias.items())
    cons = [_renamed(c, alias) for c in constraints] if moved else list(constraints)
    user_space = {"factors": [f.to_dict() for f in space.factors],
                  **({"constraints": cons} if cons else {}),
                  "responses": [{"name": response, "goal": goal}]}
    try:
        checked = Space.from_dict(user_space, source="the table")
    except SpaceError as exc:  # told in the table's own column names
        raise SpaceError(_unaliased(str(exc), back)) from None
    full = _covers(checked, domain, len(truth), back)
    rows: list[tuple[str, int, int, float]] = []
    recs: list[tuple[str, int, float]] = []
    prefix_rows: list[tuple[str, int, int, float]] = []
    seconds: dict[str, float] = {}
    for s in strategies:
        t0 = time.perf_counter()
        for r in range(repeats):
            rng = np.random.default_rng([seed, r, 11])
            prefix: list[str] = []
            measured, rec = _replay(s, domain, obj, budget, seed * 100_003 + r, truth, noise,
                                    rng, confirm_runs, user_space, confirm_share,
                                    prefix, full)
            prefix_rows += [(s, r, i, gap(truth[k])) for i, k in enumerate(prefix, 1)]
            best = math.inf
            for i, k in enumerate(measured, 1):
                if k in truth:  # a failed run (not in the table) measured nothing
                    best = min(best, gap(truth[k]))
                rows.append((s, r, i, best))
            recs.append((s, r, gap(truth[rec]) if rec is not None else math.inf))
            if progress is not None:
                progress(s, r)
        seconds[s] = time.perf_counter() - t0
    curves = pd.DataFrame(rows, columns=["strategy", "repeat", "run", "best_gap"])
    return TuneEvalResult(response, goal, budget, repeats, tuple(targets), optimum, len(truth),
                          _pad(curves, budget), seconds, [back[n] for n in names],
                          pd.DataFrame(recs, columns=["strategy", "repeat", "rec_gap"]), noise,
                          pd.DataFrame(prefix_rows,
                                       columns=["strategy", "repeat", "run", "rec_gap"]))


def factor_names(params: Sequence[Any], response: Any) -> dict[Any, str]:
    """The factor name each parameter column takes in the replay's campaign: its own,
    unless some column's name is reserved for a factor (`block`, `seed`, `_x`: columns
    storlab adds to every result); then every column takes one prefix (`p_block`), which
    keeps the names' order the strategies follow, and never the response's name."""
    if not any(reserved_name(str(p)) for p in params):
        return {p: p for p in params}
    prefix = "p_"
    while any(prefix + str(p) == str(response) for p in params):
        prefix = "p" + prefix
    return {p: prefix + str(p) for p in params}


def _renamed(text: str, alias: Mapping[Any, str]) -> str:
    """A constraint over the table's columns, over the replay's factor names instead (text
    Python cannot read is left as it is: the space refuses it in the user's words)."""
    try:
        tree = ast.parse(str(text), mode="eval")
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in alias:
                node.id = alias[node.id]
        return ast.unparse(tree)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return str(text)


def _unaliased(text: str, back: Mapping[str, Any]) -> str:
    """A message about the replay's factors in the table's column names (as written, or
    as `repr` shows them in quotes)."""
    moved: dict[str, str] = {}
    for a, p in back.items():
        if a != p:
            moved[a] = str(p)
            moved[repr(a)[1:-1]] = repr(str(p))[1:-1]
    if not moved:
        return text
    pattern = "|".join(re.escape(a) for a in sorted(moved, key=len, reverse=True))
    return re.sub(rf"(?<!\w)(?:{pattern})(?!\w)", lambda m: moved[m.group()], text)


def _covers(space: Space, domain: Domain, n_rows: int, back: Mapping[str, Any]) -> bool:
    """Whether the table's rows are every feasible configuration of `space` (a row that
    breaks its constraints is refused, in the table's column names `back`)."""
    for c in domain.candidates or []:
        if not all(con(c) for con in space.constraints):
            row = {back[n]: v for n, v in c.items()}
            raise AnalysisError(f"table row {row} breaks the constraints")
    if not space.constraints:
        return n_rows == math.prod(len(f.levels or []) for f in space.factors)
    pool = Domain(space).subspace(space.names, {})
    return pool is not None and len(pool) == n_rows


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


def _noisy(truth: dict[str, float], k: str, noise: float, rng: np.random.Generator
           ) -> float:
    """One measured run: the true value times fresh lognormal noise."""
    return truth[k] * math.exp(noise * rng.standard_normal()) if noise else truth[k]


def _replay(strategy: str, domain: Domain, obj: Objective, budget: int, seed: int,
            truth: dict[str, float], noise: float, rng: np.random.Generator,
            confirm_runs: int, user_space: dict[str, Any] | None = None,
            confirm_share: float = 0.5, prefix: list[str] | None = None,
            full: bool = True) -> tuple[list[str], str | None]:
    """The configuration keys one strategy measured, in order, and the one it recommends.
    A baseline (which does not know its budget) also appends to `prefix` what it would
    recommend after each run: its recommendation at any smaller budget. storlab's are
    `replay_tuning` on `user_space` (the campaign file's space), or on the table's rows
    unless `full` (the table is every feasible configuration of that space)."""
    if strategy in ("optuna-tpe", "optuna-tpe-norepeat"):
        return _optuna_tpe(domain, obj, budget, seed, truth, noise, rng,
                           repeat=strategy == "optuna-tpe", prefix=prefix)
    if strategy == "random":
        keys = list(truth)
        out = [keys[i] for i in rng.integers(len(keys), size=budget)]
        vals = [_noisy(truth, k, noise, rng) for k in out]
        scores = [obj.score(v) for v in vals]
        if prefix is not None:
            prefix += [out[int(np.argmax(scores[:i]))] for i in range(1, len(out) + 1)]
        return out, out[int(np.argmax(scores))]
    name = "auto" if strategy == "storlab" else strategy
    res = replay_tuning(user_space or {"factors": [f.to_dict() for f in domain.space.factors]},
                        truth, obj, budget, seed, noise, name, confirm_runs, confirm_share,
                        candidates=None if full else domain)
    out = [config_key(o.config) for o in res.history]
    b = res.best()
    return out[:budget], None if b is None else config_key(b.config)


def run_noise(seed: int, key: str, noise: float) -> float:
    """The factor one run's value is multiplied by: exp(noise * N(0, 1)), the normal drawn
    from numpy's default generator seeded with [seed, CRC-32 of the run key] (`c3-r2`), so
    a run's noise depends on the tuning and the run alone, not on how it is replayed (the
    campaign loop or a benchmark program the CLI runs)."""
    if not noise:
        return 1.0
    z = np.random.default_rng([seed, zlib.crc32(key.encode())]).standard_normal()
    return math.exp(noise * float(z))


#: The runner type the replay's campaign file names (`TableOracle`, registered on use).
ORACLE_RUNNER = "table-oracle"
_ORACLES: dict[str, Mapping[str, float]] = {}


class TableOracle:
    """An in-process runner whose benchmark is a measured table: a run of a configuration
    is its table value times `run_noise(seed, run key, noise)`; a configuration the table
    lacks fails its run, as a benchmark that cannot run it would. `oracle` names a table
    `replay_tuning` holds for the length of one campaign (sequential executor only: a
    worker process would not see it)."""

    name = ORACLE_RUNNER

    def __init__(self, oracle: str, response: str, noise: float = 0.0, seed: int = 0) -> None:
        if oracle not in _ORACLES:
            raise AnalysisError(f"table oracle {oracle!r} is not loaded in this process")
        self.truth, self.response = _ORACLES[oracle], response
        self.noise, self.seed = float(noise), int(seed)

    def metric_names(self) -> list[str]:
        return [self.response]

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        from ..campaign.runners import RunResult

        now = time.time()
        v = self.truth.get(config_key(dict(config)))
        if v is None:
            return RunResult("failed", stderr=f"{dict(config)}: not a row of the table",
                             exit_code=1, started=now, ended=now)
        # the campaign runs each run in scratch/<run key>
        v *= run_noise(self.seed, Path(workdir).name, self.noise)
        return RunResult("ok", {self.response: v}, started=now, ended=now)


@contextmanager
def _oracle(truth: Mapping[str, float]) -> Iterator[str]:
    from ..campaign.runners import REGISTRY

    added = ORACLE_RUNNER not in REGISTRY
    REGISTRY.setdefault(ORACLE_RUNNER, f"{__name__}:TableOracle")
    token = uuid.uuid4().hex
    _ORACLES[token] = truth
    try:
        yield token
    finally:
        del _ORACLES[token]
        if added and not _ORACLES:  # registered for the replay only, not for the process
            REGISTRY.pop(ORACLE_RUNNER, None)


def _scratch_root() -> str | None:
    """A memory-backed directory for the replay's store when there is one: the store
    commits every run with synchronous=FULL, which on a disk costs more than the tuning."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def replay_tuning(space: Mapping[str, Any], truth: Mapping[str, float], obj: Objective,
                  budget: int, seed: int, noise: float = 0.0, strategy: str = "auto",
                  confirm_runs: int = 3, confirm_share: float = 0.5,
                  candidates: Domain | None = None) -> TuneResult:
    """One `storlab tune` of the table `truth` (config_key -> value), through the campaign
    loop: a campaign file with `space` (as a user writes it), `design: {kind: tune, budget,
    strategy, objectives, confirm_runs, confirm_share}` and `seed`, run to its end with the
    sequential executor, its result read from the store as the CLI reads it
    (`result_from_campaign`). Each run measures `truth` times `run_noise(seed, run key,
    noise)`. `candidates`: a table no space can describe (not every combination of its
    levels, and no constraints given): the campaign's source is the strategy on those rows,
    which a campaign file cannot say; the loop is still the CLI's."""
    import yaml

    from ..campaign.campaign import Campaign
    from .result import result_from_campaign
    from .tune_source import TuneSource

    with _oracle(truth) as token, \
            tempfile.TemporaryDirectory(prefix="storlab-replay-", dir=_scratch_root()) as d:
        spec = {"name": "replay", "space": dict(space),
                "design": {"kind": "tune", "budget": budget, "strategy": strategy,
                           "objectives": [{obj.name: obj.goal}], "confirm_runs": confirm_runs,
                           "confirm_share": confirm_share},
                "runner": {"type": ORACLE_RUNNER, "options": {
                    "oracle": token, "response": obj.name, "noise": noise, "seed": seed}},
                "seed": seed}
        path = Path(d) / "tune.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        camp = Campaign.load(path)
        if candidates is not None:
            camp.source = TuneSource(make_strategy(strategy, candidates, [obj], TuneSettings(
                budget=budget, seed=seed, confirm_runs=confirm_runs,
                confirm_share=confirm_share)))
        if camp.run(executor="sequential").interrupted:
            # the loop takes Ctrl-C as "stop after this run": a truncated tuning would be
            # scored as a finished one, so the evaluation stops as Ctrl-C always stopped it
            raise KeyboardInterrupt
        return result_from_campaign(camp)


def _optuna_tpe(domain: Domain, obj: Objective, budget: int, seed: int,
                truth: dict[str, float], noise: float, rng: np.random.Generator,
                repeat: bool = True, prefix: list[str] | None = None
                ) -> tuple[list[str], str | None]:
    """Optuna's TPE as a user would run it: default sampler, one trial per run, the
    recommendation its best observation (`study.best_trial`), the space written by run
    where the table's rows fix a factor (`_by_run`); proposals outside the table told as
    failed. `repeat=False`: a configuration already measured is told its earlier value
    and not run again (no run spent)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {n: domain.distribution(n) for n in domain.names}
    rows = [tuple(c[n] for n in domain.names) for c in domain.candidates or []]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(direction=obj.goal,
                                    sampler=optuna.samplers.TPESampler(seed=seed))
        out: list[str] = []
        seen: dict[str, float] = {}
        best: tuple[float, str] | None = None
        misses = 0
        while len(out) < budget:
            t = study.ask()
            cfg = _by_run(t, domain, dists, rows)
            k = config_key(cfg)
            if k not in truth or (not repeat and k in seen):
                if k in truth:
                    study.tell(t, seen[k])
                else:
                    study.tell(t, state=optuna.trial.TrialState.FAIL)
                misses += 1
                if misses > 200 * budget:  # the table is too sparse for the sampler
                    break
                continue
            v = _noisy(truth, k, noise, rng)
            seen[k] = v
            study.tell(t, v)
            out.append(k)
            if best is None or obj.score(v) > best[0]:
                best = (obj.score(v), k)
            if prefix is not None:
                prefix.append(best[1])
    return out, None if best is None else best[1]


def _by_run(trial: Any, domain: Domain, dists: Mapping[str, Any],
            rows: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    """The configuration an Optuna user's define-by-run space proposes: each factor in
    order is suggested, unless the table's rows that agree with the factors before it hold
    one value of it; then it is fixed, as `if journal: suggest the compressor` fixes the
    compressor without a journal. On a full factorial every factor of two or more levels
    is suggested, in the order `study.ask(dists)` suggests them. (Asked over the whole space, TPE drew
    MongoDB's journal off with a compressor its constraint forbids about 110 times per
    measured run: told as failed, such proposals teach TPE nothing.)"""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    cfg: dict[str, Any] = {}
    live = list(rows)
    # in domain.names order: a factor is fixed only by the factors before it, so which
    # factors are fixed (and so TPE's space) depends on that order
    for i, n in enumerate(domain.names):
        values = {r[i] for r in live}
        if len(values) == 1:
            cfg[n] = next(iter(values))
        else:
            d = dists[n]
            if isinstance(d, CategoricalDistribution):
                param = trial.suggest_categorical(n, d.choices)
            elif isinstance(d, IntDistribution):
                param = trial.suggest_int(n, d.low, d.high, step=d.step, log=d.log)
            else:
                param = trial.suggest_float(n, d.low, d.high, step=d.step, log=d.log)
            cfg[n] = domain.from_param(n, param)
        live = [r for r in live if r[i] == cfg[n]]
    return cfg
