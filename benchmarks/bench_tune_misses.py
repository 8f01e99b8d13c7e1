"""Where storlab's recommendation misses under noise: the search or the race.

Replays `storlab tune` on the measured tables of bench_tune.py exactly as its storlab
column does (`storlab.tune.evaluate.replay_tuning` on the space a user writes, tuning
seed `seed set * 100003 + repeat`, lognormal noise drawn per run), and sorts every
tuning by what the search had measured when the race began (its first confirmation
run):

- `top1`: a configuration within 1 % of the optimum (the race's best chance);
- the recommendation's share within 5 % (`rec5`) in tunings with and without one;
- each miss: nothing within 5 % measured at all (`none`), within 5 % measured but run
  only once, never raced (`once`), or raced and lost to a worse one on noise (`raced`).

With `--show` it prints each miss: the recommendation's true gap, the best measured
one, and every configuration run more than once (true gap, runs, each run's value over
its true value: the first is the draw that selected it).

With `--choices` it also scores other final choices on the same end states (the race's
runs do not depend on its final rule, so one replay scores them all), over the
configurations run more than once, on the race's posterior (`Race.shrunk`,
`Race.post_var`): `pgs` the highest posterior probability of being within 5 % of the
best of them (probability of good selection, 4,000 normal draws, independent),
`pbest` the highest probability of being the best, `lcb` the highest posterior mean
minus one standard deviation, `raw` the highest mean of every run, `most` the most runs,
`additive` the highest mean shrunk toward a main-effects model of every run of the tuning
(`additive_shrunk`). With `--show` each miss also names its distance in factors from the
nearest configuration within 5 % and the factors that differ.

    .venv/bin/python benchmarks/bench_tune_misses.py --datasets bdbj --seed-sets 2 --repeats 15
    .venv/bin/python benchmarks/bench_tune_misses.py --datasets bdbc --seed-sets 1 --repeats 5 --show
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_datasets import constraints, dataset_names, load_dataset  # noqa: E402

from storlab.campaign.sources import config_key  # noqa: E402
from storlab.jsonutil import plain  # noqa: E402
from storlab.tune.evaluate import factor_names, replay_tuning, space_from_table  # noqa: E402
from storlab.tune.racing import Race  # noqa: E402
from storlab.tune.strategies import Objective  # noqa: E402

TOL = 1e-12


def tunings(name: str, seed_sets: int, repeats: int, noise: float, budget: int):
    """Each tuning's truth (config key -> value), goal and result, as bench_tune.py's
    storlab column runs them."""
    table, response, goal, params = load_dataset(name)
    if any(a != p for p, a in factor_names(params, response).items()):
        raise SystemExit(f"{name}: a column takes a reserved factor name; not supported here")
    df = table.groupby(list(params), sort=False)[response].mean().reset_index()
    space = space_from_table(df, list(params))
    names = space.names
    truth = {config_key({n: plain(r[n]) for n in names}): float(r[response])
             for r in df.to_dict("records")}
    cons = list(constraints(name))
    user_space = {"factors": [f.to_dict() for f in space.factors],
                  **({"constraints": cons} if cons else {}),
                  "responses": [{"name": response, "goal": goal}]}
    obj = Objective(response, goal)
    for ss in range(1, seed_sets + 1):
        for r in range(repeats):
            res = replay_tuning(user_space, truth, obj, budget, ss * 100_003 + r, noise)
            yield ss, r, truth, goal, response, res


def basin_note(cfg: dict, configs: dict[str, dict], goods: list[str]) -> str:
    """How far (in factors) a configuration is from the nearest one within 5 % of the
    optimum, and which factors differ (`--show`)."""
    def diff(k: str) -> list[str]:
        return [n for n, v in configs[k].items() if plain(cfg.get(n)) != v]
    near = min(goods, key=lambda k: len(diff(k)))
    return (f"recommended {dict(cfg)}: {len(diff(near))} factors from the nearest "
            f"within 5 % ({', '.join(f'{n}={configs[near][n]}' for n in diff(near))})")


def additive_shrunk(r: Race, rep: list) -> np.ndarray:
    """Each raced candidate's mean (runs after its first) shrunk toward a main-effects
    model fitted by ridge regression on every run of the tuning (first runs included: the
    model averages the noise of dozens of runs), by the candidate's runs against the
    spread of the configurations' means around the model."""
    names = sorted({k for a in r.arms for k in a.entry.config})
    levels = sorted({(n, str(a.entry.config.get(n))) for a in r.arms for n in names})
    col = {lv: j for j, lv in enumerate(levels)}

    def row(cfg: dict) -> np.ndarray:
        x = np.zeros(len(levels) + 1)
        x[-1] = 1.0
        for n in names:
            x[col[(n, str(cfg.get(n)))]] = 1.0
        return x

    x = np.array([row(a.entry.config) for a in r.arms for _ in a.z])
    y = np.array([z for a in r.arms for z in a.z])
    beta = np.linalg.solve(x.T @ x + 1e-2 * np.eye(x.shape[1]), x.T @ y)
    s2 = float(r.sigma) ** 2
    pred = np.array([row(a.entry.config) @ beta for a in r.arms])
    means = np.array([a.mean for a in r.arms])
    ns = np.array([a.n for a in r.arms])
    tau2 = max(float(np.mean((means - pred) ** 2 - s2 / ns)), 1e-6)
    out = []
    for a in rep:
        p = float(row(a.entry.config) @ beta)
        w = a.n / s2
        out.append((w * a.mean + p / tau2) / (w + 1 / tau2))
    return np.array(out)


