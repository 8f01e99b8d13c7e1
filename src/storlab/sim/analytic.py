"""Analytic (mean value analysis) model of the same cluster, for quick sweeps and to check
the simulator.

The per-station demands come from the very routes the simulator runs (averaged over a
sample of drawn requests), so both models see one network. Requests of all operations are
merged into one class weighted by the mix (its exact shares, not the sample's); an
operation's mean response is its own demand plus the station's queueing: in proportion to
its demand at processor-sharing stations, per visit at FCFS ones (a visit waits for the
work ahead of it, whatever its own size), and at a fork the quorum's order statistic of the
branches' waits at distinct nodes (at a station every branch visits, such as the proxy's
NIC, they wait together). A station whose work all runs under a pool with no more tokens
than its servers never queues.

* No fork (GET only, or one replica) and a modest network: exact MVA with load-dependent
  multi-server stations (`storlab.sim.mva.mva`). With exponential service this network is
  product-form, and the simulator must agree with it (tests/sim/test_cluster_analytic.py).
* Forks (PUT/DELETE to R replicas, quorum q): not product-form. A Bard-Schweitzer fixed
  point with Seidmann's multi-server split, where a fork step's response is the q-th order
  statistic of R exponential branch times (mean branch x sum_{i<q} 1/(R-i)) while every
  branch, including the background ones, loads its stations. At single-server FCFS
  stations (disks) a branch waits only when it finds the server busy, and the branches of
  one request wait alike with the probability that their disks take the same requests'
  work (`Demands.together`: the ring's replica sets repeat), independently otherwise.
* Open loop: each station as M/M/c (Erlang C), response stretched by 1 + C(c,a)/(c-a).
* Worker pools (HOLD stations, e.g. object-server workers): not product-form. A pool of
  ``c`` tokens is treated as a ``c``-server station whose service time is the *residence*
  of the visits made while holding a token (object CPU + disks, queueing included); only its
  waiting time for a token is added, since the holding time is already counted at the
  stations it covers. Closed loop: Seidmann's split inside the same Schweitzer fixed point
  (``schweitzer-pool`` without forks); open loop: Erlang C on the holding time. A pool that
  can never run out (``c`` >= clients x branches) is left out, so product-form cases stay
  exact. The covered stations see the pool's population cap through the arrival theorem
  only: a visit there finds (c - 1) / c of the queue (of at most c token holders), not
  (N - 1) / N, and a residence of at least the queue's service times keeps them no more
  than busy; their queue lengths themselves are not capped at c, so when a small pool
  binds the model is approximate (see tests/sim/test_cluster_analytic.py).
* Writes that wait for every live replica (`post_quorum_wait`): the quorum is the number of
  branches, so the order statistic above is the maximum (1 + 1/2 + 1/3 branch means for
  three exponential waits), and the client's cycle, hence closed-loop throughput, carries it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import SimError
from ..jsonutil import to_jsonable
from ..result_shape import Result
from . import mva as _mva
from .engine import FCFS, HOLD
from .model import ClusterModel, draw_requests
from .ops import DELETE, OPS
from .routes import build_routes
from .summary import flat_metrics, util_table
from .queueing import erlang_c

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Exact load-dependent MVA costs N x (multi-server stations) Python steps; above this, Seidmann.
EXACT_BUDGET = 400_000


@dataclass
class Demands:
    """Mean demand per request, per op and station, split into the single-path part and the
    forked part (all branches summed), plus each op's branches and quorum."""

    pre: np.ndarray       # [ops, stations]
    fork: np.ndarray      # [ops, stations]
    branches: np.ndarray  # [ops]
    quorum: np.ndarray    # [ops]
    mean_size: np.ndarray  # [ops] bytes
    share: np.ndarray     # [ops] mix share
    hold_pre: np.ndarray | None = None   # [ops, stations] visits to HOLD pools, single path
    hold_fork: np.ndarray | None = None  # [ops, stations] visits to HOLD pools, forked
    cover: np.ndarray | None = None      # [stations] mix-weighted demand made under a pool
    owner: np.ndarray | None = None      # [stations] the pool covering that demand, -1: none
    #: [stations] squared coefficient of variation of one visit's demand at FCFS stations
    #: (1 elsewhere: processor sharing is insensitive to it)
    scv: np.ndarray | None = None
    vpre: np.ndarray | None = None   # [ops, stations] visits per request, single path
    vfork: np.ndarray | None = None  # [ops, stations] visits per request, forked (all branches)
    #: [ops, stations] the share of forked demand made at stations another branch of the
    #: same step visits too (the proxy's NIC and CPU): those branches queue together
    shared: np.ndarray | None = None
    #: [ops] the share of the work at a forked branch's FCFS station that also visits
    #: another branch's station of the same step, in the same request (the ring's replica
    #: sets: a set's disks take the same writes at the same time)
    together: np.ndarray | None = None

    def wait_weights(self, fcfs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per op and station, what a station's queueing (stretch - 1) multiplies, for the
        single path and the forks. Processor sharing slows every job in proportion to its
        own demand: the demand. FCFS makes a visit wait for the work ahead of it, whatever
        its own size: the visits times the station's mean demand per visit (a 5 ms DELETE
        waits behind 15 ms GETs as long as a GET does; weighting the wait by the DELETE's
        own demand put its latency 14 % low on cluster700)."""
        if self.vpre is None or self.vfork is None:
            return self.pre, self.fork
        D = self.share @ (self.pre + self.fork)
        V = self.share @ (self.vpre + self.vfork)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_visit = np.where(V > 0, D / np.maximum(V, 1e-300), 0.0)
        f = np.asarray(fcfs, dtype=bool)
        return (np.where(f, self.vpre * per_visit, self.pre),
                np.where(f, self.vfork * per_visit, self.fork))


#: Largest relative error against the simulator measured over load sweeps of the shipped
#: examples (closed loop 8-2,000 clients, open loop up to 92 % busy on cluster700 and 51 %
#: on small: tests/sim/test_analytic_sweep.py checks them). Open loop past ~80 % busy the
#: mean latency can be further off (-17 % on small.yaml at 82 %): a note says so.
ACCURACY = {"throughput": 0.08, "latency": 0.13}

#: Requests drawn to average demands: as many as the workload simulates, within bounds.
DEMAND_SAMPLE = (20_000, 200_000)


def demands(model: ClusterModel, n: int | None = None, seed: int = 12345) -> Demands:
    """Average the routes of `n` drawn requests into per-station demands (default: the
    workload's requests, within DEMAND_SAMPLE)."""
    if n is None:
        want = model.spec.workload.requests or DEMAND_SAMPLE[1]
        n = int(min(max(want, DEMAND_SAMPLE[0]), DEMAND_SAMPLE[1]))
    req = draw_requests(model, n, seed)
    real = build_routes(model, req)
    # Means from routes where every request has its op's mean size: demands are linear in
    # the size, so the means are the same, without the sampling noise of which requests
    # are large (with 16 MiB objects 10 % of the time, 50 proxies' sampled demands differ by
    # +-15 % at 20,000 requests, and the busiest proxy's sampled demand would cap the
    # throughput). The route shapes do not depend on the size: visits line up.
    mean_size = req.size.astype(float).copy()
    for o in range(len(OPS)):
        sel = req.op == o
        if sel.any():
            mean_size[sel] = req.size[sel].mean()
    req_mean = dataclasses.replace(req, size=mean_size)
    r = build_routes(model, req_mean)
    if r.station.size != real.station.size or not np.array_equal(r.station, real.station):
        r = real  # a model whose routes depend on the size: sampled demands as they are
    K = len(model.stations)
    nb = np.diff(r.branch_ptr)
    step_req = np.repeat(np.arange(n), np.diff(r.step_ptr))
    branch_step = np.repeat(np.arange(nb.size), nb)
    visit_branch = np.repeat(np.arange(len(r.visit_ptr) - 1), np.diff(r.visit_ptr))
    visit_step = branch_step[visit_branch]
    visit_op = req.op[step_req[visit_step]]
    forked = nb[visit_step] > 1
    O = len(OPS)
    pre, fork = np.zeros((O, K)), np.zeros((O, K))
    hpre, hfork = np.zeros((O, K)), np.zeros((O, K))
    vpre, vfork = np.zeros((O, K)), np.zeros((O, K))
    # Forked visits to a station another branch of the same step visits as well.
    key = visit_step * K + r.station
    fk = np.flatnonzero(forked)
    _, inv, cnt_k = np.unique(key[fk], return_inverse=True, return_counts=True)
    dup = np.zeros(r.station.size, dtype=bool)
    dup[fk] = cnt_k[inv] > 1
    shared = np.zeros((O, K))
    # Visits after a branch's first HOLD visit run under that pool's token.
    is_hold = model.stations.kind[r.station] == HOLD
    hv = np.flatnonzero(is_hold)
    first = np.full(nb.sum(), -1, dtype=np.int64)
    first[visit_branch[hv][::-1]] = hv[::-1]
    fh = first[visit_branch]
    cov = (fh >= 0) & (np.arange(r.station.size) > fh)
    cover = np.bincount(r.station[cov], weights=r.demand[cov], minlength=K) / n
    owner = np.full(K, -1, dtype=np.int64)
    owner[r.station[cov]] = r.station[fh[cov]]
    branches, quorum, size = np.ones(O), np.ones(O), np.zeros(O)
    # The mix's own shares, not the sample's: per-op throughput is X times the share, and
    # 20,000 draws put cluster700's 5 % of DELETEs at 4.69 %.
    mix = model.spec.workload.mix
    share = np.array([float(mix.get(o, 0.0)) for o in OPS])
    share /= share.sum()
    for o in range(O):
        cnt = int(np.count_nonzero(req.op == o))
        if not cnt:
            share[o] = 0.0
            continue
        size[o] = mean_size[req.op == o][0]
        for part, sel in ((pre, ~forked), (fork, forked)):
            s = sel & (visit_op == o)
            part[o] = np.bincount(r.station[s], weights=r.demand[s], minlength=K) / cnt
        for part, sel in ((hpre, ~forked), (hfork, forked)):
            s = sel & (visit_op == o) & is_hold
            part[o] = np.bincount(r.station[s], minlength=K) / cnt
        for part, sel in ((vpre, ~forked), (vfork, forked)):
            s = sel & (visit_op == o)
            part[o] = np.bincount(r.station[s], minlength=K) / cnt
        s = dup & (visit_op == o)
        with np.errstate(invalid="ignore", divide="ignore"):
            shared[o] = np.where(fork[o] > 0, np.bincount(r.station[s], weights=r.demand[s],
                                                          minlength=K) / cnt
                                 / np.maximum(fork[o], 1e-300), 0.0)
        steps = np.flatnonzero((nb > 1) & (req.op[step_req] == o))
        if steps.size:
            branches[o] = nb[steps[0]]
            quorum[o] = r.quorum[steps[0]]
    # FCFS stations: a visit waits for the residual of the one in service, E[S^2] / 2E[S],
    # which a mix of 16 KiB and 16 MiB objects makes much longer than exponential's E[S].
    cnt_v = np.bincount(real.station, minlength=K).astype(float)
    m1 = np.bincount(real.station, weights=real.demand, minlength=K)
    m2 = np.bincount(real.station, weights=real.demand**2, minlength=K)
    with np.errstate(invalid="ignore", divide="ignore"):
        scv = np.where(m1 > 0, m2 * cnt_v / np.maximum(m1, 1e-300) ** 2 - 1.0, 1.0)
    fcfs = model.stations.kind == FCFS
    together = _together(model, real, visit_step, visit_branch, forked, visit_op, n)
    scv = np.where(fcfs, scv, 1.0)
    if model.spec.service_times == "exponential":
        scv = np.where(fcfs, scv * 2 + 1, 1.0)  # demand x Exp(1): E[S^2] doubles
    share /= share.sum()
    return Demands(pre, fork, branches, quorum, size, share, hpre, hfork, cover, owner, scv,
                   vpre, vfork, shared, together)


def _together(model: ClusterModel, r: Any, visit_step: np.ndarray, visit_branch: np.ndarray,
              forked: np.ndarray, visit_op: np.ndarray, n: int) -> np.ndarray:
    """Per op: for a forked visit to a single-server FCFS station a and another branch's
    such station b of the same step, the share of a's work (the visit's own left out) made
    by steps that visit b too, weighted by the visit's demand. Near 0 when replica sets
    rarely repeat; cluster700's ring puts 1,048,576 partitions on 35,323 sets of 3 disks."""
    K = len(model.stations)
    out = np.zeros(len(OPS))
    one = (model.stations.kind == FCFS) & (model.stations.servers == 1)
    idx = np.flatnonzero(forked & one[r.station])
    if idx.size == 0:
        return out
    idx = idx[np.argsort(visit_step[idx], kind="stable")]
    stp = visit_step[idx]
    start = np.flatnonzero(np.r_[True, stp[1:] != stp[:-1]])
    size = np.diff(np.r_[start, idx.size])
    grp = np.repeat(np.arange(start.size), size)
    gsize, gstart = size[grp], start[grp]
    I = np.repeat(np.arange(idx.size), gsize)
    J = np.repeat(gstart, gsize) + (np.arange(I.size) - np.repeat(np.cumsum(gsize) - gsize,
                                                                   gsize))
    keep = visit_branch[idx[I]] != visit_branch[idx[J]]
    I, J = idx[I[keep]], idx[J[keep]]
    if I.size == 0:
        return out
    dem = r.demand
    key = r.station[I].astype(np.int64) * K + r.station[J]
    uk, inv = np.unique(key, return_inverse=True)
    co = np.bincount(inv, weights=dem[I])
    tot = np.bincount(r.station, weights=dem, minlength=K)
    rest = np.maximum(tot[r.station[I]] - dem[I], 1e-300)
    frac = np.clip((co[inv] - dem[I]) / rest, 0.0, 1.0)
    op = visit_op[I]
    w = np.bincount(op, weights=dem[I], minlength=len(OPS))
    s = np.bincount(op, weights=dem[I] * frac, minlength=len(OPS))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(w > 0, s / np.maximum(w, 1e-300), 0.0)
    return out


def _order_stat(q: float, b: float) -> float:
    """Mean of the q-th smallest of b iid exponentials, in units of their mean."""
    return float(sum(1.0 / (b - i) for i in range(int(q))))


def _order_stat_idle(q: int, b: int, p: np.ndarray) -> np.ndarray:
    """Mean of the q-th smallest of b iid waits that are 0 with probability 1 - p (the
    server found idle) and exponential otherwise, in units of their mean (p x the
    exponential's): k of the b are busy with probability C(b, k) p^k (1 - p)^(b - k), and
    then the q-th smallest is the (q - b + k)-th of k exponentials. p = 1: _order_stat."""
    from math import comb

    p = np.clip(np.asarray(p, dtype=float), 1e-9, 1.0)
    tot = np.zeros_like(p)
    for k in range(max(b - q + 1, 1), b + 1):
        tot += comb(b, k) * p**k * (1.0 - p) ** (b - k) * _order_stat(q - b + k, k)
    return tot / p


@dataclass
class AnalyticResult(Result):
    """The analytic (MVA) model's answer: throughput, per-op table, utilisation."""

    PLOT_KINDS = ("utilisation",)
    ERROR = SimError

    name: str
    loop: str
    method: str
    stable: bool
    throughput: float
    ops: pd.DataFrame
    util: pd.DataFrame
    bottleneck: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        return self.ops

    def metrics(self) -> dict[str, float]:
        return flat_metrics(self.ops, self.util, self.bottleneck,
                            ("ops_s", "mb_s", "lat_mean_ms"))

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({"name": self.name, "loop": self.loop, "method": self.method,
                            "stable": self.stable, "throughput": self.throughput,
                            "ops": self.ops, "utilisation": self.util,
                            "bottleneck": self.bottleneck, "notes": self.notes})

    def plot(self, kind: str | None = None) -> Figure:
        """`utilisation` (the only kind): mean and busiest-station utilisation of each
        resource class, the bottleneck's named in the title."""
        from ..plotstyle import PALETTE, styled, subplots

        self.plot_kind(kind)
        u = self.util
        with styled():
            fig, ax = subplots(figsize=(6.8, 0.42 * len(u) + 1.6))
            y = np.arange(len(u))
            # listed as stacked: the mean above the busiest station in each pair
            ax.barh(y - 0.2, 100 * u["mean"].astype(float), height=0.4, color=PALETTE[0],
                    label="mean over its stations")
            ax.barh(y + 0.2, 100 * u["max"].astype(float), height=0.4, color=PALETTE[1],
                    label="busiest station")
            ax.set_yticks(y, u["resource"].astype(str))
            ax.invert_yaxis()
            ax.set_xlim(0, 105)
            ax.set_xlabel("utilisation (%)")
            where = self.bottleneck.get("resource", "?")
            ax.set_title(f"{self.name}: {self.method}, {self.throughput:,.0f} requests/s; "
                         f"bottleneck {where}", fontsize=9.5)
            ax.legend(loc="lower right")
        return fig


@dataclass
class _Pools:
    """The worker pools (HOLD stations) an analysis accounts for, in pool order."""

    idx: np.ndarray       # station ids
    c: np.ndarray         # tokens
    V: np.ndarray         # visits per request (mix-weighted)
    vpre: np.ndarray      # [ops, pools] visits on the single path
    vfork: np.ndarray     # [ops, pools] visits in forks (all branches)
    cov_pos: np.ndarray   # covered stations, as positions in the active-station arrays
    cov_D: np.ndarray     # mix-weighted demand made under a pool at those stations
    cov_pool: np.ndarray  # the covering pool of each, as a position in idx

    def hold(self, stretch: np.ndarray) -> np.ndarray:
        """Mean holding time per visit: residence of the covered demand, per pool visit."""
        H = np.bincount(self.cov_pool, weights=self.cov_D * stretch[self.cov_pos],
                        minlength=self.idx.size)
        return H / self.V


def _pools(d: Demands, active: np.ndarray, c_all: np.ndarray, cap: float) -> _Pools:
    """Pools with visits and fewer than `cap` tokens (a bigger pool can never run out)."""
    empty = np.zeros(0, dtype=np.int64)
    if d.hold_pre is None or d.cover is None or d.owner is None:
        z = np.zeros((len(OPS), 0))
        return _Pools(empty, np.zeros(0), np.zeros(0), z, z, empty, np.zeros(0), empty)
    V_all = d.share @ (d.hold_pre + d.hold_fork)
    idx = np.flatnonzero((V_all > 0) & (c_all < cap))
    where = np.full(c_all.size, -1, dtype=np.int64)
    where[idx] = np.arange(idx.size)
    st = np.flatnonzero((d.cover > 0) & (d.owner >= 0))
    st = st[where[d.owner[st]] >= 0]
    return _Pools(idx, c_all[idx], V_all[idx], d.hold_pre[:, idx], d.hold_fork[:, idx],
                  np.searchsorted(active, st), d.cover[st], where[d.owner[st]])


def solve_mva(model: ClusterModel, method: str = "auto", dem: Demands | None = None
            ) -> AnalyticResult:
    """Mean throughput, per-op latency and utilisations without simulating."""
    wl = model.spec.workload
    d = dem if dem is not None else demands(model)
    c_all = model.stations.servers.astype(float)
    D_all = d.share @ (d.pre + d.fork)
    active = np.flatnonzero(D_all > 0)
    D = D_all[active]
    c = c_all[active]
    pre, fork = d.pre[:, active], d.fork[:, active]
    wpre, wfork = (w[:, active] for w in d.wait_weights(model.stations.kind == FCFS))
    sh = d.shared[:, active] if d.shared is not None else np.zeros_like(fork)
    # A station all of whose work is done under a pool with no more tokens than it has
    # servers never queues: the pool caps its population (14 object workers on 14 cores).
    # MVA would queue there and lengthen the pool's holding time: on SSDs at 256 clients
    # throughput read 9.7 % low.
    free = np.zeros(D.size, dtype=bool)
    if d.owner is not None and d.cover is not None:
        own = d.owner[active]
        free = (own >= 0) & (d.cover[active] >= 0.99 * D)
        free &= c_all[np.maximum(own, 0)] <= c
    has_fork = bool(np.any((d.share > 0) & (d.branches > 1)))
    # A fork step waits for its quorum's q-th branch. Waits (for a server, for a token)
    # vary from branch to branch as exponentials do: the q-th order statistic of them
    # (`hw`). Service: exponential service the same; deterministic service asks the same
    # work of like stations, so the q-th branch's service is a typical one's (`hq`).
    hw = np.array([_order_stat(d.quorum[o], d.branches[o]) / d.branches[o]
                   for o in range(len(OPS))])
    hq = hw if model.spec.service_times == "exponential" else 1.0 / d.branches
    # Branches meeting at one station (the proxy's NIC sending every replica) wait there
    # together, not independently: that part of their wait is a typical branch's (1 / R).
    # (With the order statistic there, PUT latency read 16 % low on a 1 GbE proxy.)
    wfork_ind, wfork_sh = wfork * (1.0 - sh), wfork * sh
    hr = 1.0 / d.branches
    # At a single-server FCFS station (a disk) a branch waits only if it finds the server
    # busy (probability: its utilisation), and the branches of one request are correlated
    # where replica sets repeat: with probability `together` (the share of a disk's work
    # that the request's other disks take at the same time) the branches wait alike (the
    # q-th of them: the mean), else independently (_order_stat_idle). cluster700's DELETE
    # read +12.5 % with independent exponential waits, -13 % with independent idle-or-
    # exponential ones (bench_sim.py --analytic measures the waits' correlation: 0.29).
    one = ((model.stations.kind == FCFS) & (model.stations.servers == 1))[active]
    tog = d.together if d.together is not None else np.zeros(len(OPS))

    def hw_at(U: np.ndarray) -> np.ndarray:
        """[ops, stations]: what a fork's summed branch waits are multiplied by."""
        H = np.repeat(hw[:, None], D.size, axis=1)
        for o in np.flatnonzero((d.branches > 1) & (d.share > 0)):
            if one.any():
                q, b = int(d.quorum[o]), int(d.branches[o])
                H[o, one] = (tog[o] + (1.0 - tog[o]) * _order_stat_idle(q, b, U[one])) / b
        return H
    notes: list[str] = []
    stretch = np.ones_like(D)
    stable = True
    if wl.rate is not None:
        pools = _pools(d, active, c_all, np.inf)
        lam = float(wl.rate)
        scv_a = d.scv[active] if d.scv is not None else np.ones_like(D)
        a = lam * D
        if np.any(a >= c):
            stable = False
            notes.append("offered load exceeds capacity: the open-loop system is unstable")
            stretch[:] = np.inf
        else:
            for k in np.flatnonzero(a > 0):
                # M/G/c (Lee and Longton): M/M/c's wait scaled by (1 + scv) / 2.
                stretch[k] = 1.0 + (erlang_c(int(c[k]), float(a[k])) / (c[k] - a[k])
                                    * (1.0 + scv_a[k]) / 2.0)
            stretch[free] = 1.0
        wait = np.zeros(pools.idx.size)
        if stable and pools.idx.size:
            h = pools.hold(stretch)
            ap = lam * pools.V * h
            if np.any(ap >= pools.c):
                stable = False
                notes.append("offered load exceeds the worker pools: the open-loop system "
                             "is unstable")
            else:
                wait = np.array([erlang_c(int(cp), float(x)) * hp / (cp - x)
                                 for cp, x, hp in zip(pools.c, ap, h)])
        X = lam
        used = "open M/M/c"
    else:
        N = int(wl.clients or 1)
        Z = wl.think_ms / 1000.0
        pools = _pools(d, active, c_all, N * float(d.branches.max()))
        multi = int(np.count_nonzero(c > 1))
        if method == "auto":
            method = ("schweitzer-fork" if has_fork else
                      "schweitzer-pool" if pools.idx.size else
                      "exact" if N * max(multi, 1) <= EXACT_BUDGET else "seidmann")
        wait = np.zeros(pools.idx.size)
        if method in ("exact", "seidmann"):
            if has_fork:
                notes.append("forked writes are not product-form: replicas counted in series")
            if pools.idx.size:
                notes.append("worker pools left out: product-form methods cannot hold them")
            fn = _mva.mva if method == "exact" else _mva.mva_seidmann
            res = fn(D, N, Z, c.astype(np.int64))
            stretch = res.R[-1] / D
            X = res.throughput
        elif method in ("schweitzer-fork", "schweitzer-pool"):
            scv = d.scv[active] if d.scv is not None else np.ones_like(D)
            X, stretch, wait = _fork_fixed_point(D, c, pre, fork, (hq, hw), d.share, N, Z,
                                                 pools, scv, (wpre, wfork_ind, wfork_sh, hr),
                                                 free, hw_at)
        else:
            raise ValueError(f"method {method!r}: auto, exact, seidmann, schweitzer-fork or "
                             "schweitzer-pool")
        used = method
    if stable:
        resp = (pre.sum(axis=1) + wpre @ (stretch - 1.0)
                + hq * fork.sum(axis=1)
                + (hw_at(np.minimum(X * D / c, 1.0)) * wfork_ind) @ (stretch - 1.0)
                + hr * (wfork_sh @ (stretch - 1.0))
                + pools.vpre @ wait + hw * (pools.vfork @ wait))
    else:
        resp = np.full(len(OPS), np.inf)
    rows = []
    if wl.rate is None:
        X = float(X)
    total = {"op": "ALL", "ops_s": X, "mb_s": 0.0,
             "lat_mean_ms": float(d.share[d.share > 0] @ resp[d.share > 0]) * 1e3}
    for o, name in enumerate(OPS):
        if d.share[o] == 0:
            continue
        mb = X * d.share[o] * d.mean_size[o] / 1e6 if o != DELETE else 0.0
        total["mb_s"] += mb
        rows.append({"op": name, "ops_s": X * d.share[o], "mb_s": mb,
                     "lat_mean_ms": float(resp[o]) * 1e3})
    ops = pd.DataFrame([total, *rows])
    U = np.zeros(c_all.size)
    U[active] = X * D / c
    if stable:  # every pool, binding or not: tokens in use = throughput x holding time
        allp = _pools(d, active, c_all, np.inf)
        if allp.idx.size:
            U[allp.idx] = X * allp.V * allp.hold(stretch) / allp.c
    util, bottleneck = util_table(model, U)
    if wl.rate is not None and stable and bottleneck["utilisation"] > 0.8:
        notes.append(f"open loop at {bottleneck['utilisation']:.0%} busy: near saturation the "
                     "mean latency may be off by more than the usual "
                     f"{ACCURACY['latency']:.0%} (simulate to be sure)")
    return AnalyticResult(model.spec.name, "open" if wl.rate is not None else "closed", used,
                          stable, X, ops, util, bottleneck, notes)



def _fork_fixed_point(D: np.ndarray, c: np.ndarray, pre: np.ndarray, fork: np.ndarray,
                      h: tuple[np.ndarray, np.ndarray], share: np.ndarray, N: int, Z: float, pools: _Pools,
                      scv: np.ndarray | None = None,
                      weights: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
                      free: np.ndarray | None = None,
                      hw_at: Callable[[np.ndarray], np.ndarray] | None = None
                      ) -> tuple[float, np.ndarray, np.ndarray]:
    """Schweitzer's approximation with Seidmann's multi-server split and quorum joins; `h`
    is each op's quorum factors (service, waits). A pool is a Seidmann multi-server station whose service is
    the holding time: only its queueing term (the wait for a token) is added per visit.
    Returns throughput, per-station stretch and per-pool wait per visit."""
    Dq, Dd = D / c, D * (c - 1) / c
    Q = np.zeros_like(D)
    Qp = np.zeros(pools.idx.size)
    wait = np.zeros(pools.idx.size)
    X = 0.0
    frac = (N - 1) / N
    # Arrival theorem inside a worker pool: a visit to a station the pool covers finds the
    # others of at most c token holders there, not of N clients, so it sees (c - 1) / c of
    # the queue (Schweitzer's (N - 1) / N for the rest). Without it the disks behind
    # small.yaml's 14-worker pools queued as if 256 clients could reach them: with think
    # time, throughput read 3.6 % low and the writes, which wait for every replica's
    # token, +11.6 % (PUT) and +12.3 % (DELETE) slow.
    fs = np.full(D.size, frac)
    if pools.idx.size:
        cp = pools.c[pools.cov_pool]
        fs[pools.cov_pos] = np.minimum(fs[pools.cov_pos], (cp - 1.0) / cp)
    stretch = np.ones_like(D)
    wpre, wfork, wsh, hr = ((pre, fork, np.zeros_like(fork), h[1]) if weights is None
                            else weights)
    hs, hw = h
    base = pre.sum(axis=1) + hs * fork.sum(axis=1)
    corr = np.zeros_like(D) if scv is None else (scv - 1.0) / 2.0
    for _ in range(5000):
        # Residual-service correction (FCFS, non-exponential): a job found in service
        # leaves E[S^2]/2E[S] = S (1 + scv) / 2 to wait, not S.
        busy = np.minimum(X * Dq, 1.0) * fs
        # Behind a pool a station's queue can outgrow what (c - 1) / c of it allows, where
        # (N - 1) / N could not: a residence of at least Q service times keeps it no more
        # than busy (X Dq <= 1 at the fixed point; with 2 of 6 disks failed one read 102 %).
        rq = Dq * np.maximum(1.0 + Q * fs + busy * corr, Q)
        stretch = (rq + Dd) / D
        if free is not None:
            stretch[free] = 1.0      # pure delay: the pool in front caps its population
        fw = (hw * (wfork @ (stretch - 1.0)) if hw_at is None else
              (hw_at(np.minimum(X * D / c, 1.0)) * wfork) @ (stretch - 1.0))
        cycle = Z + share @ (base + wpre @ (stretch - 1.0) + fw + hr * (wsh @ (stretch - 1.0)))
        if pools.idx.size:
            hq = pools.hold(stretch) / pools.c  # the fast single server of Seidmann's split
            wait = hq * Qp * frac
            cycle += share @ (pools.vpre @ wait + hw * (pools.vfork @ wait))
        X = N / cycle
        Qn = X * rq
        if free is not None:
            Qn[free] = 0.0
        # Damped: near saturation the plain iteration oscillates.
        Qn = 0.5 * Q + 0.5 * Qn
        delta = float(np.max(np.abs(Qn - Q)))
        Q = Qn
        if pools.idx.size:
            Qpn = 0.5 * Qp + 0.5 * X * pools.V * hq * (1.0 + Qp * frac)
            delta = max(delta, float(np.max(np.abs(Qpn - Qp))))
            Qp = Qpn
        if delta < 1e-9 * max(1.0, N):
            break
    return float(X), stretch, wait


