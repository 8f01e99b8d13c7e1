"""What a tuning campaign found: the confirmed recommendation against the baseline (Welch),
the measured Pareto front for two objectives, every run in execution order, and plots."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats

from ..campaign.sources import Observation, config_key
from ..errors import TuneError
from ..jsonutil import to_jsonable
from ..result_shape import Result
from .racing import Race, race, race_summary
from .strategies import Entry, Objective, Tally, observed_values

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ALPHA = 0.05


@dataclass
class WelchComparison:
    """Welch's t-test of one configuration's runs against another's."""

    response: str
    goal: str
    a: list[float]
    b: list[float]

    @property
    def difference(self) -> float:
        """a's mean minus b's (+ is larger, whatever the goal)."""
        return float(np.mean(self.a)) - float(np.mean(self.b))

    @property
    def change(self) -> float | None:
        """Relative change of a's mean over b's (+ is larger, whatever the goal); None when
        b's mean is not positive: a ratio over a negative or zero mean has no meaning (over
        -167, a 997 reads -696 %)."""
        mb = float(np.mean(self.b))
        return float(np.mean(self.a)) / mb - 1.0 if mb > 0 else None

    @property
    def better(self) -> bool:
        """Whether a's mean is better than b's for the goal (from the means, not a ratio)."""
        return (self.difference > 0) == (self.goal == "maximize")

    @property
    def pvalue(self) -> float:
        if len(self.a) < 2 or len(self.b) < 2:
            return math.nan
        if np.std(self.a) == 0 and np.std(self.b) == 0:
            return 0.0 if np.mean(self.a) != np.mean(self.b) else 1.0
        with warnings.catch_warnings():
            # runs that agree to ~15 digits make scipy warn of "catastrophic cancellation"
            # on the terminal; the p-value of such runs is still the one to report
            warnings.simplefilter("ignore", RuntimeWarning)
            return float(stats.ttest_ind(self.a, self.b, equal_var=False).pvalue)

    @property
    def runs_needed(self) -> int | None:
        """Runs per side that would detect the observed difference with 80 % power at
        ALPHA (Welch's test, the observed means and spreads taken as true: an estimate),
        None when that is more than `MAX_RUNS_NEEDED` or cannot be estimated."""
        return runs_to_settle(self.a, self.b)

    @property
    def verdict(self) -> str:
        p = self.pvalue
        if math.isnan(p):
            return "too few runs to tell (need 2 or more each)"
        if p >= ALPHA:
            n = min(len(self.a), len(self.b))
            runs = f"{n} runs each" if len(self.a) == len(self.b) else \
                f"{len(self.a)} and {len(self.b)} runs"
            need = self.runs_needed
            hint = (f"about {need} runs each would settle it (80 % power; an estimate from "
                    "the observed spread)" if need is not None else
                    f"the difference is small against the run-to-run spread (more than "
                    f"{MAX_RUNS_NEEDED} runs each would be needed to tell)")
            return f"not significant with {runs} (Welch p = {p:.2g} >= {ALPHA}): {hint}"
        return f"{'better' if self.better else 'worse'} (Welch p = {p:.2g})"

    def to_dict(self) -> dict[str, Any]:
        return {"response": self.response, "goal": self.goal, "change": self.change,
                "difference": self.difference, "pvalue": self.pvalue,
                "runs_needed": self.runs_needed, "verdict": self.verdict}


#: The largest number of runs per side `runs_to_settle` looks for.
MAX_RUNS_NEEDED = 1000


def runs_to_settle(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA,
                   power: float = 0.8) -> int | None:
    """The smallest number of runs per side at which Welch's test would find the observed
    difference of means with `power`, taking the observed means and standard deviations
    as the truth (noncentral t with Welch's degrees of freedom). None when the runs cannot
    say (fewer than 2, no difference) or more than MAX_RUNS_NEEDED would be needed."""
    if len(a) < 2 or len(b) < 2:
        return None
    diff = abs(float(np.mean(a)) - float(np.mean(b)))
    va, vb = float(np.var(a, ddof=1)), float(np.var(b, ddof=1))
    if diff == 0 or not math.isfinite(diff) or va + vb == 0:
        return None

    def achieved(n: int) -> float:
        qa, qb = va / n, vb / n
        se = math.sqrt(qa + qb)
        df = (qa + qb) ** 2 / (qa ** 2 / (n - 1) + qb ** 2 / (n - 1))
        crit = float(stats.t.ppf(1 - alpha / 2, df))
        ncp = diff / se
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return float(stats.nct.sf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp))

    lo, hi = 2, 2
    while achieved(hi) < power:  # double, then bisect: power grows with n
        lo, hi = hi, hi * 2
        if hi > MAX_RUNS_NEEDED * 2:
            return None
    while lo < hi:
        mid = (lo + hi) // 2
        if achieved(mid) >= power:
            hi = mid
        else:
            lo = mid + 1
    return hi if hi <= MAX_RUNS_NEEDED else None


