"""How often can any tuning recommend a configuration within 5 % of a table's optimum
under lognormal noise at a given budget? An upper estimate from oracles that know more than
a tuner can.

Each oracle knows the table's best `--pool` configurations (the search has found the good
region perfectly and spends nothing on the rest) and the exact true values among them, but
not which configuration holds which value. It draws `first` of them at random and runs each
once, then keeps the `keep` most likely to be within 5 % and runs each `reps` more times,
rung after rung (successive halving, as in SMAC3's and Hyperband's intensification), and
recommends the configuration with the highest posterior probability of being within 5 %
(Bayes-optimal under that exact prior: every run's log value is the true log value plus
normal noise of sd `--noise`). Every schedule spends at most `--budget` runs. The
`top10 x6` line is the oracle of the issue text: it knows the 10 best configurations
themselves and races them with 6 runs each (60 runs).

A table with structure lets a real search do better than a random draw from the good
region (it measures the best configurations more often); a table whose good region has none
(Berkeley DB Java: 60 configurations with 100 MiB log files and tracing not `finest`, 8
within 5 %, 25 more within 10 %, no additive structure among them) cannot be tuned much
better than these schedules.

    .venv/bin/python benchmarks/bench_tune_ceiling.py --datasets bdbj,bdbc --noise 0.10
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_datasets import dataset_names, load_dataset  # noqa: E402

#: (first runs, then (keep, more runs each) per rung); each spends at most 60 runs
SCHEDULES: list[tuple[int, list[tuple[int, int]]]] = [
    (30, [(10, 1), (5, 2), (2, 5)]),
    (24, [(12, 1), (6, 2), (3, 4)]),
    (36, [(12, 1), (6, 1), (3, 2)]),
    (40, [(10, 1), (4, 2)]),
    (30, [(6, 5)]),
    (45, [(5, 3)]),
]


def log_gaps(name: str) -> np.ndarray:
    """Every configuration's log(value / optimum), sorted (0 is the optimum)."""
    table, response, goal, params = load_dataset(name)
    v = table.groupby(list(params), sort=False)[response].mean().to_numpy(float)
    if goal == "maximize":
        v = 1.0 / v
    return np.sort(np.log(v / v.min()))


def run(pool: np.ndarray, first: int, rungs: list[tuple[int, int]], noise: float,
        trials: int, rng: np.random.Generator, tol: float = 0.05) -> float:
    """The share of trials whose recommendation is within `tol` of the optimum."""
    good = pool <= np.log1p(tol) + 1e-12

    def p_good(total: np.ndarray, n: np.ndarray) -> np.ndarray:
        d = (total / n)[:, None] - pool[None, :]
        ll = -0.5 * d * d * n[:, None] / noise ** 2
        w = np.exp(ll - ll.max(1, keepdims=True))
        return (w * good).sum(1) / w.sum(1)

    hits = 0
    for _ in range(trials):
        idx = rng.choice(len(pool), min(first, len(pool)), replace=False)
        total = pool[idx] + noise * rng.standard_normal(len(idx))
        n = np.ones(len(idx))
        alive = np.arange(len(idx))
        for keep, reps in rungs:
            alive = alive[np.argsort(-p_good(total, n)[alive])][:keep]
            for _ in range(reps):
                total[alive] += pool[idx[alive]] + noise * rng.standard_normal(len(alive))
                n[alive] += 1
        hits += bool(good[idx[int(np.argmax(p_good(total, n)))]])
    return hits / trials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="bdbj,bdbc")
    ap.add_argument("--noise", type=float, default=0.10)
    ap.add_argument("--pool", type=int, default=60, help="best configurations the oracle knows")
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"command: .venv/bin/python benchmarks/bench_tune_ceiling.py {' '.join(sys.argv[1:])}")
    for name in dataset_names(args.datasets):
        gaps = log_gaps(name)
        pool = gaps[:args.pool]
        rng = np.random.default_rng(args.seed)
        print(f"{name}: {len(gaps)} configurations, {(gaps <= np.log(1.05)).sum()} within 5 %,"
              f" oracle pool the best {len(pool)}, noise {args.noise}")
        top = run(gaps[:10], 10, [(10, 5)], args.noise, args.trials, rng)
        print(f"    top10 x6 (knows the 10 best): {top:.2f}")
        for first, rungs in SCHEDULES:
            share = run(pool, first, rungs, args.noise, args.trials, rng)
            spent = first + sum(k * r for k, r in rungs)
            print(f"    {first} once, then " + ", ".join(f"best {k} x{r}" for k, r in rungs)
                  + f" ({spent} runs): {share:.2f}", flush=True)


if __name__ == "__main__":
    main()
