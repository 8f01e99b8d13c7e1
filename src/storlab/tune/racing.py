"""Racing confirmation: which measured configuration to recommend under run-to-run noise,
and which runs still decide it.

The anchors are the racing procedures of algorithm configuration: irace's F-race (Birattari
et al., "F-Race and iterated F-Race: an overview", 2010) re-runs the surviving candidates
and drops one as soon as a test shows it worse; SMAC3's intensifier races a challenger
against the incumbent and rejects it once it cannot win. Storage runs are few and costly,
so this race is a pure function of the runs so far (a killed tuning resumes exactly) and
every comparison is against one pooled noise estimate:

- **Noise.** Every configuration measured twice or more (confirmation runs, a repeated
  configuration, screening replicates) adds its spread to one pooled estimate, on the log
  scale when every value is positive (storage noise is multiplicative: a 10 % spread is
  10 % at 100 MB/s and at 1 GB/s), with its degrees of freedom (Student's t uses them).
  On the log scale only configurations in contention count (mean within a factor of 2 of
  the best repeated one, `_contenders`): a slow baseline's spread is not the contenders'.
- **Selection bias.** A configuration's first run is the draw that got it selected (the
  search keeps what measured high: winner's curse). Its mean in the race and in the answer
  is the mean of the runs *after* the first as soon as there is one; the first run still
  counts in the noise estimate and in deciding whether a once-measured configuration is
  worth a run (optimism is the right bias there).
- **The prior.** Each configuration's true value is estimated through the space's
  structure (`structured_posterior`): a hierarchical model of every measured
  configuration (a common mean, an effect per factor level, per pair of levels and per
  configuration; their variances fitted to the runs, each factor's level variance its
  own), so a mean over few runs is shrunk toward what the configurations sharing its
  levels measured, and a level better across many configurations (HSQLDB's memory
  tables, 5-7 % ahead of every cached one) is seen through all their runs, not the two or
  three of each.
- **The race.** The leader is the best posterior mean among configurations measured
  twice or more. A challenger stays in the race while its one-sided upper bound on
  (challenger - leader) is above the indifference zone `DELTA` (1 %: a smaller difference
  is not worth runs): the bound uses Student's t at `CONFIDENCE` with a Bonferroni split
  over the `top` candidates compared. A challenger whose bound falls below 0 is clearly
  worse and dropped; one between 0 and `DELTA` is equivalent for practical purposes, once
  both have two runs after their first. Nothing is decided before the noise estimate has
  `MIN_DOF` degrees of freedom. Each round gives the leader one run and the `top` - 1 live
  challengers most likely (posterior) to beat it one each. The race is decided when no
  challenger is live and the leader has two runs after its first.
- **The answer.** The raced candidates still live when the runs run out (the race could
  not show that they are not more than `DELTA` better than the leader) are *tied* with
  it; the recommendation is the tied candidate with the highest posterior mean (its mean
  shrunk toward what the configurations sharing its levels measured, by its uncertainty:
  a mean over few runs cannot win on one lucky draw), then the most runs. Its interval
  is Student's t on its runs after the first, with the pooled noise, two-sided at
  `CONFIDENCE` and Bonferroni-simultaneous over every raced candidate, so it covers the
  true value of whichever candidate ends up chosen.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

if TYPE_CHECKING:
    from .strategies import Entry, Objective, Tally

#: Confidence of the race's decisions and of the recommendation's interval.
CONFIDENCE = 0.95
#: Indifference zone: a challenger that cannot be more than this much better (relative)
#: than the leader is not worth more runs.
DELTA = 0.01
#: The race decides nothing before its noise estimate has this many degrees of freedom.
MIN_DOF = 4


@dataclass
class Arm:
    """One configuration in the race: its runs on the race's scale (larger is better)."""

    entry: Entry
    z: list[float]

    @property
    def kept(self) -> list[float]:
        """The runs its mean is taken over: all but the selecting first draw, when any."""
        return self.z[1:] if len(self.z) > 1 else self.z

    @property
    def n(self) -> int:
        return len(self.kept)

    @property
    def mean(self) -> float:
        return float(np.mean(self.kept))

    @property
    def repeated(self) -> bool:
        return len(self.z) > 1


