"""Tuning a storage system under noise, scored on what a user acts on, on complete measured
configuration datasets (benchmarks/data/: Berkeley DB C and Java, PostgreSQL, HSQLDB,
MongoDB; provenance in its README).

Each dataset is the oracle. Every run of a configuration is its table value times
lognormal noise exp(noise * N(0, 1)). storlab tunes as `storlab tune` runs: a campaign file
written as a user writes it (numeric levels ordinal, text categorical, the dataset's
constraints where its feature model has them), the campaign loop and
its store in a temporary directory, a runner that looks each configuration up in the table
and draws the run's noise from (seed, run key) (`storlab.tune.evaluate.replay_tuning`;
tests/tune/test_replay_cli.py checks it against the CLI with a `command` runner), and is
scored on the TRUE value of the configuration the CLI recommends (`best.config`).
Baselines, measured in the same run (fresh noise per run):

- `optuna-tpe`: Optuna's TPESampler with its defaults, as an Optuna user gets it: every
  trial a run (repeats included), the recommendation `study.best_trial` (best observation);
- `optuna-tpe-norepeat`: the same, but a configuration already measured is told its
  earlier value and not run again; recommendation the best observation;
- `random`: uniform draws from the table, recommendation the best observation;
- `smac` (optional, where SMAC3 imports; `--smac-site DIR` adds a venv's site-packages):
  SMAC3's hyperparameter-optimisation facade with its intensifier (`smac_tuning`),
  recommendation its incumbent. Skipped with a printed line when SMAC3 is not importable.

For each dataset, noise 0 / 0.05 / 0.10 and budget 20 / 40 / 60, pooled over `--seed-sets`
seed sets (seeds 1..S) of `--repeats` tunings each, it prints the share of tunings whose
recommendation is truly within 5 % of the optimum and the median true gap; without noise
also the share that measured a configuration within 5 % within 60 runs and the median runs
to it. The targets checked per dataset: recommendation within 5 % in >= 80 % of tunings at
noise 0.10, budget 60; without noise >= 95 % reach 5 % within 60 runs and storlab's median
runs to 5 % <= TPE's. All numbers go to .bench-out/bench_tune.json.

    .venv/bin/python benchmarks/bench_tune.py                  # 4 seed sets x 5 repeats
    .venv/bin/python benchmarks/bench_tune.py --quick          # smoke: 1 set x 2, budget 60
    .venv/bin/python benchmarks/bench_tune.py --seed-sets 4 --repeats 10 --datasets bdbc
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
from tune_datasets import NAMES, constraints, load_dataset  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / ".bench-out"


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


STRATS = ("storlab", "optuna-tpe", "optuna-tpe-norepeat", "random", "smac")


BASELINES = ("optuna-tpe", "optuna-tpe-norepeat", "random")


def smac_missing() -> str | None:
    """Why SMAC3 cannot run here (None when it can): it is an optional baseline, never a
    dependency of the project."""
    try:
        import ConfigSpace  # noqa: F401
        import smac  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def smac_tuning(table: pd.DataFrame, response: str, goal: str, params: list[str],
                budget: int, seed: int, noise: float) -> tuple[list[float], float]:
    """One SMAC3 tuning of the table as its users run it: the hyperparameter-optimisation
    facade (random forest, expected improvement, the intensifier that re-runs its
    incumbent: `deterministic=False`), `n_trials=budget` runs in all, numeric levels
    ordinal and the others categorical; each run the table's value times fresh lognormal
    noise. Returns the true gaps of the runs in order and of SMAC's incumbent (its
    recommendation)."""
    import tempfile

    from ConfigSpace import Categorical, ConfigurationSpace, OrdinalHyperparameter
    from smac import HyperparameterOptimizationFacade, Scenario

    truth = {tuple(r[p] for p in params): float(r[response])
             for r in table.to_dict("records")}
    best = min(truth.values()) if goal == "minimize" else max(truth.values())

    def gap(v: float) -> float:
        return max(0.0, (v - best) / abs(best) if goal == "minimize" else (best - v) / abs(best))

    cs = ConfigurationSpace(seed=seed)
    kinds: dict[str, type] = {}
    for p in params:
        levels = sorted(table[p].unique().tolist())
        kinds[p] = type(levels[0])
        numeric = all(isinstance(v, (int, float)) for v in levels) and len(levels) > 2
        cs.add(OrdinalHyperparameter(p, levels) if numeric else
               Categorical(p, [str(v) for v in levels]))
    rng = np.random.default_rng([seed, 13])
    runs: list[float] = []

    def key(config) -> tuple:
        return tuple(kinds[p](config[p]) if kinds[p] is not str else str(config[p])
                     for p in params)

    def target(config, seed: int = 0) -> float:
        if key(config) not in truth:  # outside a constrained table's feature model
            runs.append(math.inf)  # SMAC records the exception as a crashed run
            raise ValueError("configuration outside the measured table")
        v = truth[key(config)]
        runs.append(gap(v))
        v *= math.exp(noise * rng.standard_normal()) if noise else 1.0
        return v if goal == "minimize" else -v

    with tempfile.TemporaryDirectory(prefix="bench-smac-") as d:
        scenario = Scenario(cs, deterministic=False, n_trials=budget, seed=seed,
                            output_directory=Path(d))
        opt = HyperparameterOptimizationFacade(scenario, target, overwrite=True,
                                               logging_level=40)
        inc = opt.optimize()
    if isinstance(inc, list):
        inc = inc[0]
    return runs, gap(truth[key(inc)])


def pooled(name: str, noise: float, budgets: list[int], seed_sets: int, repeats: int,
           strategies: tuple[str, ...], confirm_share: float) -> list[dict]:
    """One dataset and noise, every budget, pooled over the seed sets. storlab is run at
    each budget (its confirmation share depends on it); a baseline once at the largest
    (it does not know its budget): its recommendation at a smaller budget is its best
    observation among its first runs."""
    from storlab.tune.evaluate import tune_eval

    table, response, goal, params = load_dataset(name)
    cons = constraints(name)
    top = max(budgets)
    rec = {(s, b): [] for s in strategies for b in budgets}
    runs5 = {(s, b): [] for s in strategies for b in budgets}
    secs = {(s, b): 0.0 for s in strategies for b in budgets}
    for ss in range(1, seed_sets + 1):
        base = tuple(s for s in strategies if s in BASELINES)
        if base:
            res = tune_eval(table, response, goal=goal, params=params, strategies=base,
                            budget=top, repeats=repeats, seed=ss, targets=(0.05,),
                            noise=noise, confirm_share=confirm_share, constraints=cons)
            rc = res.rec_curve
            for s in base:
                for b in budgets:
                    g = rc[(rc["strategy"] == s) & (rc["run"] == b)]["rec_gap"]
                    rec[(s, b)] += [float(x) for x in g]
                    runs5[(s, b)] += list(_runs_to(res, s, 0.05, b, repeats))
                    secs[(s, b)] += float(res.seconds.get(s, 0.0)) * b / top
        if "smac" in strategies:
            for b in budgets:
                t0 = time.perf_counter()
                for r in range(repeats):
                    runs, g = smac_tuning(table, response, goal, params, b,
                                          ss * 100_003 + r, noise)
                    rec[("smac", b)].append(g)
                    hit = [i for i, x in enumerate(runs, 1) if x <= 0.05 + 1e-12]
                    runs5[("smac", b)].append(float(hit[0]) if hit else math.inf)
                secs[("smac", b)] += time.perf_counter() - t0
        if "storlab" in strategies:
            for b in budgets:
                res = tune_eval(table, response, goal=goal, params=params,
                                strategies=("storlab",), budget=b, repeats=repeats, seed=ss,
                                targets=(0.05,), noise=noise, confirm_share=confirm_share,
                                constraints=cons)
                r = res.recommended
                rec[("storlab", b)] += [float(x) for x in r["rec_gap"]]
                runs5[("storlab", b)] += list(_runs_to(res, "storlab", 0.05, b, repeats))
                secs[("storlab", b)] += float(res.seconds.get("storlab", 0.0))
    out = []
    for b in budgets:
        c = {"dataset": name, "noise": noise, "budget": b, "tunings": seed_sets * repeats,
             "strategies": {}}
        for s in strategies:
            g, r5 = np.array(rec[(s, b)]), np.array(runs5[(s, b)])
            c["strategies"][s] = {
                "recommended_within_5": float(np.mean(g <= 0.05 + 1e-12)),
                "median_recommended_gap": float(np.median(g)),
                "reached_5": float(np.mean(np.isfinite(r5))),
                "median_runs_to_5": _median(r5), "seconds": secs[(s, b)]}
        out.append(c)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 seed set x 2 repeats, budget 60, noise 0 and 0.10")
    ap.add_argument("--seed-sets", type=int, default=4, help="seed sets pooled (default 4)")
    ap.add_argument("--repeats", type=int, default=5, help="tunings per seed set (default 5)")
    ap.add_argument("--budgets", default="20,40,60")
    ap.add_argument("--noises", default="0,0.05,0.10")
    ap.add_argument("--confirm-share", type=float, default=0.5)
    ap.add_argument("--datasets", default=",".join(NAMES),
                    help=f"comma-separated, from {', '.join(NAMES)}")
    ap.add_argument("--strategies", default=",".join(STRATS))
    ap.add_argument("--output", default=None, help="file name under .bench-out/")
    ap.add_argument("--smac-site", default=None, metavar="DIR",
                    help="a site-packages directory holding SMAC3 (e.g. a venv of its own: "
                         "python3 -m venv v && v/bin/pip install smac), appended to the "
                         "path so the project's own packages win")
    args = ap.parse_args()
    if args.smac_site:
        sys.path.append(args.smac_site)
    if args.quick:
        args.seed_sets, args.repeats, args.budgets, args.noises = 1, 2, "60", "0,0.10"
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    for n in names:
        if n not in NAMES:
            print(f"--datasets: unknown dataset {n!r} (known: {', '.join(NAMES)})",
                  file=sys.stderr)
            sys.exit(2)
    if not 0 < args.confirm_share < 1:
        print(f"--confirm-share {args.confirm_share}: must be between 0 and 1, both excluded",
              file=sys.stderr)
        sys.exit(2)
    budgets = [int(b) for b in args.budgets.split(",")]
    noises = [float(x) for x in args.noises.split(",")]
    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    for s in strategies:
        if s not in STRATS:
            print(f"--strategies: unknown strategy {s!r} (known: {', '.join(STRATS)})",
                  file=sys.stderr)
            sys.exit(2)
    if "smac" in strategies:
        why = smac_missing()
        if why is not None:
            print(f"smac: skipped, SMAC3 is not importable here ({why}); install it in a "
                  "venv of its own and pass --smac-site DIR")
            strategies = tuple(s for s in strategies if s != "smac")
    if not strategies:
        print("--strategies: nothing left to measure", file=sys.stderr)
        sys.exit(2)
    cmd = " ".join(["benchmarks/bench_tune.py", *sys.argv[1:]])
    print(f"command: .venv/bin/python {cmd}")
    print(f"{args.seed_sets} seed sets x {args.repeats} tunings pooled per cell; lognormal "
          f"noise; confirmation share {args.confirm_share}; rec5 = share of tunings whose "
          "RECOMMENDED configuration is truly within 5 % of the optimum, gap = its median "
          "true gap, reach5 / runs5 = share that measured one within 5 % / median runs to "
          "it (>B: not in most)")
    results = []
    t00 = time.perf_counter()
    for name in names:
        for noise in noises:
            t0 = time.perf_counter()
            cells = pooled(name, noise, budgets, args.seed_sets, args.repeats, strategies,
                           args.confirm_share)
            for c in cells:
                b = c["budget"]
                results.append(c)
                parts = []
                for s, st in c["strategies"].items():
                    parts.append(f"{s} rec5 {st['recommended_within_5']:.2f} gap "
                                 f"{100 * st['median_recommended_gap']:.1f}% "
                                 f"reach5 {st['reached_5']:.2f}"
                                 + (f" runs5 {_fmt_runs(st['median_runs_to_5'], b)}"
                                    if noise == 0 else ""))
                print(f"{name:10s} noise {noise:.2f} budget {b:2d} ({c['tunings']} tunings, "
                      f"{time.perf_counter() - t0:.0f} s for the noise level): "
                      + " | ".join(parts), flush=True)
    print(f"\ntargets per dataset (storlab; {time.perf_counter() - t00:.0f} s in all):")
    for name in names:
        mine = {(c["noise"], c["budget"]): c["strategies"] for c in results
                if c["dataset"] == name}
        line = [f"{name:10s}"]
        hi = mine.get((max(noises), max(budgets)))
        if hi is not None and "storlab" in hi and max(noises) >= 0.1:
            v = hi["storlab"]["recommended_within_5"]
            line.append(f"rec5 at noise {max(noises):.2f} budget {max(budgets)}: {v:.2f} "
                        f"(>= 0.80: {'MET' if v >= 0.8 else 'NOT MET'})")
        lo = mine.get((0.0, max(budgets)))
        if lo is not None and "storlab" in lo:
            v = lo["storlab"]["reached_5"]
            line.append(f"reach5 without noise: {v:.2f} (>= 0.95: "
                        f"{'MET' if v >= 0.95 else 'NOT MET'})")
            if "optuna-tpe" in lo:
                a, b = lo["storlab"]["median_runs_to_5"], lo["optuna-tpe"]["median_runs_to_5"]
                line.append(f"median runs to 5 %: {_fmt_runs(a, max(budgets))} vs TPE "
                            f"{_fmt_runs(b, max(budgets))} ({'MET' if a <= b else 'NOT MET'})")
        print("; ".join(line))
    OUT.mkdir(exist_ok=True)
    path = OUT / (args.output or "bench_tune.json")
    path.write_text(json.dumps(results, indent=1, default=float))
    print(f"numbers: {path}")


if __name__ == "__main__":
    pd.set_option("display.width", 140)
    main()