def change_text(change: float | None, difference: float, unit: str = "") -> str:
    """A comparison's change as printed (terminal and report, from its JSON): the relative
    change, else (a baseline mean <= 0) the absolute difference with its unit."""
    if change is not None:
        return f"{100 * change:+.1f} %"
    return f"{difference:+.4g} {unit}".rstrip() + \
        " (difference: no % over a baseline mean <= 0)"


def race_lines(data: dict[str, Any], unit: str) -> list[str]:
    """The recommendation's interval, the noise it rests on, and a tie with its rule (one
    objective): what the terminal and the report say under the recommendation."""
    r, b = data.get("race"), data.get("best")
    if not r or not b:
        return []
    out = []
    iv = b.get("interval")
    name = data["response"]
    if iv is None:
        out.append("no interval: no configuration was measured twice, so the run-to-run "
                   "noise is unknown")
    else:
        noise = (f"{100 * r['noise']:.1f} % run to run" if r["noise_scale"].startswith(
            "relative") else f"{_qty(r['noise'])} {unit} run to run".replace("  ", " "))
        out.append(f"{100 * r['confidence']:.0f} % interval of its true {name}: "
                   f"{_qty(iv[0])} to {_qty(iv[1])} {unit}".rstrip()
                   + f" (noise {noise}, pooled from repeats with {r['noise_dof']} degrees "
                   "of freedom)")
    if r["tied"]:
        others = [c for c in r["tied"] if c != b["config"]]
        diff = [", ".join(f"{k}={v}" for k, v in c.items() if b["config"].get(k) != v)
                for c in others]
        out.append(f"not separated at {100 * r['confidence']:.0f} % within the budget from "
                   f"{len(others)} other candidate(s) (differing in: {'; '.join(diff)}); "
                   f"chosen: {r['tie_rule']}")
    elif r["decided"]:
        out.append(f"the race separated it from every other candidate at "
                   f"{100 * r['confidence']:.0f} % (or showed them within "
                   f"{100 * r['indifference']:.0f} %)")
    return out


def _qty(v: float | None) -> str:
    """A measured quantity as the plots' ticks and the report print it: an engineering
    prefix from 1000 up, three significant digits (1.2G, 350k, 0.5), never 1.204e+09."""
    if v is None or not math.isfinite(v):
        return "n/a"
    from ..plotstyle import eng  # matplotlib: only when there is something to print

    return eng(v)


def describe(values: Sequence[float]) -> dict[str, Any]:
    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()) if len(v) else math.nan,
            "std": float(v.std(ddof=1)) if len(v) > 1 else math.nan, "runs": int(len(v)),
            "values": [float(x) for x in v]}


