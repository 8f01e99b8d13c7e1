"""Accuracy of the f_rw model, measured with fio on a quiet device and on this machine's disk.

The quiet device is a fresh ext4 on zram (else a loop device on a file in /dev/shm),
created and removed here (root needed; without it the script says so and measures the disk
only). On each device, through `estimate measure`'s campaign (norandommap, the mean I/O
size of every run checked): --sizes random I/O at 0/30/50/70/100 % read, and the mix
4k:0.8,64k:0.2 at 30 and 70 %, each in `--repeat` shuffled rounds. Printed, per device:

  A. the two-anchor model's error at 30/50/70 % (fitted from 0 and 100 % only), next to a
     named baseline from the same runs (total IOPS linear in the read percentage between
     the endpoints), and the spread of that error across the rounds (one fit per round);
  B. interval coverage at a mix used for nothing (leave one of 30/50/70 out: the model
     error is learned from the other two of every size): each size's own shrunk toward
     the pooled one (the default), pooled, each size's own, and noise only, all from the
     same runs, as k of n covered and the mean half-width;
  C. the third anchor: errors at 30 and 70 % of the 0/50/100 least-squares fit against the
     two-anchor fit;
  D. the mixed sizes against both size-mix rules (harmonic, the default, and the seed's
     slides formula), with the measured mean I/O size;
  E. the noise: the replicates' coefficient of variation, and the machine load.

    sudo .venv/bin/python benchmarks/bench_estimate.py [--device quiet|disk|both]
        [--runtime 3] [--repeat 4] [--sizes 4k,64k,1m] [--summary out.md] [--json out.json]
    .venv/bin/python benchmarks/bench_estimate.py --reanalyse a.json b.json  # B again, pooled
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from storlab.estimate.measure import MeasurePlan, MeasureResult, run_plan
from storlab.estimate.cells import Cell
from storlab.estimate.rwmodel import RWModel
from storlab.estimate.quietdev import QuietDeviceError, quiet_device
from storlab.units import parse_size

pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 24)
MIX = "4k:0.8,64k:0.2"


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def linear_baseline(model: RWModel, size: str, read_pct: float) -> float:
    """Naive baseline: total IOPS linear in the read percentage between the endpoints."""
    sf = model.fit_for(size)
    r, w = sf.anchor(100.0), sf.anchor(0.0)
    assert r is not None and w is not None
    return read_pct / 100 * r.total_iops + (1 - read_pct / 100) * w.total_iops


def _cells(runs: pd.DataFrame, size: str, pcts: list[float]) -> list[Cell]:
    g = runs[(runs["size"] == size) & (runs["status"] == "ok")]
    return [Cell.from_samples(p, g[g["read_pct"] == p]["read_iops"].to_numpy(),
                              g[g["read_pct"] == p]["write_iops"].to_numpy()) for p in pcts]


#: The intervals compared in B: the model error shrunk per size (the default), pooled over
#: sizes, each size's own, and none (noise only).
VARIANTS = {"shrunk": {}, "pooled": {"error": "pooled"}, "own": {"error": "own"},
            "noise": {"model_error": False}}


def coverage(ok: pd.DataFrame, sizes: list[str], pcts: list[float]) -> pd.DataFrame:
    """Each of `pcts` held out in turn: every size fitted from its anchors, the model error
    learned from the other held-out mixes (shrunk, pooled, own) or left out (noise); is the
    measured mean inside the interval, and inside it once the measured mean's own noise is
    added (half-widths in quadrature: the mean of a few runs is not the true mean)."""
    from scipy import stats

    rows = []
    for v in pcts:
        others = [p for p in pcts if p != v]
        m = RWModel.from_cells({size: _cells(ok, size, [0.0, *others, 100.0])
                                for size in sizes}, method="anchors")
        sh = m.shrinkage
        for size in sizes:
            got = ok[(ok["size"] == size) & (ok["read_pct"] == v)]["total_iops"]
            meas = float(got.mean())
            meas_half = (float(stats.t.ppf(0.975, len(got) - 1) * got.std(ddof=1)
                               / math.sqrt(len(got))) if len(got) > 1 else math.nan)
            row: dict[str, Any] = {"size": size, "held_out": v, "n": len(got),
                                   "measured": meas}
            for k, kw in VARIANTS.items():
                pr = m.predict_size(size, v, **kw)
                lo, hi = pr.value("total_iops_lo"), pr.value("total_iops_hi")
                half = (hi - lo) / 2
                if k == "shrunk":
                    row["predicted"] = pr.value()
                    row["error_pct"] = 100 * (pr.value() / meas - 1)
                row[f"{k}_half_pct"] = 100 * half / pr.value()
                row[f"{k}_in"] = bool(lo <= meas <= hi)
                row[f"{k}_in_meas"] = bool(abs(pr.value() - meas)
                                           <= math.hypot(half, meas_half))
            sd, df = m.size_errors("shrunk")[parse_size(size)]
            row.update({"shrunk_sd_pct": 100 * sd, "shrunk_df": df,
                        "pooled_sd_pct": 100 * m.model_error()[0],
                        "own_sd_pct": 100 * m.fit_for(size).model_sd,
                        "prior_df": sh.prior_df})
            rows.append(row)
    return pd.DataFrame(rows)


def coverage_summary(b: pd.DataFrame) -> pd.DataFrame:
    """Per variant: k of n measured means inside the interval, inside with the measured
    mean's own noise, and the mean half-width (% of the prediction)."""
    n = len(b)
    return pd.DataFrame([{
        "interval": k, "covered": f"{int(b[f'{k}_in'].sum())}/{n}",
        "rate": b[f"{k}_in"].mean(),
        "covered_with_meas_noise": f"{int(b[f'{k}_in_meas'].sum())}/{n}",
        "rate_with_meas_noise": b[f"{k}_in_meas"].mean(),
        "mean_half_width_pct": b[f"{k}_half_pct"].mean()} for k in VARIANTS])


