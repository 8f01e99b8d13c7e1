"""screen-then-tune with and without its escape move (a group move out of a local optimum),
in the same invocation, noise-free replays through `storlab.tune.evaluate.tune_eval`.

Datasets: the measured tables of bench_tune.py (tune_datasets.py) and `basins`, a planted
table with two basins three factors apart: six factors of three levels, a wide basin
(100 x 0.95 per factor away from its centre) and a 4 % higher one (104 x 0.95 per factor
away) whose centre differs from the wide one's in three factors, so from the wide basin's
top every one- and two-factor change is worse. Per dataset and variant it prints the median
runs to 5 % and to 1 % of the optimum (unreached = beyond the budget) and the share of
replays that reach them within the budget, pooled over the seed sets.

    .venv/bin/python benchmarks/bench_tune_escape.py [--datasets bdbc,bdbj,basins]
        [--seeds 1,2,3,4] [--repeats 20] [--budget 60]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_datasets import NAMES, load_dataset  # noqa: E402


def basins() -> tuple[pd.DataFrame, str, str, list[str]]:
    """The planted two-basin table (see the module docstring)."""
    a, b = (1, 1, 1, 2, 0, 1), (1, 1, 1, 0, 2, 2)
    rows = []
    for x in itertools.product(range(3), repeat=6):
        da = sum(p != q for p, q in zip(x, a))
        db = sum(p != q for p, q in zip(x, b))
        rows.append({**{f"f{i}": v for i, v in enumerate(x)},
                     "y": max(100 * 0.95 ** da, 104 * 0.95 ** db)})
    return pd.DataFrame(rows), "y", "maximize", [f"f{i}" for i in range(6)]


def runs_to(res, target: float, budget: int, repeats: int) -> np.ndarray:
    """Runs each replay needed to come within `target` of the optimum (inf: never)."""
    c = res.curves[res.curves["strategy"] == "storlab"]
    hit = c["run"].where((c["best_gap"] <= target + 1e-12) & (c["run"] <= budget))
    first = hit.groupby(c["repeat"]).min()  # NaN where a replay never got there
    out = np.array([first.get(r, math.nan) for r in range(repeats)], dtype=float)
    return np.nan_to_num(out, nan=math.inf)


def main() -> None:
    from storlab.tune.evaluate import tune_eval
    from storlab.tune.strategies import ScreenThenTune

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="bdbc,bdbj,basins")
    ap.add_argument("--seeds", default="1,2,3,4")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--budget", type=int, default=60)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    for n in names:
        if n not in (*NAMES, "basins"):
            print(f"--datasets: unknown dataset {n!r} (known: {', '.join(NAMES)}, basins)",
                  file=sys.stderr)
            sys.exit(2)
    print(f"{'dataset':10s} {'escape':>6s} {'runs to 5%':>10s} {'5% share':>8s} "
          f"{'runs to 1%':>10s} {'1% share':>8s} {'seconds':>8s}")
    for name in names:
        table, response, goal, params = basins() if name == "basins" else load_dataset(name)
        for escape in (False, True):
            ScreenThenTune.escape = escape
            t0 = time.perf_counter()
            r5, r1 = [], []
            for seed in seeds:
                res = tune_eval(table, response, goal=goal, params=params,
                                strategies=("storlab",), budget=args.budget,
                                repeats=args.repeats, seed=seed, targets=(0.01, 0.05))
                r5.append(runs_to(res, 0.05, args.budget, args.repeats))
                r1.append(runs_to(res, 0.01, args.budget, args.repeats))
            a5, a1 = np.concatenate(r5), np.concatenate(r1)
            print(f"{name:10s} {'on' if escape else 'off':>6s} {np.median(a5):10.1f} "
                  f"{np.mean(a5 <= args.budget):8.2f} {np.median(a1):10.1f} "
                  f"{np.mean(a1 <= args.budget):8.2f} {time.perf_counter() - t0:8.0f}",
                  flush=True)
    ScreenThenTune.escape = True


if __name__ == "__main__":
    main()
