"""MVA against brute-force product-form solutions and textbook limits."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from storlab.sim.mva import mva, mva_multiclass, mva_seidmann, schweitzer


def brute_force_throughput(D, c, N, Z) -> float:
    """Closed product-form network by enumerating every state (small N, K only).

    P(n) is proportional to prod_k f_k(n_k) * Z^n0 / n0!, f_k(n) = D_k^n / prod_{j<=n} min(j, c_k)
    (c_k = 0: delay, f = D^n / n!). Throughput = E[min(n_0, c_0)] / D_0.
    """
    K = len(D)

    def f(k: int, n: int) -> float:
        rates = [j if c[k] == 0 else min(j, c[k]) for j in range(1, n + 1)]
        return D[k] ** n / math.prod(rates)

    norm = busy0 = 0.0
    for ns in itertools.product(range(N + 1), repeat=K):
        if sum(ns) > N:
            continue
        n0 = N - sum(ns)
        w = Z**n0 / math.factorial(n0) * math.prod(f(k, ns[k]) for k in range(K))
        norm += w
        busy0 += w * (ns[0] if c[0] == 0 else min(ns[0], c[0])) / D[0]
    return busy0 / norm


@pytest.mark.parametrize("N", [1, 2, 5, 8])
@pytest.mark.parametrize("servers", [[1, 3, 0, 2], [5, 1, 2, 0], [2, 2, 1, 1]])
def test_exact_mva_matches_enumeration_with_multiserver_and_delay(N, servers):
    D = np.array([0.3, 0.5, 0.2, 0.4])
    c = np.array(servers)
    assert mva(D, N, 1.0, c).throughput == pytest.approx(brute_force_throughput(D, c, N, 1.0), rel=1e-10)


def test_single_server_limits():
    D = np.array([0.2, 0.5, 0.1])
    res = mva(D, 200, Z=1.0)
    assert res.throughput == pytest.approx(1 / D.max(), rel=1e-3)  # bottleneck bound
    assert res.X[0] == pytest.approx(1 / (1.0 + D.sum()))  # one client never queues
    assert np.all(np.diff(res.X) >= -1e-12)  # non-decreasing up to rounding
    # Little's law inside MVA: N = X (R + Z) at every population.
    np.testing.assert_allclose(res.X * (res.R.sum(axis=1) + 1.0), np.arange(1, 201))
    np.testing.assert_allclose(res.U[-1], res.X[-1] * D)


def test_machine_repairman_closed_form():
    # One single-server station, N clients thinking Z: classical finite-source M/M/1//N.
    N, S, Z = 6, 0.5, 2.0
    r = Z / S
    p0 = 1 / sum(math.factorial(N) / math.factorial(N - k) / r**k for k in range(N + 1))
    assert mva([S], N, Z).throughput == pytest.approx((1 - p0) / S, rel=1e-12)


def test_seidmann_is_close_and_exact_for_one_server():
    D, c = np.array([0.3, 0.6]), np.array([1, 2])
    exact = mva(D, 10, 0.5, c).throughput
    assert mva_seidmann(D, 10, 0.5, c).throughput == pytest.approx(exact, rel=0.05)
    assert mva_seidmann(D, 10, 0.5, [1, 1]).throughput == pytest.approx(mva(D, 10, 0.5).throughput, rel=1e-12)


def test_multiclass_exact_reduces_to_single_class_and_schweitzer_is_close():
    D = np.array([[0.3, 0.2, 1.0], [0.1, 0.4, 0.5]])
    delay = np.array([False, False, True])
    X1, _ = mva_multiclass(D[:1], [7], [1.0], delay)
    assert X1[0] == pytest.approx(mva(D[0], 7, 1.0, servers=[1, 1, 0]).throughput, rel=1e-12)
    # Two identical classes behave as one class with the summed population.
    Xs, _ = mva_multiclass(np.vstack([D[0], D[0]]), [3, 4], [1.0, 1.0], delay)
    assert Xs.sum() == pytest.approx(mva(D[0], 7, 1.0, servers=[1, 1, 0]).throughput, rel=1e-10)
    Xe, _ = mva_multiclass(D, [3, 4], [1.0, 2.0], delay)
    Xa, _ = schweitzer(D, [3, 4], [1.0, 2.0], servers=[1, 1, 0])
    np.testing.assert_allclose(Xa, Xe, rtol=0.05)  # Bard-Schweitzer: a few percent