@dataclass
class Race:
    """The state of the race over a tally (first objective)."""

    arms: list[Arm]
    log: bool                 # the scale is log(value) (every value positive)
    goal: str
    sigma: float | None       # pooled run-to-run standard deviation (None: no repeats yet)
    dof: int
    top: int
    confidence: float = CONFIDENCE
    delta: float = DELTA
    leader: Arm | None = None
    live: list[Arm] = field(default_factory=list)      # challengers that may still win
    dropped: list[Arm] = field(default_factory=list)   # clearly worse
    tied: list[Arm] = field(default_factory=list)      # not separated from the leader
    chosen: Arm | None = None

    tau2: float = math.inf    # prior spread of a configuration's true value (inf: none)

    center: float = 0.0       # every measured configuration's common mean
    #: id(arm) -> posterior mean and variance of its true value (race scale), `shrink`
    post: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: the structure's prior variances fitted by `shrink` (per factor, per pair, per
    #: configuration), on the race's scale
    prior: tuple[float, float, float] | None = None

    def shrink(self, rep: list[Arm]) -> None:
        """Empirical Bayes over every measured configuration through the space's
        structure (`structured_posterior`): a configuration's true value is the common
        mean plus an effect of each factor's level, of each pair of levels and of its own,
        with prior variances fitted to the runs (type-II maximum likelihood), every
        configuration's runs after its first as data. A mean over few runs is pulled toward
        what the configurations sharing its levels measured, so one lucky draw cannot win
        the race and a level that is better across many configurations (HSQLDB's memory
        tables, 5-7 % ahead of every cached one) is seen through all their runs, not two
        or three each. With one factor the structure is the configuration itself and this is
        the shrinkage toward the common mean; with few configurations nothing is shrunk
        (fewer than three)."""
        if self.sigma is None or len(rep) < 3:
            return
        # every measured configuration (fitted over the better half only, a worse level
        # left the fit and HSQLDB's cached tables were no longer pooled: 0.65)
        fit_on = sorted(rep, key=lambda a: -a.mean)
        self.center = float(np.mean([a.mean for a in fit_on]))
        fit = structured_posterior(fit_on, self.sigma ** 2)
        if fit is None:
            return
        mean, var, self.prior, self.tau2 = fit
        self.post = {id(a): (float(m), float(v)) for a, m, v in zip(fit_on, mean, var)}

    def shrunk(self, a: Arm) -> float:
        """A configuration's posterior mean under the structure (its runs after its first;
        its single draw when measured once); its raw mean without a fit."""
        p = self.post.get(id(a))
        return a.mean if p is None else p[0]

    def post_var(self, a: Arm) -> float:
        """Posterior variance of a's true value (race scale) under the structure."""
        assert self.sigma is not None
        p = self.post.get(id(a))
        return self.sigma ** 2 / a.n if p is None else max(p[1], 1e-300)

    def p_beats(self, c: Arm, lead: Arm) -> float:
        """Posterior probability that c is truly better than the leader: the challengers
        most likely to change the answer get the round's runs."""
        sd = math.sqrt(self.post_var(c) + self.post_var(lead))
        return float(stats.norm.cdf((self.shrunk(c) - self.shrunk(lead)) / max(sd, 1e-12)))

    # ------------------------------------------------------------------ bounds
    def q_one(self) -> float:
        """One-sided Student t quantile, Bonferroni over the top - 1 comparisons."""
        m = max(1, self.top - 1)
        return _t_quantile(1 - (1 - self.confidence) / m, max(self.dof, 1))

    def diff_se(self, a: Arm, b: Arm) -> float:
        assert self.sigma is not None
        return self.sigma * math.sqrt(1.0 / a.n + 1.0 / b.n)

    def upper_gain(self, c: Arm, lead: Arm) -> float:
        """Upper bound on how much better c is than the leader (race scale). A challenger
        measured once is judged on its (optimistic) single draw."""
        return (c.mean - lead.mean) + self.q_one() * self.diff_se(c, lead)

    def zone(self, lead: Arm) -> float:
        """The indifference zone on the race's scale."""
        return math.log1p(self.delta) if self.log else self.delta * abs(lead.mean)

    # ------------------------------------------------------------------ output
    @property
    def decided(self) -> bool:
        """No challenger left, and the leader has two runs after its first (its mean and
        the comparison with the baseline rest on more than one run)."""
        return self.leader is not None and self.sigma is not None and not self.live \
            and self.leader.n >= 2

    def to_value(self, z: float) -> float:
        """A race-scale number back in the response's units."""
        if self.log:
            return math.exp(z if self.goal == "maximize" else -z)
        return z if self.goal == "maximize" else -z

    def interval(self, a: Arm | None = None) -> tuple[float, float] | None:
        """Two-sided interval on a's true value (the chosen one by default), simultaneous
        over the raced candidates; None without a noise estimate."""
        a = a or self.chosen
        if a is None or self.sigma is None:
            return None
        m = max(1, sum(x.repeated for x in self.arms))
        q = _t_quantile(1 - (1 - self.confidence) / (2 * m), max(self.dof, 1))
        half = q * self.sigma / math.sqrt(a.n)
        lo, hi = self.to_value(a.mean - half), self.to_value(a.mean + half)
        return (min(lo, hi), max(lo, hi))

    def rule(self) -> str:
        return ("the tied candidate with the highest mean after shrinking each mean toward "
                "what the configurations sharing its levels measured, by its uncertainty "
                "(a hierarchical model of every measured configuration: a mean over few "
                "runs cannot win on one lucky draw, a level better across many "
                "configurations counts all their runs), then the most runs")

    def round(self, limit: int) -> list[Entry]:
        """The runs this round wants (one each, most useful first), at most `limit`."""
        if limit <= 0 or self.leader is None:
            return []
        if self.sigma is None:  # no repeats yet: re-run the top candidates to learn noise
            order = sorted(self.arms, key=lambda a: -a.mean)[:self.top]
            return [a.entry for a in order][:limit]
        if self.decided:
            return []
        out = [self.leader.entry]
        lead = self.leader
        ch = sorted(self.live, key=lambda c: -self.p_beats(c, lead))[:max(1, self.top - 1)]
        out += [c.entry for c in ch]
        return out[:limit]


