#!/usr/bin/env python3
"""Write one PNG of every storlab plot kind to a folder, to look at them side by side.

    .venv/bin/python scripts/plot_gallery.py plot-gallery/

The data are small synthetic tables shaped like storlab's own (fio metric names, a Swift
sweep, an f_rw model with one noisy size), so the script runs in seconds without fio or a
cluster. tests/test_plot_gallery.py runs it and checks every file is there.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def _effects() -> dict[str, Any]:
    from storlab.analysis.effects import analyze
    from storlab.design import full_factorial, plackett_burman
    from storlab.space import Space

    rng = np.random.default_rng(1)
    t = full_factorial(Space.two_level(4)).table.copy()
    x = t[["A", "B", "C", "D"]].to_numpy(dtype=float)
    t["total_iops"] = (50_000 + 9_000 * x[:, 0] - 4_000 * x[:, 2] + 3_000 * x[:, 0] * x[:, 2]
                       + rng.normal(0, 600, len(t)))
    a = analyze(t, "total_iops")
    pb = plackett_burman(Space.two_level(7)).table.copy()
    pb["read_clat_p99_us"] = 800 + 200 * pb["A"] + rng.normal(0, 20, len(pb))
    b = analyze(pb, "read_clat_p99_us")
    return {f"effects-{k}": (lambda k=k: a.plot(k)) for k in ("pareto", "halfnormal", "main",
                                                            "interaction")} | {
        "effects-pb-interaction": lambda: b.plot("interaction")}


def _grid() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    rows = []
    for bs, depth, sched, jobs in itertools.product(["4k", "16k", "64k"], [1, 8, 32],
                                                    ["none", "mq-deadline"], [1, 2, 4, 8]):
        kb = {"4k": 4, "16k": 16, "64k": 64}[bs]
        bw = kb * 1024 * (900 * np.log2(depth + 1) + 120 * jobs) * (1.15 if sched == "none"
                                                                     else 1.0)
        for _ in range(2):
            rows.append({"bs": bs, "iodepth": depth, "scheduler": sched, "numjobs": jobs,
                         "total_bw_bytes": bw * rng.normal(1, 0.03)})
    return pd.DataFrame(rows)


def _importance() -> dict[str, Any]:
    from storlab.analysis.compare import compare
    from storlab.analysis.importance import importance
    from storlab.analysis.importance_eval import evaluate

    df = _grid()
    params = ["bs", "iodepth", "scheduler", "numjobs"]
    res = importance(df, "total_bw_bytes", params=params, stop="rsd:0.02")
    ev = evaluate(df, "total_bw_bytes", [0.05, 0.1, 0.25, 0.5, 1.0], repeats=40, params=params,
                  n_jobs=1)
    cmp = compare(df, "total_bw_bytes", params=params)
    return {"importance": res.plot, "importance-cpi": lambda: res.plot("cpi"),
            "importance-subsets": lambda: res.plot("subsets"),
            "importance-path": lambda: res.plot("path"),
            "importance-eval": ev.plot, "importance-compare": cmp.plot}


def _coverage() -> dict[str, Any]:
    from storlab.analysis.coverage import coverage

    rng = np.random.default_rng(3)
    rows = []
    centres = {"fio-randread": [(5, 1, 0)], "fio-seqwrite": [(0, 6, 1), (1, 5, 3)],
               "postmark": [(2, 2, 5), (4, 0, 4), (0, 0, 0)]}
    for bench, cs in centres.items():
        for c in cs:
            for _ in range(12):
                v = np.array(c, dtype=float) + rng.normal(0, 0.4, 3)
                rows.append({"benchmark": bench, "read_iops": 1000 * np.exp(v[0] / 2),
                             "write_iops": 1000 * np.exp(v[1] / 2),
                             "read_clat_p99_us": 100 * np.exp(v[2] / 2),
                             "usr_cpu": 10 + 3 * v[0] + rng.normal(0, 1)})
    r = coverage(pd.DataFrame(rows), "benchmark", log=True)
    return {f"coverage-{k}": (lambda k=k: r.plot(k)) for k in ("scatter", "dendrogram", "coverage")}


def _estimate() -> dict[str, Any]:
    from storlab.estimate.cells import Cell
    from storlab.estimate.rwmodel import RWModel

    rng = np.random.default_rng(4)
    cells: dict[str, list[Any]] = {}
    for size, (tr, tw) in {"4k": (90_000, 30_000), "64k": (12_000, 5_000)}.items():
        frw = tr / tw
        cells[size] = []
        for p in (0, 30, 50, 70, 100):
            c = 1.0 / (p / 100 / tr + (1 - p / 100) / tw)  # C held invariant
            reads = [c * p / 100 * rng.normal(1, 0.02) for _ in range(3)]
            writes = [c * (1 - p / 100) * rng.normal(1, 0.02) for _ in range(3)]
            cells[size].append(Cell.from_samples(p, reads, writes))
        del frw
    # A size measured twice per mix with a wild spread: its interval is huge (the +-400k
    # error bar that used to set the y-range).
    cells["1m"] = [Cell.from_samples(100, [900, 2_600], [0, 0]),
                   Cell.from_samples(0, [0, 0], [400, 1_500]),
                   Cell.from_samples(50, [250, 900], [250, 900])]
    m = RWModel.from_cells(cells)
    pr = m.predict(70, "4k:0.8,64k:0.2")
    return {"estimate-model": m.plot, "estimate-prediction": pr.plot}


def _sim() -> dict[str, Any]:
    from storlab.sim.calibrate import CalibrationResult
    from storlab.sim.sweep import SweepResult

    rows = []
    for clients, workers in itertools.product([64, 256], [14, 28, 42]):
        ops = 900 * clients ** 0.5 * (1 - np.exp(-workers / 20))
        rows.append({"object_workers": workers, "clients": clients, "ops_s": ops,
                     "mb_s": ops * 0.064, "lat_mean_ms": clients / ops * 1e3,
                     "lat_p99_ms": 3 * clients / ops * 1e3})
    sw = SweepResult(["object_workers", "clients"], pd.DataFrame(rows), analytic=False)
    rng = np.random.default_rng(5)
    meas = np.exp(rng.uniform(np.log(200), np.log(20_000), 14))
    pts = pd.DataFrame({"op": ["GET", "PUT"] * 7, "measured": meas,
                        "predicted": meas * rng.normal(1, 0.08, 14),
                        "split": ["train"] * 10 + ["test"] * 4})
    pts["error_pct"] = (pts["predicted"] / pts["measured"] - 1) * 100
    cal = CalibrationResult({"disk_overhead": 1.1}, pts, {}, 0.0)
    return {"sim-sweep": sw.plot, "sim-calibration": cal.plot}


def _tune() -> dict[str, Any]:
    from storlab.campaign.sources import Observation
    from storlab.tune.evaluate import tune_eval
    from storlab.tune.result import TuneResult
    from storlab.tune.strategies import Objective

    rng = np.random.default_rng(6)
    hist = []
    for i in range(30):
        phase = "screen" if i < 10 else "tune" if i < 24 else "confirm"
        d, j = int(rng.integers(1, 64)), int(rng.integers(1, 9))
        bw = 2e8 * np.log2(d + 1) / 6 * (1 + j / 10) * rng.normal(1, 0.05)
        lat = 50 + 8 * d / j + rng.normal(0, 3)
        hist.append(Observation(f"k{i}", i, i if phase != "confirm" else 20 + i % 3, 0,
                                {"iodepth": d, "numjobs": j}, "ok",
                                {"total_bw_bytes": bw, "read_clat_p99_us": lat}, phase))
    tr = TuneResult([Objective("total_bw_bytes"), Objective("read_clat_p99_us", "minimize")],
                    hist, "tpe", 30)
    te = tune_eval(_grid(), "total_bw_bytes", params=["bs", "iodepth", "scheduler", "numjobs"],
                   strategies=("random", "tpe"), budget=20, repeats=4)
    return {"tune": tr.plot, "tune-eval": te.plot}


def _report() -> dict[str, Any]:
    from storlab.report.build import progress_plot

    n = 40
    start = np.cumsum(np.full(n, 20.0))
    runs = pd.DataFrame({"started": start, "ended": start + 18,
                         "status": ["ok"] * 30 + ["failed"] + ["ok"] * 9})
    return {"report-progress": lambda: progress_plot(runs)}


SECTIONS: list[Callable[[], dict[str, Any]]] = [_effects, _importance, _coverage, _estimate,
                                                 _sim, _tune, _report]


def draw_all(only: list[str] | None = None) -> Iterator[tuple[str, Any]]:
    """(kind, Figure) for every plot kind; `only`: section names (effects, importance,
    coverage, estimate, sim, tune, report)."""
    for section in SECTIONS:
        if only and section.__name__.lstrip("_") not in only:
            continue
        for name, draw in section().items():
            yield name, draw()


def write_gallery(folder: str | Path, only: list[str] | None = None) -> list[Path]:
    """Draw every plot kind and save it as `<kind>.png` in `folder`; the paths written."""
    from storlab.fileio import save_figure

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    return [save_figure(fig, out / f"{name}.png", what=name) for name, fig in draw_all(only)]


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: plot_gallery.py FOLDER [SECTION ...]", file=sys.stderr)
        return 2
    for p in write_gallery(argv[0], argv[1:] or None):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
