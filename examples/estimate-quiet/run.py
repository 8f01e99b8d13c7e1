"""Seed 004's read/write-mix model on a quiet device: a fresh ext4 on zram (else a loop
device on /dev/shm), fio libaio direct=1 iodepth 16, 4k/64k/1m random I/O.

`storlab estimate measure` fits f_rw per size from 100 % read and 100 % write runs and
checks the model at 30/50/70 % read and on the size mix 4k:0.8,64k:0.2 (both mixing rules),
in shuffled rounds, as a resumable campaign in out/campaign/. Then `storlab estimate fit`
reads the runs file measure wrote and refits with a third anchor (0/50/100 %).

    sudo .venv/bin/python examples/estimate-quiet/run.py    # ~6 minutes here
    .venv/bin/python examples/estimate-quiet/run.py --report  # summary from out/ only

Writes examples/estimate-quiet/out/: runs.csv, model.json, measure.json, fit3.json,
summary.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _cli import storlab  # noqa: E402  (examples/_cli.py)
OUT = HERE / "out"
SIZES = "4k,64k,1m"
MIX = "4k:0.8,64k:0.2"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", default="3")
    ap.add_argument("--repeat", default="4")
    ap.add_argument("--report", action="store_true", help="Only rewrite out/summary.md.")
    args = ap.parse_args()
    if not args.report:
        from storlab.estimate.quietdev import quiet_device

        OUT.mkdir(exist_ok=True)
        load = os.getloadavg()
        # a fixed mount point: the campaign (and its resume) names the same target
        with quiet_device("1g", mountpoint="/tmp/storlab-estimate-quiet") as q:
            print(f"quiet device: {q.describe()}", flush=True)
            storlab("estimate", "measure", "--sizes", SIZES, "--repeat", args.repeat,
                    "--validate", "30,50,70", "--mixed", MIX, "--mixed-pcts", "30,70",
                    "--runtime", args.runtime, "--file-size", "256m", "--seed", "4",
                    "--campaign", str(OUT / "campaign"), "--target", str(q.mountpoint),
                    "--runs", str(OUT / "runs.csv"), "--save-model", str(OUT / "model.json"),
                    "-o", str(OUT / "measure.json"))
            device = q.describe().split(",")[0]
        meta = {"device": device, "load_before": load, "load_after": os.getloadavg(),
                "runtime": args.runtime, "repeat": args.repeat}
        (OUT / "device.json").write_text(json.dumps(meta) + "\n")
        storlab("estimate", "fit", str(OUT / "runs.csv"), "--method", "anchors3",
                "-o", str(OUT / "fit3.json"))
    summarize()


def summarize() -> None:
    meas = json.loads((OUT / "measure.json").read_text())
    fit3 = json.loads((OUT / "fit3.json").read_text())
    dev = json.loads((OUT / "device.json").read_text())
    chk = pd.DataFrame(meas["checks"])
    held = chk[chk["kind"] != "anchor"].copy()
    three = pd.DataFrame(fit3["mixes"])
    three = three[~three["used_in_fit"]].set_index(["size", "read_pct"])["error_pct"]
    mixed3 = pd.DataFrame(fit3["mixed"]).set_index(["read_pct", "rule"])["error_pct"]
    held["error_3_anchors"] = [
        three.get((s, p), float("nan")) if k == "validate" else mixed3.get((p, r), float("nan"))
        for k, s, p, r in zip(held["kind"], held["size"], held["read_pct"], held["rule"])]
    held["in_interval"] = ((held["measured_iops"] >= held["pred_lo"])
                           & (held["measured_iops"] <= held["pred_hi"]))
    table = held[["kind", "size", "read_pct", "rule", "n", "mean_io_kib", "measured_iops",
                  "predicted_iops", "pred_lo", "pred_hi", "error_pct", "in_interval",
                  "error_3_anchors"]]
    fits = pd.DataFrame(meas["fits"])[["size", "T100_read", "T100_write", "f_rw", "C",
                                       "C_spread", "model_sd"]]
    single = held[held["kind"] == "validate"]
    mixed = held[held["kind"] == "mixed"]
    at3070 = single[single["read_pct"].isin([30.0, 70.0])]
    lb, la = dev["load_before"], dev["load_after"]
    lines = [
        "# estimate-quiet: measured on this machine",
        "",
        f"device: {dev['device']}, ext4; fio libaio direct=1 iodepth 16 norandommap, "
        f"{dev['runtime']} s runs, {dev['repeat']} shuffled rounds; machine load (1/5/15 min) "
        f"{lb[0]:.2f}/{lb[1]:.2f}/{lb[2]:.2f} before, {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f} after "
        "(other work shares the 2 cores; zram is CPU-bound)",
        "",
        "model per size (fitted from 0 % and 100 % read; model_sd = relative model error "
        "learned from the held-out mixes):",
        "```", fits.round(3).to_string(index=False), "```",
        "",
        "held-out points: error = (predicted - measured) / measured; the interval includes "
        "the model error; error_3_anchors from `estimate fit --method anchors3` on runs.csv "
        "(0/50/100 % by least squares):",
        "```", table.round(2).to_string(index=False), "```",
        "",
        f"single sizes: mean |error| two anchors {single['error_pct'].abs().mean():.1f} % "
        f"(max {single['error_pct'].abs().max():.1f} %) at 30/50/70 %; at 30/70 % two anchors "
        f"{at3070['error_pct'].abs().mean():.1f} %, three anchors "
        f"{at3070['error_3_anchors'].abs().mean():.1f} %",
    ]
    for rule, g in mixed.groupby("rule"):
        lines.append(f"mix {MIX}, rule {rule}: errors "
                     + ", ".join(f"{e:+.1f} %" for e in g["error_pct"])
                     + f" (mean I/O {g['mean_io_kib'].mean():.2f} KiB, requested 16 KiB)")
    lines += ["", *[f"warning: {w}" for w in meas["warnings"]]]
    (OUT / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
