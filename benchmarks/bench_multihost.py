"""Load from one host vs two: throughput ratio in the same run (root; Ceph from Debian).

A Ceph cluster (1 memstore OSD, radosgw) bound to the root end of a two-namespace LAN
(storlab.clusters.netns); the "hosts" are the namespaces. The baseline is one host, measured
in the same run, alternating with two hosts (`--reps` times each):

1. fio (rbd engine, 4 KiB random reads of a written 64 MiB extent, iodepth 16, librbd's
   cache off) on fio servers in client/server mode: 1 server vs 2 servers (one per
   namespace), the same job on each. IOPS, and CPU seconds per 1000 I/Os of the clients
   (fio's usr/sys) and of the OSD (/proc/<pid>/stat).
2. `cluster load` (S3 GETs of 4 KiB objects through radosgw, 4 clients per host) on Dask
   workers, one per namespace: --hosts 1 vs --hosts 2. ops/s and worker CPU per 1000 ops
   (/proc/<pid>/stat of the worker processes).

All of it runs on one machine over veth pairs, not a network: two "hosts" share the same
CPUs as the cluster, so the ratio shows where one client host's CPU limited the load, not
what two real machines would get.

    .venv/bin/python benchmarks/bench_multihost.py [--seconds 5] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from storlab.campaign.runners.fio import FioRunner
from storlab.clusters._util import free_port_block, read_pid
from storlab.clusters.ceph import CephCluster, CephOptions
from storlab.campaign.runners import register_cluster_walls
from storlab.campaign.runners.fanout import run_load_on_hosts
from storlab.clusters.netns import Lan, wait_port
from storlab.campaign.runners.objload import LoadSpec, Target

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds the processes and their reaped children used so far (a fio
    server runs each job in a child it waits for)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            f = fh.read().rsplit(b")", 1)[1].split()
        total += sum(int(x) for x in f[11:15])  # utime, stime, cutime, cstime
    return total / TICK


def bench_fio(lan: Lan, c: CephCluster, conf: str, seconds: float, reps: int,
              work: Path) -> pd.DataFrame:
    for h in lan.hosts:
        lan.popen(h.index, ["fio", f"--server=ip:{h.addr},8765"], env={"CEPH_CONF": conf})
        wait_port(h.addr, 8765)
    osd = read_pid(c.dir / "run" / "osd.0.pid")[0]
    job = {"ioengine": "rbd", "clientname": "admin", "pool": "bench", "rbdname": "storlab",
           "rw": "randread", "bs": "4k", "size": "64m", "iodepth": 16,
           "runtime": seconds, "time_based": 1}
    rows = []
    for rep in range(reps):
        for n in (1, 2):
            clients = [f"{h.addr},8765" for h in lan.hosts[:n]]
            o0 = cpu_s([osd])
            res = FioRunner(clients=clients, **job).run({}, work / f"fio-{rep}-{n}")
            if not res.ok:
                raise SystemExit(f"fio failed: {res.stderr}")
            ios = sum(r["read_iops"] for r in res.rows) * seconds
            # the clients' CPU as fio reports it per job (usr/sys % of the run time): a fio
            # server runs its job in a child it reaps later, so /proc lags a run behind
            client_s = sum((r["usr_cpu"] + r["sys_cpu"]) / 100 * seconds for r in res.rows)
            rows.append({"load": "fio rbd randread", "hosts": n, "rep": rep,
                         "iops": res.metrics["read_iops"],
                         "per_host": " + ".join(f"{r['read_iops']:.0f}" for r in res.rows),
                         "client_cpu_s_per_kio": client_s / ios * 1e3,
                         "osd_cpu_s_per_kio": (cpu_s([osd]) - o0) / ios * 1e3})
    return pd.DataFrame(rows)


def bench_objload(lan: Lan, c: CephCluster, seconds: float, reps: int) -> pd.DataFrame:
    with lan.dask() as d:
        workers = [p.pid for p in d.workers]
        s3 = c.state()["s3"]
        target = Target(api="s3", endpoint=s3["endpoint"], access_key=s3["access_key"],
                        secret_key=s3["secret_key"])
        spec = LoadSpec(clients=4, duration=seconds, objects=100, sizes={4096: 1.0})
        rows = []
        for rep in range(reps):
            for n in (1, 2):
                w0 = cpu_s(workers)
                res = run_load_on_hosts(d.address, target, spec, n, security=d.security)
                ops = res.summary["requests"]
                rows.append({"load": "cluster load S3 GET", "hosts": n, "rep": rep,
                             "iops": res.summary["ops_per_s"],
                             "per_host": " + ".join(f"{r['ops_per_s']:.0f}" for r in res.rows),
                             "client_cpu_s_per_kio": (cpu_s(workers) - w0) / ops * 1e3,
                             "p50_ms": res.summary["lat_p50_ms"]})
        return pd.DataFrame(rows)


def main() -> None:
    register_cluster_walls()  # the walls Ceph's programs start in
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0, help="Seconds of load per run.")
    ap.add_argument("--reps", type=int, default=3, help="Runs of each host count.")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench_multihost: needs root (network namespaces, a Ceph cluster)")
    t_cpu, t_wall = time.process_time(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="storlab-mh-") as tmp, Lan(2) as lan:
        work = Path(tmp)
        c = CephCluster(work / "cl")
        port = free_port_block(2)
        try:
            c.up(CephOptions(bind=lan.gateway, mon_port=port, rgw=True, rgw_port=port + 1,
                             tie_to_parent=True), timeout=240)
            c.prefill(64 << 20)
            conf = c.client_conf(work / "client")["conf"]
            # every read goes to the OSD: librbd's cache (32 MiB by default) would answer
            # part of the 64 MiB extent from the client's memory
            with open(conf, "a") as fh:
                fh.write("[client]\nrbd cache = false\n")
            df = pd.concat([bench_fio(lan, c, conf, a.seconds, a.reps, work),
                            bench_objload(lan, c, a.seconds, a.reps)], ignore_index=True)
        finally:
            c.down()
    print(f"load from 1 vs 2 network-namespace hosts on {os.cpu_count()} CPUs, Ceph 1 "
          f"memstore OSD + radosgw on the LAN's root end, {a.seconds:g} s per run; the "
          "machine was shared with other work (rates are noisy, CPU per I/O less so)")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(df.round(3).to_string(index=False))
    for load, g in df.groupby("load", sort=False):
        m = g.groupby("hosts")["iops"].mean()
        ratios = [g[(g.rep == r) & (g.hosts == 2)]["iops"].iloc[0]
                  / g[(g.rep == r) & (g.hosts == 1)]["iops"].iloc[0] for r in g.rep.unique()]
        print(f"{load}: 1 host {m[1]:,.0f}/s, 2 hosts {m[2]:,.0f}/s; ratio 2/1 = "
              f"{np.mean(ratios):.2f} (per rep: {', '.join(f'{x:.2f}' for x in ratios)})")
    print(f"bench process: {time.process_time() - t_cpu:.1f} s CPU, "
          f"{time.monotonic() - t_wall:.0f} s wall")


if __name__ == "__main__":
    main()
