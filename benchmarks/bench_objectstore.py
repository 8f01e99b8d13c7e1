"""The object-store load generator's own ceiling, against the rate a real server sustains.

1. A trivial HTTP object server (asyncio, in its own process: it answers every GET with a
   fixed body and every PUT with 201, no storage) is driven by storlab's generator with the
   Swift API's request shapes; what the generator reaches there, and its CPU per request,
   is its ceiling on this machine.
2. The same load against a real Swift all-in-one (brought up here if root and the packages
   are present, and down again) gives the server-bound rate.
The ratio ceiling / server-bound rate says how far the generator is from being the
bottleneck (> 1: the server saturates first).

With `--child-cost N`, instead: what running the load as a sandboxed child costs per run
(a campaign's objectstore run starts `python -m storlab.campaign.runners.objload` in the
run's bwrap sandbox), against the same small load run in this process, both against the
trivial server, N runs each, interleaved; medians and their difference.

    .venv/bin/python benchmarks/bench_objectstore.py [--duration 5] [--clients 16]
    .venv/bin/python benchmarks/bench_objectstore.py --child-cost 10

With `--cli-cost N`: what `storlab cluster load` pays for its load as a walled child
(`run_load_walled`: a private directory, bwrap, a Python start, the records read back and
summarised) against the load in storlab's process (`run_load`, as the command did before),
a `--duration` seconds closed loop of `--clients` against the trivial server, N runs per
arm, interleaved; medians, their difference and the ratio.

    .venv/bin/python benchmarks/bench_objectstore.py --cli-cost 5 --duration 2 --clients 8
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import time

from storlab.campaign.runners.objload import LoadSpec, Target, run_load

TRIVIAL_SERVER = r'''
import asyncio, sys
port, size = int(sys.argv[1]), int(sys.argv[2])
BODY = b"x" * size
GET = (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size) + BODY
AUTH = (b"HTTP/1.1 200 OK\r\nX-Storage-Url: http://127.0.0.1:%d/v1/AUTH_t\r\n"
        b"X-Auth-Token: t\r\nContent-Length: 0\r\n\r\n" % port)
OTHER = {b"PUT": b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
         b"HEAD": b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
         b"DELETE": b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"}

class P(asyncio.Protocol):
    def connection_made(self, t):
        self.t, self.buf, self.need = t, b"", 0
    def data_received(self, data):
        self.buf += data
        while True:
            if self.need:
                take = min(self.need, len(self.buf))
                self.buf, self.need = self.buf[take:], self.need - take
                if self.need:
                    return
                self.t.write(OTHER[b"PUT"])
                continue
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buf = self.buf[:end], self.buf[end + 4:]
            method, path = head.split(b" ", 2)[:2]
            clen = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    clen = int(v)
            if path.startswith(b"/auth"):
                self.t.write(AUTH)
            elif method == b"GET":
                self.t.write(GET)
            elif clen:
                self.need = clen
            else:
                self.t.write(OTHER.get(method, OTHER[b"PUT"]))

async def main():
    srv = await asyncio.get_running_loop().create_server(P, "127.0.0.1", port)
    print("ready", flush=True)
    async with srv:
        await srv.serve_forever()
asyncio.run(main())
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(target: Target, spec: LoadSpec) -> dict[str, float]:
    """ops/s of the main stage and the generator's CPU per request (whole run)."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    res = run_load(target, spec)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    n = res.summary["requests"] + (spec.objects if res.prepared else 0)
    return {"ops_s": res.summary["ops_per_s"], "errors": res.summary["errors"],
            "cpu_us_per_req": 1e6 * cpu / max(n, 1), "p50_ms": res.summary["lat_p50_ms"]}


def child_cost(port: int, repeats: int) -> None:
    """Per-run wall time of a small load (50 requests, 1 client) in this process
    (`run_load` and its records as CSV, as the runner did before) and as the runner's
    sandboxed child (`ObjectStoreRunner.run`: bwrap, a Python start, the records read
    back and summarised), interleaved."""
    import statistics
    import tempfile
    from pathlib import Path

    from storlab.campaign.runners import Declared, declared
    from storlab.campaign.runners.objectstore import ObjectStoreRunner
    from storlab.campaign.runners.objload import records_to_csv

    opts = {"api": "swift", "auth_url": f"http://127.0.0.1:{port}/auth/v1.0", "user": "u",
            "key": "k", "bucket": "bench", "clients": 1, "objects": 2, "requests": 50,
            "duration": None, "sizes": 4096}
    spec = LoadSpec(clients=1, objects=2, requests=50, duration=None, sizes=4096)
    target = Target(api="swift", auth_url=opts["auth_url"], user="u", key="k",
                    bucket="bench")
    runner = ObjectStoreRunner(**opts)
    inproc, child = [], []
    with tempfile.TemporaryDirectory(prefix="storlab-bench-") as d:
        run = Path(d) / "scratch" / "c1-r1"
        run.mkdir(parents=True)
        with declared(Declared(homes=(d,), network=True)):  # sandbox.network: true
            for i in range(repeats + 1):  # the first pair warms caches: not counted
                t0 = time.perf_counter()
                records_to_csv(run_load(target, spec).records)
                t1 = time.perf_counter()
                res = runner.run({}, run, timeout=120)
                t2 = time.perf_counter()
                assert res.status == "ok", res.stderr
                if i:
                    inproc.append(t1 - t0)
                    child.append(t2 - t1)
    a, b = statistics.median(inproc), statistics.median(child)
    print(f"object-store load, 50 requests, {repeats} runs per arm, {os.cpu_count()} CPUs "
          f"shared: in storlab's process {a * 1e3:.0f} ms, as a sandboxed child "
          f"{b * 1e3:.0f} ms (median); the child costs {(b - a) * 1e3:.0f} ms per run "
          f"({b / a:.1f}x this small load)")


