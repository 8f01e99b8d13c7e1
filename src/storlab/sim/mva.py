"""Mean value analysis (MVA) of closed product-form queueing networks.

Written by hand in numpy because no well-kept Python library provides it (the
recursions are a few lines each). Stations are described by their service demand
per request ``D_k = visits_k * service_time_k`` and their number of servers:

* ``servers[k] == 1``: single-server FCFS (exponential) or PS queue;
* ``servers[k] > 1``: multi-server queue, solved exactly as a load-dependent station
  (rate ``min(j, c)``) in :func:`mva`, or with Seidmann's approximation in
  :func:`mva_seidmann` and :func:`schweitzer`;
* ``servers[k] == 0``: delay (infinite-server) station, residence time ``D_k``.

Clients think for ``Z`` seconds between requests (a delay station outside ``D``).

References: Reiser & Lavenberg (1980) for exact MVA; Menasce & Almeida, *Capacity
Planning for Web Services* (2002), for load-dependent multi-server stations; Schweitzer
(1979) and Bard (1979) for the approximate multi-class fixed point; Seidmann, Schweitzer
& Shalev-Oren (1987) for the multi-server approximation.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["MVAResult", "mva", "mva_seidmann", "mva_multiclass", "schweitzer", "seidmann"]


@dataclass
class MVAResult:
    """MVA output for populations 1..N (row n-1 is population n).

    ``X`` throughput (requests/s), ``R`` per-station residence time per request,
    ``Q`` per-station mean number present, ``U`` per-station utilisation (per server;
    for delay stations, the mean number present).
    """

    X: np.ndarray  # (N,)
    R: np.ndarray  # (N, K)
    Q: np.ndarray  # (N, K)
    U: np.ndarray  # (N, K)
    Z: float

    @property
    def throughput(self) -> float:
        return float(self.X[-1])

    @property
    def response(self) -> float:
        """System response time (excluding think) at the full population."""
        return float(self.R[-1].sum())


def _as_inputs(demands, servers) -> tuple[np.ndarray, np.ndarray]:
    d = np.asarray(demands, dtype=np.float64)
    if d.ndim != 1 or np.any(d < 0):
        raise ValueError("demands must be a 1-D array of non-negative seconds")
    c = np.ones(len(d), dtype=np.int64) if servers is None else np.asarray(servers, dtype=np.int64)
    if c.shape != d.shape or np.any(c < 0):
        raise ValueError("servers must be >= 0 (0 = delay station), one per station")
    return d, c


def mva(demands, N: int, Z: float = 0.0, servers=None) -> MVAResult:
    """Exact single-class MVA; multi-server stations via the load-dependent recursion.

    For a station with ``c`` servers the marginal probabilities ``p(j | n)`` of the
    first ``c - 1`` states are carried, and (Menasce & Almeida's multi-server MVA)
    ``R = D/c * (1 + Q(n-1) + sum_{j<c-1} (c-1-j) p(j | n-1))``. Cost O(N*K*c),
    vectorised over stations.
    ``p(0 | n)`` comes from normalisation and can lose precision near saturation
    with many servers; it is clipped at 0.
    """
    d, c = _as_inputs(demands, servers)
    if N < 1:
        raise ValueError("N must be >= 1")
    K = len(d)
    delay = c == 0
    multi = np.flatnonzero(c > 1)
    # Vectorised over the multi-server stations: p[m, j] = P(j present at multi[m]),
    # padded to the largest server count; weights are zero outside 0 <= j < c.
    cm = c[multi].astype(np.float64)[:, None]
    dm = d[multi][:, None]
    j = np.arange(max(int(c.max()) if K else 1, 1), dtype=np.float64)[None, :]
    w_r = np.where(j < cm - 1, cm - 1 - j, 0.0)  # (c-1-j) for j < c-1, in R
    w_p = np.where((j >= 1) & (j < cm), cm - j, 0.0)  # (c-j) for 1 <= j < c, in p(0)
    grow = np.where((j >= 1) & (j < cm), 1.0 / np.maximum(j, 1.0), 0.0)  # 1/alpha(j) = 1/j
    p = np.zeros((len(multi), j.shape[1]))
    p[:, 0] = 1.0
    q = np.zeros(K)
    X = np.zeros(N)
    R = np.zeros((N, K))
    Q = np.zeros((N, K))
    for n in range(1, N + 1):
        r = d * (1.0 + q)
        r[delay] = d[delay]
        r[multi] = dm[:, 0] / cm[:, 0] * (1.0 + q[multi] + np.sum(w_r * p, axis=1))
        x = n / (Z + r.sum())
        q = x * r
        new = np.zeros_like(p)
        new[:, 1:] = x * dm * grow[:, 1:] * p[:, :-1]
        new[:, 0] = np.maximum(0.0, 1.0 - (x * dm[:, 0] + np.sum(w_p * new, axis=1)) / cm[:, 0])
        p = new
        X[n - 1], R[n - 1], Q[n - 1] = x, r, q
    U = X[:, None] * d[None, :] / np.where(delay, 1, c)[None, :]
    return MVAResult(X=X, R=R, Q=Q, U=U, Z=float(Z))


def seidmann(demands, servers) -> tuple[np.ndarray, np.ndarray]:
    """Seidmann's approximation: a c-server station with demand D becomes a single
    server with demand D/c in series with a delay of D(c-1)/c.

    Returns (queueing demands, delay demands) per station; delay stations (c = 0)
    go entirely to the delay part.
    """
    d, c = _as_inputs(demands, servers)
    cq = np.maximum(c, 1)
    dq = np.where(c == 0, 0.0, d / cq)
    dd = np.where(c == 0, d, d * (cq - 1) / cq)
    return dq, dd


def mva_seidmann(demands, N: int, Z: float = 0.0, servers=None) -> MVAResult:
    """Exact MVA on Seidmann's single-server transformation (approximate for c > 1)."""
    d, c = _as_inputs(demands, servers)
    dq, dd = seidmann(d, c)
    K = len(d)
    res = mva(np.concatenate([dq, dd]), N, Z, np.concatenate([np.ones(K, int), np.zeros(K, int)]))
    R = res.R[:, :K] + res.R[:, K:]
    Q = res.Q[:, :K] + res.Q[:, K:]
    U = res.X[:, None] * d[None, :] / np.where(c == 0, 1, c)[None, :]
    return MVAResult(X=res.X, R=R, Q=Q, U=U, Z=float(Z))


def mva_multiclass(demands, N, Z=None, delay=None) -> tuple[np.ndarray, np.ndarray]:
    """Exact multi-class MVA for single-server and delay stations.

    ``demands`` is (C, K), ``N`` the population per class, ``Z`` think time per class,
    ``delay`` a boolean mask of delay stations. The recursion runs over every
    population vector, so the cost is prod(N_c + 1) * C * K: fine for a few classes
    of tens of clients; use :func:`schweitzer` beyond. Returns (X per class, R (C, K)).
    """
    D = np.atleast_2d(np.asarray(demands, dtype=np.float64))
    C, K = D.shape
    Nv = np.asarray(N, dtype=np.int64).reshape(C)
    Zv = np.zeros(C) if Z is None else np.asarray(Z, dtype=np.float64).reshape(C)
    dl = np.zeros(K, bool) if delay is None else np.asarray(delay, bool)
    if np.prod(Nv + 1) > 2_000_000:
        raise ValueError("population space too large for exact multi-class MVA; use schweitzer()")
    strides = np.cumprod(np.concatenate([[1], Nv[:-1] + 1]))
    Qtot = np.zeros((int(np.prod(Nv + 1)), K))  # total queue length per population vector
    X = np.zeros(C)
    R = np.zeros((C, K))
    for pop in itertools.product(*(range(int(n) + 1) for n in Nv[::-1])):
        pop = np.array(pop[::-1])
        idx = int(pop @ strides)
        if idx == 0:
            continue
        R = np.zeros((C, K))
        X = np.zeros(C)
        for cl in np.flatnonzero(pop):
            qprev = Qtot[idx - strides[cl]]
            R[cl] = np.where(dl, D[cl], D[cl] * (1.0 + qprev))
            X[cl] = pop[cl] / (Zv[cl] + R[cl].sum())
        Qtot[idx] = (X[:, None] * R).sum(axis=0)
    return X, R


def schweitzer(demands, N, Z=None, servers=None, tol: float = 1e-10, max_iter: int = 100_000):
    """Bard-Schweitzer approximate multi-class MVA (multi-server via Seidmann).

    Fixed point of ``R_ck = D_ck (1 + Q_k - Q_ck / N_c)`` at queueing stations, with
    ``Q_ck = X_c R_ck`` and ``X_c = N_c / (Z_c + sum_k R_ck)``. Typical error a few
    percent on throughput. Returns (X per class, R (C, K) per-station residence).
    """
    D = np.atleast_2d(np.asarray(demands, dtype=np.float64))
    C, K = D.shape
    Nv = np.asarray(N, dtype=np.float64).reshape(C)
    Zv = np.zeros(C) if Z is None else np.asarray(Z, dtype=np.float64).reshape(C)
    c = np.ones(K, np.int64) if servers is None else np.asarray(servers, np.int64)
    cq = np.maximum(c, 1)
    Dq = np.where(c == 0, 0.0, D / cq)  # queueing part
    Dd = np.where(c == 0, D, D * (cq - 1) / cq)  # delay part
    Q = np.where(Nv[:, None] > 0, Nv[:, None] / K, 0.0) * np.ones((C, K))
    safeN = np.where(Nv > 0, Nv, 1.0)
    for _ in range(max_iter):
        Qk = Q.sum(axis=0)
        R = Dq * (1.0 + Qk[None, :] - Q / safeN[:, None]) + Dd
        X = Nv / (Zv + R.sum(axis=1))
        Qn = X[:, None] * R
        if np.max(np.abs(Qn - Q)) < tol:
            Q = Qn
            break
        Q = Qn
    return X, R