#: Prior variances tried for the structure, as shares of the spread of the configurations'
#: means (`structured_posterior`): per factor level, per pair of levels, per configuration.
_MAIN = (1.0, 0.3, 0.1, 0.03, 0.01)
_PAIR = (0.1, 0.03, 0.01, 0.003, 0.0)
_OWN = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003)
#: Factors by which one factor's level variance is scaled on its own, tried in turn.
_SCALE = (0.01, 0.1, 0.3, 3.0, 10.0, 30.0)
#: The variances are chosen on the best configurations' runs up to this many (each try is
#: a Cholesky factorisation over the runs: 600 runs of 20 factors took 28 s of CPU per
#: race round); the posterior then uses every run once. A budget of 60 never reaches it.
FIT_RUNS = 200
#: Up to this many runs, a factor's scalings are fitted together (`structured_posterior`).
_AHEAD_RUNS = 64


@functools.lru_cache(maxsize=1024)
def _t_quantile(p: float, dof: int) -> float:
    """Student t quantile, remembered: a race asks the same few (p, dof) thousands of times
    and scipy's ppf costs about 0.1 ms a call."""
    return float(stats.t.ppf(p, dof))


def structured_posterior(arms: list[Arm], noise2: float, fit_runs: int = FIT_RUNS
                         ) -> tuple[np.ndarray, np.ndarray, tuple[float, float, float], float
                                    ] | None:
    """The posterior mean and variance of each arm's true value (race scale) under a
    hierarchical model of the space: true value = common mean + sum over factors of an
    effect of the level + sum over pairs of factors of an effect of the two levels + an
    effect of the configuration, each effect normal around 0 (a Gaussian process whose
    kernel counts the levels and pairs of levels two configurations share: the
    categorical kernels of algorithm configuration, e.g. Hutter, Hoos and Leyton-Brown,
    "Sequential model-based optimization for general algorithm configuration", LION
    2011, there with a random forest). The data are each arm's runs after its first,
    with noise variance `noise2`; levels are compared as text. The variances are chosen
    by the marginal likelihood of the runs: first one per kind of effect on a grid, then
    each factor's level variance scaled on its own (automatic relevance determination:
    with one variance shared by every factor, a table with one strong factor beside
    idle ones, HSQLDB's table type beside its flags, got a small one and the strong
    level was shrunk away). The variances are chosen on the runs of the best arms, up to
    `fit_runs` runs (`FIT_RUNS`), and the posterior uses every run. Returns the means, variances, the grid's three variances and
    the prior variance of one configuration's value (`tau2`); None when the arms' means
    have no spread to scale the grid by."""
    names = sorted({k for a in arms for k in a.entry.config})
    lv = np.array([[str(a.entry.config.get(k)) for k in names] for a in arms])
    eq = (lv[:, None, :] == lv[None, :, :]).astype(float)   # level shared, per factor
    same = eq.sum(-1)                                         # levels shared
    pairs = same * (same - 1) / 2.0                           # pairs of levels shared
    own = np.eye(len(arms))
    idx = np.array([i for i, a in enumerate(arms) for _ in a.kept])
    z = np.array([x for a in arms for x in a.kept])
    center = float(np.mean([a.mean for a in arms]))
    y = z - center
    spread = float(np.var([a.mean for a in arms]))
    if not math.isfinite(spread) or spread <= 0:
        return None
    n_f = len(names)
    base = spread + noise2                 # the common mean's prior variance (flat enough)
    jitter = 1e-9 * (spread + noise2)

    every = np.arange(len(idx))
    by_mean = sorted(range(len(arms)), key=lambda i: -arms[i].mean)
    held = np.cumsum([len(arms[i].kept) for i in by_mean])
    chosen = {i for i, h in zip(by_mean, held) if h <= fit_runs} | set(by_mean[:3])
    sub = every if len(chosen) == len(arms) else np.array(
        [j for j in every if idx[j] in chosen])

    views: dict[int, tuple[np.ndarray, ...]] = {}

    def fits(tries: list[tuple[np.ndarray, tuple[float, float, float]]],
             sel: np.ndarray = sub) -> list[tuple[Any, ...] | None]:
        """Log marginal likelihood of the runs `sel` (and what the posterior needs) under
        each (scale, variances) tried, in one batched factorisation (a fit each cost ~0.3 ms
        of numpy's per-call overhead, 160+ per race round)."""
        if len(sel) not in views:          # the runs' kernel parts, once per set of runs
            r = np.ix_(idx[sel], idx[sel])
            views[len(sel)] = (eq[r], pairs[r], own[r])
        e, pr, ow = views[len(sel)]
        ys, nugget = y[sel], (noise2 + jitter) * np.eye(len(sel))
        es: dict[bytes, np.ndarray] = {}  # the level part, once per scale
        for sc, _ in tries:
            if sc.tobytes() not in es:
                es[sc.tobytes()] = e @ sc
        out: list[tuple[Any, ...] | None] = []
        step = max(1, (1 << 18) // max(1, len(sel) ** 2))  # ~2 MB of matrices at a time
        for lo in range(0, len(tries), step):
            part = tries[lo:lo + step]
            v = np.array([t[1] for t in part])[:, :, None, None]
            kr = base + v[:, 0] * np.stack([es[sc.tobytes()] for sc, _ in part]) \
                + v[:, 1] * pr + v[:, 2] * ow + nugget
            out += _chol_fits(kr, ys, part, sel)
        return out

    ones = np.ones(n_f)
    best: tuple[Any, ...] | None = None
    # one factor has no pairs (the pair part is 0): every pair variance fits alike, and
    # the first of equals is kept, so the first alone is fitted
    for got in fits([(ones, (m * spread / max(1, n_f),
                             p * spread / max(1, n_f * (n_f - 1) / 2), o * spread))
                     for m in _MAIN for p in (_PAIR if n_f > 1 else _PAIR[:1])
                     for o in _OWN]):
        if got is not None and (best is None or got[0] > best[0]):
            best = got
    if best is None:
        return None
    # Each factor's own level variance, a try at a time from the best so far. Over few runs
    # (a fit is mostly numpy's per-call overhead) a factor's tries left are fitted at once
    # and those after one that improved the best are fitted again from it; over many (the
    # factorisations themselves cost, and half the tries improved on a 20-factor table),
    # one at a time.
    ahead = len(_SCALE) if len(sub) <= _AHEAD_RUNS else 1
    for _ in range(2):
        for f in range(n_f):
            mults = list(_SCALE)
            while mults:
                tries = []
                for mult in mults[:ahead]:
                    sc = best[4].copy()
                    sc[f] *= mult
                    tries.append((sc, best[3]))
                done = len(tries)
                for i, got in enumerate(fits(tries)):
                    if got is not None and got[0] > best[0] + 1e-9:
                        best, done = got, i + 1
                        break
                mults = mults[done:]
    if len(best[5]) < len(every):           # the chosen variances, every run
        best = fits([(best[4], best[3])], every)[0]
        if best is None:
            return None
    _, chol, alpha, v, scale, _ = best
    k = base + v[0] * (eq @ scale) + v[1] * pairs + v[2] * own
    ks = k[:, idx]
    mean = center + ks @ alpha
    w = np.linalg.solve(chol, ks.T)
    var = np.maximum(np.diag(k) - (w * w).sum(0), 0.0)
    tau2 = v[0] * float(scale.sum()) + v[1] * n_f * (n_f - 1) / 2 + v[2]
    return mean, var, v, tau2


def _chol_fits(kr: np.ndarray, y: np.ndarray, tries: list[tuple[np.ndarray, Any]],
               sel: np.ndarray) -> list[tuple[Any, ...] | None]:
    """`structured_posterior`'s fits of the stacked kernels `kr` to the runs `y`: per
    kernel (log marginal likelihood, Cholesky factor, K^-1 y, variances, scale, runs), or
    None where the kernel is not positive definite."""
    try:
        chol = np.linalg.cholesky(kr)
    except np.linalg.LinAlgError:          # one kernel failed: each on its own
        return [_chol_fits(kr[i:i + 1], y, tries[i:i + 1], sel)[0] for i in range(len(kr))] \
            if len(kr) > 1 else [None]
    alpha = np.linalg.solve(np.swapaxes(chol, -1, -2),
                            np.linalg.solve(chol, np.broadcast_to(y[:, None],
                                                                  (len(kr), len(y), 1))))[..., 0]
    logdet = np.log(np.diagonal(chol, axis1=-2, axis2=-1))
    return [(-0.5 * float(y @ alpha[i]) - float(logdet[i].sum()), chol[i], alpha[i],
             tries[i][1], tries[i][0], sel) for i in range(len(kr))]


#: On the log scale, a repeated configuration more than this far below the best repeated
#: one (a factor of 2) is out of contention, and its spread is not the contenders' noise.
CONTENTION = math.log(2.0)


def _contenders(arms: list[Arm], log: bool) -> list[Arm]:
    """The arms whose repeats estimate the noise. Storage noise is not the same everywhere:
    fio's defaults (one 4 KiB read in flight) spread 40-80 % on a shared disk where deep
    queues spread 5-15 %, and pooling them made every contender look as noisy as the
    slowest baseline. On the log scale only the repeated arms within `CONTENTION` of the
    best repeated mean count, unless they hold fewer than `MIN_DOF` degrees of freedom."""
    rep = [a for a in arms if len(a.z) > 1]
    if not log or not rep:
        return rep
    best = max(float(np.mean(a.z)) for a in rep)
    near = [a for a in rep if float(np.mean(a.z)) >= best - CONTENTION]
    return near if sum(len(a.z) - 1 for a in near) >= MIN_DOF else rep


def race(tally: Tally, top: int = 5, confidence: float = CONFIDENCE, delta: float = DELTA
         ) -> Race:
    """The race over every measured configuration of the tally (first objective)."""
    ob: Objective = tally.objectives[0]
    measured = tally.measured()
    raw = {id(e): [ob.score(v[0]) for v in e.values] for e in measured}  # the values
    positive = bool(measured) and all(x > 0 for e in measured for x in raw[id(e)])
    sign = 1.0 if ob.goal == "maximize" else -1.0

    def scale(x: float) -> float:
        return sign * math.log(x) if positive else sign * x

    arms = [Arm(e, [scale(x) for x in raw[id(e)]]) for e in measured]
    ss, dof = 0.0, 0
    for a in _contenders(arms, positive):
        if len(a.z) > 1:
            z = np.asarray(a.z)
            ss += float(((z - z.mean()) ** 2).sum())
            dof += len(z) - 1
    # a floor keeps the arithmetic finite when repeats agree exactly (a noise-free oracle)
    sigma = max(math.sqrt(ss / dof), 1e-9) if dof else None
    r = Race(arms, positive, ob.goal, sigma, dof, max(2, top), confidence, delta)
    if not arms:
        return r
    rep = [a for a in arms if a.repeated]
    r.shrink(arms)
    r.leader = max(rep or arms, key=lambda a: (r.shrunk(a), a.n, -a.entry.order))
    if sigma is None:
        r.tied = [r.leader]
        r.chosen = r.leader
        return r
    lead = r.leader
    zone = r.zone(lead)
    early = dof < MIN_DOF  # a noise estimate of 1-3 degrees of freedom is too often small
    for c in arms:
        if c is lead:
            continue
        g = r.upper_gain(c, lead)
        # Equivalence (0 <= bound < zone) is judged on two runs after the first each: one
        # more run each is cheap next to recommending on a lucky pair.
        few = c.repeated and min(c.n, lead.n) < 2
        if g >= zone or (g >= 0 and (few or early)) or (early and c.repeated):
            r.live.append(c)
        elif g < 0:
            r.dropped.append(c)
    # Tied: raced candidates that may still be more than the indifference zone better
    # (one that cannot is worse or equivalent for practical purposes).
    r.tied = [lead] + [c for c in r.live if c.repeated]
    # A configuration measured once that the race left live competes on its shrunk draw:
    # with little noise (tau2 >> sigma^2) a better single run wins, with much it cannot.
    # Only once three or more configurations were raced (a race's first round re-runs
    # three): before, a single draw would be recommended over every re-run candidate.
    pool = r.tied + [c for c in r.live if not c.repeated and math.isfinite(r.tau2)
                     and len(rep) >= 3]
    r.chosen = max(pool, key=lambda a: (r.shrunk(a), a.n, -a.entry.order))
    return r


def race_summary(r: Race) -> dict[str, Any]:
    """The race as JSON: noise, confidence, interval, tie and the rule that chose."""
    iv = r.interval()
    noise = None
    if r.sigma is not None:
        noise = (math.expm1(r.sigma) if r.log else r.sigma)
    return {
        "confidence": r.confidence, "indifference": r.delta,
        "noise": noise, "noise_scale": "relative (log scale)" if r.log else "absolute",
        "noise_dof": r.dof, "decided": r.decided,
        "interval": None if iv is None else [iv[0], iv[1]],
        "interval_rule": (f"{r.confidence:.0%} two-sided Student t on the runs after the "
                          "selecting first one, pooled noise, Bonferroni-simultaneous over "
                          f"the {max(1, sum(a.repeated for a in r.arms))} raced candidates"),
        "tied": [dict(a.entry.config) for a in r.tied] if len(r.tied) > 1 else [],
        "tie_rule": r.rule() if len(r.tied) > 1 else None,
        "unraced": [dict(a.entry.config) for a in r.live if not a.repeated],
    }


__all__ = ["CONFIDENCE", "DELTA", "MIN_DOF", "Arm", "Race", "race",
           "race_summary"]

