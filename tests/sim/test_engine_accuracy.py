"""The simulator against exact queueing theory: M/M/c (Erlang C), M/M/c-PS, and a closed
product-form network against exact MVA.

Sample sizes are chosen so the standard error of each estimate is about a third of the
2% tolerance (measured over independent seeds: at rho = 0.9 the relative standard
deviation of the mean wait is ~2.4% per million customers for c = 1 and ~2.8% for c = 4,
so those cases need 14-18 million customers, run as independent replications).
"""

from __future__ import annotations

import numpy as np
import pytest

from storlab.sim.engine import FCFS, PS, SimResult, Stations, linear_routes, simulate
from storlab.sim.mva import mva
from storlab.sim.queueing import mmc, mmc_ps_response

CHUNK = 2_000_000  # customers per independent replication (bounds memory)


def check_little(r: SimResult) -> None:
    """Little's law per station (exact without warm-up; boundary term with it)."""
    busy = r.completions > (0 if r.warmup == 0 else 1000)
    assert np.all(r.little_gap()[busy] < (1e-9 if r.warmup == 0 else 0.01))


def _mmc_mean_wait(kind: int, c: int, rho: float, n_total: int, seed: int) -> tuple[float, float]:
    """Mean wait in queue and mean response time over independent replications."""
    lam, mu = rho * c, 1.0
    st = Stations(kind=np.array([kind], np.int8), servers=np.array([c], np.int32))
    rng = np.random.default_rng(seed)
    waits, resp = [], []
    for _ in range(max(1, n_total // CHUNK)):
        n = min(CHUNK, n_total)
        arr = np.cumsum(rng.exponential(1 / lam, n))
        dem = rng.exponential(1 / mu, (n, 1))
        r = simulate(st, linear_routes(np.zeros((n, 1), np.int32), dem), arrivals=arr, warmup=n // 100)
        lat = r.latency()
        waits.append(np.mean(lat - dem[r.warmup :, 0]))
        resp.append(np.mean(lat))
        check_little(r)
        np.testing.assert_allclose(r.utilisation()[0], rho, rtol=0.02)
    return float(np.mean(waits)), float(np.mean(resp))


@pytest.mark.parametrize(
    "c, rho, n",
    [
        (1, 0.5, 1_000_000),
        (1, 0.7, 2_000_000),
        (1, 0.9, 14_000_000),
        (4, 0.5, 6_000_000),
        (4, 0.7, 6_000_000),
        (4, 0.9, 18_000_000),
    ],
)
def test_mmc_mean_wait_matches_erlang_c(c, rho, n):
    wq, _ = _mmc_mean_wait(FCFS, c, rho, n, seed=100 + c * 10 + int(rho * 10))
    exact = mmc(rho * c, 1.0, c).wq
    assert wq == pytest.approx(exact, rel=0.02)


@pytest.mark.parametrize("c, rho", [(1, 0.7), (2, 0.8)])
def test_mmc_ps_mean_response(c, rho):
    _, w = _mmc_mean_wait(PS, c, rho, 4_000_000, seed=200 + c)
    assert w == pytest.approx(mmc_ps_response(rho * c, 1.0, c), rel=0.02)


def test_closed_network_matches_exact_mva():
    """CPU (PS) -> one of two disks (FCFS, exponential) -> NIC (FCFS, 2 servers), with
    exponential think time: a BCMP product-form network, so exact MVA gives its throughput."""
    n, clients, Z = 400_000, 12, 2.0
    rng = np.random.default_rng(42)
    st = Stations(kind=np.array([PS, FCFS, FCFS, FCFS], np.int8), servers=np.array([1, 1, 1, 2], np.int32))
    mean_s = np.array([0.15, 0.4, 0.25, 0.3])
    disk = 1 + (rng.random(n) < 0.3).astype(np.int32)  # disk 2 with probability 0.3
    route = np.stack([np.zeros(n, np.int32), disk, np.full(n, 3, np.int32)], axis=1)
    dem = rng.exponential(1.0, (n, 3)) * mean_s[route]
    think = rng.exponential(Z, n)
    r = simulate(st, linear_routes(route, dem), clients=clients, think=think, warmup=10_000)
    D = mean_s * np.array([1.0, 0.7, 0.3, 1.0])
    exact = mva(D, clients, Z, servers=[1, 1, 1, 2])
    assert r.throughput() == pytest.approx(exact.throughput, rel=0.02)
    np.testing.assert_allclose(r.utilisation(), exact.U[-1], rtol=0.02)
    np.testing.assert_allclose(r.mean_in_system(), exact.Q[-1], rtol=0.05)
    # Little's law over the whole loop: clients = X * (R + Z).
    assert r.throughput() * (r.latency().mean() + Z) == pytest.approx(clients, rel=0.02)
    check_little(r)