def analyse(res: MeasureResult, name: str) -> dict[str, Any]:
    runs = res.runs
    ok = runs[runs["status"] == "ok"]
    chk = res.table()
    out: dict[str, Any] = {"device": name}

    # A. two-anchor errors, baseline, spread across rounds
    val = chk[chk["kind"] == "validate"].copy()
    val["linear_err_pct"] = [
        100 * (linear_baseline(res.model, s, p) / m - 1)
        for s, p, m in zip(val["size"], val["read_pct"], val["measured_iops"])]
    per_round = []
    for (size, pct), _ in val.groupby(["size", "read_pct"], sort=False):
        errs = []
        for rep, g in ok[ok["size"] == size].groupby("replicate"):
            try:
                m = RWModel.from_cells({size: _cells(g, size, [0.0, 100.0])}, method="anchors")
            except Exception:  # a round missing an anchor
                continue
            meas = g[g["read_pct"] == pct]["total_iops"]
            if len(meas):
                errs.append(100 * (m.predict_size(size, pct).value() / meas.mean() - 1))
        per_round.append(", ".join(f"{e:+.1f}" for e in errs))
    val["per_round_err_pct"] = per_round
    out["A"] = val[["size", "read_pct", "n", "measured_iops", "predicted_iops", "error_pct",
                    "linear_err_pct", "per_round_err_pct"]]

    # B. coverage at a mix not used for anything
    out["B"] = coverage(ok, list(dict.fromkeys(val["size"])), sorted(set(val["read_pct"])))
    sizes = list(dict.fromkeys(val["size"]))

    # C. third anchor
    rows = []
    for size in sizes:
        cells = _cells(ok, size, [0.0, 30.0, 50.0, 70.0, 100.0])
        two = RWModel.from_cells({size: cells}, method="anchors")
        three = RWModel.from_cells({size: cells}, method="anchors3")
        for c in cells:
            if c.read_pct in (30.0, 70.0):
                e2 = 100 * (two.predict_size(size, c.read_pct).value() / c.total_iops - 1)
                e3 = 100 * (three.predict_size(size, c.read_pct).value() / c.total_iops - 1)
                rows.append({"size": size, "read_pct": c.read_pct, "two_anchor_err_pct": e2,
                             "three_anchor_err_pct": e3})
    out["C"] = pd.DataFrame(rows)

    # D. mixed sizes
    mixed = chk[chk["kind"] == "mixed"]
    out["D"] = mixed[["read_pct", "rule", "n", "mean_io_kib", "measured_iops",
                      "predicted_iops", "pred_lo", "pred_hi", "error_pct"]]

    # E. noise
    cv = (ok.groupby(["size", "read_pct"])["total_iops"]
          .agg(lambda s: s.std(ddof=1) / s.mean() if len(s) > 1 else math.nan))
    out["E"] = {"median_cv_pct": float(100 * cv.median()), "max_cv_pct": float(100 * cv.max()),
                "refused_runs": int((runs["status"] == "io_size_off").sum()),
                "failed_runs": int((~runs["status"].isin(["ok", "io_size_off"])).sum())}
    return out


