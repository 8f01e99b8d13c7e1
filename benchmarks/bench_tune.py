"""Runs needed to tune a storage system, on complete measured configuration datasets
(benchmarks/data/: Berkeley DB C and Java, PostgreSQL; provenance in its README).

Each dataset is the oracle: storlab's default strategy, Optuna TPE alone and random search
each tune it from scratch `--repeats` times (different seeds) with a budget of 60 runs, in
the same process, through `storlab.tune.evaluate.tune_eval`. Per dataset it prints the table
(median runs to reach within 1 % / 5 % of the table's optimum, share of repeats that do,
median final gap, wall time), then the two ratios against the baseline measured beside it:

- TPE's median runs to 5 % / storlab's (target: >= 2, i.e. storlab needs at most half);
- the share of repeats that reach 1 % within 60 runs, storlab against TPE (target: higher).

A median is a number only when more than half the repeats reach the target (storlab.tune.
evaluate.MEDIAN_RULE); otherwise the ratio
uses the censored median (unreached = more than the budget) and says so. Convergence plots
go to .bench-out/bench_tune_<dataset>.png, all numbers to .bench-out/bench_tune.json.

    .venv/bin/python benchmarks/bench_tune.py [--quick] [--repeats N] [--datasets bdbc,bdbj]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_datasets import NAMES, load_dataset  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / ".bench-out"


def _strategies() -> tuple[str, str, str]:
    """storlab's default, Optuna TPE alone, random, under the names evaluate.py uses."""
    from storlab.tune import evaluate

    baselines = getattr(evaluate, "BASELINES", ("tpe", "random"))
    tpe = next((b for b in baselines if "tpe" in b), "tpe")
    rnd = next((b for b in baselines if "random" in b), "random")
    return "storlab", tpe, rnd


def _runs_to(res, strategy: str, target: float, budget: int, repeats: int) -> np.ndarray:
    """Runs each repeat needed to reach `target` (inf when it never did), from the curves."""
    c = res.curves
    c = c[(c["strategy"] == strategy) & (c["best_gap"] <= target + 1e-12)]
    first = c.groupby("repeat")["run"].min()
    out = np.full(repeats, math.inf)
    for r, n in first.items():
        if n <= budget:
            out[int(r)] = float(n)
    return out


def _median(runs: np.ndarray) -> float:
    """Median with unreached repeats counted as beyond the budget (inf)."""
    return float(np.median(runs))


def _fmt_runs(v: float, budget: int) -> str:
    return f">{budget}" if math.isinf(v) else f"{v:.1f}"


def oracle_runs(table: pd.DataFrame, response: str, goal: str, params: list[str],
                target: float, top: int = 2) -> tuple[float, list[str], int, int]:
    """A reference for the runs-to-5 % ratio: the median runs to `target` of a strategy
    that knows, for free, the `top` parameters with the largest main-effect variance in the
    complete table and their best joint setting (best mean), and draws the other parameters'
    configurations at random without repeats. Exact: the median n with
    1 - C(N - h, n) / C(N, n) >= 1/2, for the N configurations at that setting, h of them
    within the target. Returns (median runs, the parameters, N, h)."""
    y = table[response].astype(float)
    opt = y.max() if goal == "maximize" else y.min()
    share = {p: float(table.groupby(p)[response].mean().var(ddof=0)) for p in params}
    fixed = sorted(params, key=lambda p: -share[p])[:top]
    means = table.groupby(fixed)[response].mean()
    best = means.idxmax() if goal == "maximize" else means.idxmin()
    best = best if isinstance(best, tuple) else (best,)
    sub = table[np.logical_and.reduce([table[p] == v for p, v in zip(fixed, best)])]
    gaps = (sub[response].astype(float) - opt).abs() / (abs(opt) or 1.0)
    n_all, hits = len(sub), int((gaps <= target + 1e-12).sum())
    if hits == 0:
        return math.inf, fixed, n_all, hits
    for n in range(1, n_all + 1):
        if 1 - math.comb(n_all - hits, n) / math.comb(n_all, n) >= 0.5:
            return float(n), fixed, n_all, hits
    return math.inf, fixed, n_all, hits


