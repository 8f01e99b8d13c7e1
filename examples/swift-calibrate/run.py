"""Seed 003 on the real Swift all-in-one: calibrate storlab's Swift simulator
(`storlab.sim.calibrate`) on measurements at a few concurrencies, then predict held-out
concurrencies, larger object sizes and other replica counts, and report each error;
variant B adds one larger size to the calibration set.

    sudo .venv/bin/python examples/swift-calibrate/run.py     # ~5 minutes here

Measurements come from the objectstore load generator (Swift API, closed loop, 100 % GET or
100 % PUT); the cluster is brought up once per replica count (3, then 1 and 2) and down at
the end. Writes examples/swift-calibrate/out/{measurements.csv,points.csv,summary.md}.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
SIZES = {"16KiB": 16384, "256KiB": 262144, "1MiB": 1 << 20}
#: (replicas, object size, clients, op, split, what is held out)
PLAN = (
    [(3, "16KiB", c, op, "train", "calibration") for c in (2, 8, 32) for op in ("GET", "PUT")]
    + [(3, "16KiB", c, op, "test", "concurrency") for c in (4, 16) for op in ("GET", "PUT")]
    + [(3, size, 8, op, "test", f"object size {size}") for size in ("256KiB", "1MiB")
       for op in ("GET", "PUT")]
    + [(r, "16KiB", 8, op, "test", "replicas") for r in (1, 2) for op in ("GET", "PUT")]
)


def measure(duration: float) -> pd.DataFrame:
    from storlab.clusters import get_cluster
    from storlab.clusters.objload import LoadSpec, Target, run_load
    from storlab.clusters.swift import SwiftOptions

    swift = get_cluster("swift")
    if swift.state() is not None:
        raise SystemExit("a swift cluster is up: this example brings its own up at several "
                         "replica counts; run `storlab cluster down swift` first")
    rows = []
    for replicas in sorted({p[0] for p in PLAN}, reverse=True):
        st = swift.up(SwiftOptions(replicas=replicas, workers=1, proxy_workers=2))
        print(f"swift up with {replicas} replica(s) in {st['up_seconds']} s", flush=True)
        try:
            target = Target(api="swift", auth_url=st["auth_url"], user=st["user"],
                            key=st["key"], bucket="calib")
            for r, size, clients, op, split, held in PLAN:
                if r != replicas:
                    continue
                res = run_load(target, LoadSpec(clients=clients, mix={op.lower(): 1.0},
                                                sizes=SIZES[size], objects=100,
                                                duration=duration, warmup=1.0))
                s = res.summary
                rows.append({"config": f"replicas={r}", "clients": clients,
                             "object_size": size, "op": op, "split": split, "held_out": held,
                             "ops_s": s["ops_per_s"], "errors": s["errors"],
                             "p50_ms": s["lat_p50_ms"]})
                print(f"  {op} {size} x{clients}: {s['ops_per_s']:.1f} ops/s "
                      f"(p50 {s['lat_p50_ms']:.1f} ms, errors {s['errors']:.0f})", flush=True)
        finally:
            swift.down()
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--reuse", action="store_true",
                    help="Re-fit from out/measurements.csv without measuring again.")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.reuse:
        meas = pd.read_csv(OUT / "measurements.csv")
    else:
        meas = measure(args.duration)
        meas.to_csv(OUT / "measurements.csv", index=False)
    report(meas)


def report(meas: pd.DataFrame) -> None:
    from storlab.sim.calibrate import calibrate

    raw = yaml.safe_load((HERE / "cluster.yaml").read_text())
    cols = ["config", "clients", "object_size", "op", "split", "ops_s"]
    nominal = calibrate(raw, meas[cols], fit=False)
    fitted = calibrate(raw, meas[cols])
    # Variant B: one larger size (256 KiB) joins the training set, so the per-MB costs are
    # identifiable; 1 MiB stays held out.
    with_size = meas[cols].copy()
    with_size.loc[meas["object_size"] == "256KiB", "split"] = "train"
    fitted_b = calibrate(raw, with_size)
    pts = fitted.points.assign(held_out=meas["held_out"].values,
                               nominal_error_pct=nominal.points["error_pct"].values,
                               b_split=fitted_b.points["split"].values,
                               b_predicted=fitted_b.points["predicted"].values,
                               b_error_pct=fitted_b.points["error_pct"].values)
    pts.to_csv(OUT / "points.csv", index=False)
    by = pts.assign(abs_err=pts["error_pct"].abs(), abs_nom=pts["nominal_error_pct"].abs(),
                    abs_b=pts["b_error_pct"].abs()
                    ).groupby("held_out", sort=False)[["abs_err", "abs_b", "abs_nom"]].mean()
    by.columns = ["A: 16KiB-calibrated MAPE %", "B: +256KiB-calibrated MAPE %",
                  "uncalibrated MAPE %"]
    text = "\n".join([
        "# swift-calibrate: measured on this machine",
        "", "A: calibrated on 16 KiB GET/PUT at 2, 8, 32 clients (3 replicas)",
        "fitted multipliers A: " + ", ".join(f"{k} {v:.3g}" for k, v in
                                             fitted.params.items()),
        "B: the same plus 256 KiB GET/PUT at 8 clients",
        "fitted multipliers B: " + ", ".join(f"{k} {v:.3g}" for k, v in
                                             fitted_b.params.items()),
        "", pts[["config", "clients", "object_size", "op", "split", "held_out", "measured",
                 "predicted", "error_pct", "b_split", "b_predicted", "b_error_pct",
                 "nominal_error_pct"]].round(1).to_string(index=False),
        "", "mean |error| by group:", by.round(1).to_string(),
        "", f"summary A: {({k: round(v, 1) for k, v in fitted.summary().items()})}",
        f"summary B: {({k: round(v, 1) for k, v in fitted_b.summary().items()})}"])
    (OUT / "summary.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
