"""Same output before and after a refactor: run a fixed list of deterministic storlab
commands on the repository's examples and data and compare their visible text and JSON.

    python scripts/same_output.py --save DIR    # record (e.g. on the base commit)
    python scripts/same_output.py --check DIR   # rerun and diff; exit 1 on any difference

The storlab that runs is whichever `python -m storlab` finds (set PYTHONPATH to a tree's
`src` to record another tree). Each command's stdout and the JSON/CSV/text files it writes
are saved as `NAME.out`, `NAME.<file>`; what changes from run to run for reasons other than
the code (the temporary directory's path, wall-clock times, run durations) is normalised
away, and the commands with a seed use a fixed one.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
DATA = "benchmarks/data"
CEPH = "examples/ceph-doe"

SIM_SPACE = """\
name: sim-small
factors:
  - {name: clients, kind: integer, range: [16, 64]}
  - {name: object_workers, kind: integer, range: [7, 21]}
  - {name: object_size, kind: categorical, values: [16KiB, 1MiB]}
responses:
  - {name: ops_s, goal: maximize}
"""

SIM_CAMPAIGN = """\
name: sim-small
space: space.yaml
design: {kind: full}
runner:
  type: simulator
  options: {cluster: %(root)s/examples/sim/small.yaml, requests: 1500}