def report(a: dict[str, Any], res: MeasureResult, where: str, wall: float, before: str,
           after: str) -> str:
    lines = [f"## {a['device']}: {where}", "",
             f"{len(res.runs)} fio runs in {wall:.0f} s; machine {before} before, {after} "
             "after", ""]
    lines += [f"- {n}" for n in res.notes]
    e = a["E"]
    lines += ["", f"noise: replicate CV of total IOPS median {e['median_cv_pct']:.1f} %, max "
              f"{e['max_cv_pct']:.1f} %; runs refused for their I/O size: {e['refused_runs']}, "
              f"failed: {e['failed_runs']}", ""]

    def table(title: str, df: pd.DataFrame) -> None:
        lines.extend([f"### {title}", "", "```", df.round(2).to_string(index=False), "```",
                      ""])

    table("A. two-anchor model (0 and 100 % only) vs measured; baseline: linear "
          "interpolation; error per round", a["A"])
    for size, g in a["A"].groupby("size", sort=False):
        m, b = g["error_pct"].abs().mean(), g["linear_err_pct"].abs().mean()
        lines.append(f"- {size}: mean |error| f_rw {m:.1f} %, linear baseline {b:.1f} % "
                     f"(ratio {m / b:.2f})")
    lines.append("")
    b = a["B"]
    table("B. interval at a held-out mix (model error learned from the other two)",
          b[["size", "held_out", "n", "measured", "predicted", "error_pct", "shrunk_sd_pct",
             "shrunk_df", "pooled_sd_pct", "own_sd_pct", "prior_df", "shrunk_in",
             "pooled_in", "own_in", "noise_in"]])
    table("B'. coverage of the measured means, 95 % intervals (half-width: % of the "
          "prediction)", coverage_summary(b))
    c = a["C"]
    table("C. third anchor (0/50/100 % by least squares) vs two anchors, at 30/70 %", c)
    lines += [f"- mean |error| two anchors {c['two_anchor_err_pct'].abs().mean():.1f} %, "
              f"three anchors {c['three_anchor_err_pct'].abs().mean():.1f} %", ""]
    table(f"D. mixed sizes {MIX} (fio bssplit 4k/80:64k/20; requested mean I/O 16 KiB)",
          a["D"])
    for w in res.warnings:
        lines.append(f"- warning: {w}")
    return "\n".join(lines) + "\n"


def reanalyse(paths: list[Path]) -> int:
    """B from the runs of earlier --json dumps, each device of each file, and pooled over
    all: the figure of several seeds, re-computed with the current estimator."""
    import json

    parts = []
    for path in paths:
        dump = json.loads(path.read_text())
        for dev, d in dump.items():
            runs = pd.DataFrame(d["runs"])
            ok = runs[runs["status"] == "ok"]
            sizes = list(d["plan"]["sizes"])
            pcts = sorted(float(p) for p in d["plan"]["validate"])
            b = coverage(ok, sizes, pcts)
            b.insert(0, "run", f"{path.name}:{dev}")
            parts.append(b)
            print(f"== {path} ({dev}, seed {d['plan']['seed']}): {len(ok)} runs ok")
            print(b[["size", "held_out", "measured", "error_pct", "shrunk_sd_pct", "shrunk_df",
                     "pooled_sd_pct", "own_sd_pct", "prior_df", "shrunk_in", "pooled_in",
                     "own_in", "noise_in"]].round(2).to_string(index=False))
            print(coverage_summary(b).round(3).to_string(index=False), "\n")
    if len(parts) > 1:
        print("== all runs pooled")
        print(coverage_summary(pd.concat(parts, ignore_index=True)).round(3)
              .to_string(index=False))
    return 0


