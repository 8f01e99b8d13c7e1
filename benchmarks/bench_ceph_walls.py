"""What the walls cost Ceph (root; Ceph from Debian): bring-up time and one CLI call, walled
vs unwalled, the baseline measured in the same run.

1. `CephCluster.up` (1 memstore OSD) then `down`, alternating with the daemons and CLI in
   their walls and opted out of them (`STORLAB_UNSANDBOXED=1`: the daemons then run as
   root, as before the walls), `--reps` times each; seconds until HEALTH_OK and the ratio.
2. `ceph health` on the last cluster, `--calls` times each way (median ms and the ratio).

    .venv/bin/python benchmarks/bench_ceph_walls.py [--reps 1] [--calls 10]

On a shared 2-core VM the figures move with the other load; the ratio is what to read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from storlab.campaign.runners import UNSANDBOXED_ENV, register_cluster_walls
from storlab.clusters.ceph import CephCluster, CephOptions
from storlab.clusters._util import free_port_block


def _opted_out(on: bool) -> None:
    if on:
        os.environ[UNSANDBOXED_ENV] = "1"
    else:
        os.environ.pop(UNSANDBOXED_ENV, None)


def main() -> None:
    register_cluster_walls()  # the walls Ceph's programs start in
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--calls", type=int, default=10)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (a Ceph cluster)")
    ups: dict[str, list[float]] = {"walled": [], "unwalled": []}
    calls: dict[str, list[float]] = {"walled": [], "unwalled": []}
    with tempfile.TemporaryDirectory(prefix="bench-ceph-walls-") as tmp:
        for rep in range(a.reps):
            for how in ("walled", "unwalled"):
                _opted_out(how == "unwalled")
                c = CephCluster(Path(tmp))
                t0 = time.monotonic()
                c.up(CephOptions(mon_port=free_port_block(1), osd_bytes=256 << 20,
                                 tie_to_parent=True), timeout=240)
                ups[how].append(time.monotonic() - t0)
                if rep == a.reps - 1:  # the CLI on the last cluster, both ways
                    for way in ("walled", "unwalled"):
                        _opted_out(way == "unwalled")
                        for _ in range(a.calls):
                            t1 = time.perf_counter()
                            c.ceph("health")
                            calls[way].append(time.perf_counter() - t1)
                    _opted_out(how == "unwalled")
                c.down()
    _opted_out(False)
    up_w, up_u = statistics.median(ups["walled"]), statistics.median(ups["unwalled"])
    ms_w = statistics.median(calls["walled"]) * 1e3
    ms_u = statistics.median(calls["unwalled"]) * 1e3
    print(f"cluster up (1 memstore OSD): walled {up_w:.1f} s, unwalled {up_u:.1f} s, "
          f"ratio {up_w / up_u:.2f}  ({a.reps} each)")
    print(f"ceph health: walled {ms_w:.0f} ms, unwalled {ms_u:.0f} ms, ratio "
          f"{ms_w / ms_u:.2f}, +{ms_w - ms_u:.0f} ms per call  ({a.calls} each)")


if __name__ == "__main__":
    main()
