"""The benchmark's replay (`tune-eval`, benchmarks/bench_tune.py) is `storlab tune` as a user
runs it: a campaign file written by hand (numeric levels ordinal, the table's constraints, a
`command` runner whose program looks the configuration up in the table and applies the
run's noise) tuned through the CLI's entry point gives the same history, values and
recommendation as `replay_tuning` and scores the same in `tune_eval`."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from storlab.campaign.sources import config_key
from storlab.tune.evaluate import replay_tuning, space_from_table, tune_eval
from storlab.tune.strategies import Objective

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

# The benchmark a user would point `storlab tune` at: the configuration's value in the
# table times the run's lognormal noise, drawn from numpy's default generator seeded with
# [seed, CRC-32 of the run key `c3-r1`] (written out here, not imported: the replay's noise is
# checked against its description).
PROGRAM = r'''
import json, math, os, sys, zlib
import numpy as np
table, workdir, seed, noise, *pairs = sys.argv[1:]
key = os.path.basename(workdir)  # the campaign runs each run in scratch/<run key>
cfg = "|".join(p.split("=", 1)[1] for p in pairs)
v = json.load(open(table))[cfg]
if float(noise):
    z = np.random.default_rng([int(seed), zlib.crc32(key.encode())]).standard_normal()
    v = v * math.exp(float(noise) * float(z))
print(json.dumps({"y": v}))
'''


def bdbj() -> tuple[pd.DataFrame, str, list[str], list[str]]:
    """Berkeley DB Java edition's 180 measured configurations (benchmarks/data)."""
    sys.path.insert(0, str(BENCH))
    try:
        from tune_datasets import load_dataset
    finally:
        sys.path.remove(str(BENCH))
    df, response, goal, params = load_dataset("bdbj")
    return df, goal, params, []


def planted() -> tuple[pd.DataFrame, str, list[str], list[str]]:
    """A planted throughput over a space with a constraint: only feasible rows exist."""
    rows = []
    for engine, depth, bs, sched in itertools.product(["psync", "libaio"], [1, 4, 16, 32],
                                                      [4, 16, 64], ["none", "bfq", "mq"]):
        if engine == "psync" and depth == 32:
            continue
        d = engine == "libaio"
        y = 100 + 50 * d + (30 if d and depth >= 16 else 0) + {4: 0, 16: 10, 64: 25}[bs] \
            + (5 if sched == "none" else 0) + depth / 8
        rows.append({"engine": engine, "depth": depth, "bs": bs, "sched": sched, "PERF": y})
    return (pd.DataFrame(rows), "maximize", ["engine", "depth", "bs", "sched"],
            ['not (engine == "psync" and depth == 32)'])


