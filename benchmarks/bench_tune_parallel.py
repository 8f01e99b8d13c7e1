"""Wall time of a tuning with N runs in flight against one at a time, on the same campaign,
measured in the same invocation, through the real CLI (`storlab tune --json`).

The campaign's runs are a command that sleeps `--sleep` seconds (2 by default: a short
benchmark), then prints a planted function of six storage-like factors (an engine x depth
interaction, a knee in block size and jobs) times lognormal noise (`--noise`, sigma 0.05)
drawn as a function of (seed, configuration, that configuration's k-th run): a tuning
repeats exactly, and the two executors of a seed see the same draws, so their
recommendations are compared seed by seed. Sleeping needs no CPU, so the figure holds on a
small machine; with `--sleep 0` the recommendations are the same (what the strategy is
told follows the plan's order, not the timing) and many seeds take minutes. For each
seed, `storlab tune --budget B --seed S` runs with `--executor sequential` and with
`--executor parallel:N`; it prints the wall time of each (the command's, start to the
confirmed answer), the true value of the recommended configuration as a share of the
optimum (the planted function without noise), and then the ratio of the total wall times
(target: parallel / sequential <= 0.35 with N = 4; also from the first run's start to the
last run's end, without the command's start-up), the load average at the start and the
end (the machine's other work slows the start-up's imports, which count in both), and
the two recommendation qualities, alone and paired by seed (McNemar's exact test on
"within 5 % of the optimum", a sign test on the true values).

    .venv/bin/python benchmarks/bench_tune_parallel.py [--seeds 1,2,3] [--budget 40]
        [--workers 4] [--sleep 2] [--noise 0.05]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".bench-out"

LEVELS = {
    "engine": ["psync", "libaio", "io_uring"],
    "depth": [1, 4, 16, 64],
    "bs": ["4k", "16k", "64k", "256k"],
    "jobs": [1, 2, 4, 8],
    "direct": [0, 1],
    "sched": ["none", "mq-deadline", "bfq"],
}

# The planted function, as text: the oracle command runs it, and `truth` is the same code
# here. Multiplicative effects; the queue depth pays only with an asynchronous engine.
MODEL = '''
def value(cfg):
    y = 100.0 * {"psync": 1.0, "libaio": 1.3, "io_uring": 1.4}[cfg["engine"]]
    if cfg["engine"] != "psync":
        y *= {"1": 1.0, "4": 1.3, "16": 1.5, "64": 1.45}[cfg["depth"]]
    y *= {"4k": 1.0, "16k": 1.15, "64k": 1.25, "256k": 1.2}[cfg["bs"]]
    y *= {"1": 1.0, "2": 1.1, "4": 1.15, "8": 1.05}[cfg["jobs"]]
    y *= {"0": 1.0, "1": 1.08}[cfg["direct"]]
    return y * {"none": 1.03, "mq-deadline": 1.0, "bfq": 0.9}[cfg["sched"]]
'''
# The noise is a function of (seed, configuration, that configuration's k-th run: the k of
# the run's directory, c<id>-r<k>, which storlab names after the run's key), so a
# tuning is repeatable and the two executors get paired draws: the k-th run of a
# configuration measures the same under both (random.Random seeded with text hashes it
# with SHA-512, whatever PYTHONHASHSEED is).
ORACLE = MODEL + r'''
import json, math, os, random, sys, time
cfg = dict(a.split("=", 1) for a in sys.argv[1:])
rep = cfg.pop("_run").rsplit("-r", 1)[1]  # the run directory, c<id>-r<k>
time.sleep(float(os.environ["SLEEP"]))
draw = "|".join([os.environ["NOISE_SEED"], *(f"{k}={cfg[k]}" for k in sorted(cfg)), rep])
y = value(cfg) * math.exp(random.Random(draw).gauss(0.0, float(os.environ["NOISE"])))
print(json.dumps({"mbps": y}))
'''
_NS: dict[str, object] = {}
exec(MODEL, _NS)  # noqa: S102 (the text above)


def truth(cfg: dict[str, object]) -> float:
    """The planted function without noise (what the oracle computes before the noise)."""
    return float(_NS["value"]({k: str(v) for k, v in cfg.items()}))  # type: ignore[operator]


def write_campaign(d: Path, budget: int, sleep: float, noise: float, seed: int) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "oracle.py").write_text(ORACLE)
    factors = [{"name": n, "kind": "categorical" if isinstance(v[0], str) else "ordinal",
                "values": v} for n, v in LEVELS.items()]
    spec = {
        "name": "parallel-bench",
        "space": {"factors": factors, "responses": [{"name": "mbps", "goal": "maximize"}]},
        "design": {"kind": "tune", "budget": budget},
        "runner": {"type": "command", "options": {
            "command": [sys.executable, "-S", str(d / "oracle.py"),
                        *[f"{n}={{{n}}}" for n in LEVELS], "_run={workdir}"],
            "json_metrics": {"mbps": "mbps"},
            "env": {"SLEEP": str(sleep), "NOISE": str(noise), "NOISE_SEED": str(seed)}}},
        "seed": 0,
        "timeout": 120,
    }
    p = d / "tune.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def span(store: Path) -> float:
    """Seconds from the first run's start to the last run's end (the tuning itself, without
    the command's start-up and the result's computation after it)."""
    con = sqlite3.connect(store)
    try:
        first, last = con.execute("SELECT MIN(started), MAX(ended) FROM runs").fetchone()
    finally:
        con.close()
    return float(last - first)


def tune(path: Path, seed: int, executor: str) -> tuple[float, dict]:
    """(wall seconds to the confirmed answer, the JSON result) of one `storlab tune`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep +
           os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "storlab", "tune", str(path), "--seed",
                        str(seed), "--executor", executor, "--json", "--quiet"],
                       capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"storlab tune failed ({executor}, seed {seed}): {r.stderr.strip()}")
    return wall, json.loads(r.stdout)