def measure(plan: MeasurePlan, target: Path | None, root: Path) -> tuple[MeasureResult, float,
                                                                         str, str]:
    camp = Path(tempfile.mkdtemp(prefix="campaign-", dir=root))
    before = load()
    t0 = time.time()
    res = run_plan(plan, camp, target=target, progress=lambda s: print("  " + s, flush=True))
    return res, time.time() - t0, before, load()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("quiet", "disk", "both"), default="both")
    ap.add_argument("--runtime", type=float, default=3.0, help="seconds per fio run")
    ap.add_argument("--repeat", type=int, default=4, help="replicate rounds")
    ap.add_argument("--sizes", default="4k,64k,1m")
    ap.add_argument("--file-size", default="256m")
    ap.add_argument("--seed", type=int, default=2019)
    ap.add_argument("--disk-dir", type=Path, default=Path("/var/tmp"),
                    help="a directory on the disk for the second figure")
    ap.add_argument("--summary", type=Path, default=None, help="write the tables (markdown)")
    ap.add_argument("--json", type=Path, default=None, help="write every run and check")
    ap.add_argument("--reanalyse", type=Path, nargs="+", default=None, metavar="JSON",
                    help="measure nothing: recompute B (coverage) from earlier --json dumps")
    args = ap.parse_args(argv)
    if args.reanalyse:
        return reanalyse(args.reanalyse)

    plan = MeasurePlan.build(args.sizes, repeat=args.repeat, validate="30,50,70", mixed=MIX,
                             mixed_pcts="30,70", runtime=args.runtime,
                             file_size=args.file_size, iodepth=16, ioengine="libaio",
                             pattern="random", seed=args.seed)
    n = len(plan.runs())
    cmd = "benchmarks/bench_estimate.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"== f_rw model accuracy: {n} fio runs of {args.runtime:g} s per device "
          f"({args.sizes}; read % 0/30/50/70/100; {MIX} at 30/70; x{args.repeat}); {load()}")
    parts = [f"# estimate accuracy\n\ncommand: `{cmd}`\n"]
    dump: dict[str, Any] = {}
    root = Path(tempfile.mkdtemp(prefix="storlab-bench-estimate-"))
    try:
        devices = ["quiet", "disk"] if args.device == "both" else [args.device]
        for dev in devices:
            with ExitStack() as stack:
                if dev == "quiet":
                    try:
                        # room for the scratch file and ext4's own blocks
                        size = max(2**30, 2 * int(parse_size(args.file_size)))
                        q = stack.enter_context(quiet_device(size))
                    except QuietDeviceError as exc:
                        print(f"!! no quiet device ({exc}); the figures below would measure "
                              "the disk's noise, not the model: quiet device skipped")
                        parts.append(f"## quiet device\n\nnot measured: {exc}\n")
                        continue
                    target, where = q.mountpoint, q.describe()
                else:
                    target = Path(tempfile.mkdtemp(prefix="storlab-bench-", dir=args.disk_dir))
                    stack.callback(shutil.rmtree, target, True)
                    where = f"this machine's virtual disk (ext4 on /dev/vda), {target}"
                print(f"\n== {dev}: {where}")
                res, wall, before, after = measure(plan, target, root)
            a = analyse(res, dev)
            text = report(a, res, where, wall, before, after)
            print(text)
            parts.append(text)
            dump[dev] = {**res.to_dict(), "analysis": a}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.summary is not None:
        args.summary.write_text("\n".join(parts))
        print(f"summary written to {args.summary}")
    if args.json is not None:
        from storlab.commands._common import emit_json
        emit_json(dump, args.json)
        print(f"runs and checks written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
