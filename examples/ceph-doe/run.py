"""Seed 000 at this machine's scale: a 2^(5-1) resolution V fraction with 3 center points
over Ceph OSD/messenger/client parameters on a one-OSD memstore cluster, analysed for
effects and a recommendation, then confirmed: recommended vs default configuration, each
run `--confirm-reps` times in random order.

    sudo .venv/bin/python examples/ceph-doe/run.py        # ~12 minutes here

Brings a Ceph cluster up if none is (and down again at the end), writes everything into
examples/ceph-doe/out/ and prints the figures. Uses the storlab CLI for each step, as a
user would (`storlab run`, `storlab results`, `storlab analyze`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _cli import storlab  # noqa: E402  (examples/_cli.py)
OUT = HERE / "out"
RESPONSE = "write_iops"
#: Ceph 16 defaults for an SSD-class OSD (the "before" of the confirmation).
DEFAULTS = {"osd_op_num_shards": 8, "osd_op_num_threads_per_shard": 2,
            "ms_async_op_threads": 3, "ms_dispatch_throttle_bytes": 104857600,
            "objecter_inflight_ops": 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--confirm-reps", type=int, default=4)
    ap.add_argument("--keep-cluster", action="store_true")
    ap.add_argument("--report", action="store_true",
                    help="Only rewrite the summary from out/ (no cluster, no runs).")
    args = ap.parse_args()
    if args.report:
        rec = pd.read_csv(OUT / "confirm.csv").iloc[1].astype(int).to_dict()
        summarize(json.loads((OUT / "analysis.json").read_text()), rec)
        return
    from storlab.clusters import get_cluster
    from storlab.clusters.ceph import CephOptions

    OUT.mkdir(exist_ok=True)
    ceph = get_cluster("ceph")
    started_here = ceph.state() is None
    if started_here:
        st = ceph.up(CephOptions(osds=1, store="memstore", osd_bytes=1 << 30))
        print(f"ceph up in {st['up_seconds']} s", flush=True)
    try:
        storlab("run", str(HERE / "campaign.yaml"), "--quiet")
        storlab("results", str(HERE / "campaign.yaml"), "-o", str(OUT / "results.csv"))
        print(storlab("analyze", str(OUT / "results.csv"), "-y", RESPONSE, "--space",
                      str(HERE / "space.yaml"), "--plots", str(OUT / "plots")))
        storlab("analyze", str(OUT / "results.csv"), "-y", RESPONSE, "--space",
                str(HERE / "space.yaml"), "-o", str(OUT / "analysis.json"))
        analysis = json.loads((OUT / "analysis.json").read_text())
        rec = dict(DEFAULTS)
        for s in analysis["recommendation"]["settings"]:
            rec[s["factor"]] = int(s["value"])
        # Factors without a significant effect keep their default (cost or convenience).
        res = pd.read_csv(OUT / "results.csv")
        best = res.loc[res[RESPONSE].idxmax(), list(DEFAULTS)].astype(int).to_dict()
        pd.DataFrame([DEFAULTS, rec, best]).to_csv(OUT / "confirm.csv", index=False)
        confirm = HERE / "confirm.yaml"
        storlab("run", str(confirm), "--quiet")
        storlab("results", str(confirm), "--level", "run", "-o",
                str(OUT / "confirm_runs.csv"))
    finally:
        if started_here and not args.keep_cluster:
            ceph.down()
    summarize(analysis, rec)


def summarize(analysis: dict, rec: dict) -> None:
    res = pd.read_csv(OUT / "results.csv")
    runs = pd.read_csv(OUT / "confirm_runs.csv")
    runs = runs[runs["status"] == "ok"]
    d, r, b = (runs[runs["config_id"] == i][RESPONSE].to_numpy() for i in (1, 2, 3))
    best = pd.read_csv(OUT / "confirm.csv").iloc[2].to_dict()

    def versus(x: np.ndarray, name: str) -> str:
        t = stats.ttest_ind(x, d, equal_var=False) if len(d) > 1 and len(x) > 1 else None
        return (f"{name} {x.mean():.0f} +/- {x.std(ddof=1):.0f} IOPS, change vs default "
                f"{100 * (x.mean() / d.mean() - 1):+.1f} %"
                + (f" (Welch t = {t.statistic:.2f}, p = {t.pvalue:.3g})" if t else ""))
    terms = pd.DataFrame(analysis["terms"])
    sig = terms[terms["significant"]] if "significant" in terms else terms.iloc[:0]
    lines = [
        "# ceph-doe: measured on this machine",
        "",
        f"design: 2^(5-1) resolution V, {int((~res['center']).sum())} factorial + "
        f"{int(res['center'].sum())} center runs = {len(res)} runs; response {RESPONSE} "
        f"(fio rbd 4 KiB randwrite, iodepth 32, 8 s); range over runs "
        f"{res[RESPONSE].min():.0f}-{res[RESPONSE].max():.0f} IOPS",
        "",
        "effects (coded -1/+1, effect = high minus low), largest first:",
        terms.reindex(terms["effect"].abs().sort_values(ascending=False).index)
        [["term", "effect", *(c for c in ("p", "significant") if c in terms)]]
        .head(8).to_string(index=False),
        "",
        f"significant terms: {', '.join(sig['term']) or 'none'}",
        f"curvature: {analysis.get('curvature')}",
        f"recommended: {rec}",
        f"default:     {DEFAULTS}",
        f"predicted by the model at the recommendation: "
        f"{analysis['recommendation']['predicted']:.0f} IOPS",
        "",
        f"best measured in the design: {best} "
        f"({res[RESPONSE].max():.0f} IOPS there)",
        "",
        f"confirmation ({len(d)}+{len(r)}+{len(b)} runs, random order): default "
        f"{d.mean():.0f} +/- {d.std(ddof=1):.0f} IOPS",
        "  " + versus(r, "recommended"),
        "  " + versus(b, "best measured"),
        *(["  (the recommendation equals the defaults: their difference is run-to-run "
           "noise)"] if rec == DEFAULTS else []),
    ]
    text = "\n".join(lines)
    (OUT / "summary.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