def paired(seq: list[float], par: list[float], within: float = 0.95) -> dict[str, float]:
    """The two executors' recommendations compared seed by seed (each seed's pair saw the
    same noise draws): McNemar's exact test on "within 5 % of the optimum" (a two-sided
    binomial test on the seeds where only one executor got there) and a sign test on the
    true values (the seeds where they differ)."""
    from scipy.stats import binomtest

    hit_s = [x >= within for x in seq]
    hit_p = [x >= within for x in par]
    b = sum(s and not p for s, p in zip(hit_s, hit_p))
    c = sum(p and not s for s, p in zip(hit_s, hit_p))
    up = sum(p > s + 1e-12 for s, p in zip(seq, par))
    down = sum(p < s - 1e-12 for s, p in zip(seq, par))
    return {"both": sum(s and p for s, p in zip(hit_s, hit_p)), "seq_only": b,
            "par_only": c, "neither": sum(not s and not p for s, p in zip(hit_s, hit_p)),
            "mcnemar_p": binomtest(b, b + c).pvalue if b + c else 1.0,
            "par_higher": up, "seq_higher": down, "equal": len(seq) - up - down,
            "sign_p": binomtest(up, up + down).pvalue if up + down else 1.0,
            "mean_diff": sum(p - s for s, p in zip(seq, par)) / max(1, len(seq))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated tuning seeds")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--sleep", type=float, default=2.0, help="seconds per run")
    ap.add_argument("--noise", type=float, default=0.05, help="lognormal sigma per run")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    optimum = max(truth(dict(zip(LEVELS, c))) for c in itertools.product(*LEVELS.values()))
    par = f"parallel:{args.workers}"
    rows = []
    load0 = os.getloadavg()
    print(f"{len(seeds)} seeds, budget {args.budget}, {args.sleep:g} s per run, noise "
          f"{args.noise:g}; optimum {optimum:.1f} (planted); load average "
          f"{load0[0]:.1f} (1 min), {load0[1]:.1f} (5 min)")
    print(f"{'seed':>4s} {'executor':>12s} {'wall s':>8s} {'runs s':>8s} {'runs':>5s} "
          f"{'true value of the recommendation':>34s}")
    with tempfile.TemporaryDirectory(prefix="bench-tune-parallel-") as tmp:
        for seed in seeds:
            for ex in ("sequential", par):
                d = Path(tmp) / f"s{seed}-{ex.replace(':', '')}"
                wall, out = tune(write_campaign(d, args.budget, args.sleep, args.noise,
                                                seed), seed, ex)
                share = truth(out["best"]["config"]) / optimum
                rows.append({"seed": seed, "executor": ex, "wall": wall,
                             "span": span(d / "campaign.db"), "runs": len(out["history"]),
                             "share": share, "config": out["best"]["config"]})
                print(f"{seed:4d} {ex:>12s} {wall:8.1f} {rows[-1]['span']:8.1f} "
                      f"{len(out['history']):5d} {share:33.1%}", flush=True)
    seq = [r for r in rows if r["executor"] == "sequential"]
    pll = [r for r in rows if r["executor"] == par]
    ratio = sum(r["wall"] for r in pll) / sum(r["wall"] for r in seq)
    ratio_span = sum(r["span"] for r in pll) / sum(r["span"] for r in seq)
    q_seq = sum(r["share"] for r in seq) / len(seq)
    q_par = sum(r["share"] for r in pll) / len(pll)
    load1 = os.getloadavg()
    print(f"wall time {par} / sequential: {ratio:.2f} (target <= 0.35: "
          f"{'MET' if ratio <= 0.35 else 'NOT MET'}); first run to last run only: "
          f"{ratio_span:.2f} ({'MET' if ratio_span <= 0.35 else 'NOT MET'}); load average "
          f"at the end {load1[0]:.1f} (1 min), {load1[1]:.1f} (5 min)")
    print(f"true value of the recommendation, mean share of the optimum: sequential "
          f"{q_seq:.1%}, {par} {q_par:.1%}; within 5 %: sequential "
          f"{sum(r['share'] >= 0.95 for r in seq)}/{len(seq)}, {par} "
          f"{sum(r['share'] >= 0.95 for r in pll)}/{len(pll)}")
    pairs = paired([r["share"] for r in seq], [r["share"] for r in pll])
    print(f"paired by seed (the same noise draws): within 5 % both {pairs['both']}, "
          f"sequential only {pairs['seq_only']}, {par} only {pairs['par_only']}, neither "
          f"{pairs['neither']} (McNemar's exact test p = {pairs['mcnemar_p']:.3g}); true "
          f"value higher with {par} in {pairs['par_higher']}, with sequential in "
          f"{pairs['seq_higher']}, equal in {pairs['equal']} (sign test p = "
          f"{pairs['sign_p']:.3g}); mean difference {pairs['mean_diff']:+.2%} of the "
          "optimum")
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_tune_parallel.json").write_text(json.dumps(
        {"args": vars(args), "optimum": optimum, "rows": rows, "ratio": ratio,
         "ratio_runs_only": ratio_span, "paired": pairs, "load_average": [load0, load1]},
        indent=1))
    print(f"numbers: {OUT / 'bench_tune_parallel.json'}")


if __name__ == "__main__":
    main()