@dataclass
class TuneResult(Result):
    """A tuning campaign's history and answer. `.to_dict()`, `.to_frame()`, `.plot()`."""

    PLOT_KINDS = ("progress",)
    ERROR = TuneError

    objectives: list[Objective]
    history: list[Observation]
    strategy: str
    budget: int
    baseline_config: dict[str, Any] | None = None
    confirm_runs: int = 1
    #: the objectives' units as the space declares them (the plots' axes name them)
    units: dict[str, str] = field(default_factory=dict)
    #: candidates raced at once (the design's confirm_top)
    confirm_top: int = 3

    # ------------------------------------------------------------------ derived
    @cached_property
    def tally(self) -> Tally:
        """The history grouped by configuration (the history does not change)."""
        return Tally(self.history, self.objectives)

    def _raw(self, e: Entry, j: int = 0) -> list[float]:
        """Every successful run's value of objective j (all phases)."""
        ob = self.objectives[j]
        return [ob.score(v[j]) for v in e.values]  # score() is its own inverse

    @cached_property
    def _after(self) -> dict[str, list[list[float]]]:
        """Per configuration key, the raw objective values of its confirmation runs."""
        out: dict[str, list[list[float]]] = {}
        for o in self.history:
            vals = observed_values(o, self.objectives) if o.phase == "confirm" else None
            if vals is not None:
                out.setdefault(config_key(o.config), []).append(vals)
        return out

    @cached_property
    def _failed_after(self) -> dict[str, int]:
        """Per configuration key, its confirmation runs that gave no value."""
        out: dict[str, int] = {}
        for o in self.history:
            if o.phase == "confirm" and observed_values(o, self.objectives) is None:
                k = config_key(o.config)
                out[k] = out.get(k, 0) + 1
        return out

    def shown_failed(self, e: Entry) -> int:
        """The failed runs among those `shown` is drawn from: its confirmation runs when
        any gave a value, else all its runs."""
        k = config_key(e.config)
        return self._failed_after.get(k, 0) if self._after.get(k) else e.failed

    def shown(self, e: Entry, j: int = 0) -> list[float]:
        """The values reported for a configuration: its confirmation runs when it has any,
        else all its runs. The search run that got a configuration selected is its best
        draw (winner's curse: 121.6 reported where the truth was 120); the runs measured
        after the selection are not chosen by their values."""
        after = self._after.get(config_key(e.config))
        return [v[j] for v in after] if after else self._raw(e, j)

    def confirmed(self) -> list[Entry]:
        """Configurations that were re-run in the confirmation phase (else all measured)."""
        keys = {config_key(o.config) for o in self.history if o.phase == "confirm"}
        t = self.tally
        es = [e for k, e in t.entries.items() if k in keys and e.n] or t.measured()
        # Ranked by the values reported for them (`shown`: the confirmation runs): ranked
        # by every run, the selecting search run's lucky draw could crown a configuration
        # whose own confirmation mean is below another's (the demo showed exactly that).
        ob = self.objectives[0]
        out = sorted(es, key=lambda e: (-ob.score(float(np.mean(self.shown(e, 0)))),
                                        -e.n, e.order))
        if len(self.objectives) == 1 and self.race.chosen is not None:
            # the recommendation first (a tie is settled by a stated rule, not the mean)
            pick = self.race.chosen.entry
            out = [e for e in out if e is pick] + [e for e in out if e is not pick]
        return out

    @cached_property
    def race(self) -> Race:
        """The race over the history (tune/racing.py): noise, tie, interval."""
        return race(self.tally, self.confirm_top)

    def best(self) -> Entry | None:
        """The recommendation. One objective: the race's choice (tune/racing.py: among the
        candidates it could not separate, the highest mean after shrinking each toward what
        the configurations sharing its levels measured, by its uncertainty, then the most
        runs; means over the runs after each one's selecting first run). Two: the best mean among the
        confirmed configurations that got their full `confirm_runs` (one cut short by the
        budget cannot win on fewer runs)."""
        if len(self.objectives) == 1:
            r = self.race
            return None if r.chosen is None else r.chosen.entry
        c = self.confirmed()
        full = [e for e in c if self.fully_confirmed(e)]
        return (full or c)[0] if c else None

    def fully_confirmed(self, e: Entry) -> bool:
        """Measured `confirm_runs` times in all (what the confirmation phase brings a
        candidate to: its search run counts; `runs` of `entry_dict` counts only the
        confirmation runs, one fewer). Only a configuration the confirmation phase re-ran:
        one measured that often by the search alone was not confirmed."""
        return config_key(e.config) in self._after and e.n >= self.confirm_runs

    def best_screened(self) -> Entry | None:
        """The best configuration of the first batch: what a screening alone would give."""
        return self.tally.best_screened()

    def baseline(self) -> Entry | None:
        """The default configuration when there is one (once it has a value), else the best
        screened one."""
        e = self.tally.baseline(self.baseline_config)
        return e if e is not None and e.n else None

    def notes(self) -> list[str]:
        """What the answer lacks and why, said rather than left out: a declared default
        configuration whose every run failed has no value, so there is no baseline and no
        comparison (it vanished from the output without a word); a recommendation that the
        measured Pareto front leaves out."""
        out = []
        if self.baseline_config is not None:
            e = self.tally.baseline(self.baseline_config)
            if e is not None and not e.n and e.failed:
                cfg = ", ".join(f"{k}={v}" for k, v in self.baseline_config.items())
                runs = "its only run" if e.failed == 1 else f"all its {e.failed} runs"
                out.append(f"the default configuration ({cfg}) failed {runs}: no baseline "
                           "to compare against (see `storlab status --failures`)")
        b, front = self.best(), self.pareto()
        if b is not None and front and b not in front:
            # its confirmation means against others' single search runs (not re-run, and
            # the luck that got them there inflates them): said, not hidden
            out.append("the recommended configuration is not on the measured Pareto front: "
                       "configurations measured once and not re-run dominate its confirmation "
                       "means; re-run them (storlab confirm) before trusting the front")
        return out

    def comparison(self, against: Entry | None = None) -> WelchComparison | None:
        """Welch's test of the recommendation against the baseline (or `against`)."""
        b, base = self.best(), against or self.baseline()
        if b is None or base is None:
            return None
        ob = self.objectives[0]
        # on the values shown (confirmation runs when there are): the test is of the
        # numbers the reader sees, and those are free of the selection's bias
        return WelchComparison(ob.name, ob.goal, self.shown(b), self.shown(base))

    def point(self, e: Entry) -> list[float]:
        """A configuration's scores (larger better) on the values shown for it: the means of
        its confirmation runs when it has any, else of all its runs."""
        return [ob.score(float(np.mean(self.shown(e, j))))
                for j, ob in enumerate(self.objectives)]

    def pareto(self) -> list[Entry]:
        """The measured Pareto front on the values shown (`point`), best first on the first
        objective. On one definition with the JSON and the plot: a front computed on
        all-run means but shown with confirmation means listed entries that dominate each
        other."""
        if len(self.objectives) < 2:
            return []
        es = self.tally.measured()
        m = np.array([self.point(e) for e in es])
        front = [e for i, e in enumerate(es)
                 if not np.any(np.all(m >= m[i], axis=1) & np.any(m > m[i], axis=1))]
        return sorted(front, key=lambda e: (-self.point(e)[0], e.order))

    def phases(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.history:
            out[o.phase or "run"] = out.get(o.phase or "run", 0) + 1
        return out

    def screening_table(self) -> pd.DataFrame:
        """One row per successful screening run (the space-filling first batch): its
        configuration and metrics. The search's runs are not: it holds factors at the best
        values so far while moving others, and a variance-based importance over them credits
        the held factors with the variance the moved ones cause."""
        rows = [{"config_id": o.config_id, "repetition": o.repetition, **o.config,
                 **o.metrics} for o in self.history if o.phase == "screen" and o.ok]
        return pd.DataFrame(rows)

    # ------------------------------------------------------------------ output
    def entry_dict(self, e: Entry) -> dict[str, Any]:
        d: dict[str, Any] = {"config": dict(e.config)}
        after = bool(self._after.get(config_key(e.config)))
        for j, ob in enumerate(self.objectives):
            s = describe(self.shown(e, j))
            a = describe(self._raw(e, j))
            if j == 0:
                d.update(value=s["mean"], std=s["std"], runs=s["runs"], values=s["values"],
                         value_from="confirmation runs" if after else "all runs",
                         value_all_runs=a["mean"], std_all_runs=a["std"],
                         runs_all=a["runs"])
            else:
                d[ob.name] = {**s, "mean_all_runs": a["mean"], "runs_all": a["runs"]}
        # beside `runs` and `runs_all`: the failed runs among the runs `value` is drawn from
        # (the table's "1 (2 failed)") and among all of them
        d["failed_runs"], d["failed_runs_all"] = self.shown_failed(e), e.failed
        d["confirmed"] = self.fully_confirmed(e)
        return d

    def to_dict(self) -> dict[str, Any]:
        b, base, cmp = self.best(), self.baseline(), self.comparison()
        scr = self.best_screened()
        base_kind = "default configuration" if self.baseline_config is not None else \
            "best screened configuration"
        hist = []
        for i, o in enumerate(self.history, 1):
            vals = observed_values(o, self.objectives)
            row: dict[str, Any] = {"run": i, "key": o.key, "phase": o.phase,
                                   "config": dict(o.config), "status": o.status,
                                   "value": None if vals is None else vals[0]}
            for j, ob in enumerate(self.objectives[1:], 1):
                row[ob.name] = None if vals is None else vals[j]
            hist.append(row)
        return to_jsonable({
            "strategy": self.strategy, "budget": self.budget, "runs": len(self.history),
            "objectives": [{"name": o.name, "goal": o.goal} for o in self.objectives],
            "response": self.objectives[0].name, "goal": self.objectives[0].goal,
            "phases": self.phases(),
            "best": None if b is None else {**self.entry_dict(b),
                                            "interval": self.interval()},
            "race": self.race_dict(),
            "baseline": None if base is None else {"kind": base_kind, **self.entry_dict(base)},
            "comparison": None if cmp is None else cmp.to_dict(),
            "best_screened": None if scr is None else self.entry_dict(scr),
            "comparison_screened": None if scr is None or self.baseline_config is None
            else self.comparison(scr).to_dict(),  # type: ignore[union-attr]
            # None when there is a baseline, or its runs have not been made (interrupted)
            "baseline_failed_runs": None if base is not None or self.baseline_config is None
            else getattr(self.tally.entries.get(config_key(self.baseline_config)), "failed",
                         None),
            "notes": self.notes(),
            "candidates": [self.entry_dict(e) for e in self.confirmed()],
            "pareto": [self.entry_dict(e) for e in self.pareto()],
            "history": hist,
        })

    def interval(self) -> list[float] | None:
        """The recommendation's interval on its true value (one objective; tune/racing.py),
        None without repeats to estimate the noise from."""
        if len(self.objectives) != 1:
            return None
        iv = self.race.interval()
        return None if iv is None else [iv[0], iv[1]]

    def race_dict(self) -> dict[str, Any] | None:
        """The race's noise estimate, confidence, tie and rule (one objective)."""
        return race_summary(self.race) if len(self.objectives) == 1 else None

    def to_frame(self) -> pd.DataFrame:
        """The confirmed configurations (best first): mean, spread and runs of their
        confirmation runs (all runs when none), and the mean over all their runs."""
        rows = []
        base, best, scr = self.baseline(), self.best(), self.best_screened()
        for e in self.confirmed():
            r = {**e.config}
            for j, ob in enumerate(self.objectives):
                s = describe(self.shown(e, j))
                r[f"{ob.name} mean"], r[f"{ob.name} sd"] = s["mean"], s["std"]
            # '1 (2 failed)' as `confirm` says it: a mean of the one run of three that
            # worked is no mean of three
            bad = self.shown_failed(e)
            r["runs"] = f"{len(self.shown(e))}" + (f" ({bad} failed)" if bad else "")
            r[f"{self.objectives[0].name} mean, all runs"] = describe(self._raw(e))["mean"]
            r["runs, all"] = e.n
            roles = [name for name, x in (("best", best), ("baseline", base),
                                          ("best screened", scr))
                     if x is not None and x.config == e.config]
            r["role"] = " + ".join(roles)
            rows.append(r)
        return pd.DataFrame(rows)

    def curve(self) -> pd.DataFrame:
        """Best-so-far (of single measured runs) against runs, with each run's phase."""
        ob = self.objectives[0]
        best, rows = -math.inf, []
        for i, o in enumerate(self.history, 1):
            vals = observed_values(o, self.objectives)
            if vals is not None:
                best = max(best, ob.score(vals[0]))
            rows.append({"run": i, "phase": o.phase, "value": None if vals is None else vals[0],
                         "best_so_far": ob.score(best) if math.isfinite(best) else math.nan})
        return pd.DataFrame(rows)

    def plot(self, kind: str | None = None) -> Figure:
        """`progress` (the only kind). Left: each run and the best so far, phases shaded;
        right (two objectives): the measured configurations and the Pareto front."""
        self.plot_kind(kind)
        from ..plotstyle import styled

        with styled():
            return self._plot()

    def _plot(self) -> Figure:
        from matplotlib.ticker import MaxNLocator

        from ..plotstyle import PALETTE, STYLE, axis_label, format_axis, subplots

        two = len(self.objectives) > 1
        fig, axes = subplots(1, 2 if two else 1, figsize=(12 if two else 7.4, 4.4),
                             squeeze=False)
        ax = axes[0][0]
        c = self.curve()
        colors = {"screen": PALETTE[0], "tune": PALETTE[1], "confirm": PALETTE[2]}
        names = {"screen": "screening runs", "tune": "search runs",
                 "confirm": "confirmation runs"}
        for ph, g in c.groupby("phase", sort=False):
            ax.scatter(g["run"], g["value"], s=16, color=colors.get(str(ph), STYLE["muted"]),
                       label=names.get(str(ph), f"{ph} runs"), zorder=3)
        ax.step(c["run"], c["best_so_far"], where="post", color="black", lw=1.2,
                label="best single run so far")
        ob = self.objectives[0]
        # What the user acts on: the confirmed means (runs after the selecting one), the
        # recommendation's with its interval, and the baseline's.
        b, base = self.best(), self.baseline()
        iv = self.interval()
        if b is not None:
            m = float(np.mean(self.shown(b)))
            ax.axhline(m, color=PALETTE[3], lw=1.4, ls="--",
                       label="recommended: confirmed mean"
                       + (f", {100 * self.race.confidence:.0f} % interval" if iv else ""))
            if iv is not None:
                ax.axhspan(iv[0], iv[1], color=PALETTE[3], alpha=0.15, lw=0)
        if base is not None and (b is None or base.config != b.config):
            ax.axhline(float(np.mean(self.shown(base))), color=STYLE["muted"], lw=1.2,
                       ls=":", label="baseline: confirmed mean")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("runs executed (count)")
        u = self.units
        ax.set_ylabel(axis_label(ob.name, u.get(ob.name)) + (" ↑ better" if ob.goal ==
                                                             "maximize" else " ↓ better"))
        format_axis(ax.yaxis, ob.name, u.get(ob.name))
        ax.set_title(f"Tuning ({self.strategy}): {len(self.history)} of {self.budget} runs",
                     fontsize=9.5)
        ax.legend(loc="best")
        if two:
            ax2 = axes[0][1]
            o1, o2 = self.objectives[:2]
            # the values shown everywhere else: confirmation means where re-run
            pts = [self.point(e) for e in self.tally.measured()]
            ax2.scatter([o1.score(p[0]) for p in pts], [o2.score(p[1]) for p in pts], s=16,
                        color=STYLE["muted"], label="measured configurations")
            front = [self.point(e) for e in self.pareto()]
            ax2.plot([o1.score(p[0]) for p in front], [o2.score(p[1]) for p in front],
                     "o-", color=STYLE["sig"],
                     label="Pareto front (confirmation means where re-run)")
            ax2.set_xlabel(axis_label(o1.name, u.get(o1.name))
                           + (" → better" if o1.goal == "maximize" else " ← better"))
            ax2.set_ylabel(axis_label(o2.name, u.get(o2.name))
                           + (" ↑ better" if o2.goal == "maximize" else " ↓ better"))
            format_axis(ax2.xaxis, o1.name, u.get(o1.name))
            format_axis(ax2.yaxis, o2.name, u.get(o2.name))
            ax2.set_title("Trade-off between the two objectives", fontsize=9.5)
            ax2.legend(loc="best")
        return fig


def result_from_campaign(camp: Any) -> TuneResult:
    """The TuneResult of a tuning campaign's store, read with the design the store's runs
    came from (its stored metadata: `storlab tune -y p99:minimize --strategy nsga2` over a
    file that says y and auto), not the campaign file's as it reads now."""
    src = camp.source
    history = camp.history()
    meta = {**src.meta(), **camp.design_meta()}
    objectives = [Objective(str(n), str(g)) for n, g in meta.get("objectives") or []] \
        or list(src.objectives)
    units = {r.name: r.unit for r in camp.space.responses if r.unit}
    return TuneResult(objectives, history, str(meta["strategy"]), int(meta["budget"]),
                      meta.get("baseline"), int(meta.get("confirm_runs", 1)), units,
                      int(meta.get("confirm_top", 3)))