repetitions: 1
seed: 7
"""

# name -> argv after `storlab`; {tmp} is the command's own output directory.
COMMANDS: list[tuple[str, list[str]]] = [
    ("design_pb", ["design", "examples/spaces/fio-pb.yaml", "--kind", "pb", "--seed", "3",
                   "-o", "{tmp}/design.csv"]),
    ("design_pb_json", ["design", "examples/spaces/fio-pb.yaml", "--kind", "pb", "--seed", "3",
                        "--json"]),
    ("design_frac", ["design", f"{CEPH}/space.yaml", "--kind", "fractional", "-r", "V",
                     "--center", "2", "--seed", "5"]),
    ("design_frac_json", ["design", "--factors", "7", "--kind", "fractional", "-r", "IV",
                          "--foldover", "all", "--json", "--no-randomize"]),
    ("design_lhs", ["design", f"{CEPH}/space.yaml", "--kind", "lhs", "-n", "12", "--seed", "1",
                    "--json"]),
    ("design_full", ["design", "--factors", "3", "--kind", "full", "--replicates", "2",
                     "--seed", "9"]),
    ("follow_up", ["design", f"{CEPH}/space.yaml", "--follow-up", f"{CEPH}/out/results.csv",
                   "-y", "write_iops", "--top", "2", "--seed", "4"]),
    ("analyze_ceph", ["analyze", f"{CEPH}/out/results.csv", "-y", "write_iops",
                      "--space", f"{CEPH}/space.yaml"]),
    ("analyze_ceph_json", ["analyze", f"{CEPH}/out/results.csv", "-y", "write_iops",
                           "--space", f"{CEPH}/space.yaml", "--json", "-o", "{tmp}/a.json"]),
    ("analyze_ceph_lat", ["analyze", f"{CEPH}/out/results.csv", "-y", "write_clat_mean_us",
                          "--space", f"{CEPH}/space.yaml", "--transform", "log", "--order", "3",
                          "--json"]),
    ("analyze_bdbc", ["analyze", f"{DATA}/bdbc.csv", "-y", "PERF", "--factors",
                      "HAVE_CRYPTO,HAVE_HASH,HAVE_REPLICATION,HAVE_VERIFY,HAVE_SEQUENCE",
                      "--goal", "minimize"]),
    ("analyze_bdbc_json", ["analyze", f"{DATA}/bdbc.csv", "-y", "PERF", "--factors",
                           "HAVE_CRYPTO,HAVE_HASH,HAVE_STATISTICS,DIAGNOSTIC", "--json"]),
    ("importance_bdbc", ["importance", f"{DATA}/bdbc.csv", "-y", "PERF", "--goal", "minimize"]),
    ("importance_bdbc_json", ["importance", f"{DATA}/bdbc.csv", "-y", "PERF", "--json",
                              "--stop", "top:4", "--compare"]),
    ("importance_pg", ["importance", f"{DATA}/postgresql.csv", "-y", "Performance-",
                       "--compare"]),
    ("importance_ceph", ["importance", f"{CEPH}/out/results.csv", "-y", "write_iops",
                         "--space", f"{CEPH}/space.yaml", "--json"]),
    ("importance_ceph_text", ["importance", f"{CEPH}/out/results.csv", "-y", "write_iops",
                              "--params", "osd_op_num_shards,ms_async_op_threads,"
                              "objecter_inflight_ops", "--stop", "rsd:0.05"]),
    ("importance_eval", ["importance-eval", f"{DATA}/bdbj.csv", "-y", "PERF",
                         "--fractions", "0.2,0.5", "-n", "3", "--seed", "1", "-j", "1",
                         "--json"]),
    ("coverage", ["coverage", f"{CEPH}/out/results.csv", "--by", "osd_op_num_shards",
                  "--metrics", "write_iops,write_clat_mean_us,write_bw_bytes", "--seed", "0",
                  "--json"]),
    ("report_json", ["report", f"{CEPH}/out/results.csv", "--space", f"{CEPH}/space.yaml",
                     "-o", "{tmp}/report.html", "--json"]),
    ("simulate", ["simulate", "examples/sim/small.yaml", "--requests", "3000"]),
    ("simulate_json", ["simulate", "examples/sim/small.yaml", "--requests", "3000",
                       "--set", "clients=64", "--json"]),
    ("simulate_analytic", ["simulate", "examples/sim/small.yaml", "--analytic", "--json"]),
    ("simulate_python", ["simulate", "examples/sim/small.yaml", "--requests", "1500",
                         "--backend", "python", "--json"]),
    ("simulate_sweep", ["simulate", "examples/sim/small.yaml", "--requests", "1500",
                        "--sweep", "object_workers=14,28", "--workers", "1", "-q", "--json",
                        # a fresh campaign each time: the default one in the working
                        # directory would be resumed, answering from an older storlab
                        "--campaign", "{tmp}/sweep"]),
    ("estimate_fit", ["estimate", "fit", "examples/estimate-quiet/out/runs.csv", "--json"]),
    ("estimate_predict_text", ["estimate", "predict", "-m",
                               "examples/estimate-quiet/out/model.json", "--read-pct", "30",
                               "-s", "4k:0.8,1m:0.2"]),
    ("estimate_fit_ceph", ["estimate", "fit", "examples/estimate-ceph/out/runs.csv"]),
    ("estimate_predict", ["estimate", "predict", "-m", "examples/swift-rw-mix/out/model.json",
                          "--read-pct", "70", "-s", "16k:0.5,256k:0.5", "--json"]),
    ("tune_eval", ["tune-eval", f"{DATA}/bdbj.csv", "-y", "PERF", "--budget", "16",
                   "--repeats", "2", "--seed", "1", "--strategies", "random,storlab",
                   "--json"]),
    # A small simulated campaign: the run loop, the store and the results export.
    ("sim_run", ["run", "{tmp}/campaign.yaml", "-q"]),
    ("sim_results", ["results", "{tmp}/campaign.yaml", "-o", "{tmp}/results.csv"]),
    ("sim_status", ["status", "{tmp}/campaign.yaml"]),
    ("sim_analyze", ["analyze", "{tmp}/campaign.yaml", "-y", "ops_s", "--json"]),
    ("sim_importance", ["importance", "{tmp}/campaign.yaml", "-y", "lat_mean_ms",
                        "--goal", "minimize"]),
]

# Values that change from run to run whatever the code: clocks, durations, paths, hosts.
VOLATILE_KEY = re.compile(r"^(started|finished|timestamp|created|host|hostname|pid|seconds)$|"
                          r"duration|elapsed|wall")
VOLATILE_TEXT = [
    (re.compile(r"\d{4}-\d\d-\d\dT?\s?\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(s|ms|seconds)\b"), "<secs>"),
]


def _normal_json(value, key: str = ""):
    if isinstance(value, dict):
        return {k: ("<volatile>" if VOLATILE_KEY.search(str(k)) and not isinstance(v, (dict, list))
                    else _normal_json(v, str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal_json(v, key) for v in value]
    if isinstance(value, float):
        return float(f"{value:.10g}")
    return value


def normalise(text: str, tmp: str, kind: str) -> str:
    """Text with the temporary path, clocks and durations replaced by placeholders."""
    text = text.replace(tmp, "{tmp}").replace(str(ROOT), "{root}")
    if kind == "json":
        try:
            return json.dumps(_normal_json(json.loads(text)), indent=1, sort_keys=True) + "\n"
        except ValueError:
            pass
    if kind == "csv":
        from io import StringIO
        frame = pd.read_csv(StringIO(text))
        keep = [c for c in frame.columns if not VOLATILE_KEY.search(str(c))]
        return frame[keep].to_csv(index=False, float_format="%.10g")
    for pattern, placeholder in VOLATILE_TEXT:
        text = pattern.sub(placeholder, text)
    return text


def renormalise(name: str, text: str) -> str:
    """`text` as saved, normalised again (normalising is idempotent), so that a rule added
    after a baseline was saved applies to it too."""
    head, _, body = text.partition("\n") if text.startswith("exit ") else ("", "", text)
    kind = "csv" if name.endswith(".csv") else "text"
    try:
        json.loads(body)
        kind = "json"
    except ValueError:
        pass
    return (head + "\n" if head else "") + normalise(body, "{tmp}", kind)


def run_all() -> dict[str, str]:
    """Every command's normalised outputs, by file name."""
    outputs: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="same-output-") as base:
        sim = Path(base, "sim")
        sim.mkdir()
        (sim / "space.yaml").write_text(SIM_SPACE)
        (sim / "campaign.yaml").write_text(SIM_CAMPAIGN % {"root": ROOT})
        for name, argv in COMMANDS:
            tmp = str(sim) if name.startswith("sim_") else str(Path(base, name))
            Path(tmp).mkdir(exist_ok=True)
            args = [a.replace("{tmp}", tmp) for a in argv]
            before = set(Path(tmp).iterdir())
            began = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "storlab", *args], cwd=ROOT,
                                  capture_output=True, text=True, timeout=600,
                                  env={**os.environ, "COLUMNS": "120", "NO_COLOR": "1"})
            print(f"{name}: exit {proc.returncode}, {time.perf_counter() - began:.1f} s",
                  file=sys.stderr)
            kind = "json" if "--json" in args else "text"
            outputs[f"{name}.out"] = (f"exit {proc.returncode}\n"
                                      + normalise(proc.stdout, tmp, kind))
            if proc.returncode:
                outputs[f"{name}.err"] = normalise(proc.stderr, tmp, "text")
            for path in sorted(set(Path(tmp).iterdir()) - before):
                suffix = path.suffix.lstrip(".")
                if suffix in ("json", "csv"):
                    outputs[f"{name}.{path.name}"] = normalise(path.read_text(), tmp, suffix)
    return outputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", type=Path, help="record the outputs into this directory")
    mode.add_argument("--check", type=Path, help="compare against outputs saved here")
    parser.add_argument("--only", help="comma-separated command names (default: all)")
    opts = parser.parse_args()
    global COMMANDS
    wanted: set[str] = set()
    if opts.only:
        wanted = set(opts.only.split(","))
        COMMANDS = [c for c in COMMANDS if c[0] in wanted or c[0].startswith("sim_")
                    and "sim" in wanted]
    outputs = run_all()
    if opts.save:
        if opts.save.exists():
            shutil.rmtree(opts.save)
        opts.save.mkdir(parents=True)
        for name, text in outputs.items():
            (opts.save / name).write_text(text)
        print(f"saved {len(outputs)} outputs of {len(COMMANDS)} commands to {opts.save}")
        return 0
    saved = {p.name: renormalise(p.name, p.read_text()) for p in opts.check.iterdir()}
    outputs = {k: renormalise(k, v) for k, v in outputs.items()}
    if opts.only:
        saved = {k: v for k, v in saved.items() if k.partition(".")[0] in wanted
                 or k.startswith("sim_") and "sim" in wanted}
    differ = 0
    for name in sorted(set(saved) | set(outputs)):
        old, new = saved.get(name, ""), outputs.get(name, "")
        if old != new:
            differ += 1
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(keepends=True), new.splitlines(keepends=True),
                f"saved/{name}", f"now/{name}", n=1))
    print(f"{len(outputs)} outputs of {len(COMMANDS)} commands: "
          + (f"{differ} differ" if differ else "all the same"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
