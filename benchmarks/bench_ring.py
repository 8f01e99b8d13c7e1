"""Swift's ring placement at full size: time and identity.

1. 700 storage nodes x 10 disks (7,000 devices) at part power 18 (786,432 partition-
   replicas), 3 replicas, one zone per rack of 20 nodes (35 zones), 5 zones and a single
   zone (the walk then chooses among 700 servers at every replica): CPU and wall seconds
   of `Ring.build` (target: under 10 s), its balance and whether every partition's
   replicas are in distinct zones. Each build runs in a fresh child process (no cache).
2. Identity against the baseline measured in the same run: the pure-Python reference walk
   (`swift_rebalance(..., compiled=False)`, which tests/sim/test_ring_swift.py checks
   against Swift's RingBuilder) on the same 7,000 devices at part powers 12 and 16: equal
   tables, and the speed ratio reference / compiled.
3. `--swift`: Swift's own RingBuilder (Debian's python3-swift under /usr/bin/python3) on
   the same devices at part power 14 (about a minute): equal tables.

    .venv/bin/python benchmarks/bench_ring.py [--swift]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NODES, DISKS, PER_RACK = 700, 10, 20


def layout(zones: int) -> tuple[list, list, list, list]:
    """region, zone, server, weight of the benchmark's devices; zones=0: one per rack."""
    node = np.repeat(np.arange(NODES), DISKS)
    zone = node // PER_RACK if zones == 0 else node % zones
    return [0] * node.size, zone.tolist(), node.tolist(), [1.0] * node.size


def child(zones: int, pp: int) -> None:
    from storlab.sim.ring import Ring

    region, zone, node, weight = layout(zones)
    t, w = time.process_time(), time.perf_counter()
    ring = Ring.build(node, zone, weight, pp, 3, dev_region=region)
    cpu, wall = time.process_time() - t, time.perf_counter() - w
    z = np.sort(np.asarray(zone)[ring.r2p2d], axis=0)
    print(json.dumps({"cpu": cpu, "wall": wall, "placement": ring.placement,
                      "balance": ring.balance(),
                      "distinct_zones": bool(np.all(z[1:] != z[:-1]))}))


def identity(pp: int) -> None:
    from storlab.sim.ringbuild import swift_rebalance

    args = (*layout(0), pp, 3, 0)
    t = time.process_time()
    fast = swift_rebalance(*args)
    t_fast = time.process_time() - t
    t = time.process_time()
    ref = swift_rebalance(*args, compiled=False)
    t_ref = time.process_time() - t
    print(f"  part power {pp} ({3 << pp:,} partition-replicas): identical "
          f"{np.array_equal(fast, ref)}; reference {t_ref:.2f} s CPU, compiled "
          f"{t_fast:.3f} s ({t_ref / t_fast:.0f}x)")


_SWIFT = r"""
import json, sys
from swift.common.ring.builder import RingBuilder
spec = json.load(sys.stdin)
b = RingBuilder(spec["pp"], 3, 1)
for i, (reg, z, srv, w) in enumerate(zip(*spec["layout"])):
    b.add_dev({"id": i, "region": reg, "zone": z, "ip": "n%06d" % srv, "port": 6200,
               "device": "d%d" % i, "weight": w})
b.rebalance(seed=0)
json.dump([list(a) for a in b._replica2part2dev], sys.stdout)
"""


def against_swift(pp: int) -> None:
    from storlab.sim.ringbuild import swift_rebalance

    lay = layout(0)
    t = time.perf_counter()
    out = subprocess.run(["/usr/bin/python3", "-c", _SWIFT], capture_output=True, text=True,
                         input=json.dumps({"pp": pp, "layout": lay}), timeout=3600)
    if out.returncode:
        print(f"  Swift's builder failed: {out.stderr[-300:]}")
        return
    swift = np.asarray(json.loads(out.stdout))
    ours = swift_rebalance(lay[0], lay[1], [f"n{s:06d}" for s in lay[2]], lay[3], pp, 3, 0)
    print(f"  Swift's RingBuilder, part power {pp}: identical {np.array_equal(ours, swift)} "
          f"(Swift took {time.perf_counter() - t:.0f} s wall)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--swift", action="store_true", help="also compare with Swift's builder")
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    print(f"Ring.build, {NODES} nodes x {DISKS} disks, part power 18, 3 replicas "
          f"(load average {Path('/proc/loadavg').read_text().split()[0]}):")
    for zones, label in ((0, "a zone per rack (35)"), (5, "5 zones"), (1, "1 zone")):
        out = subprocess.run([sys.executable, __file__, "--child", str(zones), "18"],
                             capture_output=True, text=True, check=True)
        d = json.loads(out.stdout)
        print(f"  {label:22s} {d['cpu']:5.2f} s CPU {d['wall']:5.2f} s wall  placement "
              f"{d['placement']}, balance {d['balance']:.2f} %, replicas in distinct zones: "
              f"{d['distinct_zones'] if zones != 1 else 'n/a'}")
    print("Compiled walk against the pure-Python reference (same run):")
    for pp in (12, 16):
        identity(pp)
    if a.swift:
        against_swift(14)


if __name__ == "__main__":
    main()
