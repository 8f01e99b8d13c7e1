"""Tuning end to end: a command that computes a planted function of its configuration is the
benchmark (known optimum, interactions, a constraint, optional noise and failures); the
real `storlab` CLI runs it through the campaign loop, store and resume."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml


# The planted function. Best: engine=libaio, depth in {16, 32} (an engine x depth
# interaction), bs=64k, x1=1, x2=0, sched=none -> 213. Constraint: psync never with depth
# 32. `noise` adds seeded relative noise per (configuration, run); `fail` makes bfq fail.
ORACLE = r'''
import json, os, sys, random, hashlib
cfg = dict(a.split("=", 1) for a in sys.argv[1:])
d = {"psync": 0, "libaio": 1}[cfg["engine"]]
depth = int(cfg["depth"])
y = 100 + 50 * d + (30 if d and depth >= 16 else 0) + {"4k": 0, "16k": 10, "64k": 25}[cfg["bs"]]
y += 3 * int(cfg["x1"]) - 2 * int(cfg["x2"]) + (5 if cfg["sched"] == "none" else 0)
lat = 1000.0 / y * (1 + depth / 8)  # a second objective that trades with the first
if os.environ.get("ORACLE_FAIL") and cfg["sched"] == "bfq":
    sys.exit("bfq: scheduler not available")
noise = float(os.environ.get("ORACLE_NOISE", "0"))
if noise:
    y *= 1 + noise * random.Random(os.environ.get("ORACLE_RUN", "") + str(sorted(cfg.items()))
                                   + str(os.getpid())).gauss(0, 1)
if os.environ.get("ORACLE_SLEEP"):
    import time; time.sleep(float(os.environ["ORACLE_SLEEP"]))
print(json.dumps({"y": y, "lat": lat}))
'''

FACTORS = [
    {"name": "engine", "kind": "categorical", "values": ["psync", "libaio"]},
    {"name": "depth", "kind": "ordinal", "values": [1, 4, 16, 32]},
    {"name": "bs", "kind": "ordinal", "values": ["4k", "16k", "64k"]},
    {"name": "x1", "kind": "integer", "values": [0, 1]},
    {"name": "x2", "kind": "integer", "values": [0, 1]},
    {"name": "sched", "kind": "categorical", "values": ["mq-deadline", "none", "bfq"]},
]
BEST = {"engine": "libaio", "bs": "64k", "x1": 1, "x2": 0, "sched": "none"}


def campaign(d: Path, budget: int = 30, env: dict[str, str] | None = None,
             **design: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "oracle.py").write_text(ORACLE)
    spec = {
        "name": "planted",
        "space": {"factors": FACTORS,
                  "constraints": ['not (engine == "psync" and depth == 32)'],
                  "responses": [{"name": "y", "goal": "maximize"},
                                {"name": "lat", "goal": "minimize"}]},
        "design": {"kind": "tune", "budget": budget, **design},
        "runner": {"type": "command", "options": {
            "command": [sys.executable, str(d / "oracle.py"), "engine={engine}",
                        "depth={depth}", "bs={bs}", "x1={x1}", "x2={x2}", "sched={sched}"],
            "json_metrics": {"y": "y", "lat": "lat"}, "env": env or {}}},
        "seed": 3,
        "timeout": 60,
    }
    p = d / "tune.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


@pytest.fixture
def cli(storlab: Any, storlab_forked: Any) -> Any:
    """`storlab ARGS...`, asserting success unless check=False: a process forked from the
    started program (`storlab_forked`: each tuning here paid ~1.5 s of start-up), started
    afresh when `env` sets what it reads at start-up (COLUMNS)."""
    def run(*args: str, check: bool = True, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        p = storlab(*args, timeout=300, env=env) if env is not None else \
            storlab_forked(*args, cwd=os.getcwd())
        if check:
            assert p.returncode == 0, p.stderr
        return p
    return run


@pytest.fixture
def tune_json(cli: Any) -> Any:
    """`storlab tune PATH --json --quiet ARGS...`, its output read."""
    def tune(path: Path, *args: str) -> dict[str, Any]:
        return json.loads(cli("tune", str(path), "--json", "--quiet", *args).stdout)
    return tune


def test_tuning_finds_the_planted_optimum_within_budget(tmp_path: Path, tune_json: Any) -> None:
    out = tune_json(campaign(tmp_path, budget=40))
    best = out["best"]
    assert {k: best["config"][k] for k in BEST} == BEST
    assert best["config"]["depth"] in (16, 32)
    assert best["value"] == pytest.approx(213.0)
    assert best["runs_all"] >= 3  # raced: two runs after the selecting one at least
    hist = out["history"]
    assert len(hist) == 40 == out["runs"]  # the budget counts every run
    assert [h["phase"] for h in hist][:1] == ["screen"]
    assert {h["phase"] for h in hist} == {"screen", "tune", "confirm"}
    # The race starts once the search has had its share; noise-free, it decides at once
    # and gives the runs back to the search (a new leader is raced in turn).
    phases = [h["phase"] for h in hist]
    assert phases.index("confirm") >= 20 and out["race"]["decided"]
    assert out["best"]["interval"][0] <= 213.0 <= out["best"]["interval"][1]
    # The constraint is never violated by anything that ran.
    assert not any(h["config"]["engine"] == "psync" and h["config"]["depth"] == 32
                   for h in hist)
    # The answer is measured: its value is the mean of its confirmation runs in the
    # history (runs after its selection), value_all_runs the mean of all of them.
    mine = [h["value"] for h in hist if h["config"] == best["config"]]
    after = [h["value"] for h in hist if h["config"] == best["config"]
             and h["phase"] == "confirm"]
    assert after and best["value_from"] == "confirmation runs"
    assert best["value"] == pytest.approx(sum(after) / len(after))
    assert best["value_all_runs"] == pytest.approx(sum(mine) / len(mine))
    assert out["comparison"]["verdict"].startswith(("better", "not significant"))


@pytest.mark.parametrize("strategy", ["tpe", "random", "nsga2"])
def test_other_strategies_respect_budget_and_constraints(tmp_path: Path, strategy: str,
                                                         tune_json: Any) -> None:
    out = tune_json(campaign(tmp_path, budget=16, strategy=strategy))
    hist = out["history"]
    assert len(hist) == 16
    assert not any(h["config"]["engine"] == "psync" and h["config"]["depth"] == 32
                   for h in hist)
    assert out["best"]["runs"] >= 2


def test_noisy_oracle_answer_is_confirmed_against_baseline(tmp_path: Path, tune_json: Any) -> None:
    baseline = {"engine": "psync", "depth": 1, "bs": "4k", "x1": 0, "x2": 0,
                "sched": "mq-deadline"}
    p = campaign(tmp_path, budget=36, env={"ORACLE_NOISE": "0.03"}, baseline=baseline,
                 confirm_runs=4)
    out = tune_json(p)
    assert out["baseline"]["config"] == baseline
    assert out["baseline"]["kind"] == "default configuration"
    # the baseline gets confirm_runs; the recommendation is raced (two runs after its
    # first at least)
    assert out["baseline"]["runs_all"] >= 4 and out["best"]["runs_all"] >= 3
    # the values shown and compared: the runs after selection, enough for Welch
    assert out["baseline"]["runs"] >= 2 and out["best"]["runs"] >= 2
    # Planted: the best is ~2x the baseline; a 3 % noise cannot hide that.
    assert out["comparison"]["change"] > 0.5
    assert out["comparison"]["verdict"].startswith("better")
    assert out["best"]["value"] > 190


def test_failed_runs_are_recorded_and_the_search_goes_on(tmp_path: Path, tune_json: Any) -> None:
    out = tune_json(campaign(tmp_path, budget=24, env={"ORACLE_FAIL": "1"}))
    failed = [h for h in out["history"] if h["status"] != "ok"]
    assert failed and all(h["value"] is None and h["config"]["sched"] == "bfq"
                          for h in failed)
    assert out["best"]["config"]["sched"] != "bfq"
    assert len(out["history"]) == 24


def test_two_objectives_give_a_measured_pareto_front_and_plot(tmp_path: Path,
                                                              tune_json: Any) -> None:
    plot = tmp_path / "front.png"
    out = tune_json(campaign(tmp_path, budget=24, objectives=["y", {"lat": "minimize"}]),
                    "--plot", str(plot))
    front = out["pareto"]
    assert len(front) >= 2
    pts = [(f["value"], f["lat"]["mean"]) for f in front]
    for a in pts:  # nobody on the front is dominated by anyone on it
        assert not any(b[0] >= a[0] and b[1] <= a[1] and b != a for b in pts)
    assert plot.stat().st_size > 10_000


def test_pareto_front_counts_configurations_measured_confirm_runs_times(
        tmp_path: Path, cli: Any, tune_json: Any) -> None:
    """With confirm_runs: 2 the confirmation phase brings candidates to two runs in all
    (one search run, one confirmation run): those are the confirmed ones (it said '0 of
    them confirmed with 2+ runs' beside three with 2 runs each, counting only the
    confirmation runs)."""
    p = campaign(tmp_path, budget=24, strategy="nsga2", confirm_runs=2,
                 objectives=["y", {"lat": "minimize"}])
    out = tune_json(p)
    front = out["pareto"]
    want = sum(f["runs_all"] >= 2 for f in front)
    assert want >= 1
    text = " ".join(cli("tune", str(p), env={**os.environ, "COLUMNS": "200"}).stdout.split())
    assert (f"Pareto front: {len(front)} measured configurations, {want} of them confirmed "
            "with 2+ runs") in text
    assert [f["confirmed"] for f in front] == [f["runs_all"] >= 2 for f in front]


def _history_in_store(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT r.key, r.config, r.status FROM runs r WHERE r.warmup = 0 "
                           "ORDER BY r.seq").fetchall()
    except sqlite3.OperationalError:  # the file exists, its tables not yet (being created)
        rows = []
    finally:
        con.close()
    return [(k, c) for k, c, s in rows]


def test_sigkill_in_the_middle_resumes_to_the_same_history(tmp_path: Path, tune_json: Any,
                                                           storlab_argv: list[str],
                                                           act_on_a_stopped_look: Any) -> None:
    ref = campaign(tmp_path / "ref", budget=20)
    full = tune_json(ref)
    p = campaign(tmp_path / "killed", budget=20, env={"ORACLE_SLEEP": "0.25"})
    db = tmp_path / "killed" / "campaign.db"
    proc = subprocess.Popen([*storlab_argv, "tune", str(p), "--quiet"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)

    def done() -> int | None:
        """Runs finished, once the tuning phase is on (after the screening batch)."""
        n = 0
        if db.exists():
            try:
                con = sqlite3.connect(db)
                n = con.execute("SELECT COUNT(*) FROM runs WHERE status='ok'").fetchone()[0]
                con.close()
            except sqlite3.OperationalError:
                pass
        return n if n >= 12 else None

    try:  # the count is read with the tuning stopped: what it says is what the kill cuts
        cut = act_on_a_stopped_look(proc, done, lambda _: os.killpg(proc.pid, signal.SIGKILL),
                                    group=True)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert cut is not None and 12 <= cut < 20, cut
    before = _history_in_store(db)
    resumed = tune_json(p)
    after = _history_in_store(db)
    # Nothing finished before the kill was lost or repeated.
    finished = {k for k, _ in before}
    assert [k for k, _ in after][:len(before)] == [k for k, _ in before]
    assert len(after) == len(set(k for k, _ in after)) == 20
    assert finished <= {k for k, _ in after}
    # And the tuning went exactly as the uninterrupted one with the same seed.
    assert [(h["config"], h["phase"], h["value"]) for h in resumed["history"]] == \
        [(h["config"], h["phase"], h["value"]) for h in full["history"]]


def test_changed_runner_settings_are_refused_not_mixed(tmp_path: Path, cli: Any,
                                                       tune_json: Any) -> None:
    p = campaign(tmp_path, budget=20, strategy="random")
    tune_json(p)
    spec = yaml.safe_load(p.read_text())
    spec["runner"]["options"]["env"] = {"ORACLE_NOISE": "0.5"}  # another measurement
    p.write_text(yaml.safe_dump(spec))
    r = cli("tune", str(p), "--quiet", check=False)
    assert r.returncode == 2 and "measured with other settings" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_finished_tuning_says_a_larger_budget_does_not_reopen_it(tmp_path: Path, cli: Any,
                                                                   tune_json: Any) -> None:
    # Two objectives: the fixed confirmation ends the tuning, and more budget does not
    # reopen it (it says so).
    p = campaign(tmp_path, budget=20, objectives=["y", {"lat": "minimize"}])
    first = tune_json(p)
    assert len(first["history"]) == 20
    again = cli("tune", str(p), "--quiet", "--budget", "26")
    assert "does not reopen it" in " ".join(again.stdout.split())
    assert len(tune_json(p)["history"]) == 20
    less = cli("tune", str(p), "--quiet", "--budget", "15", check=False)
    assert less.returncode == 2 and "already holds 20" in less.stderr
    # One objective: the race goes on while runs remain, so more budget is more runs.
    q = campaign(tmp_path / "one", budget=20)
    one = tune_json(q)
    assert len(one["history"]) == 20
    more = tune_json(q, "--budget", "24")
    assert len(more["history"]) == 24 and more["history"][:20] == one["history"]


def test_an_interrupted_tuning_continues_with_more_budget(tmp_path: Path, tune_json: Any,
                                                          storlab_argv: list[str]) -> None:
    p = campaign(tmp_path, budget=16, strategy="tpe")
    db = tmp_path / "campaign.db"
    proc = subprocess.Popen([*storlab_argv, "tune", str(p), "--quiet"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ})
    deadline = time.time() + 60
    while time.time() < deadline and not (db.exists() and _history_in_store(db)):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    out = tune_json(p, "--budget", "22")
    assert len(out["history"]) == 22 and "confirm" in out["phases"]


@pytest.mark.parametrize("args, design, message", [
    (["--strategy", "nope"], {}, "strategy 'nope'"),
    (["--budget", "10"], {}, "too small"),  # screening 6 + 1 search + 2 x 2 confirmations
    (["--response", "nosuch:maximize"], {}, "'nosuch' is not a metric"),
    # an undeclared response's goal is never guessed (p99 was tuned to maximize)
    (["--response", "p99"], {}, "'p99' is not declared in the space, so its goal is unknown"),
    ([], {"objectives": ["p99"]}, "-y p99:minimize or :maximize"),
    ([], {"baseline": {"engine": "psync"}}, "baseline"),
])
def test_bad_requests_are_one_line_before_anything_runs(tmp_path: Path, args: list[str],
                                                        design: dict[str, Any],
                                                        message: str, cli: Any) -> None:
    p = campaign(tmp_path, budget=30, **design)
    r = cli("tune", str(p), "--quiet", *args, check=False)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "campaign.db").exists() or not _history_in_store(
        tmp_path / "campaign.db")


def test_infeasible_space_is_refused(tmp_path: Path, cli: Any) -> None:
    p = campaign(tmp_path, budget=30)
    spec = yaml.safe_load(p.read_text())
    spec["space"]["constraints"] = ['engine == "psync" and engine == "libaio"']
    p.write_text(yaml.safe_dump(spec))
    r = cli("tune", str(p), "--quiet", check=False)
    assert r.returncode == 2 and "no feasible configuration" in r.stderr


def test_fixed_design_file_is_tuned_with_budget_into_its_own_store(tmp_path: Path, cli: Any,
                                                                   tune_json: Any) -> None:
    p = campaign(tmp_path, budget=30)
    spec = yaml.safe_load(p.read_text())
    spec["design"] = {"kind": "lhs", "runs": 6}
    p.write_text(yaml.safe_dump({**spec, "repetitions": 2}))
    r = cli("tune", str(p), "--quiet", check=False)
    assert r.returncode == 2 and "--budget" in r.stderr
    r = cli("tune", str(p), "--quiet", "--budget", "18", "--strategy", "tpe")
    assert "repetitions: 2 do not apply to tuning" in " ".join(r.stdout.split())
    out = tune_json(p, "--budget", "18", "--strategy", "tpe")
    assert len(out["history"]) == 18
    assert any("repetitions: 2 do not apply" in n for n in out["notes"])  # JSON too
    assert out["store"].endswith("tune-tune.db")


REF = "engine=psync,depth=1,bs=4k,x1=0,x2=0,sched=mq-deadline"


def confirm_rows(cli: Any, p: Path, config: str) -> tuple[dict, dict, dict]:
    """`storlab confirm` of `config` against REF, 3 runs each: (JSON, its row, REF's row)."""
    out = json.loads(cli("confirm", str(p), "--config", config, "--against", REF, "--runs",
                         "3", "--json", "--quiet").stdout)
    return out, *out["configs"]


def test_confirm_compares_interleaved_runs(tmp_path: Path, cli: Any) -> None:
    p = campaign(tmp_path, budget=30)
    _, cfg, refrow = confirm_rows(cli, p, "engine=libaio,depth=16,bs=64k,x1=1,x2=0,sched=none")
    assert cfg["runs"] == refrow["runs"] == 3
    assert cfg["mean"] == pytest.approx(213.0) and refrow["mean"] == pytest.approx(100.0)
    assert cfg["comparison"]["change"] == pytest.approx(1.13)
    # The runs were interleaved, not grouped.
    con = sqlite3.connect(tmp_path / "confirm.db")
    order = [c for (c,) in con.execute("SELECT config_id FROM runs ORDER BY seq")]
    con.close()
    assert order != sorted(order)
    bad = cli("confirm", str(p), "--config", "engine=libaio", "--runs", "2", check=False)
    assert bad.returncode == 2 and "missing" in bad.stderr


def test_confirm_shows_failed_runs(tmp_path: Path, cli: Any) -> None:
    """bfq always fails here: its row says how many runs failed (before: 'runs 0' beside
    the reference's 3, nothing about the failures), in the table, the JSON and a note."""
    p = campaign(tmp_path, budget=30, env={"ORACLE_FAIL": "1"})
    bad = "engine=libaio,depth=16,bs=64k,x1=1,x2=0,sched=bfq"
    out, cfg, refrow = confirm_rows(cli, p, bad)
    assert (cfg["runs"], cfg["failed_runs"]) == (0, 3)
    assert (refrow["runs"], refrow["failed_runs"]) == (3, 0)
    assert out["notes"] == ["config 1: 0 of 3 runs gave y; 3 failed"]
    text = cli("confirm", str(p), "--config", bad, "--against", REF, "--runs", "3",
               "--quiet", env={**os.environ, "COLUMNS": "200"}).stdout
    assert "0 (3 failed)" in text and "note: config 1: 0 of 3 runs gave y; 3 failed" in text


def test_tune_eval_on_a_complete_table(tmp_path: Path, cli: Any) -> None:
    import itertools

    import pandas as pd

    levels = {"a": [0, 1, 2, 3], "b": ["x", "y", "z"], "c": [0, 1], "d": [0, 1], "e": [1, 2, 4]}
    rows = []
    for combo in itertools.product(*levels.values()):
        r = dict(zip(levels, combo))
        r["y"] = 100 + 20 * r["a"] - 3 * r["a"] ** 2 + 15 * (r["b"] == "z") \
            + 10 * r["c"] * r["d"] + r["e"]
        rows.append(r)
    csv = tmp_path / "full.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    plot = tmp_path / "conv.png"
    out = json.loads(cli("tune-eval", str(csv), "-y", "y", "--budget", "30", "--repeats", "4",
                         "--plot", str(plot), "--json").stdout)
    assert out["n_configs"] == 144 and out["optimum"] == pytest.approx(162.0)
    t = {(r["strategy"], r["target"]): r for r in out["table"]}
    assert set(s for s, _ in t) == {"storlab", "optuna-tpe", "random"}
    assert t[("storlab", 0.05)]["reached_share"] >= 0.75
    assert plot.stat().st_size > 10_000


def test_tune_eval_median_rule_is_what_it_says(tmp_path: Path, cli: Any) -> None:
    """Unreached repeats count as infinitely many runs, so the median is a number only
    when more than half the repeats reach the target: at exactly half it is n/a, and the
    title says so (it said 'n/a when fewer than half', and n/a showed at 0.5)."""
    import pandas as pd

    csv = tmp_path / "t.csv"
    pd.DataFrame({"a": range(8), "y": [10, 20, 15, 12, 11, 9, 8, 7]}).to_csv(csv, index=False)
    args = ("tune-eval", str(csv), "-y", "y", "--budget", "2", "--repeats", "2",
            "--strategies", "random", "--seed", "1")
    rows = json.loads(cli(*args, "--json").stdout)["table"]
    assert {r["reached_share"] for r in rows} == {0.5}  # seed 1: one repeat of two
    assert all(r["median_runs"] is None for r in rows)
    text = cli(*args, env={**os.environ, "COLUMNS": "200"}).stdout
    assert "n/a unless more than half the repeats reach it" in " ".join(text.split())
    assert text.count("n/a") == 1 + len(rows)


def test_tune_eval_median_at_three_of_four() -> None:
    """More than half reach the target: the median counts the unreached one as infinity."""
    import pandas as pd

    from storlab.tune.evaluate import TuneEvalResult

    first = {0: 3, 1: 5, 2: 9, 3: None}  # repeat -> run that reached the target
    rows = [{"strategy": "s", "repeat": r, "run": k,
             "best_gap": 0.0 if hit is not None and k >= hit else 0.5}
            for r, hit in first.items() for k in range(1, 11)]
    res = TuneEvalResult("y", "maximize", 10, 4, (0.01,), 1.0, 10, pd.DataFrame(rows))
    row = res.to_frame().iloc[0]
    assert row["reached_share"] == 0.75 and row["median_runs"] == 7.0  # (5 + 9) / 2
    half = TuneEvalResult("y", "maximize", 10, 4, (0.01,), 1.0, 10, pd.DataFrame(
        [r for r in rows if r["repeat"] != 1] + [{**r, "repeat": 1, "best_gap": 0.5}
                                                 for r in rows if r["repeat"] == 1]))
    row = half.to_frame().iloc[0]
    assert row["reached_share"] == 0.5 and pd.isna(row["median_runs"])


def test_report_has_a_tuning_section(tmp_path: Path, cli: Any, tune_json: Any) -> None:
    p = campaign(tmp_path, budget=20, strategy="tpe")
    out = tune_json(p)
    html = tmp_path / "r.html"
    cli("report", str(p), "-o", str(html))
    text = html.read_text()
    assert 'id="tuning"' in text and "Confirmed configurations" in text
    b = out["best"]["config"]
    assert ", ".join(f"{k}={v}" for k, v in b.items()) in text
    assert "recommended vs baseline" in text
    # The campaign's other views read a tuning store as any other.
    assert "ok" in cli("status", str(p)).stdout
    assert "results (config)" in cli("results", str(p)).stdout


def _history(rows: list[tuple[str, dict[str, Any], float | None]]) -> list[Any]:
    from storlab.campaign.sources import Observation, config_key

    ids: dict[str, int] = {}
    reps: dict[int, int] = {}
    out = []
    for i, (phase, cfg, y) in enumerate(rows):
        cid = ids.setdefault(config_key(cfg), len(ids) + 1)
        reps[cid] = reps.get(cid, 0) + 1
        out.append(Observation(f"c{cid}-r{reps[cid]}", i, cid, reps[cid], cfg,
                               "ok" if y is not None else "failed",
                               {} if y is None else {"y": y}, phase))
    return out


def test_reported_value_is_the_confirmation_runs_mean() -> None:
    """Winner's curse: the search run that put a configuration on top is its luckiest draw.
    Planted: truth 120 for B, 50 for the default A; B's search run drew 126, its two
    confirmation runs 119 and 121. Reported: 120 (before: 122, all three runs), the
    all-runs mean kept beside it, Welch on the confirmation runs."""
    from storlab.tune.result import TuneResult
    from storlab.tune.strategies import Objective

    a, b, c = {"k": 1}, {"k": 2}, {"k": 3}
    hist = _history([("screen", a, 50.0), ("screen", c, 100.0), ("tune", b, 126.0),
                     ("tune", b, None), ("confirm", b, 119.0), ("confirm", a, 49.0),
                     ("confirm", b, 121.0), ("confirm", a, 51.0)])
    res = TuneResult([Objective("y")], hist, "screen-then-tune", 8, baseline_config=a,
                     confirm_runs=3)
    d = res.to_dict()
    best, base = d["best"], d["baseline"]
    assert best["config"] == b and best["value"] == pytest.approx(120.0)
    assert best["runs"] == 2 and best["values"] == [119.0, 121.0]
    assert best["value_from"] == "confirmation runs"
    assert best["value_all_runs"] == pytest.approx(122.0) and best["runs_all"] == 3
    assert (best["failed_runs"], best["failed_runs_all"]) == (0, 1)  # failed in the search
    assert base["value"] == pytest.approx(50.0) and base["runs"] == 2
    from scipy import stats

    assert d["comparison"]["pvalue"] == pytest.approx(
        stats.ttest_ind([119.0, 121.0], [49.0, 51.0], equal_var=False).pvalue)
    assert d["comparison"]["change"] == pytest.approx(120 / 50 - 1)
    # a configuration never confirmed keeps the mean of its runs
    scr = [e for e in res.tally.measured() if e.config == c][0]
    assert res.entry_dict(scr)["value_from"] == "all runs"
    t = res.table()
    row = t[t["role"].str.contains("best")].iloc[0]
    assert row["y mean"] == pytest.approx(120.0) and row["y mean, all runs"] == pytest.approx(122.0)


def test_best_is_ranked_by_its_confirmation_runs() -> None:
    """B's lucky search run (140) put its all-runs mean (120) above C's (115); their
    confirmation runs say C (115, 115) beats B (110, 110): C is the recommendation, so the
    recommended row never shows a lower mean than another confirmed one (the demo did)."""
    from storlab.tune.result import TuneResult
    from storlab.tune.strategies import Objective

    a, b, c = {"k": 1}, {"k": 2}, {"k": 3}
    hist = _history([("screen", a, 50.0), ("tune", b, 140.0), ("tune", c, 115.0),
                     ("confirm", b, 110.0), ("confirm", c, 115.0), ("confirm", b, 110.0),
                     ("confirm", c, 115.0)])
    res = TuneResult([Objective("y")], hist, "screen-then-tune", 7, confirm_runs=3)
    assert res.best().config == c
    assert [e.config for e in res.confirmed()] == [c, b]
    low = TuneResult([Objective("y", "minimize")], hist, "screen-then-tune", 7, confirm_runs=3)
    assert low.best().config == b


def test_best_screened_is_the_one_confirmation_reran() -> None:
    """The audit's pb2: the best screened S (150) is confirmed at 141 and 143, so its
    all-run mean (144.7) fell below T's single screening run (146). Judged on all runs the
    baseline became T, never re-run ("over 1 runs"), compared by Welch with nothing. The
    best screened is judged on its screening runs: S, the one confirmation re-ran."""
    from storlab.tune.result import TuneResult
    from storlab.tune.strategies import Objective, Tally

    s, t, b = {"k": 1}, {"k": 2}, {"k": 3}
    hist = _history([("screen", s, 150.0), ("screen", t, 146.0), ("tune", b, 170.0),
                     ("confirm", s, 141.0), ("confirm", b, 171.0), ("confirm", s, 143.0),
                     ("confirm", b, 169.0)])
    res = TuneResult([Objective("y")], hist, "screen-then-tune", 7, confirm_runs=3)
    d = res.to_dict()
    assert d["best_screened"]["config"] == s and d["baseline"]["config"] == s
    assert d["baseline"]["values"] == [141.0, 143.0]
    from scipy import stats

    assert d["comparison"]["pvalue"] == pytest.approx(
        stats.ttest_ind([171.0, 169.0], [141.0, 143.0], equal_var=False).pvalue)
    # stable: the same answer before the confirmation ran (what chose who to re-run)
    assert Tally(hist[:3], [Objective("y")]).best_screened().config == s


def test_report_uses_the_design_the_tuning_ran(tmp_path: Path, storlab_main: Any,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The file says y and screen-then-tune on 30 runs; `storlab tune -y lat:minimize
    --strategy random --budget 7` ran. The report rebuilt the section from the file: ranked
    on y, "screen-then-tune: 7 of 30 runs". It reads the store's design metadata."""
    monkeypatch.chdir(tmp_path)
    p = campaign(tmp_path, budget=30, strategy="screen-then-tune")
    code, out, err = storlab_main("tune", p, "--json", "--quiet", "-y", "lat:minimize",
                                  "--strategy", "random", "--budget", "7")
    assert code == 0, err
    best = json.loads(out)["best"]
    html = tmp_path / "r.html"
    code, _, err = storlab_main("report", p, "-o", html)
    assert code == 0, err
    text = html.read_text()
    sec = text[text.index('id="tuning"'):]
    sec = sec[:sec.index("</section>")]
    assert "random" in sec and "screen-then-tune" not in sec and "of 30" not in sec
    assert "its lat" in sec and "its y" not in sec
    assert ", ".join(f"{k}={v}" for k, v in best["config"].items()) in sec


def test_pareto_front_is_computed_on_the_values_it_shows() -> None:
    """t3_4: the front was computed on all-run means and shown with confirmation means, so
    listed entries dominated each other. A: search run (160, lat 11), confirmed at 140 and
    140 (lat 11): all runs (146.7, 11), shown (140, 11). B: one run (145, 10.5). On all
    runs both are on the front; on the values shown B dominates A."""
    from storlab.campaign.sources import Observation
    from storlab.tune.result import TuneResult
    from storlab.tune.strategies import Objective

    a, b = {"k": 1}, {"k": 2}
    rows = [("tune", a, 160.0, 11.0), ("tune", b, 145.0, 10.5), ("confirm", a, 140.0, 11.0),
            ("confirm", a, 140.0, 11.0)]
    hist = [Observation(f"r{i}", i, 0, 1, cfg, "ok", {"y": y, "lat": lat}, ph)
            for i, (ph, cfg, y, lat) in enumerate(rows)]
    res = TuneResult([Objective("y"), Objective("lat", "minimize")], hist, "nsga2", 4,
                     confirm_runs=3)
    shown = [(p["value"], p["lat"]["mean"]) for p in res.to_dict()["pareto"]]
    assert shown == [(145.0, 10.5)]
    for y, lat in shown:  # no listed entry dominates another on the listed values
        assert not any(y2 >= y and lat2 <= lat and (y2, lat2) != (y, lat)
                       for y2, lat2 in shown)
    front = res.plot().axes[1].lines[0]  # the plot draws the same front
    assert list(front.get_xdata()) == [145.0] and list(front.get_ydata()) == [10.5]
    # the recommendation (A, the best confirmed) is off that front: said, not hidden
    d = res.to_dict()
    assert d["best"]["config"] == a
    assert any("not on the measured Pareto front" in n for n in d["notes"])


def test_a_default_baseline_that_failed_every_run_is_said(tmp_path: Path, storlab_main: Any,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """dfl: the declared baseline failed each of its runs; baseline and comparison were null
    and nothing said so. The terminal, the JSON and the report say it."""
    monkeypatch.chdir(tmp_path)
    base = {"engine": "psync", "depth": 1, "bs": "4k", "x1": 0, "x2": 0, "sched": "bfq"}
    p = campaign(tmp_path, budget=8, env={"ORACLE_FAIL": "1"}, strategy="random",
                 baseline=base)
    code, out, err = storlab_main("tune", p, "--quiet")
    assert code == 0, err
    out = " ".join(out.split())  # the console wraps long lines
    assert "note: the default configuration (engine=psync" in out
    # its screening run and its one retry in the confirmation
    assert "failed all its 2 runs" in out
    code, out, err = storlab_main("tune", p, "--quiet", "--json")
    d = json.loads(out)
    assert d["baseline"] is None and d["baseline_failed_runs"] == 2
    assert len(d["notes"]) == 1 and "failed all its 2 runs" in d["notes"][0]
    code, _, err = storlab_main("report", p, "-o", tmp_path / "r.html")
    assert code == 0, err
    assert "failed all its 2 runs: no baseline" in (tmp_path / "r.html").read_text()


def test_a_default_that_keeps_failing_is_retried_once(tmp_path: Path, tune_json: Any
                                                     ) -> None:
    """dfl: a declared default whose every run failed was re-run confirm_runs (3) times in
    the confirmation, 3 more failures of the budget; now one retry (a transient failure
    gets its second chance), and the search has the runs."""
    base = {"engine": "psync", "depth": 1, "bs": "4k", "x1": 0, "x2": 0, "sched": "bfq"}
    out = tune_json(campaign(tmp_path, budget=20, env={"ORACLE_FAIL": "1"},
                             strategy="random", baseline=base))
    mine = [h for h in out["history"] if h["config"] == base]
    assert [(h["phase"], h["value"]) for h in mine] == [("screen", None), ("confirm", None)]
    assert len(out["history"]) == 20 and out["baseline_failed_runs"] == 2


def test_repetitions_are_refused_and_warmups_said(tmp_path: Path, storlab_main: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """t5: `repetitions: 2` was silently ignored by a tuning design and `warmup: 1` runs were
    executed beside a budget said to count every run. Repetitions: one line, exit 2, nothing
    run. Warm-ups: said beside the budget (terminal and JSON)."""
    monkeypatch.chdir(tmp_path)
    p = campaign(tmp_path, budget=5, strategy="random")
    spec = yaml.safe_load(p.read_text())
    p.write_text(yaml.safe_dump({**spec, "repetitions": 2}))
    code, out, err = storlab_main("tune", p, "--quiet")
    assert code == 2 and "repetitions: 2 does not apply" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "campaign.db").exists() or not _history_in_store(
        tmp_path / "campaign.db")
    p.write_text(yaml.safe_dump({**spec, "warmup": 1}))
    code, out, err = storlab_main("tune", p, "--quiet", "--json")
    assert code == 0, err
    d = json.loads(out)
    n_configs = len({json.dumps(h["config"], sort_keys=True) for h in d["history"]})
    assert d["runs"] == 5 and d["warmup_runs"] >= n_configs
    code, out, err = storlab_main("tune", p, "--quiet")
    assert f"5 of 5 runs (screen 4, confirm 1) + {d['warmup_runs']} warm-up runs (not counted" \
        in " ".join(out.split())


def test_confirm_refuses_an_unknown_response_before_running(tmp_path: Path,
                                                            storlab_main: Any,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """`confirm -y zzz` ran every run, then said no run produced 'zzz'; `tune` refuses
    before running, and so does `confirm` now. An undeclared response needs its goal."""
    monkeypatch.chdir(tmp_path)
    p = campaign(tmp_path)
    cfg = "engine=libaio,depth=16,bs=64k,x1=1,x2=0,sched=none"
    code, _, err = storlab_main("confirm", p, "--config", cfg, "--against", REF, "-n", "2",
                                "-y", "zzz", "--quiet")
    assert code == 2 and "'zzz' is not a metric of this runner" in err
    assert len(err.strip().splitlines()) == 1
    assert not list((tmp_path / "scratch").glob("c*"))  # nothing ran
    spec = yaml.safe_load(p.read_text())
    spec["space"]["responses"] = spec["space"]["responses"][:1]  # lat undeclared
    p.write_text(yaml.safe_dump(spec))
    code, _, err = storlab_main("confirm", p, "--config", cfg, "--against", REF, "-n", "2",
                                "-y", "lat", "--quiet")
    assert code == 2 and "'lat' is not declared in the space" in err
    code, out, err = storlab_main("confirm", p, "--config", cfg, "--against", REF, "-n", "2",
                                  "-y", "lat:minimize", "--quiet", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["goal"] == "minimize" and d["response"] == "lat"
    # a tuning file that gives the goal in its objectives is enough (it was refused)
    spec["design"]["objectives"] = [{"y": "maximize"}, {"lat": "minimize"}]
    p.write_text(yaml.safe_dump(spec))
    code, out, err = storlab_main("confirm", p, "--config", cfg, "--against", REF, "-n", "2",
                                  "-y", "lat", "--quiet", "--json")
    assert code == 0, err
    assert json.loads(out)["goal"] == "minimize"


@pytest.mark.parametrize("columns, args, message", [
    (["y"], [], "no parameter column besides the response 'y'"),  # was a pandas traceback
    (["p1", "p2", "y"], ["--params", "p1,y"], "--params names the response 'y'"),
    (["p1", "p2", "zero"], [], "the optimum y is 0"),  # 1 % of 0 was an absolute gap
])
def test_tune_eval_refuses_a_table_it_cannot_judge(tmp_path: Path, storlab_main: Any,
                                                   columns: list[str], args: list[str],
                                                   message: str) -> None:
    import pandas as pd

    rows = [{"p1": a, "p2": b, "y": float(10 * a + b), "zero": float(10 * a + b - 22)}
            for a in (0, 1, 2) for b in (0, 1, 2)]
    df = pd.DataFrame(rows)[columns].rename(columns={"zero": "y"})
    csv = tmp_path / "t.csv"
    df.to_csv(csv, index=False)
    code, _, err = storlab_main("tune-eval", csv, "-y", "y", "-b", "6", "-n", "1",
                                "--strategies", "random", *args)
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_tune_eval_says_which_columns_are_parameters(tmp_path: Path,
                                                     storlab_main: Any) -> None:
    """extra.csv: a latency column beside y became a parameter without a word."""
    import pandas as pd

    rows = [{"p1": a, "p2": b, "y": float(10 * a + b + 1), "lat": 1.0 / (10 * a + b + 1)}
            for a in (0, 1, 2) for b in (0, 1, 2)]
    csv = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    code, out, err = storlab_main("tune-eval", csv, "-y", "y", "-b", "6", "-n", "1",
                                  "--strategies", "random")
    assert code == 0, err
    assert "parameters: p1, p2, lat (every column but y; --params to choose)" in out
    code, out, err = storlab_main("tune-eval", csv, "-y", "y", "-b", "6", "-n", "1",
                                  "--strategies", "random", "--params", "p1,p2", "--json")
    assert json.loads(out)["params"] == ["p1", "p2"]


def test_tune_eval_on_columns_named_as_storlab_names_its_own(tmp_path: Path,
                                                           storlab_main: Any) -> None:
    """A parameter column named `block` (a name storlab keeps for its results) broke the
    replay: 'constraints: factors[1]: name 'block' is reserved'. The replay's factors take
    neutral names now, the tuning is the one of the same table with the column renamed, and
    the result, the constraints and the messages name the table's columns."""
    import itertools

    import pandas as pd

    from storlab.errors import SpaceError
    from storlab.tune.evaluate import tune_eval

    df = pd.DataFrame([{"a": a, "block": b, "y": 10.0 + a * b + a}
                       for a, b in itertools.product(range(3), range(3))])
    csv = tmp_path / "t.csv"
    df.to_csv(csv, index=False)
    code, out, err = storlab_main("tune-eval", csv, "-y", "y", "-b", "6", "-n", "2",
                                  "--strategies", "storlab,random", "--json")
    assert code == 0, err
    assert json.loads(out)["params"] == ["a", "block"]
    kw: dict[str, Any] = {"strategies": ("storlab",), "budget": 6, "repeats": 2, "noise": 0.1}
    feasible = df[df["a"] + df["block"] <= 3]
    for table, cons in ((df, []), (feasible, ["a + block <= 3"])):
        mine = tune_eval(table, "y", **kw, constraints=cons)
        renamed = tune_eval(table.rename(columns={"block": "b"}), "y", **kw,
                            constraints=[c.replace("block", "b") for c in cons])
        assert mine.params == ["a", "block"] and mine.n_configs == len(table)
        pd.testing.assert_frame_equal(mine.curves, renamed.curves)
        pd.testing.assert_frame_equal(mine.recommended, renamed.recommended)
    with pytest.raises(SpaceError, match="^the table: constraints: constraint "
                                         "\"block < 'x'\" compares factor 'block'"):
        tune_eval(df, "y", **kw, constraints=["block < 'x'"])
    # the label says where the error is: it said 'constraints:' with none given
    with pytest.raises(SpaceError, match=r"^the table: factors\[0\]: name 'a\\x01'"):
        tune_eval(df.rename(columns={"a": "a\x01"}), "y", **kw)


def test_tune_eval_help_names_every_strategy_it_accepts(storlab_main: Any,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """--strategies help left out auto, gp, nsga2 and optuna-tpe-norepeat."""
    import re

    from storlab.tune.evaluate import BASELINES
    from storlab.tune.strategies import STRATEGIES

    monkeypatch.setenv("COLUMNS", "300")
    code, out, err = storlab_main("tune-eval", "--help")
    assert code == 0, err
    text = " ".join(out.split())
    for name in ("storlab", *STRATEGIES, *BASELINES):
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), name


def test_table_says_the_confirmation_runs_that_failed() -> None:
    """A candidate whose confirmation runs failed (2 of 3) showed as "runs 1" in the tune
    table and the report; `confirm` says "1 (2 failed)", and so does the table now. A failed
    search run is not among the confirmation runs the row's mean is drawn from."""
    from storlab.tune.result import TuneResult
    from storlab.tune.strategies import Objective

    a, b, c = {"k": 1}, {"k": 2}, {"k": 3}
    hist = _history([("screen", a, 50.0), ("tune", c, None), ("tune", c, 90.0),
                     ("tune", b, 100.0), ("confirm", b, 99.0), ("confirm", b, None),
                     ("confirm", b, None), ("confirm", c, 91.0), ("confirm", c, 92.0),
                     ("confirm", a, 49.0), ("confirm", a, None)])
    res = TuneResult([Objective("y")], hist, "screen-then-tune", 11, confirm_runs=3)
    runs = {r["k"]: r["runs"] for r in res.table().to_dict("records")}
    assert runs == {2: "1 (2 failed)", 3: "2", 1: "1 (1 failed)"}
    # the JSON says the same beside runs, and over all runs beside runs_all (c failed once
    # in the search, not in its confirmation)
    failed = {e["config"]["k"]: (e["failed_runs"], e["runs"], e["failed_runs_all"],
                                 e["runs_all"]) for e in res.to_dict()["candidates"]}
    assert failed[2] == (2, 1, 2, 2) and failed[3] == (0, 2, 1, 3)
    # a declared baseline not run yet (interrupted) has no failed runs to count
    res = TuneResult([Objective("y")], hist, "screen-then-tune", 11, baseline_config={"k": 9},
                     confirm_runs=3)
    assert res.to_dict()["baseline_failed_runs"] is None


@pytest.mark.parametrize("goal,a,b,verdict,change", [
    # 997 against -167 under maximize: better, and no percentage over a negative mean
    # (the ratio read -696 %, worse)
    ("maximize", [996.0, 997.0, 998.0], [-168.0, -167.0, -166.0], "better", None),
    ("maximize", [1004.0, 1005.0, 1006.0], [-1.0, 0.0, 1.0], "better", None),  # "+nan %"
    ("minimize", [996.0, 997.0, 998.0], [-168.0, -167.0, -166.0], "worse", None),
    ("minimize", [-20.0, -21.0, -19.0], [-9.0, -10.0, -11.0], "better", None),
    ("maximize", [199.0, 200.0, 201.0], [99.0, 100.0, 101.0], "better", 1.0),
])
def test_comparison_verdict_comes_from_the_means_not_the_ratio(
        goal: str, a: list[float], b: list[float], verdict: str, change: float | None) -> None:
    from storlab.tune.result import WelchComparison, change_text

    c = WelchComparison("y", goal, a, b)
    d = c.to_dict()
    assert d["verdict"].startswith(verdict)
    assert d["difference"] == pytest.approx(sum(a) / 3 - sum(b) / 3)
    if change is None:
        assert d["change"] is None
        text = change_text(d["change"], d["difference"], "ops/s")
        assert "%" not in text.split("(")[0] and "ops/s" in text and "nan" not in text
    else:
        assert d["change"] == pytest.approx(change)
        assert change_text(d["change"], d["difference"]) == "+100.0 %"


def test_confirm_against_a_negative_reference_says_better(tmp_path: Path, cli: Any) -> None:
    """The terminal line of `confirm` against a reference whose mean is negative."""
    p = campaign(tmp_path, budget=30)
    (tmp_path / "oracle.py").write_text(ORACLE.replace('print(json.dumps({"y": y',
                                                       'print(json.dumps({"y": y - 150'))
    r = cli("confirm", str(p), "--config", "engine=libaio,depth=16,bs=64k,x1=1,x2=0,sched=none",
            "--against", REF, "--runs", "2", "--quiet")
    line = [ln for ln in r.stdout.splitlines() if "vs reference" in ln][0]
    assert "+113 " in line and "better" in line and "%" not in line.split("(")[0]


def test_a_dominant_real_factor_is_searched(tmp_path: Path, tune_json: Any) -> None:
    """Planted: y = 1000 - 2000 (d - 0.7)^2 - 5 (a - 2)^2, d a `real` factor (no listed
    levels), b, c, e null. Local steps move only listed levels, so d stayed at its best
    screened value (0.628, y 989.7) for every search run; a stall now hands the asks to
    TPE, which moves d."""
    (tmp_path / "f.py").write_text(
        "import sys\na, b, c, d, e = map(float, sys.argv[1:6])\n"
        "print(f'tput: {1000 - 2000 * (d - 0.7) ** 2 - 5 * (a - 2) ** 2:.4f}')\n")
    spec = {"name": "realfactor",
            "space": {"factors": [{"name": n, "kind": "integer", "range": [0, 4]}
                                  for n in "abc"]
                      + [{"name": "d", "kind": "real", "range": [0, 1]},
                         {"name": "e", "kind": "integer", "range": [0, 4]}],
                      "responses": [{"name": "tput", "unit": "ops/s", "goal": "maximize"}]},
            "design": {"kind": "tune", "budget": 32, "strategy": "screen-then-tune"},
            "runner": {"type": "command", "options": {
                "command": [sys.executable, str(tmp_path / "f.py"), "{a}", "{b}", "{c}", "{d}",
                            "{e}"],
                "regex_metrics": [r"tput: (?P<tput>[-\d.]+)"]}},
            "seed": 11}
    p = tmp_path / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tune_json(p)
    ds = {h["config"]["d"] for h in out["history"] if h["phase"] == "tune"}
    assert len(ds) > 3  # the search moved d
    assert abs(out["best"]["config"]["d"] - 0.7) < 0.05
    assert out["best"]["value"] > 990  # within 1 % (a one step off 2 costs 5)


def test_every_warmup_is_stored_and_counted(tmp_path: Path, tune_json: Any) -> None:
    """tune3: warm-ups were keyed `c<c>-w1`, so a configuration warmed again before its
    confirmation runs replaced its screening warm-up's record: 14 ran, 11 stored and said.
    Now each is keyed by the measured run it precedes; the count is what ran."""
    p = campaign(tmp_path, budget=14)
    log = tmp_path / "calls.log"
    (tmp_path / "oracle.py").write_text(
        f"open({str(log)!r}, 'a').write('x\\n')\n" + ORACLE)
    log.write_text("")  # the one file outside its run directory the oracle may write
    p.write_text(yaml.safe_dump({**yaml.safe_load(p.read_text()), "warmup": 1,
                                 "sandbox": {"writable": ["calls.log"]}}))
    out = tune_json(p)
    calls = len(log.read_text().splitlines())
    confirmed = {json.dumps(h["config"], sort_keys=True) for h in out["history"]
                 if h["phase"] == "confirm"}
    assert confirmed  # configurations warmed in two batches
    assert out["runs"] == 14 and out["warmup_runs"] == calls - 14
    con = sqlite3.connect(tmp_path / "campaign.db")
    n_warm = con.execute("SELECT count(*) FROM runs WHERE warmup = 1").fetchone()[0]
    con.close()
    assert n_warm == calls - 14


def test_a_tuned_fixed_design_is_read_with_store(tmp_path: Path, storlab_main: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """After `storlab tune --budget N` of a fixed-design file, status, results and report of
    the file said nothing ('0 of 120 measured runs finished', 'no store yet'): the runs are
    in NAME-tune.db. They say so in one line, and read it with --store."""
    monkeypatch.chdir(tmp_path)
    p = campaign(tmp_path)
    spec = yaml.safe_load(p.read_text())
    spec["space"]["constraints"] = []  # a full design cannot skip runs
    p.write_text(yaml.safe_dump({**spec, "design": {"kind": "full"}}))
    code, _, err = storlab_main("tune", p, "--budget", "6", "--strategy", "random", "--quiet")
    assert code == 0, err
    hint = "add --store tune-tune.db"
    code, out, err = storlab_main("status", p)
    assert code == 0 and hint in " ".join(out.split())
    code, out, err = storlab_main("results", p)
    assert code == 2 and hint in err and len(err.strip().splitlines()) == 1
    code, out, err = storlab_main("status", p, "--store", "tune-tune.db", "--json")
    assert code == 0, err
    assert json.loads(out)["counts"] == [{"status": "ok", "runs": 6}]
    code, out, err = storlab_main("results", p, "--store", "tune-tune.db", "--level", "run",
                                  "--json")
    assert code == 0 and len(json.loads(out)) == 6
    code, out, err = storlab_main("report", p, "--store", "tune-tune.db", "-o",
                                  tmp_path / "r.html")
    assert code == 0, err
    assert "Tuning" in out and "6 of 6" in (tmp_path / "r.html").read_text()


def test_tuning_plot_axes_name_the_declared_units() -> None:
    """The axes read 'tput ↑ better' with no unit; every axis names its unit."""
    from storlab.tune.result import TuneResult
    from storlab.tune.strategies import Objective

    a, b = {"k": 1}, {"k": 2}
    hist = _history([("screen", a, 50.0), ("screen", b, 100.0), ("confirm", b, 99.0)])
    for o in hist:
        o.metrics["lat"] = 1000.0 / o.metrics["y"]
    res = TuneResult([Objective("y"), Objective("lat", "minimize")], hist, "nsga2", 3,
                     units={"y": "ops/s", "lat": "ms"})
    fig = res.plot()
    left, right = fig.axes[:2]
    assert left.get_ylabel() == "y (ops/s) ↑ better"
    assert right.get_xlabel() == "y (ops/s) → better"
    assert right.get_ylabel().startswith("latency (ms)")


def test_store_of_another_campaign_file_is_refused(tmp_path: Path, storlab_main: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Review LOW-4: `results a.yaml --store ../b/campaign.db` printed b's runs as a's. The
    store names the campaign file that wrote it (meta `campaign`): another one is refused
    in one line, exit 2; a store that names none is read as before."""
    monkeypatch.chdir(tmp_path)
    a, b = (campaign(tmp_path / d, budget=6, strategy="random") for d in "ab")
    code, _, err = storlab_main("tune", b, "--quiet")
    assert code == 0, err
    for cmd in ("status", "results", "report"):
        code, out, err = storlab_main(cmd, a, "--store", "../b/campaign.db")
        assert code == 2 and "another campaign file" in err, (cmd, out, err)
        assert len(err.strip().splitlines()) == 1
    # a copied campaign directory's store names the original file: its own store is read
    shutil.copytree(tmp_path / "b", tmp_path / "c")
    code, out, err = storlab_main("status", tmp_path / "c" / "tune.yaml", "--store",
                                  "campaign.db", "--json")
    assert code == 0 and json.loads(out)["counts"] == [{"status": "ok", "runs": 6}], err
    code, out, err = storlab_main("status", tmp_path / "c" / "tune.yaml", "--store",
                                  "../c/campaign.db", "--json")  # the same store, via ..
    assert code == 0 and json.loads(out)["counts"] == [{"status": "ok", "runs": 6}], err
    con = sqlite3.connect(tmp_path / "b" / "campaign.db")
    con.execute("DELETE FROM meta WHERE key = 'campaign'")
    con.commit()
    con.close()
    code, out, err = storlab_main("results", a, "--store", "../b/campaign.db", "--level",
                                  "run", "--json")
    assert code == 0 and len(json.loads(out)) == 6, err


def test_a_warmup_cut_off_under_an_old_key_is_not_counted(tmp_path: Path,
                                                           tune_json: Any) -> None:
    """Review LOW-1: a warm-up killed while running under the old key `c<c>-w<i>` (a store
    written by an earlier storlab) is never reused under the new `c<c>-r<r>-w<i>` keys, and
    tune counted it in warmup_runs. Only warm-ups that finished or failed count."""
    p = campaign(tmp_path, budget=11)
    p.write_text(yaml.safe_dump({**yaml.safe_load(p.read_text()), "warmup": 1}))
    first = tune_json(p)
    con = sqlite3.connect(tmp_path / "campaign.db")
    con.execute("INSERT INTO runs (key, seq, config_id, repetition, warmup, config, status) "
                "SELECT 'c1-w1', seq, config_id, 0, 1, config, 'running' FROM runs "
                "WHERE key = 'c1-r1'")
    con.commit()
    con.close()
    again = tune_json(p)
    assert again["runs"] == first["runs"] == 11
    assert again["warmup_runs"] == first["warmup_runs"] > 0


def test_a_design_given_another_source_keeps_none_of_the_fixed_designs_options() -> None:
    """Review LOW-3: tune (a fixed file tuned), confirm (its configurations) and a tuning
    store read with --store each wrote the same reset by hand. One helper; every option of
    a generated design (any field neither a source, the seed nor a tuning option) is back
    to its default, so a new one cannot be forgotten at one of the three places."""
    from storlab.campaign.spec import DesignSpec

    fixed = DesignSpec(kind="fractional", runs=8, resolution=4, generators=["D=ABC"],
                       center=2, replicates=2, fold="full", optimize="d", seed=7)
    blank = DesignSpec(kind="full")
    tuning = {"budget", "strategy", "objectives", "screen_runs", "confirm_runs",
              "confirm_top", "stall", "baseline"}
    generated = set(DesignSpec.model_fields) - tuning - {"kind", "csv", "configs", "seed"}
    assert generated  # runs, resolution, generators, center, replicates, fold, optimize
    tuned = fixed.with_source(kind="tune", budget=20)
    listed = fixed.with_source(configs=[{"a": 1}], budget=None)
    for d in (tuned, listed):
        assert {f: getattr(d, f) for f in generated} == {f: getattr(blank, f)
                                                          for f in generated}
        assert d.seed == 7 and DesignSpec.model_validate(d.model_dump()) == d
    assert (tuned.kind, tuned.budget, tuned.configs) == ("tune", 20, None)
    assert (listed.kind, listed.configs) == (None, [{"a": 1}])


def test_all_runs_mean_is_written_as_the_value_beside_it() -> None:
    """The report wrote the confirmation runs' mean as '1.2 MB/s' and, beside it, the mean
    of all runs as '1,233,333' (thousands separators, no unit). Both are quantities now."""
    from storlab.report.html import fmt_num
    from storlab.tune.result import TuneResult
    from storlab.tune.strategies import Objective

    a, b = {"k": 1}, {"k": 2}
    hist = _history([("screen", a, 50e3), ("tune", b, 1.3e6), ("confirm", b, 1.2e6),
                     ("confirm", a, 49e3), ("confirm", b, 1.2e6), ("confirm", a, 51e3)])
    res = TuneResult([Objective("y")], hist, "screen-then-tune", 6, baseline_config=a,
                     confirm_runs=3)
    from storlab.report import sections

    e = res.to_dict()["best"]
    text = str(sections._measured(e, "B/s"))  # noqa: SLF001
    assert "(all 3 runs: <b>1.23M</b>B/s)" in text  # as the value: <b>1.2M</b>B/s
    assert fmt_num(e["value_all_runs"]) not in text  # not '1,233,333'


def test_the_terminal_writes_the_all_runs_mean_with_its_unit(tmp_path: Path, cli: Any) -> None:
    """The terminal printed the confirmation runs' mean with its unit and, beside it, the
    mean of all runs as a bare number ('(all 4 runs: 212.5)'); the report writes both as
    quantities, and so does the terminal now."""
    p = campaign(tmp_path, budget=20)
    spec = yaml.safe_load(p.read_text())
    spec["space"]["responses"][0]["unit"] = "MB/s"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    text = " ".join(cli("tune", str(p), "--quiet").stdout.split())
    line = re.search(r"y ([\d.]+) \+/- [\d.]+ MB/s over \d+ confirmation runs "
                     r"\(all \d+ runs: ([\d.]+) MB/s\)", text)
    assert line, text


def test_the_terminal_writes_no_unit_beside_n_a() -> None:
    """A mean that is not a number printed as 'n/a MB/s'; now 'n/a' alone."""
    from storlab.commands.tune import _quantity

    assert _quantity(float("nan"), 1.0, "MB/s") == "n/a"
    assert _quantity(None, None, "MB/s") == "n/a"
    assert _quantity(4.5, 0.25, "MB/s") == "4.5 +/- 0.25 MB/s"
    assert _quantity(4.5, None, "") == "4.5"


def test_tune_and_confirm_exit_1_when_their_runs_failed(tmp_path: Path, cli: Any,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """`tune` said "nothing to recommend" and exited 0 with every run failed, `confirm`
    exited 2 (bad input) when no run gave the response: both now exit 1, as `storlab run`
    does, saying how many runs failed and how to see why; some failed: 0, but 1 with
    --fail-on-error."""
    monkeypatch.chdir(tmp_path)
    broken = campaign(tmp_path / "b", budget=6, strategy="random")
    spec = yaml.safe_load(broken.read_text())
    spec["runner"]["options"]["command"] = [sys.executable, "-c",
                                            "import sys; sys.exit('no such device')"]
    broken.write_text(yaml.safe_dump(spec, sort_keys=False))
    r = cli("tune", str(broken), "--quiet", check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    last = " ".join(r.stdout.strip().splitlines()[-1].split())
    assert re.match(r"all \d+ runs failed \(see why: storlab status ", last), r.stdout
    assert "--store" in last and last.endswith("--failures)"), last
    cfg = "engine=libaio,depth=16,bs=64k,x1=1,x2=0,sched=none"
    r = cli("confirm", str(broken), "--config", cfg, "--against", REF, "-n", "2", "--quiet",
            check=False)
    assert r.returncode == 1 and "no run produced 'y'" in r.stderr, r.stdout + r.stderr
    # some runs fail (bfq, with ORACLE_FAIL): 0, and 1 with --fail-on-error
    half = campaign(tmp_path / "h", env={"ORACLE_FAIL": "1"})
    bfq = "engine=libaio,depth=16,bs=64k,x1=1,x2=0,sched=bfq"
    r = cli("confirm", str(half), "--config", bfq, "--against", REF, "-n", "2", "--quiet",
            check=False)
    assert r.returncode == 0 and "2 of 4 runs failed" in " ".join(r.stdout.split()), \
        r.stdout + r.stderr
    r = cli("confirm", str(half), "--config", bfq, "--against", REF, "-n", "2", "--quiet",
            "--store", "again.db", "--fail-on-error", check=False)
    assert r.returncode == 1 and "2 of 4 runs failed" in " ".join(r.stdout.split()), \
        r.stdout + r.stderr
