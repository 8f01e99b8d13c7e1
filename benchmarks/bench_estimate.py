"""Accuracy of the f_rw model on this machine's disk, measured with fio.

4k and 64k random I/O on a scratch file; read percentages 0/30/50/70/100 each measured
`--repeat` times in shuffled replicate rounds; the model is fitted from 0 % and 100 % only
and its error at 30/50/70 is printed per size, next to a named baseline measured in the
same run: linear interpolation of total IOPS between the two endpoints. A mixed-size
workload (fio bssplit 4k/80:64k/20) at 30 % and 70 % read checks both size-mix rules.
Finally a least-squares fit over all five mixes reports how invariant C really is.

    .venv/bin/python benchmarks/bench_estimate.py [--runtime 3] [--repeat 3] [--plot f.png]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from storlab.estimate.measure import MeasurePlan, run_plan
from storlab.estimate.model import RWModel

pd.set_option("display.width", 140)
pd.set_option("display.max_columns", 20)


def linear_baseline(model: RWModel, size: str, read_pct: float) -> float:
    """Naive baseline: total IOPS linear in the read percentage between the endpoints."""
    sf = model.fit_for(size)
    r, w = sf.anchor(100.0), sf.anchor(0.0)
    assert r is not None and w is not None
    return read_pct / 100 * r.total_iops + (1 - read_pct / 100) * w.total_iops


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", type=float, default=3.0, help="seconds per fio run")
    ap.add_argument("--repeat", type=int, default=3, help="replicate rounds")
    ap.add_argument("--file-size", default="256m")
    ap.add_argument("--dir", type=Path, default=None, help="where the scratch file goes")
    ap.add_argument("--seed", type=int, default=2019)
    ap.add_argument("--plot", type=Path, default=None, help="write the model plot here")
    ap.add_argument("--json", type=Path, default=None, help="write every run and check here")
    args = ap.parse_args(argv)

    plan = MeasurePlan.build("4k,64k", repeat=args.repeat, validate="30,50,70",
                             mixed="4k:0.8,64k:0.2", mixed_pcts="30,70",
                             runtime=args.runtime, file_size=args.file_size, iodepth=16,
                             ioengine="libaio", pattern="random", seed=args.seed)
    n = len(plan.runs())
    print(f"== f_rw model validation: {n} fio runs of {args.runtime:g} s "
          f"(4k, 64k; read % 0/30/50/70/100; 4k:0.8,64k:0.2 at 30/70; x{args.repeat})")
    t0 = time.time()
    res = run_plan(plan, directory=args.dir, progress=lambda s: print("  " + s, flush=True))
    wall = time.time() - t0
    for note in res.notes:
        print(f"note: {note}")
    print(f"wall time {wall:.0f} s; failed runs: {(res.runs['status'] != 'ok').sum()}")

    fits = res.model.table()
    print("\n-- model fitted from 0% and 100% read only (95% intervals from the replicates)")
    print(fits[["size", "T100_read", "T100_write", "f_rw", "f_rw_lo", "f_rw_hi", "C",
                "C_spread"]].round(3).to_string(index=False))

    chk = res.table()
    single = chk[chk["kind"] == "validate"].copy()
    single["linear_iops"] = [linear_baseline(res.model, s, p)
                             for s, p in zip(single["size"], single["read_pct"])]
    single["linear_err_pct"] = 100 * (single["linear_iops"] - single["measured_iops"]) \
        / single["measured_iops"]
    single["meas_in_pred_ci"] = ((single["measured_iops"] >= single["pred_lo"])
                                 & (single["measured_iops"] <= single["pred_hi"]))
    print("\n-- total IOPS at the held-out mixes: f_rw model vs measured "
          "(error = (pred - meas) / meas)")
    print(single[["size", "read_pct", "n", "measured_iops", "measured_lo", "measured_hi",
                  "predicted_iops", "pred_lo", "pred_hi", "error_pct", "linear_iops",
                  "linear_err_pct", "meas_in_pred_ci"]].round(1).to_string(index=False))
    for size, g in single.groupby("size", sort=False):
        m = g["error_pct"].abs().mean()
        b = g["linear_err_pct"].abs().mean()
        print(f"  {size}: mean |error| f_rw {m:.1f}%  vs linear baseline {b:.1f}%  "
              f"(ratio f_rw/linear {m / b:.2f})")

    mixed = chk[chk["kind"] == "mixed"]
    print("\n-- mixed sizes 4k:0.8,64k:0.2 (fio bssplit=4k/80:64k/20): predicted vs measured")
    print(mixed[["read_pct", "rule", "n", "measured_iops", "measured_lo", "measured_hi",
                 "predicted_iops", "pred_lo", "pred_hi", "error_pct"]]
          .round(1).to_string(index=False))

    # How invariant is C? Least squares over all five mixes of each size.
    cells = {s: list(sf.cells) for s, sf in res.model.fits.items()}
    lsq = RWModel.from_cells(cells, method="lsq")
    print("\n-- least squares over all five mixes: f_rw and the spread of C across them")
    print(lsq.table()[["size", "f_rw", "f_rw_lo", "f_rw_hi", "C", "C_spread", "C_cv",
                       "invariant"]].round(3).to_string(index=False))
    cap = res.model.capacity_table()
    print("\n   C_j = T_read + f_rw(anchors) * T_write at each mix, relative to C = T100_read:")
    print(cap.pivot(index="size", columns="read_pct", values="C_dev")
          .mul(100).round(1).to_string())
    for label, ws in (("anchor fit", res.warnings), ("lsq fit", lsq.warnings)):
        for w in ws:
            print(f"warning ({label}): {w}")

    if args.plot is not None:
        res.plot().savefig(args.plot, dpi=120)
        print(f"plot written to {args.plot}")
    if args.json is not None:
        from storlab.commands._common import emit_json
        emit_json({**res.to_dict(), "lsq_fits": lsq.table(), "validation": single},
                  args.json)
        print(f"runs and checks written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
