"""Seed 004 on the real Swift all-in-one: fit f_rw per object size from 100 % GET and
100 % PUT runs (objectstore runner, Swift API), then predict held-out workloads (GET/PUT
mixes per size, and a 50/50 mix of 16 KiB and 256 KiB objects at several GET shares)
and compare with measurements.

    sudo .venv/bin/python examples/swift-rw-mix/run.py      # ~5 minutes here

Brings Swift up if it is down (and down again at the end); writes examples/swift-rw-mix/out/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _cli import storlab  # noqa: E402  (examples/_cli.py)
OUT = HERE / "out"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep-cluster", action="store_true")
    ap.add_argument("--report", action="store_true",
                    help="Only refit and re-evaluate from out/ (no cluster, no runs).")
    args = ap.parse_args()
    if args.report:
        storlab("estimate", "fit", str(OUT / "fit_runs.csv"), "--size-col", "object_size",
                "--method", "anchors", "--save-model", str(OUT / "model.json"))
        evaluate()
        return
    from storlab.clusters import get_cluster
    from storlab.clusters.swift import SwiftOptions

    OUT.mkdir(exist_ok=True)
    swift = get_cluster("swift")
    started_here = swift.state() is None
    if started_here:
        st = swift.up(SwiftOptions(replicas=3, workers=1, proxy_workers=2))
        print(f"swift up in {st['up_seconds']} s", flush=True)
    try:
        for part in ("fit", "check"):
            storlab("run", str(HERE / f"{part}.yaml"), "--quiet")
            storlab("results", str(HERE / f"{part}.yaml"), "--level", "run", "-o",
                    str(OUT / f"{part}_runs.csv"))
    finally:
        if started_here and not args.keep_cluster:
            swift.down()
    print(storlab("estimate", "fit", str(OUT / "fit_runs.csv"), "--size-col", "object_size",
                  "--method", "anchors", "--save-model", str(OUT / "model.json")))
    evaluate()


def evaluate() -> pd.DataFrame:
    from storlab.campaign.runners.objload import parse_sizes
    from storlab.estimate import RWModel

    model = RWModel.load(OUT / "model.json")
    runs = pd.read_csv(OUT / "check_runs.csv")
    runs = runs[runs["status"] == "ok"]
    rows = []
    for (pct, size), g in runs.groupby(["read_pct", "object_size"], sort=False):
        props = parse_sizes(size)
        pred = model.predict(float(pct), props, mix="slides").table()
        tot = pred[pred["size"] == "total"].iloc[0]
        harm = model.predict(float(pct), props, mix="harmonic").table()
        harm_tot = harm[harm["size"] == "total"].iloc[0]["total_iops"]
        meas = g["total_iops"].mean()
        rows.append({"read_pct": pct, "object_size": size, "runs": len(g),
                     "measured_iops": meas, "measured_sd": g["total_iops"].std(ddof=1),
                     "predicted_iops": tot["total_iops"],
                     "pred_lo": tot["total_iops_lo"], "pred_hi": tot["total_iops_hi"],
                     "error_pct": 100 * (tot["total_iops"] - meas) / meas,
                     # the estimate module's alternative size-mix rule (same for one size)
                     "harmonic_error_pct": 100 * (harm_tot - meas) / meas})
    df = pd.DataFrame(rows).sort_values(["object_size", "read_pct"])
    df.to_csv(OUT / "errors.csv", index=False)
    fit = pd.read_csv(OUT / "fit_runs.csv")
    anchors = fit.groupby(["object_size", "read_pct"])["total_iops"].agg(["mean", "std"])
    text = "\n".join([
        "# swift-rw-mix: measured on this machine",
        "", "anchors (ops/s, mean and sd over repetitions):", anchors.round(1).to_string(),
        "", "held-out workloads:", df.round(1).to_string(index=False), "",
        f"mean |error| {df['error_pct'].abs().mean():.1f} %, max |error| "
        f"{df['error_pct'].abs().max():.1f} % over {len(df)} workloads (slides' size-mix "
        f"rule); size mixes with the harmonic rule: mean |error| "
        f"{df[df.object_size.str.contains(',')]['harmonic_error_pct'].abs().mean():.1f} %"])
    (OUT / "summary.md").write_text(text + "\n")
    print(text)
    return df


if __name__ == "__main__":
    main()
