"""The Rust core and the pure-Python reference give identical results on random small
route sets (forks, quorums, empty branches, ties, FCFS/PS/HOLD, open and closed loops)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from storlab.sim.model import build_model, draw_requests
from storlab.sim.routes import build_routes
from storlab.sim.spec import apply_overrides, load_raw, parse_cluster
from storlab.sim.engine import HOLD, Routes, SimResult, Stations, simulate

# Few distinct demands and arrival gaps, so simultaneous events (ties) are common.
DEMANDS = [0.0, 0.5, 1.0, 1.5, 2.0, 0.1, 0.7]


def check_little(r: SimResult) -> None:
    """Little's law per station (exact without warm-up; boundary term with it)."""
    busy = r.completions > (0 if r.warmup == 0 else 1000)
    assert np.all(r.little_gap()[busy] < (1e-9 if r.warmup == 0 else 0.01))


@st.composite
def cases(draw):
    n_st = draw(st.integers(1, 4))
    kind = draw(st.lists(st.integers(0, 2), min_size=n_st, max_size=n_st))
    servers = draw(st.lists(st.integers(1, 3), min_size=n_st, max_size=n_st))
    n_req = draw(st.integers(1, 12))
    step_ptr, branch_ptr, quorum, visit_ptr, station, demand = [0], [0], [], [0], [], []
    for _ in range(n_req):
        for _ in range(draw(st.integers(0, 3))):
            nb = draw(st.integers(1, 3))
            quorum.append(draw(st.integers(0, nb)))
            for _ in range(nb):
                last_hold = -1
                for _ in range(draw(st.integers(0, 3))):
                    s = draw(st.integers(0, n_st - 1))
                    if kind[s] == HOLD:
                        # Pools taken in increasing order, each once per branch: no circular
                        # wait, so no deadlock (that case has its own test).
                        if s <= last_hold:
                            continue
                        last_hold = s
                    station.append(s)
                    d = draw(st.sampled_from(DEMANDS)) * draw(st.sampled_from([1.0, 1.0, 1.37]))
                    demand.append(0.0 if kind[s] == HOLD else d)  # a HOLD visit only takes a token
                visit_ptr.append(len(station))
            branch_ptr.append(len(visit_ptr) - 1)
        step_ptr.append(len(quorum))
    routes = Routes(
        step_ptr=np.array(step_ptr, np.int64),
        branch_ptr=np.array(branch_ptr, np.int64),
        quorum=np.array(quorum, np.int32),
        visit_ptr=np.array(visit_ptr, np.int64),
        station=np.array(station, np.int32),
        demand=np.array(demand, np.float64),
        op=np.array(draw(st.lists(st.integers(0, 2), min_size=n_req, max_size=n_req)), np.int8),
    )
    stations = Stations(kind=np.array(kind, np.int8), servers=np.array(servers, np.int32))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 0.33]), min_size=n_req, max_size=n_req))
    think = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=n_req, max_size=n_req)))
    if draw(st.booleans()):
        kw = dict(arrivals=np.cumsum(gaps))
    else:
        kw = dict(clients=draw(st.integers(1, 4)), think=think)
    kw["warmup"] = draw(st.integers(0, n_req - 1))
    kw["marks"] = np.array(sorted(draw(st.sets(st.integers(0, n_req - 1), max_size=4))),
                           dtype=np.int64)
    return stations, routes, kw


@settings(max_examples=150, deadline=None)
@given(cases())
def test_rust_and_python_backends_identical(case):
    stations, routes, kw = case
    a = simulate(stations, routes, backend="rust", **kw)
    b = simulate(stations, routes, backend="python", **kw)
    for f in ("start", "finish", "busy", "area", "completions", "residence"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    assert (a.events, a.sim_time, a.stats_start) == (b.events, b.sim_time, b.stats_start)
    for f in ("snap_t", "snap_busy", "snap_area"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    if kw["marks"].size:  # one row per mark, then one at the end of the run
        assert a.snap_busy.shape == (kw["marks"].size + 1, len(stations))
        assert a.snap_t[-1] == a.sim_time and np.all(np.diff(a.snap_t) >= 0)
        assert np.all(np.diff(a.snap_busy, axis=0) >= -1e-12)
        if kw["warmup"] == 0:  # nothing reset: the last row is the engine's totals
            np.testing.assert_allclose(a.snap_busy[-1], a.busy, rtol=1e-12, atol=1e-12)
    assert np.all(a.finish >= a.start)
    assert a.completions.sum() == (len(routes.station) if kw["warmup"] == 0 else a.completions.sum())
    if kw["warmup"] == 0:
        check_little(a)


def test_backends_identical_on_a_larger_run():
    rng = np.random.default_rng(5)
    n = 3000
    n_st = 6
    stations = Stations(kind=rng.integers(0, 2, n_st).astype(np.int8), servers=rng.integers(1, 4, n_st).astype(np.int32))
    # Every request: one visit, then a 3-way fork with quorum 2 of two visits each.
    step_ptr = np.arange(n + 1, dtype=np.int64) * 2
    branch_ptr = np.concatenate([[0], np.cumsum(np.tile([1, 3], n))]).astype(np.int64)
    quorum = np.tile([1, 2], n).astype(np.int32)
    visit_ptr = np.concatenate([[0], np.cumsum(np.tile([1, 2, 2, 2], n))]).astype(np.int64)
    n_vis = int(visit_ptr[-1])
    routes = Routes(step_ptr, branch_ptr, quorum, visit_ptr, rng.integers(0, n_st, n_vis).astype(np.int32), rng.exponential(0.2, n_vis))
    arr = np.cumsum(rng.exponential(0.3, n))
    a = simulate(stations, routes, arrivals=arr, warmup=100)
    b = simulate(stations, routes, arrivals=arr, warmup=100, backend="python")
    for f in ("start", "finish", "busy", "area", "completions", "residence"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    assert a.events == b.events


def test_backends_identical_on_cluster_routes_with_worker_pools():
    """Swift routes (forks, quorums, object-server pools that run out) on both backends."""
    raw = load_raw(Path(__file__).resolve().parents[2] / "examples" / "sim" / "small.yaml")
    m = build_model(parse_cluster(apply_overrides(raw, {"object_workers": 3, "object_size": "64KiB"})))
    req = draw_requests(m, 3000)
    routes = build_routes(m, req)
    a = simulate(m.stations, routes, clients=200, think=req.think, warmup=300)
    b = simulate(m.stations, routes, clients=200, think=req.think, warmup=300, backend="python")
    for f in ("start", "finish", "busy", "area", "completions", "residence"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    assert a.events == b.events
    pools = m.node_pool[m.node_pool >= 0]
    assert np.all(a.utilisation()[pools] > 0.9)  # the pools did run out
