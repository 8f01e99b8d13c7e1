"""Speed and memory of `storlab simulate` on the 700-node example, against SimPy in the
same run.

1. examples/sim/cluster700.yaml (700 nodes, 7,800 disks, leaf/spine), 1,000,000 requests
   (target: under 5 s). Each size runs in a fresh child process, so its peak RSS is its
   own; wall and CPU seconds are printed per phase (ring + stations, drawing, route
   building, engine + summary). CPU seconds are what a quiet machine would take as wall
   time when the machine is shared. A run streams block by block (storlab.sim.stream), so
   peak RSS must not grow with the requests: the 1e6 / 1e5 ratio is printed (flat: <= 1.2).
   Route building is printed per request at two sizes: it must be linear. The same, with
   one failed disk (`failed_disks: 1`, the sweep operators run) and with a storage node
   down from 0.5 s to 1.5 s (a closed loop's window: `failures.settle` simulates the run
   until no request changes window, each pass streamed): such runs stream too.
2. Baseline, same run: SimPy executing the same routes (the first 20,000 requests of the
   700-node run, closed loop with the same clients) with one generic interpreter: FCFS
   stations as `simpy.Resource(c)`, worker pools as a Resource held through the branch,
   forks joined at their quorum. SimPy has no processor-sharing resource, so PS stations
   run as FCFS there (same demands; the latencies differ, the event count does not).
   Rate = model events (arrivals + visit completions) per CPU second of the simulation
   call (storlab's: best of 3), for both engines on the same prefix; the ratio is
   storlab / SimPy.

    .venv/bin/python benchmarks/bench_sim.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "examples" / "sim" / "cluster700.yaml"


#: The failure variants timed beside the plain run (cluster-file overrides).
FAILURES = {"failed_disks=1": {"failed_disks": 1},
            # A window in a closed loop: settled over passes, each streamed.
            # (Inside the 1e5 run too, which lasts 1.7 s.)
            "store-3 down 0.5-1.5 s": {"failures": [{"node": "store-3", "at": 0.5,
                                                     "until": 1.5}]}}


def child(requests: int, overrides: dict | None = None) -> None:
    """Run in a fresh process: time each phase of one simulation, print JSON."""
    w0, c0 = time.perf_counter(), time.process_time()
    from storlab.sim.model import build_model
    from storlab.sim.run import run_model
    from storlab.sim.spec import apply_overrides, load_raw, parse_cluster

    marks = [(time.perf_counter(), time.process_time())]
    model = build_model(parse_cluster(apply_overrides(load_raw(CLUSTER), overrides or {})))
    marks.append((time.perf_counter(), time.process_time()))
    rep = run_model(model, requests=requests)
    marks.append((time.perf_counter(), time.process_time()))
    out = {"requests": requests, "imports_wall": marks[0][0] - w0,
           "model_wall": marks[1][0] - marks[0][0], "model_cpu": marks[1][1] - marks[0][1],
           "run_wall": marks[2][0] - marks[1][0], "run_cpu": marks[2][1] - marks[1][1],
           "build_wall": rep.build_wall, "engine_wall": rep.wall, "events": rep.events,
           "engine_cpu": getattr(rep, "engine_cpu", float("nan")),
           "total_wall": marks[2][0] - w0, "total_cpu": time.process_time() - c0,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "ops_s": float(rep.ops.ops_s[0]), "ops_s_ci95": float(rep.ops.ops_s_ci95[0]),
           "lat_mean_ms": float(rep.ops.lat_mean_ms[0]), "bottleneck": rep.bottleneck,
           "littles": rep.littles_law_system,
           "passes": int(getattr(model.extra.get("failures"), "passes", 0) or 1)}
    print(json.dumps(out))


def run_child(requests: int, overrides: dict | None = None) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", str(requests),
                        "--overrides", json.dumps(overrides or {})],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def routes_per_request(requests: int) -> tuple[float, float]:
    """(wall, CPU) seconds per 1,000 requests to draw and build the routes, block by block
    as a run streams them (storlab.sim.stream)."""
    from storlab.sim.model import build_model, iter_requests
    from storlab.sim.routes import build_routes
    from storlab.sim.spec import load_raw, parse_cluster
    from storlab.sim.stream import FEED_CHUNK, slice_requests

    model = build_model(parse_cluster(load_raw(CLUSTER)))
    next(iter_requests(model, 10))  # object names hashed once (cached)
    w, c = time.perf_counter(), time.process_time()
    for block in iter_requests(model, requests):
        for a in range(0, len(block), FEED_CHUNK):
            build_routes(model, slice_requests(block, a, min(a + FEED_CHUNK, len(block))))
    return ((time.perf_counter() - w) / requests * 1e3,
            (time.process_time() - c) / requests * 1e3)


def simpy_routes(stations, routes, clients: int, think: np.ndarray) -> tuple[float, int]:
    """Execute storlab routes with SimPy (closed loop); returns (CPU s, model events)."""
    import simpy

    from storlab.sim.engine import HOLD

    env = simpy.Environment()
    res = [simpy.Resource(env, capacity=int(c)) for c in stations.servers]
    hold = (stations.kind == HOLD).tolist()
    sp, bp, vp = routes.step_ptr.tolist(), routes.branch_ptr.tolist(), routes.visit_ptr.tolist()
    q, st, dem = routes.quorum.tolist(), routes.station.tolist(), routes.demand.tolist()
    n = len(sp) - 1
    nxt = [min(clients, n)]

    def branch(b: int, join: list, ev):
        held = []
        for v in range(vp[b], vp[b + 1]):
            s = st[v]
            if hold[s]:
                req = res[s].request()
                yield req
                held.append((s, req))
            else:
                with res[s].request() as req:
                    yield req
                    yield env.timeout(dem[v])
        for s, req in held:
            res[s].release(req)
        join[0] += 1
        if join[0] == join[1]:
            ev.succeed()

    def request(i: int):
        for s in range(sp[i], sp[i + 1]):
            ev = env.event()
            join = [0, q[s]]
            for b in range(bp[s], bp[s + 1]):
                env.process(branch(b, join, ev))
            if q[s] > 0:
                yield ev

    def client(i: int):
        while True:
            yield env.timeout(float(think[i]))
            yield env.process(request(i))
            if nxt[0] >= n:
                return
            i = nxt[0]
            nxt[0] += 1

    for j in range(nxt[0]):
        env.process(client(j))
    t0 = time.process_time()
    env.run()
    return time.process_time() - t0, n + len(st)


def baseline(prefix: int) -> None:
    from storlab.sim import engine
    from storlab.sim.model import build_model, draw_requests
    from storlab.sim.routes import build_routes
    from storlab.sim.spec import load_raw, parse_cluster

    model = build_model(parse_cluster(load_raw(CLUSTER)))
    req = draw_requests(model, prefix)
    routes = build_routes(model, req)
    clients = int(model.spec.workload.clients or 1)
    # CPU seconds (the machine may be shared); best of 3 for the short storlab call.
    t_storlab = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        engine.simulate(model.stations, routes, clients=clients, think=req.think)
        t_storlab = min(t_storlab, time.process_time() - t0)
    t_simpy, ev = simpy_routes(model.stations, routes, clients, req.think)
    print(f"\nbaseline, same routes ({prefix:,} requests, {ev:,} model events, "
          f"{clients:,} clients):")
    print(f"  storlab engine {t_storlab:7.2f} s CPU  {ev / t_storlab:12,.0f} events/s")
    print(f"  SimPy          {t_simpy:7.2f} s CPU  {ev / t_simpy:12,.0f} events/s")
    print(f"  storlab / SimPy = {t_simpy / t_storlab:.0f}x")


#: A product-form cluster (GET-only, exponential service, pools never exhausted): exact MVA
#: is its answer (the theory test's configuration, tests/sim/test_steady_state.py).
PRODUCT_FORM = ROOT / "examples" / "sim" / "productform.yaml"

#: small.yaml with a storage node down for the whole run and three operations.
AFTER_FAILURE = {"failed_nodes": 1, "object_size": "64KiB", "mix": "GET:0.6,PUT:0.3,DELETE:0.1",
                 "clients": 128}


def window_check(quick: bool) -> None:
    """3. The steady-state window against theory: with think time, X (R + Z) / N (Z: the
    mean of the think times drawn) and X against exact MVA at 64 and 512 clients, over
    seeds; the baseline is the previous window (closed at the last arrival), patched in
    for the same runs. Then each operation's throughput and mean latency after a failure
    at two run lengths, with their 95 % intervals."""
    from storlab.sim import stream
    from storlab.sim.analytic import solve_mva
    from storlab.sim.model import build_model, draw_requests
    from storlab.sim.run import run_model
    from storlab.sim.spec import apply_overrides, load_raw, parse_cluster
    from storlab.sim.summary import window_marks

    n, seeds = (40_000, 3) if quick else (100_000, 5)
    print(f"\nsteady-state window with think time, product-form cluster, {n:,} requests, "
          f"{seeds} seeds (exact MVA as reference):")
    print(f"{'clients':>8} {'Z ms':>6} {'window':>12} {'X(R+Z)/N mean':>14} {'min':>7} "
          f"{'max':>7} {'X/X_mva mean':>13} {'min':>7} {'max':>7}")
    for clients, z_ms in ((64, 20.0), (512, 100.0)):
        for label, marks in (("last arrival", lambda k, c=None: window_marks(k)),
                             ("n - N", window_marks)):
            stream.window_marks = marks
            lit, rat = [], []
            for seed in range(1, seeds + 1):
                m = build_model(parse_cluster(apply_overrides(load_raw(PRODUCT_FORM), {
                    "clients": clients, "think_ms": z_ms, "requests": n, "seed": seed})))
                x_mva = solve_mva(m).throughput
                rep = run_model(m)
                x, r = rep.ops.loc[0, "ops_s"], rep.ops.loc[0, "lat_mean_ms"] / 1e3
                z = float(draw_requests(m, n).think.mean())
                lit.append(x * (r + z) / clients)
                rat.append(x / x_mva)
            print(f"{clients:>8} {z_ms:>6g} {label:>12} {np.mean(lit):>14.4f} {min(lit):>7.4f} "
                  f"{max(lit):>7.4f} {np.mean(rat):>13.4f} {min(rat):>7.4f} {max(rat):>7.4f}")
    stream.window_marks = window_marks
    lengths = (20_000, 100_000) if quick else (60_000, 300_000)
    print(f"\nper operation after a failure (examples/sim/small.yaml, {AFTER_FAILURE}):")
    reps = [run_model(build_model(parse_cluster(apply_overrides(
        load_raw(ROOT / "examples" / "sim" / "small.yaml"), {**AFTER_FAILURE, "requests": k}))))
        for k in lengths]
    for rep, k in zip(reps, lengths):
        print(f"  {k:,} requests: window opens after {rep.window['warmup_rule']}")
    a, b = (r.ops.set_index("op") for r in reps)
    print(f"{'op':>8} {'ops/s ' + format(lengths[0], ','):>20} {format(lengths[1], ','):>16} "
          f"{'lat ms ' + format(lengths[0], ','):>20} {format(lengths[1], ','):>16} "
          f"{'within':>7}")
    for op in ("PUT", "GET", "DELETE"):
        ok = all(abs(a.loc[op, c] - b.loc[op, c]) <= a.loc[op, ci]
                 for c, ci in (("ops_s", "ops_s_ci95"), ("lat_mean_ms", "lat_mean_ci95_ms")))
        print(f"{op:>8} {a.loc[op, 'ops_s']:>13.1f}±{a.loc[op, 'ops_s_ci95']:<6.1f}"
              f"{b.loc[op, 'ops_s']:>9.1f}±{b.loc[op, 'ops_s_ci95']:<6.1f}"
              f"{a.loc[op, 'lat_mean_ms']:>13.2f}±{a.loc[op, 'lat_mean_ci95_ms']:<6.2f}"
              f"{b.loc[op, 'lat_mean_ms']:>9.2f}±{b.loc[op, 'lat_mean_ci95_ms']:<6.2f}"
              f"{'yes' if ok else 'NO':>7}")
    print("  within: the two means differ by less than the shorter run's 95 % interval "
          "(throughput and latency)")
    # Why: each operation's mean latency over 20 slices of the longer run's window, as
    # shipped (write quorum 2 of 3: a third branch runs on after the reply) and with
    # write_quorum 3 (nothing left running).
    print(f"\nPUT and GET mean latency (ms) over 20 slices of the {lengths[1]:,}-request "
          "window, min-max:")
    for wq in (2, 3):
        rep = reps[1] if wq == 2 else run_model(build_model(parse_cluster(apply_overrides(
            load_raw(ROOT / "examples" / "sim" / "small.yaml"),
            {**AFTER_FAILURE, "requests": lengths[1], "write_quorum": wq}))))
        ts = rep.timeseries[rep.timeseries["phase"] == "steady"]
        slices = np.array_split(np.arange(len(ts)), 20)
        dt = (ts["t_to"] - ts["t_from"]).to_numpy()
        cnt = ts["ops_s"].to_numpy() * dt
        span = {}
        for op in ("put", "get"):
            # per-slice means weighted by the interval's finishes (the op's share is even)
            lat = ts[f"{op}_lat_mean_ms"].to_numpy()
            m = [float(np.average(lat[g], weights=cnt[g])) for g in slices]
            span[op] = f"{min(m):.1f}-{max(m):.1f}"
        print(f"  write_quorum {wq}: PUT {span['put']}, GET {span['get']}, total "
              f"{rep.ops.loc[0, 'lat_mean_ms']:.1f}")


#: Configurations for the analytic model against the simulator: the examples, then planted
#: ones (closed and open loop, HDD and SSD, disk-, worker-, CPU- and network-bound).
ANALYTIC_CASES = [
    ("small.yaml as shipped", "small.yaml", {}),
    ("cluster700.yaml as shipped", "cluster700.yaml", {}),
    ("HDD, 64 KiB, 3 ops, 128 clients", "small.yaml",
     {"object_size": "64KiB", "mix": "GET:0.6,PUT:0.3,DELETE:0.1", "clients": 128}),
    ("HDD, 64 KiB, 3 ops, 28 workers", "small.yaml",
     {"object_size": "64KiB", "mix": "GET:0.6,PUT:0.3,DELETE:0.1", "clients": 128,
      "object_workers": 28}),
    ("SSD, 64 KiB, 3 ops, 256 clients", "small.yaml",
     {"disk": "ssd_s3700", "object_size": "64KiB", "mix": "GET:0.6,PUT:0.3,DELETE:0.1",
      "clients": 256}),
    ("SSD, 1 MiB, 1 GbE (network)", "small.yaml",
     {"disk": "ssd_s3700", "nic": 1, "object_size": "1MiB", "mix": "GET:0.7,PUT:0.3",
      "clients": 64}),
    ("HDD, think 50 ms, 3 ops", "small.yaml",
     {"object_size": "64KiB", "mix": "GET:0.6,PUT:0.3,DELETE:0.1", "clients": 256,
      "think_ms": 50}),
    ("open loop, HDD, 1,500/s, 3 ops", "small.yaml",
     {"object_size": "64KiB", "mix": "GET:0.6,PUT:0.3,DELETE:0.1", "rate": 1500}),
    ("open loop, SSD, 3,000/s, 3 ops", "small.yaml",
     {"disk": "ssd_s3700", "object_size": "64KiB", "mix": "GET:0.6,PUT:0.3,DELETE:0.1",
      "rate": 3000}),
]


def analytic_check(quick: bool) -> None:
    """4. The analytic (MVA) model against the simulator per operation: throughput and mean
    latency, relative error of the analytic figure; the simulator's 95 % interval beside."""
    from storlab.sim.analytic import solve_mva
    from storlab.sim.model import build_model
    from storlab.sim.run import run_model
    from storlab.sim.spec import apply_overrides, load_raw, parse_cluster

    # 400,000 requests: in the worker-bound HDD loops the simulator's own per-operation
    # means swing for tens of thousands of requests (PUT 30.1 +- 2.7 ms at 100,000 requests,
    # 37.5 +- 1.3 at 400,000, 37.9 +- 1.0 at 1,200,000), so shorter runs judge the analytic
    # model against a mean that has not settled.
    n_small, n_big = (40_000, 100_000) if quick else (400_000, 300_000)
    print(f"\nanalytic model against the simulator ({n_small:,} requests; cluster700 "
          f"{n_big:,}); error = analytic / simulated - 1:")
    print(f"{'configuration':<34} {'bound by':<15} {'op':<7} {'sim ops/s':>16} {'err':>7} "
          f"{'sim lat ms':>15} {'err':>7}")
    worst = {"ops_s": 0.0, "lat_mean_ms": 0.0}
    for label, f, ov in ANALYTIC_CASES:
        m = build_model(parse_cluster(apply_overrides(load_raw(ROOT / "examples" / "sim" / f),
                                                      ov)))
        a = solve_mva(m)
        rep = run_model(m, requests=n_big if f == "cluster700.yaml" else n_small)
        A, S = a.ops.set_index("op"), rep.ops.set_index("op")
        for op in S.index:
            ex, el = (A.loc[op, k] / S.loc[op, k] - 1 for k in ("ops_s", "lat_mean_ms"))
            if op != "ALL":
                worst["ops_s"] = max(worst["ops_s"], abs(ex))
                worst["lat_mean_ms"] = max(worst["lat_mean_ms"], abs(el))
            print(f"{label if op == 'ALL' else '':<34} "
                  f"{rep.bottleneck['resource'] if op == 'ALL' else '':<15} {op:<7} "
                  f"{S.loc[op, 'ops_s']:>9.0f}±{S.loc[op, 'ops_s_ci95']:<6.0f} {ex:>+7.1%} "
                  f"{S.loc[op, 'lat_mean_ms']:>8.2f}±{S.loc[op, 'lat_mean_ci95_ms']:<6.2f} "
                  f"{el:>+7.1%}")
    print(f"worst per-operation error: throughput {worst['ops_s']:.1%}, mean latency "
          f"{worst['lat_mean_ms']:.1%} (target: 10 %)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="100,000 requests, 5,000 for SimPy")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--overrides", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--fidelity", action="store_true",
                    help="only the steady-state window and analytic-model checks")
    ap.add_argument("--analytic", action="store_true", help="only the analytic-model check")
    a = ap.parse_args()
    if a.child:
        child(a.child, json.loads(a.overrides))
        return
    if a.fidelity:
        window_check(a.quick)
        analytic_check(a.quick)
        return
    if a.analytic:
        analytic_check(a.quick)
        return
    sizes = [20_000, 100_000] if a.quick else [100_000, 1_000_000]
    print(f"examples/sim/cluster700.yaml, machine load average {resource_load()}")
    print(f"{'requests':>10} {'total wall':>10} {'total CPU':>10} {'model':>7} "
          f"{'run':>7} {'routes':>7} {'engine':>7} {'eng CPU':>7} {'peak RSS':>9} {'ops/s':>16}")
    for label, ov in [("", {}), *FAILURES.items()]:
        if label:
            print(f"with {label}:")
        rss = []
        for n in sizes:
            d = run_child(n, ov)
            rss.append(d["peak_rss_mb"])
            print(f"{n:>10,} {d['total_wall']:>9.2f}s {d['total_cpu']:>9.2f}s "
                  f"{d['model_wall']:>6.2f}s {d['run_wall']:>6.2f}s {d['build_wall']:>6.2f}s "
                  f"{d['engine_wall']:>6.2f}s {d['engine_cpu']:>6.2f}s "
                  f"{d['peak_rss_mb']:>7.0f}MB {d['ops_s']:>9,.0f}±{d['ops_s_ci95']:,.0f}")
            if d["passes"] > 1:
                print(f"  settled after {d['passes']} simulations (each streamed; engine: "
                      "the last one's)")
            if n == 1_000_000:
                print(f"  target < 5 s for 1e6 requests: wall "
                      f"{'met' if d['total_wall'] < 5 else 'NOT met'}, CPU "
                      f"{'met' if d['total_cpu'] < 5 else 'NOT met'}")
        print(f"  peak RSS {sizes[-1]:,} / {sizes[0]:,} requests = {rss[-1] / rss[0]:.2f} "
              f"({'flat' if rss[-1] <= 1.2 * rss[0] else 'NOT flat'}: <= 1.20)")
    small, big = (20_000, 200_000) if a.quick else (100_000, 1_000_000)
    ws, cs = routes_per_request(small)
    wb, cb = routes_per_request(big)
    print(f"route building per 1,000 requests: {ws * 1e3:.1f} ms at {small:,}, "
          f"{wb * 1e3:.1f} ms at {big:,} (CPU {cs * 1e3:.1f} / {cb * 1e3:.1f} ms; "
          f"ratio {cb / cs:.2f}, 1.0 = linear)")
    baseline(5_000 if a.quick else 20_000)


def resource_load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


if __name__ == "__main__":
    main()
