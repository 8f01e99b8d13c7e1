"""Engine semantics on hand-made cases (exact times), determinism, Little's law,
exact agreement with the Lindley / Kiefer-Wolfowitz recursions, and input checks."""

from __future__ import annotations

import numpy as np
import pytest

from storlab.sim.engine import FCFS, HOLD, PS, Routes, SimResult, Stations, linear_routes, simulate

BACKENDS = ["rust", "python"]


def check_little(r: SimResult, rel: float = 1e-9) -> None:
    """Little's law per station: time-integral of the number present equals the summed
    residence of the visits (exact when the run starts and ends empty, no warm-up)."""
    if r.warmup == 0:
        np.testing.assert_allclose(r.area, r.residence, rtol=rel, atol=1e-9)
        assert np.all(r.little_gap()[r.completions > 0] < 1e-9)
    else:  # boundary effects at the warm-up cut only
        big = r.completions > 1000
        assert np.all(r.little_gap()[big] < 0.01)
    assert np.all(r.busy <= r.area + 1e-9)
    assert np.all(r.busy <= r.servers * r.window * (1 + 1e-12) + 1e-9)


def stations(kinds, servers) -> Stations:
    return Stations(kind=np.array(kinds, np.int8), servers=np.array(servers, np.int32))


def fork_routes(requests) -> Routes:
    """Build Routes from nested lists: request = [(quorum, [branch, ...]), ...],
    branch = [(station, demand), ...]."""
    step_ptr, branch_ptr, quorum, visit_ptr, station, demand = [0], [0], [], [0], [], []
    for steps in requests:
        for q, branches in steps:
            quorum.append(q)
            for br in branches:
                for s, d in br:
                    station.append(s)
                    demand.append(d)
                visit_ptr.append(len(station))
            branch_ptr.append(len(visit_ptr) - 1)
        step_ptr.append(len(quorum))
    return Routes(
        step_ptr=np.array(step_ptr, np.int64),
        branch_ptr=np.array(branch_ptr, np.int64),
        quorum=np.array(quorum, np.int32),
        visit_ptr=np.array(visit_ptr, np.int64),
        station=np.array(station, np.int32),
        demand=np.array(demand, np.float64),
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_fork_quorum_exact_times(backend):
    st = stations([FCFS] * 4, [1] * 4)
    # Request 0: fork to 3 replicas (1, 2, 3 s), quorum 2, then one visit of 0.5 s.
    # Request 1 (t=2.5) queues behind request 0's background replica at station 2.
    routes = fork_routes(
        [
            [(2, [[(0, 1.0)], [(1, 2.0)], [(2, 3.0)]]), (1, [[(3, 0.5)]])],
            [(1, [[(2, 1.0)]])],
        ]
    )
    r = simulate(st, routes, arrivals=np.array([0.0, 2.5]), backend=backend)
    np.testing.assert_array_equal(r.finish, [2.5, 4.0])  # quorum at 2, +0.5; 3 + 1
    np.testing.assert_array_equal(r.latency(), [2.5, 1.5])
    np.testing.assert_array_equal(r.busy, [1.0, 2.0, 4.0, 0.5])
    np.testing.assert_array_equal(r.completions, [1, 1, 2, 1])
    assert r.sim_time == 4.0
    assert r.events == 2 + 5  # two arrivals, five visit completions
    check_little(r)


@pytest.mark.parametrize("backend", BACKENDS)
def test_quorum_zero_empty_branches_and_empty_request(backend):
    st = stations([FCFS], [1])
    routes = fork_routes(
        [
            [(0, [[(0, 5.0)]])],  # fire-and-forget: done at arrival, station busy 5 s
            [(1, [[], [(0, 1.0)]])],  # empty branch meets quorum 1 at once
            [],  # no steps at all
            [(2, [[], [(0, 1.0)]])],  # needs the real branch: waits behind the 5 s job
        ]
    )
    r = simulate(st, routes, arrivals=np.array([0.0, 1.0, 2.0, 3.0]), backend=backend)
    np.testing.assert_array_equal(r.finish, [0.0, 1.0, 2.0, 7.0])
    assert r.sim_time == 7.0
    np.testing.assert_array_equal(r.busy, [7.0])
    check_little(r)


@pytest.mark.parametrize("backend", BACKENDS)
def test_processor_sharing_exact(backend):
    # PS c=1: jobs of 1 s and 2 s at t=0 share the server: leave at 2 and 3.
    # PS c=2 with three 1 s jobs: each gets 2/3 of a server, all leave at 1.5.
    st = stations([PS, PS], [1, 2])
    r = simulate(st, linear_routes([[0], [0]], [[1.0], [2.0]]), arrivals=np.zeros(2), backend=backend)
    np.testing.assert_allclose(r.finish, [2.0, 3.0], rtol=1e-12)
    r = simulate(st, linear_routes([[1]] * 3, [[1.0]] * 3), arrivals=np.zeros(3), backend=backend)
    np.testing.assert_allclose(r.finish, [1.5] * 3, rtol=1e-12)
    np.testing.assert_allclose(r.busy[1], 3.0, rtol=1e-12)  # 2 servers x 1.5 s = the 3 s of work
    # A late arrival slows the first job: job 0 (2 s) alone for 1 s, then shared with
    # job 1 (0.5 s): job 1 leaves at 2, job 0 finishes its last 0.5 s at 2.5.
    r = simulate(st, linear_routes([[0], [0]], [[2.0], [0.5]]), arrivals=np.array([0.0, 1.0]), backend=backend)
    np.testing.assert_allclose(r.finish, [2.5, 2.0], rtol=1e-12)
    check_little(r)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fcfs_multiserver_and_closed_loop_exact(backend):
    st = stations([FCFS], [2])
    r = simulate(st, linear_routes([[0]] * 3, [[1.0]] * 3), arrivals=np.zeros(3), backend=backend)
    np.testing.assert_array_equal(r.finish, [1.0, 1.0, 2.0])
    # Closed loop: one client, think 0.5 s before each request, 1 s of service.
    st1 = stations([FCFS], [1])
    r = simulate(st1, linear_routes([[0]] * 3, [[1.0]] * 3), clients=1, think=0.5, backend=backend)
    np.testing.assert_array_equal(r.start, [0.5, 2.0, 3.5])
    np.testing.assert_array_equal(r.finish, [1.5, 3.0, 4.5])
    # Two clients, per-request think times: request 2 is issued by the first completion.
    r = simulate(
        st1, linear_routes([[0]] * 3, [[1.0]] * 3), clients=2, think=np.array([0.0, 0.0, 2.0]), backend=backend
    )
    np.testing.assert_array_equal(r.start, [0.0, 0.0, 3.0])
    np.testing.assert_array_equal(r.finish, [1.0, 2.0, 4.0])
    check_little(r)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hold_two_branches_compete_for_one_token(backend):
    # Pool of 1 token (0), CPU (1), disk (2, two servers). Request 0 holds the token from 0
    # through its CPU (0-1) and disk (1-3) visits; request 1 arrives at 0.5, waits for the
    # token until 3, then CPU 3-4, disk 4-5. Without the pool it would finish at 3.
    st = stations([HOLD, FCFS, FCFS], [1, 1, 2])
    routes = fork_routes([[(1, [[(0, 0.0), (1, 1.0), (2, 2.0)]])], [(1, [[(0, 0.0), (1, 1.0), (2, 1.0)]])]])
    r = simulate(st, routes, arrivals=np.array([0.0, 0.5]), backend=backend)
    np.testing.assert_array_equal(r.finish, [3.0, 5.0])
    np.testing.assert_array_equal(r.busy, [5.0, 2.0, 3.0])  # token in use 0-5
    np.testing.assert_array_equal(r.area, [7.5, 2.0, 3.0])  # 1 holder, 2 from 0.5 to 3, 1
    np.testing.assert_array_equal(r.residence, [7.5, 2.0, 3.0])  # 3 + (5 - 0.5)
    np.testing.assert_array_equal(r.completions, [2, 2, 2])
    assert r.events == 2 + 2 + 4  # arrivals, grants, visit completions
    check_little(r)
    # Without the pool the second request overlaps: the test above is not vacuous.
    free = simulate(stations([PS, FCFS, FCFS], [9, 1, 2]), routes, arrivals=np.array([0.0, 0.5]), backend=backend)
    np.testing.assert_array_equal(free.finish, [3.0, 3.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_hold_released_at_branch_end_after_quorum(backend):
    # Pools A (0) and B (1), one token each; disks 2 and 3. Request 0 forks to both, quorum 1:
    # it is done at 1 (branch A), while its background branch B keeps B's token until 4.
    # Request 1 (t=2) forks to both, quorum 2: A is free (2-3), B waits for the token until
    # 4, then disk 4-5.
    st = stations([HOLD, HOLD, FCFS, FCFS], [1, 1, 1, 1])
    routes = fork_routes(
        [
            [(1, [[(0, 0.0), (2, 1.0)], [(1, 0.0), (3, 4.0)]])],
            [(2, [[(0, 0.0), (2, 1.0)], [(1, 0.0), (3, 1.0)]])],
        ]
    )
    r = simulate(st, routes, arrivals=np.array([0.0, 2.0]), backend=backend)
    np.testing.assert_array_equal(r.finish, [1.0, 5.0])
    np.testing.assert_array_equal(r.busy, [2.0, 5.0, 2.0, 5.0])
    np.testing.assert_array_equal(r.residence, [2.0, 7.0, 2.0, 5.0])  # B: 4 + (5 - 2)
    np.testing.assert_array_equal(r.completions, [2, 2, 2, 2])
    assert r.sim_time == 5.0
    check_little(r)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hold_with_several_tokens_and_several_pools(backend):
    # Two tokens (0), work station 1 (FCFS, 3 servers): requests of 1, 2 and 1 s at t=0.
    # Two take tokens at once; the third waits until the first releases at 1, works 1-2.
    st = stations([HOLD, FCFS, HOLD], [2, 3, 1])
    routes = linear_routes([[0, 1]] * 3, [[0.0, 1.0], [0.0, 2.0], [0.0, 1.0]])
    r = simulate(st, routes, arrivals=np.zeros(3), backend=backend)
    np.testing.assert_array_equal(r.finish, [1.0, 2.0, 2.0])
    np.testing.assert_array_equal(r.busy[0], 4.0)  # two tokens in use from 0 to 2
    np.testing.assert_array_equal(r.area[0], 5.0)  # plus one waiter from 0 to 1
    assert r.utilisation()[0] == 1.0
    check_little(r)
    # Request 0 takes pool 0, then queues for pool 2, whose single token request 1 took at
    # its arrival (request 0's grant of pool 0 is an event after that arrival); request 1
    # works 0-1 and releases; request 0 gets pool 2 at 1, works 1-2 and releases both pools.
    routes = linear_routes([[0, 2, 1], [2, 1, 1]], [[0.0, 0.0, 1.0], [0.0, 0.5, 0.5]])
    r = simulate(st, routes, arrivals=np.zeros(2), backend=backend)
    np.testing.assert_array_equal(r.finish, [2.0, 1.0])
    np.testing.assert_array_equal(r.residence[[0, 2]], [2.0, 3.0])  # pool 2: 1 + 2
    np.testing.assert_array_equal(r.completions, [1, 3, 2])
    check_little(r)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hold_deadlock_and_demand_are_rejected(backend):
    st = stations([HOLD, FCFS], [1, 1])
    # The same one-token pool twice in one branch can never be granted.
    with pytest.raises(ValueError, match="deadlock"):
        simulate(st, linear_routes([[0, 0, 1]], [[0.0, 0.0, 1.0]]), arrivals=np.zeros(1), backend=backend)
    with pytest.raises(ValueError, match="HOLD"):
        simulate(st, linear_routes([[0, 1]], [[1.0, 1.0]]), arrivals=np.zeros(1), backend=backend)


def _mm_inputs(n: int, lam: float, mu: float, seed: int):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.exponential(1 / lam, n)), rng.exponential(1 / mu, n)


@pytest.mark.parametrize("c", [1, 3])
def test_fcfs_matches_kiefer_wolfowitz_recursion(c):
    """FCFS waits equal the Kiefer-Wolfowitz workload recursion (Lindley for c = 1)."""
    n = 20_000
    arr, dem = _mm_inputs(n, 0.85 * c, 1.0, seed=7)
    r = simulate(stations([FCFS], [c]), linear_routes(np.zeros((n, 1)), dem[:, None]), arrivals=arr)
    work = np.zeros(c)  # remaining work seen by each server, sorted
    wait = np.empty(n)
    for i in range(n):
        wait[i] = work[0]
        work[0] += dem[i]
        work.sort()
        if i + 1 < n:
            work = np.maximum(work - (arr[i + 1] - arr[i]), 0.0)
    np.testing.assert_allclose(r.finish - r.start - dem, wait, atol=1e-8)
    check_little(r)


def test_little_network_level_and_helpers():
    """Without forks, the stations' integrated population equals the summed request latencies."""
    n = 50_000
    rng = np.random.default_rng(3)
    st = stations([PS, FCFS, FCFS, PS], [1, 2, 1, 4])
    route = np.stack([np.zeros(n, int), 1 + rng.integers(0, 2, n), np.full(n, 3)], axis=1)
    dem = rng.exponential(1.0, (n, 3)) * np.array([0.5, 1.0, 2.0])
    arr = np.cumsum(rng.exponential(1 / 1.2, n))
    r = simulate(st, linear_routes(route, dem), arrivals=arr)
    np.testing.assert_allclose(r.area.sum(), (r.finish - r.start).sum(), rtol=1e-9)
    assert r.events == n + 3 * n
    assert r.completions.sum() == 3 * n
    lam = n / r.window
    np.testing.assert_allclose(r.utilisation(), lam * np.bincount(route.ravel(), dem.ravel(), 4) / n / r.servers, rtol=1e-9)
    np.testing.assert_allclose(r.mean_in_system(), r.completions / r.window * r.response_time(), rtol=1e-9)
    check_little(r)
    rw = simulate(st, linear_routes(route, dem), arrivals=arr, warmup=5000)
    assert rw.stats_start == arr[5000] and len(rw.latency()) == n - 5000
    np.testing.assert_array_equal(rw.finish, r.finish)  # warm-up only changes the statistics
    check_little(rw)


def test_determinism_same_seed_same_result():
    def run(seed: int) -> SimResult:
        rng = np.random.default_rng(seed)
        n = 20_000
        route = rng.integers(0, 3, (n, 2))
        dem = rng.exponential(0.3, (n, 2))
        return simulate(
            stations([FCFS, PS, FCFS], [1, 2, 2]), linear_routes(route, dem), clients=8, think=rng.exponential(1.0, n)
        )

    a, b, c = run(11), run(11), run(12)
    for f in ("start", "finish", "busy", "area", "completions", "residence"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert a.events == b.events and a.sim_time == b.sim_time
    assert not np.array_equal(a.finish, c.finish)
    check_little(a)


def test_op_classes_and_throughput():
    n = 1000
    op = np.arange(n, dtype=np.int8) % 2
    r = simulate(
        stations([FCFS], [1]),
        linear_routes(np.zeros((n, 1)), np.full((n, 1), 0.5), op=op),
        arrivals=np.arange(n, dtype=float),
    )
    assert len(r.latency(op=1)) == n // 2
    np.testing.assert_allclose(r.latency(), 0.5)
    np.testing.assert_allclose(r.throughput(), n / (n - 1 + 0.5))
    np.testing.assert_allclose(r.throughput(op=0) + r.throughput(op=1), r.throughput())


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        (dict(arrivals=np.array([1.0, 0.0])), "sorted"),
        (dict(), "exactly one"),
        (dict(arrivals=np.zeros(2), clients=2), "exactly one"),
        (dict(clients=0), "clients"),
        (dict(clients=1, think=-1.0), "think"),
        (dict(clients=1, warmup=2), "warmup"),
    ],
)
def test_bad_inputs_are_rejected(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        simulate(stations([FCFS], [1]), linear_routes([[0], [0]], [[1.0], [1.0]]), **kwargs)


def test_bad_routes_are_rejected():
    st = stations([FCFS], [1])
    with pytest.raises(ValueError, match="station"):
        simulate(st, linear_routes([[1]], [[1.0]]), arrivals=np.zeros(1))
    with pytest.raises(ValueError, match="demand"):
        simulate(st, linear_routes([[0]], [[-1.0]]), arrivals=np.zeros(1))
    r = fork_routes([[(3, [[(0, 1.0)], [(0, 1.0)]])]])
    with pytest.raises(ValueError, match="quorum"):
        simulate(st, r, arrivals=np.zeros(1))
    with pytest.raises(ValueError, match="backend"):
        simulate(st, linear_routes([[0]], [[1.0]]), arrivals=np.zeros(1), backend="fortran")
