"""Tuning strategies: each is a pure function of (its settings, the history of measured runs)
that proposes the next runs. Being pure is what makes a killed tuning campaign resume
exactly: the campaign asks again with the same history and gets the same answer.

- `screen-then-tune` (storlab's default for more than a handful of factors): a Latin
  Hypercube screening, Carver's importance ranking on it (seed 001: a few parameters carry
  most of the variance), a measured main-effects guess, one- and two-factor local steps
  around the best measured configuration, then Optuna's TPE over the most important
  parameters with the others held at the best measured configuration's values, widening
  to the next parameter whenever the search stalls or the subspace is used up.
- `tpe`, `gp`, `nsga2`: Optuna's samplers over the whole space.
- `random`: unmeasured feasible configurations at random.

Every strategy ends with confirmation: the best candidates (the measured Pareto front for
two objectives) and the baseline are re-run until each has `confirm_runs` measurements, so
the answer is a measured, repeated configuration, never a model's prediction. Optuna does
the sampling through its ask/tell interface; storlab supplies the screening, the narrowing,
the constraints, the de-duplication and the bookkeeping.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..campaign.sources import Observation, Proposal, config_key
from ..errors import StorlabError, TuneError
from ..jsonutil import plain
from .batch import early_spent, fill, more, race_runs, raced, rounded, warm_up
from .domain import Domain

STRATEGIES = ("auto", "screen-then-tune", "tpe", "gp", "nsga2", "random")
#: `auto` screens first when the space has more factors than this.
HANDFUL = 4


@dataclass(frozen=True)
class Objective:
    name: str
    goal: str = "maximize"

    def score(self, value: float) -> float:
        """Larger is better, whatever the goal."""
        return value if self.goal == "maximize" else -value


@dataclass
class TuneSettings:
    budget: int
    seed: int = 0
    screen_runs: int | None = None
    confirm_runs: int = 3
    confirm_top: int = 3
    stall: int | None = None
    baseline: dict[str, Any] | None = None
    #: share of the budget kept for racing the leading candidates (one objective)
    confirm_share: float = 0.5


# --------------------------------------------------------------------------- tally
@dataclass
class Entry:
    """Everything measured for one configuration."""

    config: dict[str, Any]
    first_phase: str
    order: int
    values: list[list[float]] = field(default_factory=list)  # per ok run, per objective
    failed: int = 0
    screened: list[list[float]] = field(default_factory=list)  # the screening-phase runs'

    @property
    def n(self) -> int:
        return len(self.values)

    def mean(self, j: int = 0) -> float:
        return float(np.mean([v[j] for v in self.values])) if self.values else math.nan


class Tally:
    """The history grouped by configuration; scores are `Objective.score` (larger better)."""

    def __init__(self, history: Sequence[Observation], objectives: Sequence[Objective]) -> None:
        self.objectives = list(objectives)
        self.entries: dict[str, Entry] = {}
        for i, o in enumerate(history):
            k = config_key(o.config)
            e = self.entries.get(k)
            if e is None:
                e = self.entries[k] = Entry(dict(o.config), o.phase, i)
            vals = observed_values(o, self.objectives)
            if vals is None:
                e.failed += 1
            else:
                e.values.append([ob.score(v) for ob, v in zip(self.objectives, vals)])
                if o.phase == "screen":
                    e.screened.append(e.values[-1])

    def measured(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.n]

    def ranked(self) -> list[Entry]:
        """Configurations with a value, best first on the first objective (ties: more runs,
        then earlier)."""
        return sorted(self.measured(), key=lambda e: (-e.mean(0), -e.n, e.order))

    def pareto(self) -> list[Entry]:
        """The non-dominated configurations on mean scores, in order of the first objective."""
        es = self.measured()
        m = np.array([[e.mean(j) for j in range(len(self.objectives))] for e in es])
        front = []
        for i, e in enumerate(es):
            dominated = np.any(np.all(m >= m[i], axis=1) & np.any(m > m[i], axis=1))
            if not dominated:
                front.append(e)
        return sorted(front, key=lambda e: (-e.mean(0), e.order))

    def best(self) -> Entry | None:
        r = self.ranked()
        return r[0] if r else None

    def best_screened(self) -> Entry | None:
        """The best configuration the first batch measured (what a screening alone gives),
        judged on its screening runs only: later runs of a screened configuration must not
        change which one it was, else the confirmation re-runs one configuration and the
        report compares against another that was never re-run."""
        screened = [e for e in self.measured() if e.screened]
        if not screened:
            return None
        return min(screened, key=lambda e: (-float(np.mean([v[0] for v in e.screened])),
                                            e.order))

    def baseline(self, config: Mapping[str, Any] | None) -> Entry | None:
        """The given baseline configuration's entry (None before it ran), else the best
        screened one."""
        if config is not None:
            return self.entries.get(config_key(config))
        return self.best_screened()


def observed_values(o: Observation, objectives: Sequence[Objective]) -> list[float] | None:
    """The run's objective values, or None when it failed or lacks a finite value (a failed
    run is recorded and never counts as a good value)."""
    if not o.ok:
        return None
    out = []
    for ob in objectives:
        v = o.metrics.get(ob.name)
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            return None
        out.append(float(v))
    return out


# --------------------------------------------------------------------------- strategies
class Strategy:
    """Shared mechanics: budget, baseline, confirmation, de-duplication."""

    name = ""
    confirm = True
    random_start = 10  # Optuna's TPE draws its first 10 trials at random

    def __init__(self, domain: Domain, objectives: Sequence[Objective],
                 settings: TuneSettings) -> None:
        if not objectives:
            raise TuneError("nothing to optimise: name a response")
        self.domain = domain
        self.objectives = list(objectives)
        self.s = settings
        if settings.baseline is not None and not domain.feasible(settings.baseline):
            raise TuneError(f"the baseline {settings.baseline} is not a feasible configuration")

    #: Whether the search can propose a run while others are in flight (`ask_more`).
    batches = True
    #: The move `next_config` made, when it names it (see `move_note`).
    move = ""

    #: Runs the executor keeps in flight (`--executor parallel:N`): an ask with nothing in
    #: flight answers with a batch of this many (tune/batch.py). Set by the campaign.
    width = 1

    # -- the protocol
    def ask(self, history: Sequence[Observation],
            pending: Sequence[Proposal] = ()) -> list[Proposal]:
        """The next runs given the finished ones; with runs still in flight (`pending`, a
        parallel executor's free slot), `ask_more`. With nothing in flight and `width`
        slots, a batch that fills them (`batch.fill`)."""
        if pending:
            return self.ask_more(history, pending)
        return fill(self, history, self.ask_next(history))

    def ask_next(self, history: Sequence[Observation]) -> list[Proposal]:
        """The next runs given the finished ones, nothing in flight: the screening, a
        search run, or the confirmation's next round."""
        used = len(history)
        remaining = self.s.budget - used
        # A fixed confirmation ends the tuning; a race goes on while runs remain (once it
        # has decided, the search gets the runs back; a new leader is raced in turn).
        if remaining <= 0 or (not self.racing() and any(o.phase == "confirm"
                                                        for o in history)):
            return []
        tally = Tally(history, self.objectives)
        first = self.start(history, tally, remaining)
        if first:
            return first
        searched = any(o.phase == "tune" for o in history)
        # (race runs made early by spare parallel slots come out of the race's runs)
        if self.confirm and remaining <= self.reserve(tally) - early_spent(history) and \
                (searched or remaining <= 1):
            out = self.confirmation(tally, remaining)
            if out or not self.racing():
                return out
        self.move = ""
        cfg = self.next_config(history, tally)
        if cfg is None:  # nothing left to try
            return self.confirmation(tally, remaining) if self.confirm else []
        # A sampler's first draws are random (TPE's start-up trials): they are this
        # strategy's screening, and its best is the baseline when the space has no default.
        early = sum(o.phase in ("screen", "tune") for o in history) < self.random_start
        return [Proposal(cfg, 1, "screen" if early else "tune", self.move_note())]

    def ask_more(self, history: Sequence[Observation], pending: Sequence[Proposal]
                 ) -> list[Proposal]:
        """One more run while `pending` runs are in flight, or [] to wait for them: a search
        run, or with spare parallel slots one of the race's runs early (tune/batch.py).

        The pending configurations count as measured at the incumbent's value (a constant
        liar at the best value: Ginsbourger, Le Riche and Carraro, "Kriging is well-suited
        to parallelize optimization", 2010): they are never proposed twice, the local
        model sees no gain where a run is on its way and turns to another factor, and TPE
        models them as trials. The lie never reaches a decision: the screening, the switch
        to confirmation and the confirmation itself wait for the runs in flight and see
        only finished runs."""
        warm_up()
        if raced(history) or raced(pending):
            return []
        return more(self, history, pending)  # a search run, or an early race run

    def search_more(self, history: Sequence[Observation], pending: Sequence[Proposal],
                    spare: bool = False) -> list[Proposal]:
        """One search run beside `pending` (constant liar, see `ask_more`), or []: within
        the budget, the pending runs counted, and, before the confirmation has started,
        outside the runs it keeps (a race over the finished runs that is decided can
        `spare` them, tune/batch.py, all but a whole round of `width` for the race
        proper)."""
        remaining = self.s.budget - len(history) - sum(p.repetitions for p in pending)
        if remaining <= 0 or not self.batch_ready(history, pending):
            return []
        tally = Tally(history, self.objectives)
        if self.confirm and not raced(history):
            kept = self.reserve(tally) - early_spent(history, pending)
            if spare:  # a decided race hands back its runs but a whole round of the slots
                kept = min(kept, self.width)
            if remaining <= kept:
                return []  # the confirmation decides on finished runs only
        # (a race run in flight re-runs a measured configuration: no lie needed)
        lied = [*history, *self.lies(tally, [p for p in pending if p.phase != "confirm"])]
        self.move = ""
        cfg = self.next_config(lied, Tally(lied, self.objectives))
        if cfg is None:
            return []
        early = sum(o.phase in ("screen", "tune") for o in history) + \
            sum(p.phase in ("screen", "tune") for p in pending) < self.random_start
        return [Proposal(cfg, 1, "screen" if early else "tune", self.move_note())]

    def tally(self, history: Sequence[Observation]) -> Tally:
        """The history grouped by configuration, on this strategy's objectives."""
        return Tally(history, self.objectives)

    def move_note(self) -> dict[str, Any]:
        """The note a search run carries into the store when `next_config` named its
        move (`move`: e.g. an escape from a local optimum, which later asks count)."""
        return {"move": self.move} if self.move else {}

    def batch_ready(self, history: Sequence[Observation], pending: Sequence[Proposal]
                    ) -> bool:
        """Whether a search run can be proposed while `pending` are in flight."""
        return True

    def lies(self, tally: Tally, pending: Sequence[Proposal]) -> list[Observation]:
        """The pending runs as observations at the incumbent's values (phase `pending`, so
        no stall count or phase test reads them as search runs); failed when nothing has a
        value yet (known to be on its way, never proposed again)."""
        best = tally.best()
        out = []
        for i, p in enumerate(pending):
            metrics: dict[str, float] = {}
            if best is not None:
                # Entry values are scores (larger better): back to the metric's own sign
                metrics = {ob.name: ob.score(best.mean(j))
                           for j, ob in enumerate(self.objectives)}
            out.append(Observation(f"pending-{i}", 0, 0, 0, dict(p.config),
                                   "ok" if metrics else "failed", metrics, "pending",
                                   dict(p.note)))
        return out

    def meta(self) -> dict[str, Any]:
        return {"strategy": self.name, "seed": self.s.seed, "budget": self.s.budget,
                "objectives": [[o.name, o.goal] for o in self.objectives],
                "confirm_runs": self.s.confirm_runs, "confirm_top": self.s.confirm_top,
                "baseline": self.s.baseline,
                **({"confirm": "racing", "confirm_share": self.s.confirm_share}
                   if self.racing() else {})}

    def min_budget(self) -> int:
        """The fewest runs that leave room for one search run and the confirmation of the
        best, the best screened configuration and the baseline (when it is another)."""
        essential = 2 + (self.s.baseline is not None)
        return 1 + (self.s.baseline is not None) + \
            ((self.s.confirm_runs - 1) * essential if self.confirm else 0)

    # -- hooks
    def start(self, history: Sequence[Observation], tally: Tally, remaining: int
              ) -> list[Proposal]:
        """The first batch (the baseline, a screening design), or [] once it has run."""
        if history or self.s.baseline is None:
            return []
        return [Proposal(dict(self.s.baseline), 1, "screen", {"baseline": True})]

    def next_config(self, history: Sequence[Observation], tally: Tally
                    ) -> dict[str, Any] | None:
        raise NotImplementedError

    # -- confirmation
    def racing(self) -> bool:
        """One objective is confirmed by a race (tune/racing.py); two by re-running the
        Pareto candidates `confirm_runs` times."""
        return self.confirm and len(self.objectives) == 1

    def candidates(self, tally: Tally) -> list[Entry]:
        """Who gets confirmed, most important first: the best (or the Pareto front, spread
        along the first objective), then the baseline, then the runners-up."""
        k = self.s.confirm_top
        if len(self.objectives) > 1:
            front = tally.pareto()
            if len(front) > k:
                idx = np.unique(np.round(np.linspace(0, len(front) - 1, k)).astype(int))
                front = [front[i] for i in idx]
            top = front
        else:
            top = tally.ranked()[:k]
        out = top[:1]
        base = tally.baseline(self.s.baseline)
        if base is not None and base not in out:
            out.append(base)
        screened = tally.best_screened()
        if screened is not None and screened not in out:
            out.append(screened)
        out += [e for e in top[1:] if e not in out]
        return out

    def wanted(self, e: Entry) -> int:
        """Confirmation runs a candidate still needs: up to `confirm_runs` in all, but one
        retry for a configuration whose every run failed (a transient failure gets a second
        chance; a declared default that always fails cost confirm_runs more failures)."""
        if not e.n and e.failed:
            return 1
        return max(0, self.s.confirm_runs - e.n)

    def reserve(self, tally: Tally) -> int:
        """Runs kept for the confirmation: what the candidates still want, and when
        racing at least `confirm_share` of the budget (the race's runs)."""
        fixed = sum(self.wanted(e) for e in self.candidates(tally))
        if not self.racing():
            return fixed
        return max(fixed, math.ceil(self.s.confirm_share * self.s.budget))

    def confirmation(self, tally: Tally, remaining: int) -> list[Proposal]:
        if self.racing():
            return self.race_round(tally, remaining)
        out = []
        for e in self.candidates(tally):
            need = min(self.wanted(e), remaining)
            if need:
                out.append(Proposal(dict(e.config), need, "confirm"))
                remaining -= need
        return out

    def race_round(self, tally: Tally, remaining: int) -> list[Proposal]:
        """The baseline's runs up to its `confirm_runs` (the comparison the answer
        reports), then one round of the race (tune/racing.py): [] once both are done."""
        from .racing import race

        out: list[Proposal] = []
        base = tally.baseline(self.s.baseline)
        if base is not None:
            # one retry for a baseline whose every run failed, then no more
            need = 0 if not base.n and base.failed > 1 else self.wanted(base)
            need = min(need, remaining)
            if need:
                out.append(Proposal(dict(base.config), need, "confirm"))
                remaining -= need
        # N slots: the round's candidates get runs in turn until they are filled
        runs = race_runs(race(tally, self.s.confirm_top), self.width,
                         sum(p.repetitions for p in out), remaining)
        if base is not None and out:  # already re-run in this round
            runs = [e for e in runs if e is not base]
        for e in {id(e): e for e in runs}.values():
            out.append(Proposal(dict(e.config), sum(x is e for x in runs), "confirm"))
        return out

    # -- helpers for the samplers
    def unmeasured(self, tally: Tally, configs: Sequence[Mapping[str, Any]]
                   ) -> list[dict[str, Any]]:
        return [dict(c) for c in configs if config_key(c) not in tally.entries]

    def rng(self, history: Sequence[Observation]) -> np.random.Generator:
        return np.random.default_rng([self.s.seed, len(history), 7])


class RandomSearch(Strategy):
    """Unmeasured feasible configurations, uniformly at random."""

    name = "random"

    def next_config(self, history: Sequence[Observation], tally: Tally
                    ) -> dict[str, Any] | None:
        rng = self.rng(history)
        names = self.domain.names
        pool = self.domain.subspace(names, {})
        if pool is not None:
            pool = self.unmeasured(tally, pool)
            return pool[int(rng.integers(len(pool)))] if pool else None
        for _ in range(50):
            cfg = self.domain.sample(rng, names, {})
            if cfg is not None and config_key(cfg) not in tally.entries:
                return cfg
        return None


class OptunaSearch(Strategy):
    """An Optuna sampler over the `active` factors, the others held at `fixed`.

    The study is rebuilt from the history at each ask (a pure function of it): every
    measured run becomes a trial. A proposal that was already measured is told its mean
    and asked again (no run spent), an infeasible one is told the worst value seen (never
    run); if the sampler keeps proposing such, an unmeasured feasible configuration of the
    subspace is drawn at random instead."""

    name = "tpe"
    sampler_name = "tpe"
    retries = 30

    def _sampler(self, seed: int) -> Any:
        import optuna

        if self.sampler_name == "tpe":
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)
        if self.sampler_name == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed)
        if self.sampler_name == "gp":
            return optuna.samplers.GPSampler(seed=seed)
        raise TuneError(f"unknown sampler {self.sampler_name!r}")

    def next_config(self, history: Sequence[Observation], tally: Tally
                    ) -> dict[str, Any] | None:
        return self.search(history, tally, self.domain.names, {})

    def search(self, history: Sequence[Observation], tally: Tally, active: Sequence[str],
               fixed: Mapping[str, Any]) -> dict[str, Any] | None:
        import optuna
        from optuna.trial import create_trial

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        dists = {n: self.domain.distribution(n) for n in active}
        directions = ["maximize"] * len(self.objectives)
        rng = self.rng(history)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental-feature warnings
            study = optuna.create_study(directions=directions,
                                        sampler=self._sampler(int(rng.integers(2**31))))
            trials = []
            for e in tally.measured():
                for v in e.values:
                    trials.append(create_trial(
                        params={n: self.domain.to_param(n, e.config[n]) for n in active},
                        distributions=dists, values=v))
            study.add_trials(trials)
            worst = [min((v[j] for e in tally.measured() for v in e.values), default=0.0)
                     for j in range(len(self.objectives))]
            for _ in range(self.retries):
                t = study.ask(dists)
                cfg = {**fixed, **{n: self.domain.from_param(n, t.params[n]) for n in active}}
                cfg = {n: cfg[n] for n in self.domain.names}
                e = tally.entries.get(config_key(cfg))
                if not self.domain.feasible(cfg):
                    study.tell(t, worst)
                elif e is not None:
                    study.tell(t, [e.mean(j) for j in range(len(self.objectives))]
                               if e.n else worst)
                else:
                    return cfg
        # The sampler keeps coming back to known or infeasible points: draw instead.
        pool = self.domain.subspace(active, fixed)
        if pool is not None:
            pool = self.unmeasured(tally, pool)
            return pool[int(rng.integers(len(pool)))] if pool else None
        for _ in range(20):
            cfg = self.domain.sample(rng, active, fixed)
            if cfg is not None and config_key(cfg) not in tally.entries:
                return cfg
        return None