def other_choices(r: Race, zone: float = 0.05) -> dict[str, dict]:
    """The configuration other final rules would recommend on the race's end state
    (`--choices`, see the module docstring)."""
    rep = [a for a in r.arms if a.repeated]
    if not rep or r.sigma is None:
        return {}
    m = np.array([r.shrunk(a) for a in rep])
    sd = np.sqrt([r.post_var(a) for a in rep])
    draws = m + sd * np.random.default_rng(0).standard_normal((4000, len(rep)))
    top = draws.max(1, keepdims=True)
    pick = {"pgs": int(np.argmax((draws >= top - np.log1p(zone)).mean(0))),
            "pbest": int(np.argmax((draws >= top).mean(0))),
            "lcb": int(np.argmax(m - sd)),
            "raw": max(range(len(rep)), key=lambda i: float(np.mean(rep[i].z))),
            "most": max(range(len(rep)), key=lambda i: (rep[i].n, m[i])),
            "additive": int(np.argmax(additive_shrunk(r, rep)))}
    return {k: rep[i].entry.config for k, i in pick.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="bdbc,bdbj")
    ap.add_argument("--seed-sets", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--noise", type=float, default=0.10)
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--show", action="store_true", help="print each miss")
    ap.add_argument("--choices", action="store_true",
                    help="also score other final rules on the same end states")
    args = ap.parse_args()
    print(f"command: .venv/bin/python benchmarks/bench_tune_misses.py {' '.join(sys.argv[1:])}")
    for name in dataset_names(args.datasets):
        t0 = time.perf_counter()
        rows = []
        for ss, r, truth, goal, response, res in tunings(name, args.seed_sets, args.repeats,
                                                         args.noise, args.budget):
            best = min(truth.values()) if goal == "minimize" else max(truth.values())

            def gap(k: str) -> float:
                return abs(truth[k] - best) / abs(best)

            hist = res.history
            keys = [config_key(o.config) for o in hist]
            start = next((i for i, o in enumerate(hist) if o.phase == "confirm"), len(hist))
            runs: dict[str, list[float]] = {}
            for o, k in zip(hist, keys):
                v = o.metrics.get(response)
                if k in truth and isinstance(v, (int, float)):
                    runs.setdefault(k, []).append(float(v))
            rec = config_key(res.best().config)
            if not rows:
                configs = {k: json.loads(k) for k in truth}
                goods = [k for k in truth if gap(k) <= 0.05 + TOL]
            searched = [gap(k) for k in keys[:start] if k in truth]
            near = [k for k in runs if gap(k) <= 0.05 + TOL]
            hit = gap(rec) <= 0.05 + TOL
            kind = "hit" if hit else ("none" if not near else
                                      "once" if all(len(runs[k]) == 1 for k in near)
                                      else "raced")
            rows.append({"seed_set": ss, "repeat": r, "rec_gap": gap(rec), "kind": kind,
                         "top1": min(searched, default=1.0) <= 0.01 + TOL, "race_at": start})
            if args.choices:
                for rule, cfg in other_choices(res.race).items():
                    rows[-1][f"rec5_{rule}"] = gap(config_key(cfg)) <= 0.05 + TOL
            if args.show and not hit:
                print(f"{name} seed set {ss} tuning {r}: recommended {100 * gap(rec):.1f} %, "
                      f"best measured {100 * min(gap(k) for k in runs):.1f} % (before the "
                      f"race at run {start}: {100 * min(searched, default=1.0):.1f} %), {kind}")
                print("    " + basin_note(res.best().config, configs, goods))
                for k in sorted(runs, key=gap):
                    if len(runs[k]) > 1 or gap(k) <= 0.05 + TOL:
                        ratio = [round(v / truth[k], 2) for v in runs[k]]
                        print(f"    {100 * gap(k):5.1f} % runs {len(runs[k]):2d} "
                              f"value/true {ratio}{'  <- recommended' if k == rec else ''}")
        df = pd.DataFrame(rows)
        n = len(df)
        top = df[df["top1"]]
        rest = df[~df["top1"]]
        kinds = df["kind"].value_counts()
        print(f"{name:10s} noise {args.noise:.2f} budget {args.budget} ({n} tunings, "
              f"{time.perf_counter() - t0:.0f} s): rec5 {(df['kind'] == 'hit').mean():.2f}; "
              f"within 1 % measured before the race in {len(top)} "
              f"(rec5 {(top['kind'] == 'hit').mean() if len(top) else float('nan'):.2f}), "
              f"not in {len(rest)} "
              f"(rec5 {(rest['kind'] == 'hit').mean() if len(rest) else float('nan'):.2f}); "
              f"misses: none within 5 % measured {kinds.get('none', 0)}, measured once "
              f"{kinds.get('once', 0)}, raced and lost {kinds.get('raced', 0)}", flush=True)
        if args.choices:
            print("    other final rules on the same runs: " + ", ".join(
                f"{c[5:]} {df[c].mean():.2f}" for c in df.columns if c.startswith("rec5_")),
                flush=True)


if __name__ == "__main__":
    main()
