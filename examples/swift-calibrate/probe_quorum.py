"""Does Swift's proxy answer a PUT at the write quorum or after every replica? (seed 003's host)

Swift's proxy, once a quorum of replicas has answered a PUT, waits up to
`post_quorum_timeout` (0.5 s by default) for the rest before it answers
(swift/proxy/controllers/obj.py, `_get_put_responses`: `pile.waitall(post_quorum_timeout)`).
This probe measures what that wait costs on the all-in-one: closed-loop 16 KiB PUTs, 3
replicas, few clients (where a request's latency, not a saturated CPU, sets the
throughput), with the proxy's default `post_quorum_timeout` against 0 (answer at the
quorum). Each repetition runs both settings in a seeded random order on one cluster, the
proxy restarted with its conf changed before each run, so the host's drift cancels in the
paired difference. The simulator's `swift.post_quorum_wait` is the same switch: the probe
prints the paired latency difference (default - 0) per client count, with its 95 %
interval, to hold against the simulator's (examples/swift-calibrate/run.py's notes).

    sudo .venv/bin/python examples/swift-calibrate/probe_quorum.py   # ~6 minutes
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parent / "out"
SETTINGS = {"default (0.5 s)": None, "0 (at the quorum)": 0.0}


def _set_post_quorum_timeout(conf: Path, value: float | None) -> None:
    """The proxy conf's [app:proxy-server] with post_quorum_timeout set (None: Swift's
    default, the line removed)."""
    text = re.sub(r"\npost_quorum_timeout = [^\n]*", "", conf.read_text())
    if value is not None:
        text = text.replace("[app:proxy-server]\n",
                            f"[app:proxy-server]\npost_quorum_timeout = {value}\n", 1)
    conf.write_text(text)


def main() -> None:
    from scipy.stats import t as student_t

    from storlab.campaign.runners.objload import LoadSpec, Target, run_load
    from storlab.clusters import get_cluster
    from storlab.clusters._util import free_port_block
    from storlab.clusters.swift import SwiftOptions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--clients", default="1,2", help="comma list of client counts")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    swift = get_cluster("swift", os.environ.get("STORLAB_CALIBRATE_DIR",
                                                "/tmp/storlab-swift-quorum"))
    if swift.state() is not None:
        swift.down()
    rng = np.random.default_rng(args.seed)
    rows = []
    port = free_port_block(6)
    st = swift.up(SwiftOptions(replicas=3, workers=1, proxy_workers=2, port=port,
                               storage_port=port + 1, memcached_port=port + 4))
    conf = swift.dir / "proxy-server.conf"
    try:
        target = Target(api="swift", auth_url=st["auth_url"], user=st["user"], key=st["key"],
                        bucket="quorum")
        for rep in range(args.repeats):
            for c in clients:
                for name in rng.permutation(list(SETTINGS)):
                    _set_post_quorum_timeout(conf, SETTINGS[name])
                    swift.restart("proxy")
                    res = run_load(target, LoadSpec(clients=c, mix={"put": 1.0}, sizes=16384,
                                                    objects=100, duration=args.duration,
                                                    warmup=1.0, seed=rep))
                    s = res.summary
                    rows.append({"repeat": rep, "clients": c, "setting": str(name),
                                 "ops_s": s["ops_per_s"], "lat_mean_ms": s["lat_mean_ms"],
                                 "lat_p50_ms": s["lat_p50_ms"], "errors": s["errors"],
                                 "load1": os.getloadavg()[0]})
                    print(rows[-1], flush=True)
                    OUT.mkdir(exist_ok=True)
                    pd.DataFrame(rows).to_csv(OUT / "probe_quorum.csv", index=False)
    finally:
        swift.down()
    df = pd.DataFrame(rows)
    for c, m in df.groupby("clients"):
        p = m.pivot_table(index="repeat", columns="setting", values="lat_mean_ms")
        d = (p["default (0.5 s)"] - p["0 (at the quorum)"]).dropna()
        half = student_t.ppf(0.975, max(len(d) - 1, 1)) * d.std(ddof=1) / np.sqrt(len(d))
        print(f"{c} client(s): PUT mean latency {p['default (0.5 s)'].mean():.1f} ms with the "
              f"default post_quorum_timeout, {p['0 (at the quorum)'].mean():.1f} ms with 0; "
              f"paired difference {d.mean():+.2f} ms (95 % interval {d.mean() - half:+.2f} to "
              f"{d.mean() + half:+.2f}, {len(d)} repetitions)")
    print(f"load average while measuring: {df['load1'].min():.1f}-{df['load1'].max():.1f} "
          f"on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
