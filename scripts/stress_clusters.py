"""Stress the throwaway clusters: N consecutive up / restart / down cycles of each kind
under CPU load, counting false start-up failures, duplicate daemons, unhealthy states and
leftovers. Outside the default test run (root, ~1 min per cycle and kind):

    sudo .venv/bin/python scripts/stress_clusters.py --cycles 20      # or `make stress`

CPU load: `stress-ng --cpu N` when installed, else N Python busy loops (N = CPUs). Each cycle:
up (then exactly one process per daemon, healthy, a probe put/get), R restarts (Ceph: every
OSD; Swift: the object server), each followed by the same checks, then down (then no process,
mount or loop device left). Exit status 1 if any cycle failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from storlab.campaign.runners import register_cluster_walls
from storlab.clusters._util import free_port_block
from storlab.clusters.ceph import CephCluster, CephOptions
from storlab.clusters.swift import SwiftCluster, SwiftOptions


def _busy() -> None:
    while True:
        pass


def cpu_load(n: int) -> list:
    """Start n CPU burners; returns handles for stop_load."""
    if n <= 0:
        return []
    if shutil.which("stress-ng"):
        return [subprocess.Popen(["stress-ng", "--cpu", str(n), "--quiet"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    procs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def stop_load(handles: list) -> None:
    for h in handles:
        if isinstance(h, subprocess.Popen):
            h.terminate()
            h.wait()
        else:
            h.terminate()
            h.join()


def free_block(n: int) -> int:
    return free_port_block(n, tries=500)


def copies(needle: str) -> dict[str, int]:
    """Copies per command line among live processes naming `needle` (our directory): a
    process whose parent runs the same command line is that copy's worker (Swift servers
    fork theirs), not a second copy. Log writers are left out."""
    procs: dict[int, tuple[str, int]] = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/cmdline", "rb") as fh:
                cmd = fh.read().rstrip(b"\0").split(b"\0")
            with open(f"/proc/{e}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        line = b" ".join(cmd)
        if fields[0] == b"Z" or needle.encode() not in line or b"_logcap.py" in line:
            continue
        procs[int(e)] = (line.decode(errors="replace"), int(fields[1]))
    out: dict[str, int] = {}
    for pid, (line, ppid) in procs.items():
        if procs.get(ppid, ("", 0))[0] != line:
            out[line] = out.get(line, 0) + 1
    return out


def check(c, kind: str, expect_daemons: int) -> None:
    """Exactly one copy of each daemon, healthy, a probe put/get that works."""
    procs = copies(str(c.dir))
    dup = {k: n for k, n in procs.items() if n > 1}
    if dup:
        raise AssertionError(f"duplicate daemons: {dup}")
    if len(procs) < expect_daemons:
        raise AssertionError(f"{len(procs)} daemons, expected {expect_daemons}: "
                             f"{sorted(procs)}")
    st = c.status(probe=True)
    if not st["healthy"]:
        raise AssertionError(f"not healthy: {st['health']} (probe {st.get('probe')})")


def leftovers(base: Path) -> list[str]:
    left = list(copies(str(base)))
    with open("/proc/self/mounts") as fh:
        left += [m.split()[1] for m in fh if m.split()[1].startswith(str(base))]
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    left += [line for line in out.splitlines() if str(base) in line]
    return left


def cycle(kind: str, base: Path, restarts: int) -> dict[str, float]:
    t: dict[str, float] = {}
    if kind == "ceph":
        c = CephCluster(base)
        t0 = time.monotonic()
        c.up(CephOptions(osds=1, osd_bytes=256 << 20, mon_port=free_block(1), pg_num=16,
                         tie_to_parent=True), timeout=240)
        t["up_s"] = time.monotonic() - t0
        daemons = 3
    else:
        c = SwiftCluster(base)
        p = free_block(5)
        t0 = time.monotonic()
        c.up(SwiftOptions(replicas=2, port=p + 3, storage_port=p, memcached_port=p + 4,
                          part_power=8, tie_to_parent=True), timeout=240)
        t["up_s"] = time.monotonic() - t0
        daemons = 4  # account, container, object, proxy (memcached names no conf)
    try:
        check(c, kind, daemons)
        rs = []
        for _ in range(restarts):
            t0 = time.monotonic()
            if kind == "ceph":
                c.restart_osds(timeout=240)
            else:
                c.restart("object", timeout=120)
            rs.append(time.monotonic() - t0)
            check(c, kind, daemons)
        t["restart_s"] = statistics.mean(rs) if rs else float("nan")
    finally:
        t0 = time.monotonic()
        c.down()
        t["down_s"] = time.monotonic() - t0
    left = leftovers(base)
    if left:
        raise AssertionError(f"left behind after down: {left}")
    return t


def main() -> int:
    register_cluster_walls()  # the walls Ceph's programs start in
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--restarts", type=int, default=2, help="restarts per cycle")
    ap.add_argument("--kinds", default="ceph,swift")
    ap.add_argument("--cpu", type=int, default=os.cpu_count() or 2,
                    help="CPU burners during the cycles (0: none)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("stress_clusters: needs root (clusters mount, bind ports, run daemons)")
        return 2
    # SIGTERM (and SIGINT, ignored in a background job) end it cleanly: down, no leftovers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    load = cpu_load(a.cpu)
    how = "stress-ng" if shutil.which("stress-ng") else "python busy loops"
    print(f"stress: {a.cycles} cycles x {a.kinds}, {a.restarts} restart(s) each, "
          f"{a.cpu} CPU burner(s) ({how}) on {os.cpu_count()} CPUs")
    failures = 0
    try:
        for kind in a.kinds.split(","):
            times: list[dict[str, float]] = []
            errors: list[str] = []
            for i in range(1, a.cycles + 1):
                base = Path(tempfile.mkdtemp(prefix=f"stress-{kind}-"))
                try:
                    t = cycle(kind, base, a.restarts)
                    times.append(t)
                    print(f"  {kind} cycle {i:2d}: ok   up {t['up_s']:5.1f} s  restart "
                          f"{t['restart_s']:5.1f} s  down {t['down_s']:4.1f} s", flush=True)
                except Exception as exc:  # noqa: BLE001 - every failure is counted
                    errors.append(f"cycle {i}: {exc}")
                    print(f"  {kind} cycle {i:2d}: FAILED {str(exc)[:400]}", flush=True)
                    traceback.print_exc(limit=3)
                finally:
                    shutil.rmtree(base, ignore_errors=True)
            failures += len(errors)
            if times:
                ups = [t["up_s"] for t in times]
                rss = [t["restart_s"] for t in times]
                print(f"{kind}: {len(times)}/{a.cycles} cycles ok ({len(errors)} failed); "
                      f"up mean {statistics.mean(ups):.1f} s max {max(ups):.1f} s; "
                      f"restart mean {statistics.mean(rss):.1f} s max {max(rss):.1f} s",
                      flush=True)
            for e in errors:
                print(f"  {kind} {e[:600]}")
    finally:
        stop_load(load)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