def bench_one(name: str, repeats: int, budget: int, seed: int, noise: float,
              plot: bool) -> dict:
    from storlab.tune.evaluate import tune_eval

    table, response, goal, params = load_dataset(name)
    ours, tpe, rnd = _strategies()
    t0 = time.perf_counter()
    res = tune_eval(table, response, goal=goal, params=params, strategies=(ours, tpe, rnd),
                    budget=budget, repeats=repeats, seed=seed, targets=(0.01, 0.05),
                    noise=noise)
    wall = time.perf_counter() - t0
    tab = res.table()
    seconds = dict(getattr(res, "seconds", {}) or {})

    stats: dict[str, dict[str, float]] = {}
    for s in (ours, tpe, rnd):
        r1 = _runs_to(res, s, 0.01, budget, repeats)
        r5 = _runs_to(res, s, 0.05, budget, repeats)
        within60 = min(budget, 60)
        stats[s] = {"median_runs_5": _median(r5), "median_runs_1": _median(r1),
                    "share_5": float(np.mean(r5 <= within60)),
                    "share_1_within_60": float(np.mean(r1 <= within60)),
                    "seconds": float(seconds.get(s, math.nan))}

    a, b = stats[ours]["median_runs_5"], stats[tpe]["median_runs_5"]
    if math.isinf(a) and math.isinf(b):
        ratio5, ratio_note = math.nan, "neither reaches 5 % in more than half the repeats"
    elif math.isinf(a):
        ratio5, ratio_note = 0.0, "storlab reaches 5 % in at most half the repeats"
    elif math.isinf(b):
        ratio5, ratio_note = budget / a, (f"TPE reaches 5 % in at most half the repeats; "
                                          f"ratio is a lower bound (budget/{a:.1f})")
    else:
        ratio5, ratio_note = b / a, ""
    # A flat table: when a large share of all configurations is within 5 %, TPE's (random)
    # first runs get there at once and no strategy can need half as many runs as that.
    truth = table.groupby(list(params))[response].mean()
    gaps = (truth - res.optimum).abs() / (abs(res.optimum) or 1.0)
    flat = float((gaps <= 0.05 + 1e-12).mean())
    if b < 2:
        ratio_note = (f"{flat:.0%} of all configurations are within 5 % of the optimum: "
                      f"TPE's median of {b:.1f} run(s) cannot be halved (a run count is "
                      f">= 1), so the 2x target is unreachable on this table")
    s1, t1 = stats[ours]["share_1_within_60"], stats[tpe]["share_1_within_60"]

    print(f"\n=== {name}: {len(table):,} configurations, {len(params)} parameters, "
          f"{response} ({goal}), optimum {res.optimum:.6g}; {repeats} repeats x {budget} runs, "
          f"seed {seed}"
          f"{f', noise {noise:.0%}' if noise else ''}; {wall:.1f} s")
    print(tab.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"{'strategy':12s} {'runs to 5%':>11s} {'runs to 1%':>11s} {'5% share':>9s} "
          f"{'1% in 60':>9s} {'wall s':>8s}")
    for s, st in stats.items():
        print(f"{s:12s} {_fmt_runs(st['median_runs_5'], budget):>11s} "
              f"{_fmt_runs(st['median_runs_1'], budget):>11s} {st['share_5']:9.2f} "
              f"{st['share_1_within_60']:9.2f} {st['seconds']:8.2f}")
    o5, ofixed, on, oh = oracle_runs(table, response, goal, list(params), 0.05)
    print(f"reference: knowing the top-2 parameters ({', '.join(ofixed)}) and their best "
          f"setting for free leaves {on} configurations, {oh} within 5 %: drawing them "
          f"without repeats needs a median of {_fmt_runs(o5, budget)} runs to 5 % "
          f"(TPE / that = {b / o5 if o5 else math.nan:.2f}x: what a perfect screening that "
          f"costs no run gains over TPE when the rest is searched at random)")
    verdict5 = "MET" if ratio5 >= 2 else "NOT MET"
    verdict1 = "MET" if s1 > t1 else ("NOT MET: a tie, every repeat of both reaches 1 %"
                                      if s1 == t1 == 1.0 else "NOT MET")
    print(f"ratio TPE/storlab median runs to 5 %: {ratio5:.2f}  (target >= 2: {verdict5})"
          + (f"  [{ratio_note}]" if ratio_note else ""))
    print(f"reached 1 % within 60 runs: storlab {s1:.2f} vs TPE {t1:.2f} vs random "
          f"{stats[rnd]['share_1_within_60']:.2f}  (target storlab > TPE: {verdict1})")

    if plot:
        OUT.mkdir(exist_ok=True)
        fig = res.plot()
        ax = fig.axes[0]
        ax.set_title(f"{name}: {ax.get_title()}", fontsize=9)
        ax.set_ylim(bottom=0)  # a gap is never negative; symlog would show a negative half
        path = OUT / f"bench_tune_{name}.png"
        fig.savefig(path, dpi=110)
        print(f"plot: {path}")
    return {"dataset": name, "configs": len(table), "response": response, "goal": goal,
            "optimum": res.optimum, "repeats": repeats, "seed": seed, "budget": budget, "noise": noise,
            "seconds": wall, "table": tab.to_dict("records"), "stats": stats,
            "ratio_tpe_over_storlab_runs_to_5": ratio5, "ratio_note": ratio_note,
            "share_of_configs_within_5": flat, "oracle_top2_runs_to_5": o5, "target_5_met": bool(ratio5 >= 2), "target_1_met": bool(s1 > t1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="6 repeats instead of 30 (smoke run)")
    ap.add_argument("--repeats", type=int, default=None, help="seeds per strategy (default 30)")
    ap.add_argument("--budget", type=int, default=60, help="runs per tuning (default 60)")
    ap.add_argument("--datasets", default=",".join(NAMES),
                    help=f"comma-separated, from {', '.join(NAMES)}")
    ap.add_argument("--noise", type=float, default=0.0,
                    help="relative Gaussian noise added to each measured run (default 0)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()
    repeats = args.repeats or (6 if args.quick else 30)
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    for n in names:
        if n not in NAMES:
            print(f"--datasets: unknown dataset {n!r} (known: {', '.join(NAMES)})",
                  file=sys.stderr)
            sys.exit(2)
    results = [bench_one(n, repeats, args.budget, args.seed, args.noise, not args.no_plot)
               for n in names]

    print(f"\nsummary, seed {args.seed}, {repeats} repeats (ratio = TPE median runs to 5 % / "
          f"storlab's; 1 % = share within 60 runs)")
    print(f"{'dataset':12s} {'ratio 5%':>9s} {'storlab 1%':>11s} {'TPE 1%':>7s} "
          f"{'random 1%':>10s}  targets")
    ours, tpe, rnd = _strategies()
    for r in results:
        st = r["stats"]
        print(f"{r['dataset']:12s} {r['ratio_tpe_over_storlab_runs_to_5']:9.2f} "
              f"{st[ours]['share_1_within_60']:11.2f} {st[tpe]['share_1_within_60']:7.2f} "
              f"{st[rnd]['share_1_within_60']:10.2f}  "
              f"5%:{'met' if r['target_5_met'] else 'NOT met'} "
              f"1%:{'met' if r['target_1_met'] else 'NOT met'}")
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_tune.json").write_text(json.dumps(results, indent=1, default=float))
    print(f"numbers: {OUT / 'bench_tune.json'}")


if __name__ == "__main__":
    pd.set_option("display.width", 140)
    main()