def user_campaign(d: Path, df: pd.DataFrame, goal: str, params: list[str],
                  constraints: list[str], budget: int, seed: int, noise: float) -> Path:
    """The campaign file a user writes for the table (the space by hand: numeric levels
    ordinal, text categorical), its benchmark program and the table it reads."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "bench.py").write_text(PROGRAM)
    (d / "table.json").write_text(json.dumps(
        {"|".join(str(r[p]) for p in params): float(r["PERF"])
         for r in df.to_dict("records")}))
    factors = []
    for p in params:
        vals = sorted(df[p].unique().tolist(), key=lambda v: (isinstance(v, str), v))
        numeric = not any(isinstance(v, str) for v in vals)
        factors.append({"name": p, "kind": "ordinal" if numeric else "categorical",
                        "values": [int(v) if numeric else v for v in vals]})
    spec = {"space": {"factors": factors, "constraints": constraints,
                      "responses": [{"name": "y", "goal": goal}]},
            "design": {"kind": "tune", "budget": budget},
            "runner": {"type": "command", "options": {
                "command": [sys.executable, str(d / "bench.py"), str(d / "table.json"),
                            "{workdir}", str(seed), str(noise), *[f"{p}={{{p}}}" for p in params]],
                "json_metrics": {"y": "y"}}},
            "seed": seed}
    path = d / "tune.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize("table", [bdbj, planted])
def test_the_replay_is_the_cli_tuning(table: Any, tmp_path: Path, storlab_main: Any) -> None:
    df, goal, params, constraints = table()
    budget, noise = 20, 0.1
    truth = {config_key({p: r[p] for p in params}): float(r["PERF"])
             for r in df.to_dict("records")}
    best = max(truth.values()) if goal == "maximize" else min(truth.values())
    space = space_from_table(df, params).to_dict()
    space.update(constraints=constraints, responses=[{"name": "y", "goal": goal}])
    for seed in (0, 1):
        code, out, err = storlab_main(
            "tune", user_campaign(tmp_path / f"s{seed}", df, goal, params, constraints,
                                  budget, seed, noise), "--json", "--quiet")
        assert code == 0, err
        cli = json.loads(out)
        assert len(cli["history"]) == budget
        assert {h["status"] for h in cli["history"]} == {"ok"}
        assert "confirm" in cli["phases"]  # the race ran too
        mine = replay_tuning(space, truth, Objective("y", goal), budget, seed, noise).to_dict()
        assert [(h["key"], h["config"], h["phase"]) for h in mine["history"]] == \
            [(h["key"], h["config"], h["phase"]) for h in cli["history"]]
        # the same runs measured the same values: the noise is the run's, however it ran
        assert [h["value"] for h in mine["history"]] == [h["value"] for h in cli["history"]]
        assert mine["best"]["config"] == cli["best"]["config"]
        if constraints:  # nothing the constraint forbids ran
            assert not any(h["config"]["engine"] == "psync" and h["config"]["depth"] == 32
                           for h in cli["history"])
        if seed == 0:
            # tune_eval scores the CLI's recommendation on the table's true value (repeat 0
            # of seed 0 is the tuning seed 0), and its curve is the CLI's history
            ev = tune_eval(df.rename(columns={"PERF": "y"}), "y", goal=goal, params=params,
                           strategies=("storlab",), budget=budget, repeats=1, seed=0,
                           noise=noise, constraints=constraints)
            assert ev.n_configs == len(truth)
            true = truth[config_key(cli["best"]["config"])]
            assert ev.recommended["rec_gap"].iloc[0] == pytest.approx(abs(best - true)
                                                                      / abs(best))
            gaps = [abs(truth[config_key(h["config"])] - best) / abs(best)
                    for h in cli["history"]]
            assert ev.curves["best_gap"].tolist() == pytest.approx(
                [min(gaps[:i]) for i in range(1, budget + 1)])


def test_a_table_no_space_describes_is_replayed_on_its_rows() -> None:
    """A sample of a grid (not every combination, no constraint says which) is tuned by
    the campaign loop with the table's rows as the feasible set: nothing else runs, and
    tune_eval judges it on them."""
    from storlab.tune.domain import Domain

    rows = [{"a": a, "b": b, "c": c, "y": 10 + a * b + (c == "z")}
            for a, b, c in itertools.product(range(4), range(4), ["x", "y", "z"])]
    df = pd.DataFrame(rows).sample(30, random_state=1)
    params = ["a", "b", "c"]
    space = space_from_table(df, params)
    truth = {config_key({p: r[p] for p in params}): float(r["y"])
             for r in df.to_dict("records")}
    res = replay_tuning({"factors": [f.to_dict() for f in space.factors]}, truth,
                        Objective("y", "maximize"), 16, 3, 0.1,
                        candidates=Domain(space, df[params].to_dict("records")))
    assert len(res.history) == 16
    assert all(o.status == "ok" and config_key(o.config) in truth for o in res.history)
    ev = tune_eval(df, "y", params=params, strategies=("storlab",), budget=16, repeats=2,
                   noise=0.1)
    assert ev.n_configs == 30 and len(ev.recommended) == 2
    assert ev.recommended["rec_gap"].notna().all()
