"""Design benchmarks: minimum-aberration generator search time for 2^(k-p) designs up to
64 runs and 16 factors, against brute-force enumeration of every generator set where that
is feasible in the same run; and LHS generation of 100,000 points x 20 mixed factors
against scipy's own LatinHypercube; the compiled search that writes the catalogue against
the Python one.

    .venv/bin/python benchmarks/bench_design.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np
from scipy.stats import qmc

from storlab.design import aliasing as al
from storlab.design.factorial import minimum_aberration, search_generators
from storlab.design.lhs import lhs_design
from storlab.space import Space

BRUTE_LIMIT = 60_000  # generator sets enumerated by brute force at most


def brute_force(k: int, n: int) -> tuple[list[int], float]:
    t0 = time.perf_counter()
    cols = [c for c in range(1, 2**n) if al.popcount(c) >= 2]
    best = None
    for added in itertools.combinations(cols, k - n):
        gens = [c | (1 << (n + i)) for i, c in enumerate(added)]
        w = al.wlp(al.subgroup(gens), k)
        if best is None or w < best:
            best = w
    return best, time.perf_counter() - t0


def bench_search(quick: bool) -> None:
    print("2^(k-p) minimum-aberration search (exact branch and bound)")
    print(f"{'k':>3} {'runs':>5} {'p':>3} {'res':>4} {'A3..A6':<18} {'nodes':>9} "
          f"{'generator sets':>15} {'search s':>9} {'brute s':>9} {'speed-up':>9}")
    cases = [(k, n) for n in (3, 4, 5, 6) for k in range(n + 1, 17) if k <= 2**n - 1]
    if quick:
        cases = [c for c in cases if c[1] <= 5 or c[0] <= 12]
    worst = 0.0
    for k, n in cases:
        r = search_generators(k, n)
        assert r is not None and r.exact
        cands = 2**n - 1 - n
        combos = math.comb(cands, k - n)
        brute_s = ratio = float("nan")
        if combos <= BRUTE_LIMIT:
            wlp, brute_s = brute_force(k, n)
            assert wlp == r.wlp, (k, n, wlp, r.wlp)
            ratio = brute_s / max(r.seconds, 1e-6)
        worst = max(worst, r.seconds)
        res = al.resolution(r.wlp)
        print(f"{k:>3} {2**n:>5} {k - n:>3} {res or '-':>4} {str(r.wlp[2:6]):<18} "
              f"{r.nodes:>9} {combos:>15.3g} {r.seconds:>9.3f} "
              f"{brute_s:>9.3f} {ratio:>8.1f}x")
    print(f"slowest exact search: {worst:.2f} s")


def bench_catalogue() -> None:
    """The shipped catalogue against the search it was generated with, same run."""
    print("\ncatalogue lookup vs exact search (same answer)")
    for k, n in ((16, 6), (12, 5), (13, 7)):
        t0 = time.perf_counter()
        hit = minimum_aberration(k, n)
        t_cat = time.perf_counter() - t0
        t0 = time.perf_counter()
        found = search_generators(k, n)
        t_search = time.perf_counter() - t0
        assert hit is not None and found is not None and hit.wlp == found.wlp
        print(f"2^({k}-{k - n}) {2**n:4d} runs: {hit.source} {t_cat * 1e3:.2f} ms, search "
              f"{t_search:.2f} s, ratio {t_search / max(t_cat, 1e-9):,.0f}x")


def bench_compiled(quick: bool) -> None:
    """The compiled exact search (designs/src/ma.rs, which writes the catalogue) against the
    Python branch and bound, same cases, same run: CPU seconds (the machine may be shared)."""
    from storlab_designs import ma_search

    print("\ncompiled exact search (storlab_designs.ma_search) vs Python search_generators, CPU s")
    print(f"{'case':>12} {'runs':>5} {'A3..A6':<22} {'rust s':>8} {'python s':>9} {'ratio':>8}")
    cases = [(12, 5), (16, 6), (18, 6), (14, 7)] + ([] if quick else [(20, 6), (19, 5)])
    for k, n in cases:
        t0 = time.process_time()
        _, wlp, exact, _, _ = ma_search(k, n, seconds=600.0)
        t_rust = time.process_time() - t0
        t0 = time.process_time()
        found = search_generators(k, n, time_limit=600.0)
        t_py = time.process_time() - t0
        assert exact and found is not None and found.exact and list(wlp) == found.wlp
        print(f"{f'2^({k}-{k - n})':>12} {2**n:>5} {str(list(wlp)[2:6]):<22} {t_rust:>8.3f} "
              f"{t_py:>9.3f} {t_py / max(t_rust, 1e-6):>7.0f}x")


def bench_lhs(quick: bool) -> None:
    n, d = (20_000 if quick else 100_000), 20
    factors = []
    for j in range(d):
        kind = j % 4
        if kind == 0:
            factors.append({"name": f"c{j}", "values": [f"v{i}" for i in range(2 + j % 5)]})
        elif kind == 1:
            factors.append({"name": f"i{j}", "range": [1, 64]})
        elif kind == 2:
            factors.append({"name": f"l{j}", "range": [1.0, 1e6], "log": True})
        else:
            factors.append({"name": f"r{j}", "range": [0.0, 1.0]})
    space = Space.from_dict({"factors": factors})
    t0 = time.perf_counter()
    qmc.LatinHypercube(d=d, rng=np.random.default_rng(1)).random(n)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    lhs_design(space, n, seed=1)
    ours = time.perf_counter() - t0
    print(f"\nLHS {n:,} points x {d} mixed factors (5 categorical, 5 integer, 5 log-real, 5 real)")
    print(f"{'scipy qmc.LatinHypercube (unit cube)':<45} {base:8.3f} s")
    print(f"{'storlab lhs_design (natural units, levels)':<45} {ours:8.3f} s")
    print(f"{'ratio storlab / scipy':<45} {ours / base:8.2f}x")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    bench_search(args.quick)
    bench_catalogue()
    bench_compiled(args.quick)
    bench_lhs(args.quick)
