"""Seed 004's read/write-mix model on Ceph block storage (the seed's Ceph setting at this
machine's scale): a single-host cluster with 3 OSDs (memstore) and 3x replication, fio's
rbd engine on an RBD image, 1 job x iodepth 32 (`--numjobs 4 --iodepth 8 --out
out/4jobs` for four librbd clients on the one image: the mixes then ran below both
endpoints), 4k and 64k random I/O.

`storlab estimate measure --ioengine rbd` fits f_rw per size from 100 % read and 100 %
write, checks it at 30/50/70 % read and on the mix 4k:0.8,64k:0.2 (both mixing rules), in
shuffled rounds, as a resumable campaign in out/campaign/. librados finds the cluster
through CEPH_CONF.

    sudo .venv/bin/python examples/estimate-ceph/run.py     # ~4 minutes here
    .venv/bin/python examples/estimate-ceph/run.py --report  # summary from out/ only

Brings Ceph up if it is down (and down again at the end); writes
examples/estimate-ceph/out/: runs.csv, model.json, measure.json, summary.md.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _cli import storlab  # noqa: E402  (examples/_cli.py)
OUT = HERE / "out"
MIX = "4k:0.8,64k:0.2"


def main() -> None:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", default="3")
    ap.add_argument("--repeat", default="3")
    ap.add_argument("--osds", type=int, default=3)
    ap.add_argument("--numjobs", default="1", help="fio jobs, each a librbd client")
    ap.add_argument("--iodepth", default="32")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--keep-cluster", action="store_true")
    ap.add_argument("--base", default="/tmp/storlab-estimate-ceph",
                    help="Directory of the example's own cluster.")
    ap.add_argument("--report", action="store_true", help="Only rewrite out/summary.md.")
    args = ap.parse_args()
    OUT = args.out
    if not args.report:
        from storlab.clusters import get_cluster
        from storlab.clusters.ceph import CephOptions

        OUT.mkdir(parents=True, exist_ok=True)
        # a cluster of its own (own directory, free port): others may run one meanwhile
        ceph = get_cluster("ceph", base=args.base)
        started_here = ceph.state() is None
        if started_here:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            st = ceph.up(CephOptions(osds=args.osds, store="memstore", osd_bytes=1 << 30,
                                     mon_port=port))
            print(f"ceph up in {st['up_seconds']} s", flush=True)
        st = ceph.state()
        try:
            os.environ["CEPH_CONF"] = st["conf"]
            load = os.getloadavg()
            storlab("estimate", "measure", "--ioengine", "rbd", "-O", f"pool={st['pool']}",
                    "-O", f"rbdname={st['image']}", "-O", "clientname=admin",
                    "-O", f"numjobs={args.numjobs}", "--iodepth", args.iodepth, "--sizes", "4k,64k",
                    "--repeat", args.repeat, "--validate", "30,50,70", "--mixed", MIX,
                    "--mixed-pcts", "30,70", "--runtime", args.runtime, "--seed", "4",
                    "--campaign", str(OUT / "campaign"), "--runs", str(OUT / "runs.csv"),
                    "--save-model", str(OUT / "model.json"), "-o", str(OUT / "measure.json"))
            meta = {"cluster": f"{st['osds']} OSD(s), {st['store']}, {st['replicas']}x "
                               "replication, one host",
                    "fio": f"{args.numjobs} job(s) x iodepth {args.iodepth}",
                    "load_before": load, "load_after": os.getloadavg(),
                    "runtime": args.runtime, "repeat": args.repeat}
            (OUT / "cluster.json").write_text(json.dumps(meta) + "\n")
        finally:
            if started_here and not args.keep_cluster:
                ceph.down()
    summarize()


def summarize() -> None:
    meas = json.loads((OUT / "measure.json").read_text())
    meta = json.loads((OUT / "cluster.json").read_text())
    chk = pd.DataFrame(meas["checks"])
    held = chk[chk["kind"] != "anchor"].copy()
    held["in_interval"] = ((held["measured_iops"] >= held["pred_lo"])
                           & (held["measured_iops"] <= held["pred_hi"]))
    table = held[["kind", "size", "read_pct", "rule", "n", "mean_io_kib", "measured_iops",
                  "predicted_iops", "pred_lo", "pred_hi", "error_pct", "in_interval"]]
    fits = pd.DataFrame(meas["fits"])[["size", "T100_read", "T100_write", "f_rw", "C",
                                       "C_spread", "model_sd"]]
    single = held[held["kind"] == "validate"]
    lb, la = meta["load_before"], meta["load_after"]
    lines = [
        "# estimate-ceph: measured on this machine",
        "",
        f"cluster: {meta['cluster']}; fio rbd engine, {meta.get('fio', '4 jobs x iodepth 8')}"
        ", norandommap, "
        f"{meta['runtime']} s runs, {meta['repeat']} shuffled rounds; machine load "
        f"(1/5/15 min) {lb[0]:.2f}/{lb[1]:.2f}/{lb[2]:.2f} before, "
        f"{la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f} after",
        "",
        "model per size (fitted from 0 % and 100 % read):",
        "```", fits.round(3).to_string(index=False), "```",
        "",
        "held-out points: error = (predicted - measured) / measured; intervals include the "
        "model error learned from the held-out mixes:",
        "```", table.round(2).to_string(index=False), "```",
        "",
        f"single sizes: mean |error| {single['error_pct'].abs().mean():.1f} % "
        f"(max {single['error_pct'].abs().max():.1f} %)",
    ]
    for rule, g in held[held["kind"] == "mixed"].groupby("rule"):
        lines.append(f"mix {MIX}, rule {rule}: errors "
                     + ", ".join(f"{e:+.1f} %" for e in g["error_pct"])
                     + f" (mean I/O {g['mean_io_kib'].mean():.2f} KiB, requested 16 KiB)")
    lines += ["", *[f"warning: {w}" for w in meas["warnings"]]]
    (OUT / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
