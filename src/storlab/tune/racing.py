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
- **The race.** The leader is the best shrunk mean (below) among configurations measured
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
  it; the recommendation is the tied candidate with the highest mean after shrinking each
  mean toward the common mean of every measured configuration by its uncertainty
  (empirical Bayes: a mean over few runs cannot win on one lucky draw), then the most
  runs. Its interval
  is Student's t on its runs after the first, with the pooled noise, two-sided at
  `CONFIDENCE` and Bonferroni-simultaneous over every raced candidate, so it covers the
  true value of whichever candidate ends up chosen.
"""

from __future__ import annotations

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

    tau2: float = math.inf    # spread of true values around the model (inf: no shrinkage)

    center: float = 0.0       # every measured configuration's common mean (shrinkage target)

    def shrink(self, rep: list[Arm]) -> None:
        """Empirical Bayes over every measured configuration: their true values spread
        `tau2` around their common mean `center` (method of moments: the spread of their
        means less the noise's share). A mean over few runs is pulled toward the others by
        its uncertainty, so one lucky draw cannot win the race. Fitted over the raced
        candidates alone (the two or three re-run first, chosen for being close), their
        spread was about the noise's, `tau2` fell to its floor and every configuration
        measured once looked alike to the round that picks challengers; over all of them,
        a single draw far above the others counts for what it is worth (noise 0.10, 60
        replayed tunings of Berkeley DB C: see docs/tuning.md).
        (Shrinking toward an additive model's prediction instead was tried: Berkeley DB's
        optimum is an interaction, and the model buried it.)"""
        if self.sigma is None or len(rep) < 3:
            return
        means = np.array([a.mean for a in rep])
        noise = float(np.mean([self.sigma ** 2 / a.n for a in rep]))
        self.center = float(means.mean())
        self.tau2 = max(float(means.var(ddof=1)) - noise, (0.1 * self.sigma) ** 2)

    def shrunk(self, a: Arm) -> float:
        """A configuration's mean (runs after its first; its single draw when measured
        once) shrunk toward every measured configuration's common mean by its uncertainty."""
        if not math.isfinite(self.tau2) or self.sigma is None:
            return a.mean
        w = self.tau2 / (self.tau2 + self.sigma ** 2 / a.n)
        return self.center + w * (a.mean - self.center)

    def post_var(self, a: Arm) -> float:
        """Posterior variance of a's true value (race scale) under the shrinkage."""
        assert self.sigma is not None
        if not math.isfinite(self.tau2):
            return self.sigma ** 2 / a.n
        return 1.0 / (1.0 / self.tau2 + a.n / self.sigma ** 2)

    def p_beats(self, c: Arm, lead: Arm) -> float:
        """Posterior probability that c is truly better than the leader: the challengers
        most likely to change the answer get the round's runs."""
        sd = math.sqrt(self.post_var(c) + self.post_var(lead))
        return float(stats.norm.cdf((self.shrunk(c) - self.shrunk(lead)) / max(sd, 1e-12)))

    # ------------------------------------------------------------------ bounds
    def q_one(self) -> float:
        """One-sided Student t quantile, Bonferroni over the top - 1 comparisons."""
        m = max(1, self.top - 1)
        return float(stats.t.ppf(1 - (1 - self.confidence) / m, max(self.dof, 1)))

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
        q = float(stats.t.ppf(1 - (1 - self.confidence) / (2 * m), max(self.dof, 1)))
        half = q * self.sigma / math.sqrt(a.n)
        lo, hi = self.to_value(a.mean - half), self.to_value(a.mean + half)
        return (min(lo, hi), max(lo, hi))

    def rule(self) -> str:
        return ("the tied candidate with the highest mean after shrinking each mean toward "
                "the common mean of every measured configuration by its uncertainty "
                "(empirical Bayes: a mean over few runs cannot win on one lucky draw), then "
                "the most runs")

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

