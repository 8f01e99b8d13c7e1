"""Analytic (mean value analysis) model of the same cluster, for quick sweeps and to check
the simulator.

The per-station demands come from the very routes the simulator runs (averaged over a
sample of drawn requests), so both models see one network. Requests of all operations are
merged into one class weighted by the mix; an operation's mean response is its own demand at
each station times that station's residence per unit of demand.

* No fork (GET only, or one replica) and a modest network: exact MVA with load-dependent
  multi-server stations (`storlab.sim.mva.mva`). With exponential service this network is
  product-form, and the simulator must agree with it (tests/sim/test_cluster_analytic.py).
* Forks (PUT/DELETE to R replicas, quorum q): not product-form. A Bard-Schweitzer fixed
  point with Seidmann's multi-server split, where a fork step's response is the q-th order
  statistic of R exponential branch times (mean branch x sum_{i<q} 1/(R-i)) while every
  branch, including the background ones, loads its stations.
* Open loop: each station as M/M/c (Erlang C), response stretched by 1 + C(c,a)/(c-a).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import mva as _mva
from .cluster import DELETE, OPS, ClusterModel, ClusterSpec, build_model, build_routes, draw_requests
from .queueing import erlang_c

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


def demands(model: ClusterModel, n: int = 20_000, seed: int = 12345) -> Demands:
    """Average the routes of `n` drawn requests into per-station demands."""
    req = draw_requests(model, n, seed)
    r = build_routes(model, req)
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
    branches, quorum, size, share = np.ones(O), np.ones(O), np.zeros(O), np.zeros(O)
    for o in range(O):
        cnt = int(np.count_nonzero(req.op == o))
        share[o] = cnt / n
        if not cnt:
            continue
        size[o] = req.size[req.op == o].mean()
        for part, sel in ((pre, ~forked), (fork, forked)):
            s = sel & (visit_op == o)
            part[o] = np.bincount(r.station[s], weights=r.demand[s], minlength=K) / cnt
        steps = np.flatnonzero((nb > 1) & (req.op[step_req] == o))
        if steps.size:
            branches[o] = nb[steps[0]]
            quorum[o] = r.quorum[steps[0]]
    return Demands(pre, fork, branches, quorum, size, share)


def _order_stat(q: float, b: float) -> float:
    """Mean of the q-th smallest of b iid exponentials, in units of their mean."""
    return float(sum(1.0 / (b - i) for i in range(int(q))))


@dataclass
class AnalyticResult:
    name: str
    loop: str
    method: str
    stable: bool
    throughput: float
    ops: pd.DataFrame
    util: pd.DataFrame
    bottleneck: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        return self.ops

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for row in self.ops.to_dict("records"):
            pre = "" if row["op"] == "ALL" else f"{row['op'].lower()}_"
            for k in ("ops_s", "mb_s", "lat_mean_ms"):
                out[f"{pre}{k}"] = float(row[k])
        for row in self.util.to_dict("records"):
            out[f"util_{row['resource']}"] = float(row["max"])
        out["bottleneck_util"] = float(self.bottleneck["utilisation"])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "loop": self.loop, "method": self.method,
                "stable": self.stable, "throughput": self.throughput, "ops": self.ops,
                "utilisation": self.util, "bottleneck": self.bottleneck, "notes": self.notes}


def analyse(model: ClusterModel, method: str = "auto", dem: Demands | None = None
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
    has_fork = bool(np.any((d.share > 0) & (d.branches > 1)))
    notes: list[str] = []
    stretch = np.ones_like(D)
    stable = True
    if wl.rate is not None:
        lam = float(wl.rate)
        a = lam * D
        if np.any(a >= c):
            stable = False
            notes.append("offered load exceeds capacity: the open-loop system is unstable")
            stretch[:] = np.inf
        else:
            for k in np.flatnonzero(a > 0):
                stretch[k] = 1.0 + erlang_c(int(c[k]), float(a[k])) / (c[k] - a[k])
        X = lam
        used = "open M/M/c"
    else:
        N = int(wl.clients or 1)
        Z = wl.think_ms / 1000.0
        multi = int(np.count_nonzero(c > 1))
        if method == "auto":
            method = ("schweitzer-fork" if has_fork else
                      "exact" if N * max(multi, 1) <= EXACT_BUDGET else "seidmann")
        if method in ("exact", "seidmann"):
            if has_fork:
                notes.append("forked writes are not product-form: replicas counted in series")
            fn = _mva.mva if method == "exact" else _mva.mva_seidmann
            res = fn(D, N, Z, c.astype(np.int64))
            stretch = res.R[-1] / D
            X = res.throughput
        elif method == "schweitzer-fork":
            X, stretch = _fork_fixed_point(D, c, pre, fork, d, N, Z)
        else:
            raise ValueError(f"method {method!r}: auto, exact, seidmann or schweitzer-fork")
        used = method
    if stable:
        resp = pre @ stretch + np.array([_order_stat(d.quorum[o], d.branches[o])
                                         / d.branches[o] for o in range(len(OPS))]) * (
            fork @ stretch)
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
    util, bottleneck = _util_table(model, U)
    return AnalyticResult(model.spec.name, "open" if wl.rate is not None else "closed", used,
                          stable, X, ops, util, bottleneck, notes)


def _fork_fixed_point(D: np.ndarray, c: np.ndarray, pre: np.ndarray, fork: np.ndarray,
                      d: Demands, N: int, Z: float) -> tuple[float, np.ndarray]:
    """Schweitzer's approximation with Seidmann's multi-server split and quorum joins."""
    Dq, Dd = D / c, D * (c - 1) / c
    h = np.array([_order_stat(d.quorum[o], d.branches[o]) / d.branches[o]
                  for o in range(d.share.size)])
    Q = np.zeros_like(D)
    X = 0.0
    frac = (N - 1) / N
    stretch = np.ones_like(D)
    for _ in range(5000):
        stretch = (Dq * (1.0 + Q * frac) + Dd) / D
        cycle = Z + d.share @ (pre @ stretch + h * (fork @ stretch))
        X = N / cycle
        Qn = X * Dq * (1.0 + Q * frac)
        # Damped: near saturation the plain iteration oscillates.
        Qn = 0.5 * Q + 0.5 * Qn
        if np.max(np.abs(Qn - Q)) < 1e-9 * max(1.0, N):
            Q = Qn
            break
        Q = Qn
    return float(X), stretch


def _util_table(model: ClusterModel, U: np.ndarray) -> tuple[pd.DataFrame, dict[str, Any]]:
    names = model.stations.names or [str(i) for i in range(U.size)]
    rows = []
    for cls in model.classes():
        idx = np.flatnonzero(model.station_class == cls)
        j = idx[np.argmax(U[idx])]
        rows.append({"resource": cls, "stations": idx.size, "mean": float(U[idx].mean()),
                     "max": float(U[j]), "busiest": names[j]})
    util = pd.DataFrame(rows).sort_values("max", ascending=False, ignore_index=True)
    top = util.iloc[0]
    return util, {"resource": top["resource"], "station": top["busiest"],
                  "utilisation": float(top["max"])}


def analyse_spec(spec: ClusterSpec, method: str = "auto") -> AnalyticResult:
    return analyse(build_model(spec), method)