def cli_cost(port: int, repeats: int, duration: float, clients: int) -> None:
    """Wall time of `cluster load`'s load in this process and as the walled child."""
    import statistics

    from storlab.campaign.runners.objectstore import run_load_walled

    spec = LoadSpec(clients=clients, objects=20, duration=duration, sizes=16384)
    target = Target(api="swift", auth_url=f"http://127.0.0.1:{port}/auth/v1.0", user="u",
                    key="k", bucket="bench")
    inproc, child, reqs = [], [], []
    for i in range(repeats + 1):  # the first pair warms caches: not counted
        t0 = time.perf_counter()
        a = run_load(target, spec)
        t1 = time.perf_counter()
        b = run_load_walled(target, spec)
        t2 = time.perf_counter()
        if i:
            inproc.append(t1 - t0)
            child.append(t2 - t1)
            reqs.append((a.summary["requests"], b.summary["requests"]))
    a_s, b_s = statistics.median(inproc), statistics.median(child)
    ra = statistics.median(r[0] for r in reqs) / duration
    rb = statistics.median(r[1] for r in reqs) / duration
    print(f"cluster load, {duration:g} s closed loop x {clients} clients, {repeats} runs per "
          f"arm, {os.cpu_count()} CPUs shared: in storlab's process {a_s:.2f} s, as the "
          f"walled child {b_s:.2f} s (median wall time); the child costs "
          f"{(b_s - a_s) * 1e3:.0f} ms per load ({b_s / a_s:.3f}x); requests/s "
          f"{ra:.0f} in process, {rb:.0f} walled")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--size", type=int, default=16384)
    ap.add_argument("--child-cost", type=int, default=0, metavar="N",
                    help="measure the sandboxed child's cost per run instead (N runs/arm)")
    ap.add_argument("--cli-cost", type=int, default=0, metavar="N",
                    help="measure cluster load's walled child against the load in process "
                    "(N runs/arm of --duration seconds)")
    args = ap.parse_args()
    if args.cli_cost or args.child_cost:
        port = free_port()
        size = "16384" if args.cli_cost else "4096"
        srv = subprocess.Popen([sys.executable, "-c", TRIVIAL_SERVER, str(port), size],
                               stdout=subprocess.PIPE, text=True)
        try:
            assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
            if args.cli_cost:
                cli_cost(port, args.cli_cost, args.duration, args.clients)
            else:
                child_cost(port, args.child_cost)
        finally:
            srv.terminate()
            srv.wait(10)
        return
    cases = [("GET", {"get": 1.0}), ("PUT", {"put": 1.0})]
    port = free_port()
    srv = subprocess.Popen([sys.executable, "-c", TRIVIAL_SERVER, str(port), str(args.size)],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
        trivial = Target(api="swift", auth_url=f"http://127.0.0.1:{port}/auth/v1.0",
                         user="u", key="k", bucket="bench")
        ceiling = {}
        for name, mix in cases:
            ceiling[name] = measure(trivial, LoadSpec(clients=args.clients, mix=mix,
                                                      sizes=args.size, objects=50,
                                                      duration=args.duration, prepare="always"))
    finally:
        srv.terminate()
        srv.wait(10)
    print(f"load generator vs a trivial local HTTP server ({args.clients} clients, "
          f"{args.size} B objects, {args.duration:g} s, {os.cpu_count()} CPUs shared):")
    for name, m in ceiling.items():
        print(f"  {name}: {m['ops_s']:8.0f} ops/s  p50 {m['p50_ms']:.2f} ms  client CPU "
              f"{m['cpu_us_per_req']:.0f} us/request (=> {1e6 / m['cpu_us_per_req']:.0f} "
              f"ops/s per core)  errors {m['errors']:.0f}")

    if os.geteuid() != 0 or shutil.which("swift-proxy-server") is None:
        print("server-bound rate: skipped (needs root and the swift packages)")
        return
    import tempfile

    from storlab.clusters.swift import SwiftCluster, SwiftOptions

    base = tempfile.mkdtemp(prefix="storlab-bench-")
    sw = SwiftCluster(base)
    st = sw.up(SwiftOptions(replicas=3, port=free_port(), storage_port=6400,
                            memcached_port=free_port()))
    try:
        target = Target(api="swift", auth_url=st["auth_url"], user=st["user"], key=st["key"],
                        bucket="bench")
        server = {name: measure(target, LoadSpec(clients=args.clients, mix=mix,
                                                 sizes=args.size, objects=200,
                                                 duration=args.duration))
                  for name, mix in cases}
    finally:
        sw.down()
        shutil.rmtree(base, ignore_errors=True)
    print("server-bound rate: the same load against a Swift all-in-one (3 replicas, "
          "1 worker/server, 2 proxy workers):")
    for name, m in server.items():
        c = ceiling[name]
        print(f"  {name}: {m['ops_s']:8.0f} ops/s  p50 {m['p50_ms']:.1f} ms  client CPU "
              f"{m['cpu_us_per_req']:.0f} us/request;  generator ceiling / Swift rate = "
              f"{c['ops_s'] / m['ops_s']:.1f}x (achieved), "
              f"{1e6 / c['cpu_us_per_req'] / m['ops_s']:.1f}x (per core of client CPU)")


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"({time.time() - t0:.0f} s)")
