"""storlab's own overhead per campaign run (store, parse, bookkeeping) against the runtime of
the benchmark it drives. Target: under 1 % for 5-second fio runs.

Baseline, measured in the same run: the wall time of the fio processes themselves
(RunResult.started..ended, i.e. fio's start-up, file layout and its `runtime`). Overhead =
campaign wall time - the fio processes' wall time, per run. Also timed on their own, on a
real fio json+ document: parsing it, and committing one run to the SQLite store.

    python benchmarks/bench_campaign.py [--runs 3] [--runtime 5]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from storlab.campaign.campaign import Campaign
from storlab.campaign.runners.base import RunResult
from storlab.campaign.runners.fio_parse import job_records, parse_json_output, summarize
from storlab.campaign.store import Store


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--runtime", type=float, default=5.0)
    args = ap.parse_args()
    if shutil.which("fio") is None:
        print("bench_campaign: fio not installed", file=sys.stderr)
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="storlab-bench-"))
    try:
        spec = {
            "name": "overhead",
            "space": {"factors": [{"name": "rw", "kind": "categorical",
                                   "values": ["randread", "randwrite"]}]},
            "design": {"kind": "full"},
            "runner": {"type": "fio", "options": {"ioengine": "psync", "bs": "4k",
                                                  "size": "16M", "time_based": 1,
                                                  "runtime": f"{int(args.runtime * 1000)}ms"}},
            "repetitions": max(1, (args.runs + 1) // 2),
            "seed": 1,
        }
        (tmp / "campaign.yaml").write_text(yaml.safe_dump(spec))
        camp = Campaign.load(tmp / "campaign.yaml")
        t0 = time.perf_counter()
        s = camp.run()
        wall = time.perf_counter() - t0
        con = sqlite3.connect(tmp / "campaign.db")
        spans = [e - b for b, e in con.execute("SELECT started, ended FROM runs")]
        raw = con.execute("SELECT raw FROM runs LIMIT 1").fetchone()[0]
        con.close()
        n = len(spans)
        fio_wall = sum(spans)
        overhead = (wall - fio_wall) / n
        # The parts, each on its own (median of 50), on a real fio json+ document.
        parse = _median(lambda: summarize(job_records(parse_json_output(raw))), 50)
        st = Store(tmp / "bench.db")
        res = RunResult("ok", summarize(job_records(parse_json_output(raw))), raw, "", 0,
                        time.time(), time.time())
        counter = iter(range(10**6))

        def commit() -> None:
            k = f"k{next(counter)}"
            st.mark_running(k, 1, 1, 1, False, {"rw": "randread"})
            st.record(k, res, "host")

        with st.writer_lock():
            store = _median(commit, 50)
        st.close()
        print(f"fio runs: {n} x runtime {args.runtime:g} s (ok {s.ok}); campaign wall "
              f"{wall:.2f} s, fio processes {fio_wall:.2f} s")
        print(f"  fio process wall per run (baseline)    {fio_wall / n * 1000:9.1f} ms")
        print(f"  storlab overhead per run (wall - fio)  {overhead * 1000:9.1f} ms")
        print(f"    of which parse fio json+ ({len(raw) / 1024:.0f} KiB) {parse * 1000:9.2f} ms")
        print(f"    of which store commit (2 x fsync)    {store * 1000:9.2f} ms")
        print(f"overhead / benchmark runtime = {overhead / args.runtime * 100:.3f} % "
              f"(target < 1 %)")
        print(f"overhead / fio process wall  = {overhead / (fio_wall / n) * 100:.3f} %")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _median(fn, n: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
