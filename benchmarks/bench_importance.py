"""Speed of Carver's importance (storlab.analysis.importance) against a straightforward
pandas-groupby implementation, measured in the same run.

0. The whole `storlab importance TABLE.csv -y tput --stop top:4` command on a
   500,000-row CSV (10 categorical parameters), start-up and CSV reading included, against
   a whole plain-pandas program doing the same (import pandas, `pd.read_csv`, the groupby
   greedy below), each a fresh process; wall time (median of --repeats) and CPU time.
   Run as the environment is (PYTHONDONTWRITEBYTECODE, OPENBLAS_CORETYPE and the load
   average are printed); with PYTHONDONTWRITEBYTECODE set, storlab's modules are compiled
   from source on every start, so a second row gives storlab byte-code caches (in a
   temporary PYTHONPYCACHEPREFIX), as an installed copy has them.
1. Greedy top-4 on a 500,000-row table, 10 categorical parameters (2-7 values each).
2. The section 5.4 harness: 1000 repetitions x 10 fractions on a 6,624-configuration
   dataset (Ext4-like: 7 parameters, 9,072 combinations, some forbidden), 2 processes.
   The pandas baseline runs the same subsets single-process on fewer repetitions; its
   per-repetition time is scaled to the full count (said so in the output).

    .venv/bin/python benchmarks/bench_importance.py [--quick] [--command-only] [--repeats N]
        [--baseline OTHER_TREE/src]
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


# ------------------------------------------------------------------ whole commands
def run_timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system of the child) of one run, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def pandas_program(csv: str) -> None:
    """The plain-pandas whole program the command is measured against (`--pandas-program`):
    import, read, average repeats and select by groupby, print the selection."""
    df = pd.read_csv(csv)
    params = [c for c in df.columns if c != "tput"]
    print(",".join(p for p, _ in pandas_greedy(df, "tput", params, 4)))


def whole_commands(rows: int, repeats: int, baseline: str | None = None
                   ) -> list[tuple[str, float, float, float, float]]:
    """(case, storlab wall, storlab cpu, pandas wall, pandas cpu) medians; with `baseline`
    (another tree's `src`), that storlab's command too, interleaved with this one."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        csv = str(Path(tmp) / "results.csv")
        big_table(rows).to_csv(csv, index=False)
        env = dict(os.environ)
        trees = {"": env}
        if baseline:
            trees["baseline "] = dict(env, PYTHONPATH=os.pathsep.join(
                [baseline, *filter(None, [env.get("PYTHONPATH")])]))
        ours = [sys.executable, "-m", "storlab", "importance", csv, "-y", "tput",
                "--stop", "top:4"]
        theirs = [sys.executable, __file__, "--pandas-program", csv]
        cached = {}
        for i, (tree, tenv) in enumerate(trees.items()):
            cached[tree] = dict(tenv, PYTHONPYCACHEPREFIX=str(Path(tmp) / f"pyc{i}"))
            cached[tree].pop("PYTHONDONTWRITEBYTECODE", None)
            run_timed(ours, cached[tree])  # fills the byte-code cache
        run_timed(theirs, env)   # and the page cache
        times: dict[str, list[tuple[float, float]]] = {"pandas": []}
        texts = set()
        for _ in range(repeats):  # interleaved, so load changes hit every case alike
            for tree, tenv in trees.items():
                w, c, text = run_timed(ours, tenv)
                texts.add(text)
                times.setdefault(f"{tree}as is", []).append((w, c))
                times.setdefault(f"{tree}pyc", []).append(run_timed(ours, cached[tree])[:2])
            w, c, selected = run_timed(theirs, env)
            times["pandas"].append((w, c))
        assert len(texts) == 1, "the trees print different reports"
        picked = [ln.split()[3] for ln in text.splitlines()
                  if ln.startswith("│") and ln.split()[1].isdigit()]
        assert picked == selected.strip().split(","), (picked, selected)
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
               for k, v in times.items()}
        pw, pc = med["pandas"]
        for tree in trees:
            out.append((f"{tree}command, {rows:,}-row CSV, as is", *med[f"{tree}as is"], pw, pc))
            out.append((f"{tree}command, {rows:,}-row CSV, storlab .pyc cached",
                        *med[f"{tree}pyc"], pw, pc))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--command-only", action="store_true",
                    help="only the whole-command case (0)")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each whole command")
    ap.add_argument("--baseline", metavar="SRC",
                    help="another storlab tree's src directory (e.g. a checkout of the "
                         "previous commit): its command is timed too, interleaved")
    ap.add_argument("--pandas-program", metavar="CSV", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pandas_program:
        pandas_program(args.pandas_program)
        return
    rows = 50_000 if args.quick else 500_000
    print(f"environment: {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}, OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, PYTHONDONTWRITEBYTECODE="
          f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")
    print(f"{'case':52s} {'storlab s':>10s} {'cpu s':>7s} {'pandas s':>9s} {'cpu s':>7s} "
          f"{'ratio':>7s}  (wall, median of {args.repeats}; ratio of wall)")
    for name, w, c, pw, pc in whole_commands(rows, args.repeats, args.baseline):
        print(f"{name:52s} {w:10.3f} {c:7.3f} {pw:9.3f} {pc:7.3f} {pw / w:6.1f}x")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print()
    if args.command_only:
        return
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
