"""Where a PUT's cost goes on the Swift all-in-one, by replica count (seed 003's host).

Brings the all-in-one up with 3, 2 and 1 replica(s) in turn (REPEATS times, interleaved),
runs closed-loop 16 KiB PUTs at 8 clients, and records per PUT: the CPU time of each Swift
service (proxy, object, container, account: utime + stime of its processes from
/proc/PID/stat), of the load generator (this process), and the loop device's writes and
flushes (/sys/block/loopN/stat). If the object server's CPU per PUT grows with the replicas
while the throughput does not, the throughput is not set by per-replica CPU, which is
what the simulator's calibrated model assumes.

    sudo .venv/bin/python examples/swift-calibrate/probe_put.py      # ~10 minutes at load 18
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parent / "out"
SERVICES = ("proxy-server", "object-server", "container-server", "account-server")


def _cpu_s(tag: str) -> dict[str, float]:
    """CPU seconds (user + system) of each Swift service whose command line holds `tag`."""
    tick = os.sysconf("SC_CLK_TCK")
    out = dict.fromkeys(SERVICES, 0.0)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if tag not in cmd:
            continue
        for s in SERVICES:
            if f"swift-{s}" in cmd:
                out[s] += (int(stat[11]) + int(stat[12])) / tick
    return out


def _self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _disk(loop: str) -> tuple[int, int]:
    """(write requests, flush requests) of a block device (flushes: kernels >= 5.5)."""
    f = Path(f"/sys/block/{Path(loop).name}/stat").read_text().split()
    return int(f[4]), int(f[15]) if len(f) > 15 else -1


def main() -> None:
    from storlab.campaign.runners.objload import LoadSpec, Target, run_load
    from storlab.clusters import get_cluster
    from storlab.clusters._util import free_port_block
    from storlab.clusters.swift import SwiftOptions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=8.0)
    args = ap.parse_args()
    where = os.environ.get("STORLAB_CALIBRATE_DIR", "/tmp/storlab-swift-probe")
    swift = get_cluster("swift", where)
    if swift.state() is not None:
        swift.down()
    rows = []
    for rep in range(args.repeats):
        for replicas in (3, 2, 1):
            port = free_port_block(6)
            st = swift.up(SwiftOptions(replicas=replicas, workers=1, proxy_workers=2,
                                       port=port, storage_port=port + 1,
                                       memcached_port=port + 4))
            try:
                target = Target(api="swift", auth_url=st["auth_url"], user=st["user"],
                                key=st["key"], bucket="probe")
                spec = dict(clients=8, mix={"put": 1.0}, sizes=16384, objects=100, seed=rep)
                run_load(target, LoadSpec(duration=1.0, **spec))  # objects made, warm
                loop = swift.state()["loop"]
                c0, s0, d0, t0 = _cpu_s(where), _self_cpu_s(), _disk(loop), time.monotonic()
                res = run_load(target, LoadSpec(duration=args.duration, prepare="never",
                                                **spec))
                c1, s1, d1, t1 = _cpu_s(where), _self_cpu_s(), _disk(loop), time.monotonic()
                n = max(float(res.summary["requests"]), 1.0)
                row = {"replicas": replicas, "repeat": rep, "ops_s": res.summary["ops_per_s"],
                       "puts": n, "wall_s": t1 - t0, "load1": os.getloadavg()[0],
                       **{f"{s.split('-')[0]}_cpu_ms": (c1[s] - c0[s]) / n * 1e3
                          for s in SERVICES},
                       "loadgen_cpu_ms": (s1 - s0) / n * 1e3,
                       "disk_writes": (d1[0] - d0[0]) / n, "disk_flushes": (d1[1] - d0[1]) / n}
                rows.append(row)
                print({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()},
                      flush=True)
            finally:
                swift.down()
    df = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "probe_put.csv", index=False)
    cols = [c for c in df.columns if c not in ("repeat", "puts", "wall_s")]
    print(df[cols].groupby("replicas").mean().round(2).to_string())


if __name__ == "__main__":
    main()
