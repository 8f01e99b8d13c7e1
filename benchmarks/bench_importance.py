"""Speed of Carver's importance (storlab.analysis.importance) against a straightforward
pandas-groupby implementation, measured in the same run.

1. Greedy top-4 on a 500,000-row table, 10 categorical parameters (2-7 values each).
2. The section 5.4 harness: 1000 repetitions x 10 fractions on a 6,624-configuration
   dataset (Ext4-like: 7 parameters, 9,072 combinations, some forbidden), 2 processes.
   The pandas baseline runs the same subsets single-process on fewer repetitions; its
   per-repetition time is scaled to the full count (said so in the output).

    .venv/bin/python benchmarks/bench_importance.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import pandas as pd

from storlab.analysis.importance import encode, greedy_order, importance
from storlab.analysis.importance_eval import SubsetSampler, evaluate


# ------------------------------------------------------------------ pandas baseline
def pandas_greedy(df: pd.DataFrame, response: str, params: list[str], steps: int,
                  aggregate: str = "max") -> list[tuple[str, float]]:
    """Algorithm 1 with groupby: average per configuration, then PI/CPI by group variances."""
    d = df.groupby(params, observed=True)[response].mean().reset_index()
    chosen: list[str] = []
    out = []
    for _ in range(steps):
        best, best_v = None, -1.0
        for q in params:
            if q in chosen:
                continue
            if not chosen:
                n = len(d)
                w = d.groupby(q, observed=True)[response].agg(["size", lambda s: s.var(ddof=0)])
                v = d[response].var(ddof=0) - (w.iloc[:, 0] / n * w.iloc[:, 1]).sum()
            else:
                vals, sizes = [], []
                for _, sub in d.groupby(chosen, observed=True):
                    m = len(sub)
                    w = sub.groupby(q, observed=True)[response].agg(
                        ["size", lambda s: s.var(ddof=0)])
                    vals.append(sub[response].var(ddof=0)
                                - (w.iloc[:, 0] / m * w.iloc[:, 1].fillna(0)).sum())
                    sizes.append(m)
                v = max(vals) if aggregate == "max" else float(np.dot(vals, sizes) / sum(sizes))
            if v > best_v:
                best, best_v = q, v
        chosen.append(best)  # type: ignore[arg-type]
        out.append((best, best_v))
    return out


# ------------------------------------------------------------------ datasets
def big_table(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sizes = [2, 3, 4, 5, 6, 7, 2, 3, 4, 5]
    df = pd.DataFrame({f"p{j}": pd.Categorical([f"v{v}" for v in rng.integers(0, L, rows)])
                       for j, L in enumerate(sizes)})
    c = {j: df[f"p{j}"].cat.codes.to_numpy() for j in range(10)}
    df["tput"] = (10000 - 4000 * (c[5] == 0) + 900 * (c[3] == 2) + 500 * (c[5] == 0) * (c[1] == 1)
                  + 120 * c[8] + rng.normal(0, 200, rows))
    return df


def ext4_like(seed: int = 1) -> pd.DataFrame:
    """9,072 combinations of (3, 7, 6, 3, 2, 3, 4) values; inode size > block size is
    forbidden (as in Ext4) and a few random runs are missing: 6,624 configurations."""
    rng = np.random.default_rng(seed)
    names = ["journal", "bgroup", "isize", "bs", "flex", "sched", "device"]
    df = pd.DataFrame(list(itertools.product(*[range(s) for s in (3, 7, 6, 3, 2, 3, 4)])),
                      columns=names)
    df = df[~(((df.isize >= 4) & (df.bs == 0)) | ((df.isize == 5) & (df.bs == 1))
              | ((df.isize == 3) & (df.bs == 0)))]
    df = df.iloc[np.sort(rng.choice(len(df), 6624, replace=False))].reset_index(drop=True)
    df["tput"] = (15000 - 9000 * (df.journal == 2) + 2000 * (df.device == 3)
                  + 700 * (df.bs == 2) * (df.journal != 2) + 40 * df.bgroup
                  + rng.normal(0, 300, len(df)))
    return df


def timed(fn, repeat: int = 3):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = ap.parse_args()
    rows = 50_000 if args.quick else 500_000
    repeats = 50 if args.quick else 1000
    base_reps = 5 if args.quick else 20
    fractions = [0.001, 0.002, 0.004, 0.008, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05]
    lines = []

    # 1. greedy top-4 on a big table
    df = big_table(rows)
    params = [f"p{j}" for j in range(10)]
    t_ours, res = timed(lambda: importance(df, "tput", params=params, stop="top:4"))
    t_pd, base = timed(lambda: pandas_greedy(df, "tput", params, 4), repeat=1)
    assert res.selected == [p for p, _ in base], (res.selected, base)
    lines.append((f"greedy top-4, {rows:,} rows x 10 params", t_ours, t_pd,
                  "selected " + ",".join(res.selected) + " (same)"))

    # 2. the evaluation harness
    full = ext4_like()
    ev_params = [c for c in full.columns if c != "tput"]
    t0 = time.perf_counter()
    ev = evaluate(full, "tput", fractions, repeats=repeats, n_jobs=2, seed=0)
    t_ev = time.perf_counter() - t0
    enc = encode(full, "tput", ev_params)
    sampler = SubsetSampler(enc.codes, enc.nlev)
    configs = enc.configs[ev_params + ["tput"]]
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    agree = 0
    for n in ev.sizes:
        for _ in range(base_reps):
            rows_ = sampler.sample(n, rng)
            ours = [ev_params[j] for j, _ in greedy_order(enc.codes[rows_], enc.nlev,
                                                          enc.y[rows_], 3)]
            theirs = [p for p, _ in pandas_greedy(configs.iloc[rows_], "tput", ev_params, 3)]
            agree += ours == theirs
    t_base_per = (time.perf_counter() - t0) / (base_reps * len(ev.sizes))
    t_pd_ev = t_base_per * repeats * len(ev.sizes)
    lines.append((f"harness {repeats} reps x {len(fractions)} fractions, {len(full):,} configs",
                  t_ev, t_pd_ev,
                  f"pandas: 1 process, {base_reps} reps/fraction scaled x{repeats // base_reps}"
                  f" (sampler time included); agreement {agree}/{base_reps * len(ev.sizes)}"))

    print(f"{'case':52s} {'storlab s':>10s} {'pandas s':>10s} {'ratio':>8s}  note")
    for name, a, b, note in lines:
        print(f"{name:52s} {a:10.3f} {b:10.3f} {b / a:7.1f}x  {note}")
    print()
    print("harness result (Figure 5 numbers): truth", ", ".join(ev.truth))
    print(ev.table().to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
