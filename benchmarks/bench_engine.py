"""Speed of storlab's event engine against SimPy, measured in the same run.

Models (inputs drawn once with numpy and given to both engines, so both simulate
exactly the same customers; their mean latencies are printed as a cross-check):

1. M/M/c, c = 4, rho = 0.9 (one FCFS station).
2. Small cluster: proxy CPU (FCFS, 8 servers) -> 3-way fork to storage nodes, each
   branch NIC -> CPU -> disk (FCFS), quorum 2; 1 proxy + 6 storage nodes. FCFS
   everywhere because SimPy has no processor-sharing resource; the same model with
   PS NICs/CPUs is timed for storlab alone.
3. Synthetic 700-node cluster (storlab only): 700 storage nodes with CPU (PS, 16 cores),
   NIC (PS) and 10 disks (FCFS) each, 100 proxies with CPU and NIC (PS); 70% GETs (one
   replica), 30% PUTs (3-way fork, quorum 2); 1,000,000 requests. Wall time includes
   building the routes with numpy.

Events are counted the same way for both engines, from the model: one per request
arrival plus one per visit completion (this is exactly storlab's ``SimResult.events``;
for SimPy the count is computed from the model, since SimPy also schedules internal
bookkeeping events: its own count, read from its event-id counter, is printed too).
Events/s = model events / wall seconds of the simulation call; inputs are drawn outside
the timed region for both engines. Targets: >= 20x SimPy; 700 nodes x 1M requests < 60 s.

Usage: python benchmarks/bench_engine.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from storlab.sim.engine import FCFS, PS, Routes, Stations, linear_routes, simulate

try:
    import simpy
except ImportError:  # pragma: no cover
    simpy = None


# ---------------------------------------------------------------- M/M/c


def mmc_inputs(n: int, c: int = 4, rho: float = 0.9, seed: int = 1):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.exponential(1 / (rho * c), n)), rng.exponential(1.0, n)


def simpy_mmc(arr: np.ndarray, dem: np.ndarray, c: int) -> tuple[float, float, int]:
    """Returns (wall s, mean response, SimPy's own scheduled-event count)."""
    arr_l, dem_l = arr.tolist(), dem.tolist()
    env = simpy.Environment()
    res = simpy.Resource(env, capacity=c)
    total = [0.0]

    def customer(i: int):
        t0 = env.now
        with res.request() as req:
            yield req
            yield env.timeout(dem_l[i])
        total[0] += env.now - t0

    def source():
        for i, t in enumerate(arr_l):
            yield env.timeout(t - env.now)
            env.process(customer(i))

    env.process(source())
    t0 = time.perf_counter()
    env.run()
    wall = time.perf_counter() - t0
    return wall, total[0] / len(arr_l), _simpy_event_count(env)


def _simpy_event_count(env) -> int:
    eid = getattr(env, "_eid", None)  # itertools.count of scheduled events (internal)
    return next(eid) if eid is not None else -1


def storlab_mmc(arr: np.ndarray, dem: np.ndarray, c: int) -> tuple[float, float, int]:
    st = Stations(kind=np.array([FCFS], np.int8), servers=np.array([c], np.int32))
    routes = linear_routes(np.zeros((len(arr), 1), np.int32), dem[:, None])
    t0 = time.perf_counter()
    r = simulate(st, routes, arrivals=arr)
    wall = time.perf_counter() - t0
    return wall, float(r.latency().mean()), r.events


# ---------------------------------------------------------------- small cluster


def cluster_inputs(n: int, seed: int = 2, storage: int = 6):
    """Per request: proxy CPU demand, 3 distinct storage nodes, (NIC, CPU, disk) demands per replica."""
    rng = np.random.default_rng(seed)
    cpu = rng.exponential(0.5e-3, n)
    nodes = np.argsort(rng.random((n, storage)), axis=1)[:, :3].astype(np.int32)
    dem = rng.exponential(1.0, (n, 3, 3)) * np.array([0.2e-3, 0.3e-3, 4e-3])  # NIC, CPU, disk
    arr = np.cumsum(rng.exponential(1 / 350.0, n))  # disk utilisation 350/s x 3/6 x 4 ms = 0.7
    return arr, cpu, nodes, dem


def storlab_cluster(arr, cpu, nodes, dem, storage: int = 6, ps: bool = False):
    # Stations: 0 = proxy CPU (8 servers); node k: NIC 1+3k, CPU 2+3k (4 servers), disk 3+3k.
    n = len(arr)
    kinds = [PS if ps else FCFS] + [PS if ps else FCFS, PS if ps else FCFS, FCFS] * storage
    servers = [8] + [1, 4, 1] * storage
    st = Stations(kind=np.array(kinds, np.int8), servers=np.array(servers, np.int32))
    step_ptr = np.arange(n + 1, dtype=np.int64) * 2
    branch_ptr = np.concatenate([[0], np.cumsum(np.tile([1, 3], n))]).astype(np.int64)
    quorum = np.tile(np.array([1, 2], np.int32), n)
    visit_ptr = np.concatenate([[0], np.cumsum(np.tile([1, 3, 3, 3], n))]).astype(np.int64)
    station = np.empty((n, 10), np.int32)
    demand = np.empty((n, 10))
    station[:, 0], demand[:, 0] = 0, cpu
    station[:, 1:] = (1 + 3 * nodes[:, :, None] + np.arange(3)).reshape(n, 9)
    demand[:, 1:] = dem.reshape(n, 9)
    routes = Routes(step_ptr, branch_ptr, quorum, visit_ptr, station.ravel(), demand.ravel())
    t0 = time.perf_counter()
    r = simulate(st, routes, arrivals=arr)
    wall = time.perf_counter() - t0
    return wall, float(r.latency().mean()), r.events, r


def simpy_cluster(arr, cpu, nodes, dem, storage: int = 6):
    env = simpy.Environment()
    proxy = simpy.Resource(env, capacity=8)
    res = [[simpy.Resource(env, capacity=c) for c in (1, 4, 1)] for _ in range(storage)]
    arr_l, cpu_l, nodes_l, dem_l = arr.tolist(), cpu.tolist(), nodes.tolist(), dem.tolist()
    total = [0.0]

    def branch(i: int, j: int, quorum: list, done_ev):
        node = res[nodes_l[i][j]]
        for k in range(3):
            with node[k].request() as req:
                yield req
                yield env.timeout(dem_l[i][j][k])
        quorum[0] += 1
        if quorum[0] == 2:
            done_ev.succeed()

    def request(i: int):
        t0 = env.now
        with proxy.request() as req:
            yield req
            yield env.timeout(cpu_l[i])
        done_ev = env.event()
        quorum = [0]
        for j in range(3):
            env.process(branch(i, j, quorum, done_ev))
        yield done_ev
        total[0] += env.now - t0

    def source():
        for i, t in enumerate(arr_l):
            yield env.timeout(t - env.now)
            env.process(request(i))

    env.process(source())
    t0 = time.perf_counter()
    env.run()
    wall = time.perf_counter() - t0
    return wall, total[0] / len(arr_l), _simpy_event_count(env)


# ---------------------------------------------------------------- 700 nodes


def big_cluster(n: int, nodes: int = 700, disks: int = 10, proxies: int = 100, seed: int = 3):
    """Build the synthetic 700-node network and routes (vectorised) and simulate it."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    # Station layout: proxies (CPU, NIC), then per node CPU, NIC, disks.
    p_cpu = np.arange(proxies) * 2
    p_nic = p_cpu + 1
    base = 2 * proxies + np.arange(nodes) * (2 + disks)
    n_cpu, n_nic = base, base + 1
    n_st = 2 * proxies + nodes * (2 + disks)
    kind = np.full(n_st, FCFS, np.int8)
    servers = np.ones(n_st, np.int32)
    kind[p_cpu], servers[p_cpu] = PS, 32
    kind[p_nic] = PS
    kind[n_cpu], servers[n_cpu] = PS, 16
    kind[n_nic] = PS
    st = Stations(kind=kind, servers=servers)

    put = rng.random(n) < 0.3
    size = np.where(put, 1 << 20, 64 << 10).astype(float)  # 1 MiB PUTs, 64 KiB GETs
    bw_nic, bw_proxy, bw_disk = 1.25e9, 3.125e9, 200e6  # 10 GbE nodes, 25 GbE proxies, 200 MB/s disks
    proxy = rng.integers(0, proxies, n)
    # Three distinct nodes per request (rejection on collisions, vectorised).
    rep = rng.integers(0, nodes, (n, 3))
    while True:
        bad = (rep[:, 1] == rep[:, 0]) | (rep[:, 2] == rep[:, 0]) | (rep[:, 2] == rep[:, 1])
        if not bad.any():
            break
        rep[bad] = rng.integers(0, nodes, (int(bad.sum()), 3))
    disk = rng.integers(0, disks, (n, 3))
    # Per request: step 1 proxy NIC (in) + proxy CPU; step 2 fork (PUT: 3 replicas, quorum 2;
    # GET: 1 replica) of node NIC, CPU, disk; step 3 proxy NIC (out).
    n_br = np.where(put, 3, 1)
    steps_per = 3
    step_ptr = np.arange(n + 1, dtype=np.int64) * steps_per
    br_count = np.stack([np.ones(n, int), n_br, np.ones(n, int)], axis=1).ravel()
    branch_ptr = np.concatenate([[0], np.cumsum(br_count)]).astype(np.int64)
    quorum = np.stack([np.ones(n, int), np.where(put, 2, 1), np.ones(n, int)], axis=1).ravel().astype(np.int32)
    # Visits: branch kinds in order: [2 visits], [3 visits] x n_br, [1 visit].
    vis_per_branch = np.concatenate([np.full(1, 2), np.full(3, 3), np.full(1, 1)])
    mask = np.stack([np.ones(n, bool), np.ones(n, bool), put, put, np.ones(n, bool)], axis=1)
    branch_visits = np.broadcast_to(vis_per_branch, (n, 5))[mask]
    visit_ptr = np.concatenate([[0], np.cumsum(branch_visits)]).astype(np.int64)
    # Station and demand of all 2 + 9 + 1 possible visits per request, then keep the used ones.
    exp = rng.exponential(1.0, (n, 12))
    stn = np.empty((n, 12), np.int32)
    dem = np.empty((n, 12))
    wire, pwire = size / bw_nic, size / bw_proxy
    stn[:, 0], dem[:, 0] = p_nic[proxy], np.where(put, pwire, 2e-6)
    stn[:, 1], dem[:, 1] = p_cpu[proxy], 150e-6 * exp[:, 1]
    for j in range(3):
        k = 2 + 3 * j
        node = rep[:, j]
        stn[:, k], dem[:, k] = n_nic[node], np.where(put, wire, 2e-6)
        stn[:, k + 1], dem[:, k + 1] = n_cpu[node], 200e-6 * exp[:, k + 1]
        stn[:, k + 2] = base[node] + 2 + disk[:, j]
        dem[:, k + 2] = 2e-3 * exp[:, k + 2] + size / bw_disk
    stn[:, 11], dem[:, 11] = p_nic[proxy], np.where(put, 2e-6, pwire)
    used = np.ones((n, 12), bool)
    used[:, 5:11] = put[:, None]
    routes = Routes(
        step_ptr, branch_ptr, quorum, visit_ptr, stn[used], dem[used], op=put.astype(np.int8)
    )
    arr = np.cumsum(rng.exponential(1 / 400_000.0, n))  # busiest class (proxy NICs) ~ 0.6
    t_build = time.perf_counter() - t0
    t1 = time.perf_counter()
    r = simulate(st, routes, arrivals=arr, warmup=n // 20)
    t_sim = time.perf_counter() - t1
    return t_build, t_sim, r, n_st


# ---------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs (about 10x fewer requests)")
    args = ap.parse_args()
    n_mmc, n_cl, n_big = (100_000, 20_000, 100_000) if args.quick else (1_000_000, 100_000, 1_000_000)
    rows = []

    arr, dem = mmc_inputs(n_mmc)
    w_s, lat_s, ev_s = storlab_mmc(arr, dem, 4)
    events = 2 * n_mmc  # arrival + one visit completion per customer
    assert ev_s == events
    if simpy is not None:
        w_p, lat_p, ev_p = simpy_mmc(arr, dem, 4)
        rows.append(("M/M/4 rho=0.9", n_mmc, events, w_p, w_s, lat_p, lat_s, ev_p))
    else:
        rows.append(("M/M/4 rho=0.9", n_mmc, events, float("nan"), w_s, float("nan"), lat_s, -1))

    arr, cpu, nodes, cdem = cluster_inputs(n_cl)
    w_s, lat_s, ev_s, _ = storlab_cluster(arr, cpu, nodes, cdem)
    events = n_cl * (1 + 1 + 9)
    assert ev_s == events
    if simpy is not None:
        w_p, lat_p, ev_p = simpy_cluster(arr, cpu, nodes, cdem)
        rows.append(("cluster 1+6 nodes, fork 3/q2", n_cl, events, w_p, w_s, lat_p, lat_s, ev_p))
    else:
        rows.append(("cluster 1+6 nodes, fork 3/q2", n_cl, events, float("nan"), w_s, float("nan"), lat_s, -1))
    w_ps, lat_ps, _, _ = storlab_cluster(arr, cpu, nodes, cdem, ps=True)

    print("Engine speed, storlab (Rust core) vs SimPy", simpy.__version__ if simpy else "(not installed)")
    print("events = arrivals + visit completions (same count for both engines)\n")
    hdr = f"{'model':30} {'requests':>9} {'events':>10} {'SimPy s':>8} {'storlab s':>9} {'SimPy ev/s':>11} {'storlab ev/s':>12} {'ratio':>7}  {'mean latency SimPy / storlab':>30}  SimPy own events"
    print(hdr)
    for name, n, ev, wp, ws, lp, ls, evp in rows:
        print(
            f"{name:30} {n:9d} {ev:10d} {wp:8.2f} {ws:9.3f} {ev / wp:11.3g} {ev / ws:12.3g} {wp / ws:6.1f}x"
            f"  {lp:14.6g} / {ls:<14.6g}  {evp}"
        )
    print(f"\nsame small cluster with PS NICs and CPUs, storlab only: {w_ps:.3f} s, mean latency {lat_ps:.6g} s")

    t_build, t_sim, r, n_st = big_cluster(n_big)
    lat_get, lat_put = r.latency(op=0), r.latency(op=1)
    util = r.utilisation()
    print(f"\nSynthetic 700-node cluster: {n_st} stations, {n_big} requests (30% PUT 3-way/quorum 2, 70% GET)")
    print(f"  build routes (numpy) {t_build:6.2f} s")
    print(f"  simulate             {t_sim:6.2f} s   ({r.events} events, {r.events / t_sim:.3g} events/s)")
    print(f"  total                {t_build + t_sim:6.2f} s   (target < 60 s for 1,000,000 requests)")
    print(f"  simulated {r.sim_time:.3f} s; throughput {r.throughput():.4g} req/s")
    print(
        f"  latency ms  GET p50 {1e3 * np.median(lat_get):.3f} p99 {1e3 * np.quantile(lat_get, 0.99):.3f}"
        f"   PUT p50 {1e3 * np.median(lat_put):.3f} p99 {1e3 * np.quantile(lat_put, 0.99):.3f}"
    )
    print(f"  max utilisation {util.max():.3f}; max Little's-law gap {r.little_gap()[r.completions > 1000].max():.2e}")


if __name__ == "__main__":
    main()
