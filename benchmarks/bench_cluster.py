"""Cluster simulator benchmarks.

1. Wall time to simulate 1,000,000 requests on the 700-node cluster
   (examples/sim/cluster700.yaml; target: under a minute), split into ring + stations,
   request drawing + route building, and the engine; baseline in the same run: the pure
   Python reference engine on the first 20,000 requests of the same routes (events/s).
2. Calibration accuracy. A hidden "true" cluster (examples/sim/small.yaml with CPU and disk
   costs multiplied by factors the fit is not told) is simulated on a grid of
   configurations; those throughputs play the measurements. The nominal model's error
   (the baseline: no calibration) and the calibrated model's error are printed per point,
   with the test points held out of the fit: other concurrencies, sizes and a mix than the
   training grid, bound by CPU, disks or network (the `bound` column: the true cluster's
   busiest resource), so they test what the fit claims to learn.
3. Worker pools: examples/sim/small.yaml (HDDs, 14 cores) with 64 KiB objects and 256
   clients, object_workers = cores x {1, 2, 3, 4}; baseline: workers == cores. The
   simulator and the analytic model side by side.

    .venv/bin/python benchmarks/bench_cluster.py [--quick] [--write-example]

`--write-example` rewrites examples/sim/calibration.csv from the synthetic measurements.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from storlab.sim import engine
from storlab.sim.calibrate import calibrate
from storlab.sim.model import build_model, draw_requests
from storlab.sim.routes import build_routes
from storlab.sim.spec import apply_overrides, load_raw, parse_cluster
from storlab.sim.summary import summarise

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "sim"
#: The hidden truth of the calibration benchmark.
TRUTH = {"proxy_cpu_op": 1.6, "proxy_cpu_mb": 1.0, "object_cpu_op": 0.7, "object_cpu_mb": 1.3,
         "disk_overhead": 1.25, "disk_bandwidth": 0.85}


def bench_700(requests: int) -> None:
    raw = load_raw(EXAMPLES / "cluster700.yaml")
    t0 = time.perf_counter()
    model = build_model(parse_cluster(raw))
    t1 = time.perf_counter()
    req = draw_requests(model, requests)
    routes = build_routes(model, req)
    t2 = time.perf_counter()
    wl = model.spec.workload
    res = engine.simulate(model.stations, routes, clients=wl.clients, think=req.think,
                          warmup=int(wl.warmup * requests))
    t3 = time.perf_counter()
    rep = summarise(model, req, res, t2 - t1)
    total = t3 - t0
    print(f"700-node cluster: {model.n_nodes} nodes, {len(model.stations):,} stations, "
          f"{model.ring.partitions:,} partitions x {model.ring.replicas} replicas")
    print(f"  requests {requests:,}, visits {routes.station.size:,}, events {res.events:,}")
    print(f"  ring + stations  {t1 - t0:7.2f} s")
    print(f"  draw + routes    {t2 - t1:7.2f} s")
    print(f"  engine (rust)    {t3 - t2:7.2f} s   ({res.events / (t3 - t2):,.0f} events/s)")
    print(f"  total            {total:7.2f} s   target < 60 s: "
          f"{'met' if total < 60 else 'NOT met'}")
    print(f"  throughput {rep.ops.ops_s[0]:,.0f} ops/s, mean latency "
          f"{rep.ops.lat_mean_ms[0]:.1f} ms, bottleneck {rep.bottleneck['resource']} "
          f"({rep.bottleneck['utilisation']:.0%}), Little's law error "
          f"{rep.littles_law_error:.1e}")
    # Baseline in the same run: the Python reference engine on a prefix of the same routes.
    k = min(20_000, requests)
    sub = engine.Routes(step_ptr=routes.step_ptr[:k + 1],
                        branch_ptr=routes.branch_ptr[:routes.step_ptr[k] + 1],
                        quorum=routes.quorum[:routes.step_ptr[k]],
                        visit_ptr=routes.visit_ptr[:routes.branch_ptr[routes.step_ptr[k]] + 1],
                        station=routes.station[:routes.visit_ptr[routes.branch_ptr[
                            routes.step_ptr[k]]]],
                        demand=routes.demand[:routes.visit_ptr[routes.branch_ptr[
                            routes.step_ptr[k]]]], op=routes.op[:k])
    tp = time.perf_counter()
    py = engine.simulate(model.stations, sub, clients=wl.clients, think=req.think[:k],
                         backend="python")
    py_rate = py.events / (time.perf_counter() - tp)
    print(f"  baseline: python reference engine, {k:,} requests: {py_rate:,.0f} events/s; "
          f"rust/python = {res.events / (t3 - t2) / py_rate:.0f}x")


def truth_raw(raw: dict) -> dict:
    from storlab.sim.calibrate import calibrated_raw

    return calibrated_raw(raw, TRUTH)


def grid() -> pd.DataFrame:
    rows = []
    for disk in ("hdd7200", "ssd_s3700"):
        for op in ("GET", "PUT"):
            for size in ("16KiB", "1MiB"):
                for clients in (8, 64):
                    rows.append({"config": f"disk={disk}", "clients": clients,
                                 "object_size": size, "op": op})
    df = pd.DataFrame(rows).assign(split="train")
    # Held out: concurrencies, sizes and a mix the fit never saw, chosen so that some are
    # CPU-bound (tiny objects on SSDs), some disk-bound (HDD seeks, large HDD reads) and
    # some network-bound, not only the latter (which calibration of CPU and disks cannot
    # improve).
    test = [("hdd7200", 32, "256KiB", "GET"), ("hdd7200", 32, "256KiB", "PUT"),
            ("ssd_s3700", 32, "256KiB", "GET"), ("ssd_s3700", 32, "256KiB", "PUT"),
            ("ssd_s3700", 128, "4KiB", "GET"), ("ssd_s3700", 128, "4KiB", "PUT"),
            ("hdd7200", 128, "4KiB", "GET:0.8,PUT:0.2"), ("hdd7200", 16, "4MiB", "GET")]
    df_test = pd.DataFrame([{"config": f"disk={d}", "clients": c, "object_size": z, "op": o,
                             "split": "test"} for d, c, z, o in test])
    return pd.concat([df, df_test], ignore_index=True)


def measure(raw: dict, df: pd.DataFrame, requests: int) -> pd.DataFrame:
    from storlab.sim.calibrate import _row_overrides
    from storlab.sim.run import run_model

    out, bound = [], []
    for rec in df.to_dict("records"):
        ov = _row_overrides(rec, "bench")
        ov["requests"] = requests
        spec = parse_cluster(apply_overrides(raw, ov))
        rep = run_model(build_model(spec))
        out.append(rep.ops.ops_s[0])
        bound.append(rep.bottleneck["resource"])
    df = df.copy()
    df["bound"] = bound
    df["ops_s"] = np.round(out, 1)
    return df


def bench_calibration(requests: int, write_example: bool) -> None:
    nominal = load_raw(EXAMPLES / "small.yaml")
    t0 = time.perf_counter()
    meas = measure(truth_raw(nominal), grid(), requests)
    t1 = time.perf_counter()
    if write_example:
        path = EXAMPLES / "calibration.csv"
        header = ("# Synthetic measurements: examples/sim/small.yaml with hidden CPU and disk "
                  "multipliers, simulated\n# by benchmarks/bench_cluster.py --write-example "
                  f"({requests} requests per point). Replace with real ones.\n"
                  "# bound: the true cluster's busiest resource at that point (information "
                  "only; not read by the fit).\n")
        path.write_text(header + meas.to_csv(index=False))
        print(f"wrote {path}")
    res = calibrate(nominal, meas)
    t2 = time.perf_counter()
    # Baseline: the nominal (uncalibrated) model's error on the same points.
    base = calibrate(nominal, meas, fit=False)
    pts = res.points[["config", "clients", "object_size", "op", "split", "bound", "measured",
                      "predicted", "error_pct"]].copy()
    pts["nominal_error_pct"] = base.points["error_pct"].values
    with pd.option_context("display.width", 140, "display.max_columns", 20):
        print(f"\ncalibration: {len(meas)} points simulated in {t1 - t0:.1f} s, fit in "
              f"{t2 - t1:.1f} s")
        print(pts.round(1).to_string(index=False))
    print("\nmultiplier      true   fitted")
    for k, v in res.params.items():
        print(f"  {k:15s} {TRUTH[k]:5.2f}  {v:6.2f}")
    for split, g in pts.groupby("split"):
        print(f"{split}: calibrated mean |error| {g['error_pct'].abs().mean():.1f} % "
              f"(max {g['error_pct'].abs().max():.1f} %), nominal mean |error| "
              f"{g['nominal_error_pct'].abs().mean():.1f} %")


def bench_workers(requests: int) -> None:
    from storlab.sim.analytic import solve_mva
    from storlab.sim.run import run_model

    raw = load_raw(EXAMPLES / "small.yaml")
    cores = int(raw["nodes"][1]["cpu"]["cores"])
    rows = []
    for k in (1, 2, 3, 4):
        ov = {"object_size": "64KiB", "clients": 256, "requests": requests,
              "object_workers": cores * k}
        m = build_model(parse_cluster(apply_overrides(raw, ov)))
        rep = run_model(m)
        u = rep.util.set_index("resource")["max"]
        rows.append({"object_workers": f"{cores * k} ({k}x cores)",
                     "ops_s": rep.ops.ops_s[0], "lat_mean_ms": rep.ops.lat_mean_ms[0],
                     "util_workers": u["object_workers"], "util_disk": u["disk"],
                     "util_storage_cpu": u["storage_cpu"],
                     "analytic_ops_s": solve_mva(m).throughput})
    df = pd.DataFrame(rows)
    df.insert(2, "x_vs_1x", df["ops_s"] / df["ops_s"].iloc[0])
    df["analytic_err_pct"] = (df["analytic_ops_s"] / df["ops_s"] - 1) * 100
    print(f"worker pools: small.yaml, HDD, {cores} cores/node, 64 KiB GET:0.8/PUT:0.2, "
          f"256 clients, {requests:,} requests per point; baseline object_workers = cores")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(df.round(3).to_string(index=False))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="100,000 requests, smaller grid runs")
    ap.add_argument("--write-example", action="store_true")
    a = ap.parse_args()
    bench_700(100_000 if a.quick else 1_000_000)
    print()
    bench_calibration(5_000 if a.quick else 20_000, a.write_example)
    print()
    bench_workers(10_000 if a.quick else 50_000)


if __name__ == "__main__":
    main()