class ScreenThenTune(OptunaSearch):
    """Screen, rank, then a local step when one promises a gain, else a focused TPE ask.

    1. Screening: a small Latin Hypercube over the space (`screen_runs`, default
       max(6, k // 2 + 1)): enough to see the few factors that carry most of the
       variance (seed 001), not to estimate every effect.
    2. Carver's greedy importance on the screening (log scale: knobs multiply throughput)
       ranks the factors.
    3. The first search run exploits the screening: the best screened configuration with
       each factor moved to the level an additive model of all screening runs predicts
       best (what a main-effects recommendation would be, but measured, not predicted).
    4. Each later search run, every measured run told to every move:
       - a local step: the best measured configuration with one factor changed to a level
         not yet tried there, the change with the highest upper confidence bound on its
         gain in a local additive model (`LocalModel`; ties in importance order). Storage
         knobs interact (page size x cache, engine x depth), so a one-factor change around
         the incumbent finds what a main-effects model of the screening cannot see;
       - when none promises a gain, a two-factor step: two of the `pair_top` factors with
         the largest one-factor effects around the incumbent (`local_ranking`) changed
         together, by the same bound (page size and hash table must move together in
         Berkeley DB: each alone is worse, and the hash table's importance over the whole
         space is near zero);
       - when no such change promises a gain either (a local optimum), Optuna's TPE
         (multivariate, no random start-up: the screening is its start-up) over the
         `focus` most important factors, the others held at the incumbent's values.
    5. `stall` search runs in a row without a gain of `min_gain` widen the TPE focus by
       one factor; a used-up subspace does the same.
    6. Confirmation (the base class).

    Figures on the measured datasets in benchmarks/ (bench_tune.py) are in docs/tuning.md.
    """

    name = "screen-then-tune"
    random_start = 0     # its screening is the LHS batch
    min_gain = 0.01      # a smaller relative gain does not end a stall
    focus_share = 0.5    # TPE searches this share of the factors, most important first
    explore = 1.0        # the local step's upper confidence bound, in standard deviations
    pair_top = 3         # a stuck one-factor step tries pairs of this many top factors
    escape = True        # leave a local optimum by group moves (`escape_step`)
    escape_group = 3     # ... that change at least this many factors at once
    escape_basins = 3    # ... restarting from at most this many other basins
    escape_every = 1     # ... after this many search runs without a gain or escape

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._screen_cache: dict[tuple[Any, ...], tuple[list[str], dict[str, Any]]] = {}

    def screen_size(self) -> int:
        k = len(self.domain.names)
        return self.s.screen_runs or max(6, k // 2 + 1)

    def focus(self) -> int:
        """How many top-ranked factors TPE searches before any widening."""
        return max(2, math.ceil(len(self.domain.names) * self.focus_share))

    def min_budget(self) -> int:
        return self.screen_size() + super().min_budget()

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "screen_runs": self.screen_size(), "stall": self.s.stall}

    def _sampler(self, seed: int) -> Any:
        import optuna

        # The screening is the start-up: TPE models from its first ask on.
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                          n_startup_trials=0)

    def start(self, history: Sequence[Observation], tally: Tally, remaining: int
              ) -> list[Proposal]:
        if any(o.phase == "screen" for o in history):
            return []
        configs = self.screen_configs()
        with_base = self._with_baseline(configs)
        # N runs in flight: a screening that fills its last round (the search waits for
        # the whole screening, so a part-filled last round leaves slots idle)
        n = rounded(len(with_base), self.width, self.s.budget - self.min_budget())
        if n > len(with_base):
            configs = self.screen_configs(self.screen_size() + n - len(with_base))
            with_base = self._with_baseline(configs)
        return with_base

    def _with_baseline(self, configs: list[dict[str, Any]]) -> list[Proposal]:
        """The screening's runs, the baseline first when the design does not hold it."""
        props = [Proposal(c, 1, "screen") for c in configs]
        if self.s.baseline is not None and config_key(self.s.baseline) not in \
                {config_key(c) for c in configs}:
            props.insert(0, Proposal(dict(self.s.baseline), 1, "screen", {"baseline": True}))
        return props

    def batch_ready(self, history: Sequence[Observation], pending: Sequence[Proposal]
                    ) -> bool:
        """The search ranks factors on the whole screening: it waits for it to finish."""
        return any(o.phase == "screen" for o in history) and \
            not any(p.phase == "screen" for p in pending)

    def screen_configs(self, n: int | None = None) -> list[dict[str, Any]]:
        """A Latin Hypercube of `n` runs (`screen_size` by default) over the space (every
        level of every factor as evenly as the runs allow: what Carver's importance
        needs), without repeats."""
        n = n or self.screen_size()
        if self.domain.candidates is not None:  # offline: LHS strata over the table's rows
            return self._screen_from_candidates(n)
        from ..design.lhs import lhs_design

        space = self.domain.space
        free = self._balanced_screen(n)
        table = free if free is not None else lhs_design(space, n, seed=self.s.seed).table
        out, seen = [], set()
        for row in table[self.domain.names].to_dict("records"):
            cfg = {k: plain(v) for k, v in row.items()}
            if not self.domain.feasible(cfg):
                cfg = self.domain.repair(cfg, seen)
                if cfg is None:
                    continue
            if config_key(cfg) not in seen:
                seen.add(config_key(cfg))
                out.append(cfg)
        return out

    def _balanced_screen(self, n: int) -> pd.DataFrame | None:
        """With constraints over listed levels: a Latin Hypercube of the space without
        them, whose infeasible rows `screen_configs` repairs one by one (`Domain.repair`:
        a two-level factor keeps its level, the factors it forces follow). The design's
        own repair swaps values between rows and redraws what swaps cannot fix, which
        on MongoDB's table (journal off forces its compressor and commit interval) left
        one run in six without a journal where the Hypercube had three, and 28 of the 30
        journal-off configurations are within 5 % of the optimum. None: no constraints
        (the design as it always was), or one `repair` cannot enumerate."""
        from ..design.lhs import lhs_design

        space = self.domain.space
        if not space.constraints or not self.domain.repairable():
            return None
        free = replace(space, constraints=[])  # the same space, unconstrained
        return lhs_design(free, n, seed=self.s.seed).table

    def _screen_from_candidates(self, n: int) -> list[dict[str, Any]]:
        """On a finite table: each row a Latin Hypercube asks for is replaced by the
        nearest unused table row (in level-index space)."""
        from ..design.lhs import lhs_design

        cands = self.domain.candidates or []
        names = self.domain.names
        idx = np.array([[self._index(nm, c[nm]) for nm in names] for c in cands], dtype=float)
        span = np.maximum(idx.max(axis=0) - idx.min(axis=0), 1.0)
        want = lhs_design(self.domain.space, n, seed=self.s.seed).table[names]
        used: list[int] = []
        out = []
        for row in want.to_dict("records"):
            p = np.array([self._index(nm, plain(row[nm])) for nm in names], dtype=float)
            d = np.abs((idx - p) / span).sum(axis=1)
            d[used] = np.inf
            j = int(np.argmin(d))
            if math.isfinite(d[j]):
                used.append(j)
                out.append(dict(cands[j]))
        return out

    def _index(self, name: str, value: Any) -> int:
        levels = [plain(v) for v in self.domain.space[name].levels or []]
        return levels.index(value) if value in levels else 0

    def screening(self, history: Sequence[Observation]) -> tuple[list[str], dict[str, Any]]:
        """Factors by Carver's greedy importance on the screening runs (then by PI, then in
        the space's order; merged across objectives), and Carver's best value combination
        (first objective). Memoised on the screening runs: they never change once run."""
        screen = [o for o in history if o.phase == "screen"]
        key = tuple((config_key(o.config), o.ok, tuple(sorted(o.metrics.items())))
                    for o in screen)
        hit = self._screen_cache.get(key)
        if hit is None:
            hit = self._screen_cache[key] = self._rank(screen)
        return list(hit[0]), dict(hit[1])

    def _rank(self, screen: Sequence[Observation]) -> tuple[list[str], dict[str, Any]]:
        from ..analysis.importance import importance

        names = self.domain.names
        rows = []
        for o in screen:
            vals = observed_values(o, self.objectives)
            if vals is not None:
                rows.append({**o.config, **{f"_y{j}": ob.score(v) for j, (ob, v)
                                            in enumerate(zip(self.objectives, vals))}})
        df = pd.DataFrame(rows)
        for j in range(len(self.objectives) if rows else 0):
            df[f"_y{j}"] = _log_scores(df[f"_y{j}"].to_numpy())
        per_objective: list[list[str]] = []
        best: dict[str, Any] = {}
        for j in range(len(self.objectives)):
            order: list[str] = []
            if len(df) >= 3 and df[f"_y{j}"].nunique() > 1:
                try:
                    res = importance(df, f"_y{j}", params=names, stop=f"top:{len(names)}",
                                     goal="maximize", min_support=1)
                except StorlabError:
                    res = None
                if res is not None:
                    order = list(res.selected)
                    order += [p for p in res.pi_table()["param"] if p not in order]
                    if j == 0 and res.steps:
                        best = dict(res.steps[-1].best_values)
            per_objective.append(order + [n for n in names if n not in order])
        merged: list[str] = []
        for tier in zip(*per_objective):
            merged += [p for p in tier if p not in merged]
        return merged, best

    def next_config(self, history: Sequence[Observation], tally: Tally
                    ) -> dict[str, Any] | None:
        ranking, _ = self.screening(history)
        best = tally.best()
        incumbent = best.config if best is not None else self.screen_configs()[0]
        if not any(o.phase == "tune" for o in history):
            cfg = self.exploit_step(tally, ranking, incumbent)
            if cfg is not None:
                return cfg
        widened, stalled = self.stall_state(history)
        # Local and pair steps move only factors with listed levels: in a space with range
        # factors (a `real` one) they always find an untried level of some null factor, so
        # TPE, the only move of a range factor, never got a turn (d stayed at its screened
        # 0.628 for 26 runs while it carried the response). There, a stall hands the asks
        # to TPE until one gains.
        ranged = [n for n in ranking if self.domain.space[n].levels is None]
        if not (ranged and stalled):
            cfg = self.local_step(tally, ranking, incumbent)
            if cfg is not None:
                return cfg
            cfg = self.pair_step(tally, ranking, incumbent)
            if cfg is not None:
                return cfg
            # A local optimum for one- and two-factor moves: every `escape_every` search
            # runs without a gain, leave it by a group move (TPE's turn otherwise).
            if self.escape and self.since_escape(history) >= self.escape_every:
                cfg = self.escape_step(tally, ranking, incumbent)
                if cfg is not None:
                    self.move = "escape"
                    return cfg
        n_active = min(len(ranking), self.focus() + widened)
        while True:
            # a range factor is always searched: no other step moves it
            active = ranking[:n_active] + [n for n in ranged if n not in ranking[:n_active]]
            fixed = {n: incumbent[n] for n in ranking[n_active:]}
            cfg = self.search(history, tally, active, fixed)
            if cfg is not None or n_active >= len(ranking):
                return cfg if cfg is not None else self.local_step(tally, ranking, incumbent,
                                                                   any_gain=True)
            n_active += 1  # this subspace is used up: widen

    def local_step(self, tally: Tally, ranking: Sequence[str], incumbent: Mapping[str, Any],
                   any_gain: bool = False, away: Mapping[str, Any] | None = None
                   ) -> dict[str, Any] | None:
        """The incumbent with one factor changed to an untried level: the change with the
        highest upper confidence bound (`explore` standard deviations) on its gain in a
        local additive model (`LocalModel`), ties broken by importance rank. A change
        with no evidence near the incumbent is uncertain, so it is tried before a change
        the runs so far showed to be bad. None when no change's bound is above zero (a
        local optimum: TPE's turn) unless `any_gain`. Factors without listed levels are
        left to TPE. With `away`, only configurations `escape_group` or more factors from
        it (an escape's restart from another basin must not step back)."""
        model = LocalModel(self.domain, tally.measured(), incumbent)
        rank = {n: i for i, n in enumerate(ranking)}
        best_key: tuple[float, int] | None = None
        choice: dict[str, Any] | None = None
        for name in ranking:
            for lv in [plain(v) for v in self.domain.space[name].levels or []]:
                if lv == incumbent[name]:
                    continue
                cfg = {**incumbent, name: lv}
                cfg = {n: cfg[n] for n in self.domain.names}
                if config_key(cfg) in tally.entries or not self.domain.feasible(cfg) or \
                        not self._away(cfg, away):
                    continue
                mean, sd = model.gain(cfg)
                key = (mean + self.explore * sd, -rank[name])
                if best_key is None or key > best_key:
                    best_key, choice = key, cfg
        if best_key is not None and best_key[0] <= 0 and not any_gain:
            return None
        return choice

    def escape_step(self, tally: Tally, ranking: Sequence[str], incumbent: Mapping[str, Any]
                    ) -> dict[str, Any] | None:
        """Out of a local optimum that no one- or two-factor move leaves: a configuration
        `escape_group` or more factors from the incumbent, towards another basin.

        First the configuration an additive model of every run (equal weights) predicts
        best, when it is that far (the group of factors moved together); else a restart
        of the local search from another basin: a one- or two-factor step (the local
        steps' bound, in the local model around that point) from the best measured heads
        of other basins (`basins`, at most `escape_basins`), to a configuration that far
        from the incumbent. Storage optima can sit several factors away from the runner-up
        basin, where each change alone or in pairs is worse."""
        cfg = self.exploit_step(tally, ranking, incumbent)
        if cfg is not None and self._away(cfg, incumbent):
            return cfg
        for e in self.basins(tally, incumbent)[:self.escape_basins]:
            cfg = self.local_step(tally, ranking, e.config, away=incumbent)
            if cfg is None:
                cfg = self.pair_step(tally, ranking, e.config, away=incumbent)
            if cfg is not None:
                return cfg
        return None

    def _away(self, cfg: Mapping[str, Any], ref: Mapping[str, Any] | None) -> bool:
        """Whether `cfg` differs from `ref` in `escape_group` or more listed factors (always
        true without `ref`)."""
        if ref is None:
            return True
        return sum(plain(cfg[n]) != plain(ref[n]) for n in self.domain.names
                   if self.domain.space[n].levels) >= self.escape_group

    def basins(self, tally: Tally, incumbent: Mapping[str, Any]) -> list[Entry]:
        """Measured configurations that head another basin, best first: two or more
        factors from the incumbent, and no better measured configuration one factor from
        them (a point on the incumbent's own slope has one: the local steps measured it)."""
        names = [n for n in self.domain.names if self.domain.space[n].levels]

        def apart(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
            return sum(plain(a[n]) != plain(b[n]) for n in names)

        ranked = tally.ranked()
        return [e for i, e in enumerate(ranked) if apart(e.config, incumbent) >= 2 and
                not any(apart(e.config, b.config) == 1 for b in ranked[:i])]

    def since_escape(self, history: Sequence[Observation]) -> int:
        """Search runs (and pending ones) since the last gain or escape move."""
        best, n = -math.inf, 0
        for o in history:
            vals = observed_values(o, self.objectives)
            score = self.objectives[0].score(vals[0]) if vals is not None else -math.inf
            if o.phase in ("tune", "pending"):
                gain = score > best + self.min_gain * abs(best)
                n = 0 if gain or o.note.get("move") == "escape" else n + 1
            best = max(best, score)
        return n

    def exploit_step(self, tally: Tally, ranking: Sequence[str], incumbent: Mapping[str, Any]
                     ) -> dict[str, Any] | None:
        """Right after the screening: the incumbent with every factor set to the level an
        additive model of all the screening runs (equal weights) predicts best, where that
        beats the incumbent's level; None when that is the incumbent or already measured."""
        model = LocalModel(self.domain, tally.measured(), incumbent, decay=1.0)
        cfg = dict(incumbent)
        for name in ranking:
            best_lv, best_gain = cfg[name], 0.0
            for lv in [plain(v) for v in self.domain.space[name].levels or []]:
                g, _ = model.gain({**incumbent, name: lv})
                if g > best_gain:
                    best_lv, best_gain = lv, g
            trial = {**cfg, name: best_lv}
            if self.domain.feasible({n: trial[n] for n in self.domain.names}):
                cfg = trial
        cfg = {n: cfg[n] for n in self.domain.names}
        if config_key(cfg) in tally.entries or not self.domain.feasible(cfg):
            return None
        return cfg

    def pair_step(self, tally: Tally, ranking: Sequence[str], incumbent: Mapping[str, Any],
                  away: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """At a local optimum: the incumbent with two of the `pair_top` factors with the
        largest local effects (`local_ranking`) changed together to untried levels (page
        size and hash type must move together when each alone is worse), by the highest
        upper confidence bound."""
        model = LocalModel(self.domain, tally.measured(), incumbent)
        top = self.local_ranking(model, ranking, incumbent)[:self.pair_top]
        best_key: tuple[float, int] | None = None
        choice: dict[str, Any] | None = None
        for i, a in enumerate(top):
            for j in range(i + 1, len(top)):
                b = top[j]
                for la in [plain(v) for v in self.domain.space[a].levels or []]:
                    if la == incumbent[a]:
                        continue
                    for lb in [plain(v) for v in self.domain.space[b].levels or []]:
                        if lb == incumbent[b]:
                            continue
                        cfg = {**incumbent, a: la, b: lb}
                        cfg = {n: cfg[n] for n in self.domain.names}
                        if config_key(cfg) in tally.entries or \
                                not self.domain.feasible(cfg) or not self._away(cfg, away):
                            continue
                        mean, sd = model.gain(cfg)
                        # The additive model cannot see the pair's interaction: its prior
                        # is as wide as the runs' spread, as a main effect's is.
                        sd = math.sqrt(sd ** 2 + model.spread)
                        key = (mean + self.explore * sd, -(i + j))
                        if best_key is None or key > best_key:
                            best_key, choice = key, cfg
        if best_key is None or best_key[0] <= 0:
            return None
        return choice

    def local_ranking(self, model: LocalModel, ranking: Sequence[str],
                      incumbent: Mapping[str, Any]) -> list[str]:
        """Factors with listed levels by their largest one-factor effect around the
        incumbent in the local model (ties: the screening's order). Effect heredity:
        interactions are most likely between factors that have large effects themselves,
        and what counts is their effect here, not over the screening's whole space (in
        Berkeley DB the hash table matters only with small pages and no encryption)."""
        names = [n for n in ranking if self.domain.space[n].levels]
        size = {}
        for n in names:
            gains = [abs(model.gain({**incumbent, n: plain(v)})[0])
                     for v in self.domain.space[n].levels or [] if plain(v) != incumbent[n]]
            size[n] = max(gains, default=0.0)
        return sorted(names, key=lambda n: -size[n])

    def stall_state(self, history: Sequence[Observation]) -> tuple[int, bool]:
        """(how often the search has stalled, whether it has not gained since its last
        stall): `stall` tuning runs in a row without a gain of `min_gain` are a stall."""
        best = -math.inf
        since, widened, stalled = 0, 0, False
        limit = self.s.stall or max(4, self.focus())
        for o in history:
            vals = observed_values(o, self.objectives)
            score = self.objectives[0].score(vals[0]) if vals is not None else -math.inf
            if o.phase != "tune":
                best = max(best, score)
                continue
            if score > best + self.min_gain * abs(best):
                best, since, stalled = score, 0, False
            else:
                best, since = max(best, score), since + 1
            if since >= limit:
                widened, since, stalled = widened + 1, 0, True
        return widened, stalled


class LocalModel:
    """An additive model of the log score (first objective) around the incumbent: Bayesian
    linear regression on one-hot levels, plus a linear trend over the level index of each
    ordered factor (so a trend carries on to a level not yet measured). Every measured
    configuration counts with weight `decay` ** (factors in which it differs from the
    incumbent): storage knobs interact, so what holds near the incumbent counts most.
    Fitted jointly, one factor's effect is not confounded with another's (a marginal mean
    would be, on a few runs).

    The prior on each effect starts as wide as the runs' spread (effects of the size seen),
    then each factor's prior is fitted to the effects the runs show for that factor
    (`ard_steps` EM steps of a grouped automatic relevance determination, capped at the
    spread); a run's noise is `noise` (log units: 2 %, a repeat's spread on a steady
    machine) divided by its weight. So a level measured next to the incumbent is known and not
    re-tried at every small move of the incumbent, while one measured far from it (or
    never) stays uncertain and worth a run."""

    ard_steps = 20  # EM steps for the per-factor priors (converged well before 20)

    def __init__(self, domain: Domain, measured: Sequence[Entry],
                 incumbent: Mapping[str, Any], decay: float = 0.5, noise: float = 0.02
                 ) -> None:
        self.names = [n for n in domain.names if domain.space[n].levels]
        self.levels = {n: [plain(v) for v in domain.space[n].levels or []] for n in self.names}
        cols: list[tuple[str, Any]] = []
        for n in self.names:
            cols += [(n, lv) for lv in self.levels[n]]
            if domain.space[n].kind != "categorical" and len(self.levels[n]) > 2:
                cols.append((n, "_trend"))
        self.pos = {c: i for i, c in enumerate(cols)}
        self.incumbent = self.row(incumbent)
        X = np.array([self.row(e.config) for e in measured]).reshape(len(measured), len(cols))
        y = _log_scores([e.mean(0) for e in measured])
        d = np.array([sum(plain(e.config.get(n)) != plain(incumbent.get(n))
                          for n in self.names) for e in measured], dtype=float)
        w = decay ** d
        if len(y):
            yc = y - np.average(y, weights=w)
            # Effects of the size seen in all runs, unweighted: a run far from the incumbent
            # is weak evidence of what holds near it, but its size is what a factor can
            # do. (Weighted, the prior shrank a 10x encryption cost, measured only far
            # away, to a fraction, and the rest was blamed on the options aliased with it.)
            s2 = float(np.var(y)) if len(y) > 1 else 1.0
        else:
            yc, s2 = y, 1.0
        s2 = max(s2, noise ** 2)  # identical runs: no spread to scale the prior by
        self.spread = s2
        n2 = noise ** 2
        XtWX = (X * w[:, None]).T @ X
        Xty = (X * w[:, None]).T @ yc
        group = np.array([self.names.index(c[0]) for c in cols], dtype=int)
        # Only levels some run has measured inform their factor's prior: a level never run
        # keeps the wide one (flat cache sizes 1-8 say nothing of the knee at 32).
        seen = np.diag(XtWX) > 0
        prior = np.full(len(self.names), s2)

        def col_prior(prior: np.ndarray) -> np.ndarray:
            return np.where(seen, prior[group], s2)
        for _ in range(self.ard_steps):
            # Each factor's prior from the effects the runs show for it (EM for a grouped
            # automatic relevance determination): a factor whose levels were measured and
            # barely differ is not worth a run at each new incumbent, while a factor whose
            # levels were never compared keeps the wide prior.
            cov = np.linalg.inv(XtWX / n2 + np.diag(1.0 / col_prior(prior)))
            coef = cov @ Xty / n2
            second = coef ** 2 + np.diag(cov)
            prior = np.array([min(s2, max(n2, float(second[(group == g) & seen].mean())))
                              if ((group == g) & seen).any() else s2
                              for g in range(len(self.names))])
        self.prior = dict(zip(self.names, prior))
        self.cov = np.linalg.inv(XtWX / n2 + np.diag(1.0 / col_prior(prior)))
        self.coef = self.cov @ Xty / n2

    def row(self, cfg: Mapping[str, Any]) -> np.ndarray:
        x = np.zeros(len(self.pos))
        for n in self.names:
            v = plain(cfg.get(n))
            if (n, v) in self.pos:
                x[self.pos[(n, v)]] = 1.0
            if (n, "_trend") in self.pos and v in self.levels[n]:
                x[self.pos[(n, "_trend")]] = self.levels[n].index(v) / \
                    (len(self.levels[n]) - 1) - 0.5
        return x

    def gain(self, cfg: Mapping[str, Any]) -> tuple[float, float]:
        """Predicted gain in log score over the incumbent, and its standard deviation."""
        dx = self.row(cfg) - self.incumbent
        return float(dx @ self.coef), float(math.sqrt(max(0.0, dx @ self.cov @ dx)))


def _log_scores(scores: Sequence[float]) -> np.ndarray:
    """Scores on a log scale (knobs multiply throughput and latency): a score is a value or
    its negative, so the sign is kept and the magnitude compressed (log1p copes with zero).
    Not unit-free: a relative change of values near x shrinks by x / (1 + x) (4x at
    Berkeley DB's 0.35), so the fixed 2 % noise acts wider there. log |score| (unit-free)
    was tried and made
    Berkeley DB C slower to 5 % (median 14.0 runs against 10.0 on 60 seeds, seed 1), so
    this stays until the noise is estimated rather than fixed."""
    a = np.asarray(scores, dtype=float)
    return np.sign(a) * np.log1p(np.abs(a))


# --------------------------------------------------------------------------- factory
def make_strategy(name: str, domain: Domain, objectives: Sequence[Objective],
                  settings: TuneSettings) -> Strategy:
    """`auto`: screen-then-tune above a handful of factors, else TPE over everything."""
    if name not in STRATEGIES:
        raise TuneError(f"strategy {name!r} must be one of {', '.join(STRATEGIES)}")
    if name == "auto":
        name = "screen-then-tune" if len(domain.names) > HANDFUL else "tpe"
    if name == "gp":
        try:
            import torch  # noqa: F401  (Optuna's GPSampler runs on PyTorch)
        except ImportError:
            raise TuneError("strategy 'gp' needs PyTorch (pip install torch); use tpe, "
                            "nsga2, random or screen-then-tune") from None
    cls: type[Strategy] = {"screen-then-tune": ScreenThenTune, "tpe": OptunaSearch,
                           "gp": OptunaSearch, "nsga2": OptunaSearch,
                           "random": RandomSearch}[name]
    s = cls(domain, objectives, settings)
    if isinstance(s, OptunaSearch) and not isinstance(s, ScreenThenTune):
        s.name = s.sampler_name = name
    if s.min_budget() > settings.budget:
        raise TuneError(f"budget {settings.budget} is too small for {name}: it needs at "
                        f"least {s.min_budget()} runs (the screening, one search run, and "
                        f"the best, the best screened and the baseline configurations "
                        f"brought to {settings.confirm_runs} runs each)")
    return s
