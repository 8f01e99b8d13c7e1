"""Regenerate storlab's catalogue of minimum-aberration 2^(k-p) generators.

    .venv/bin/python scripts/ma_catalogue.py [--max-runs 128] [--nodes 300000]
        [--complement-nodes 10000000] [--workers 2]
        [-o src/storlab/design/data/ma_catalogue.json]

Every case k factors in 2^n runs (n < k <= 2^n - 1, 2^n <= --max-runs: 219 cases up to
128 runs) gets an entry, found by the compiled exact search (storlab_designs.ma_search,
designs/src/ma.rs), each search seeded with the best design met so far, until one
finishes inside its node budget:

- "direct": branch and bound over the added columns (finishes for every case up to 32
  runs and for the smaller factor counts of 64 and 128 runs);
- "even": for 5*2^(n-4) < k <= 2^(n-1), all sets cut out of the even design (every
  resolution IV design of that size lies in it, and the MA design has resolution IV);
- "complement": for k > 2^(n-1), all sets F of the 2^n - 1 - k columns left out, cut by
  the design's A3 and A4 following F's (more lines in F, or as many and fewer 4-words,
  make a better design: Tang and Wu 1996). Its nodes are cheap (no pattern but at the
  leaves), so it gets its own, larger budget.

An entry whose searches all ran out of nodes keeps the best design any of them met, with
"exact": false; storlab then tells the user it is not proven minimum aberration. The budget
is in nodes, not seconds, so the file is the same on any machine (no timestamps either).
With the defaults: 149 of the 219 cases proven (every one up to 64 runs), 761 s of CPU
(user time of `time ... --workers 2`, on a loaded 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src/storlab/design/data/ma_catalogue.json"


def cases(max_runs: int) -> list[tuple[int, int]]:
    """(k, n) for every fraction with 2^n <= max_runs runs."""
    out = []
    n = 2
    while 2**n <= max_runs:
        out.extend((k, n) for k in range(n + 1, 2**n))
        n += 1
    return out


def methods(k: int, n: int) -> list[str]:
    """The searches for case (k, n), those that settle it fastest first ("even" below its
    range, 5*2^(n-4) < k, cannot prove anything: it only offers resolution IV designs)."""
    if k > 2 ** (n - 1):
        return ["complement", "direct"]
    if n >= 4 and 5 * 2 ** (n - 4) < k:
        return ["even", "direct"]
    return ["direct", "even"] if n >= 4 else ["direct"]


def proves_cheaply(k: int, n: int, method: str) -> bool:
    """Whether the search is one of the bounded set searches that can prove the case with
    cheap nodes (no pattern but at the leaves): it gets the larger budget."""
    return method == "complement" or (method == "even" and n >= 4 and 5 * 2 ** (n - 4) < k)


def solve(case: tuple[int, int], nodes: int,
          complement_nodes: int) -> tuple[str, dict[str, Any], str]:
    """One case: its catalogue entry and a log line."""
    from storlab_designs import ma_search

    k, n = case
    t0 = time.process_time()
    best: tuple[list[int], list[int]] | None = None
    used, total, exact = "", 0, False
    for method in methods(k, n):
        cols, wlp, done, used_nodes, _ = ma_search(
            k, n, seconds=1e9, method=method,
            max_nodes=complement_nodes if proves_cheaply(k, n, method) else nodes,
            initial=best[0] if best else None)
        total += used_nodes
        if best is None or wlp < best[1]:
            best, used = (list(cols), list(wlp)), method
        if done:
            exact, used = True, method
            break
    assert best is not None
    entry = {"columns": best[0], "wlp": best[1], "exact": exact, "method": used,
             "nodes": total}
    line = (f"2^({k}-{k - n}) {2**n:4d} runs: {time.process_time() - t0:7.2f} s CPU  "
            f"{'exact' if exact else 'NOT PROVEN':10s} {used:10s} A3..A6={best[1][2:6]}")
    return f"{k}-{n}", entry, line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-runs", type=int, default=128)
    ap.add_argument("--nodes", type=int, default=300_000,
                    help="node budget of each direct or even search of a case")
    ap.add_argument("--complement-nodes", type=int, default=10_000_000,
                    help="node budget of each complement search, and of each even search "
                         "where it can prove the case")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.max_runs > 128:
        print("the compiled search handles up to 128 runs", file=sys.stderr)
        return 2
    todo = cases(args.max_runs)
    old = json.loads(args.output.read_text())["entries"] if args.output.exists() else {}
    dropped = set(old) - {f"{k}-{n}" for k, n in todo}
    if dropped:  # checked before hours of search, not after
        print(f"{args.output} holds {len(dropped)} cases this run would drop (up to "
              f"{args.max_runs} runs): give another -o for a partial catalogue",
              file=sys.stderr)
        return 2
    entries: dict[str, dict[str, Any]] = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for key, entry, line in pool.map(solve, todo, [args.nodes] * len(todo),
                                         [args.complement_nodes] * len(todo)):
            print(line, flush=True)
            entries[key] = entry
    worse = _worse(old, entries)
    if worse:
        # Keep the search's work beside the catalogue, not over it.
        side = args.output.with_suffix(".rejected.json")
        _write(side, args.max_runs, args.nodes, args.complement_nodes, entries)
        print(f"not written to {args.output} (written to {side}): worse than the "
              f"catalogue in {len(worse)} cases: {'; '.join(worse[:5])}", file=sys.stderr)
        return 1
    _write(args.output, args.max_runs, args.nodes, args.complement_nodes, entries)
    proven = sum(e["exact"] for e in entries.values())
    print(f"{len(entries)} cases written to {args.output}: {proven} proven minimum "
          f"aberration, {len(entries) - proven} not proven")
    return 0


def _worse(old: dict[str, dict[str, Any]], entries: dict[str, dict[str, Any]]
           ) -> list[str]:
    """Cases where `entries` would replace a catalogued design by one with a larger
    pattern, or a proven entry by an unproven one (a weaker search or a smaller budget
    would)."""
    out = []
    for key, e in entries.items():
        if key in old and e["wlp"] > old[key]["wlp"]:
            out.append(f"{key}: pattern {e['wlp']} > {old[key]['wlp']}")
        elif key in old and old[key]["exact"] and not e["exact"]:
            out.append(f"{key}: proven before, not proven now")
    return out


def _write(path: Path, max_runs: int, nodes: int, complement_nodes: int,
           entries: dict[str, dict[str, Any]]) -> None:
    doc = {
        "about": "Minimum-aberration 2^(k-p) generators found by storlab's exact search "
                 "(scripts/ma_catalogue.py, designs/src/ma.rs). Key 'k-n': k factors in 2^n "
                 "runs; columns: the added factors' base-bit masks (bit i = base factor i); "
                 "wlp: A1..Ak; exact: the search finished, so no design has a smaller "
                 "pattern (false: best found within the budget, not proven); method: the "
                 "search that decided it.",
        "max_runs": max_runs,
        "nodes_per_search": nodes,
        "nodes_per_complement_search": complement_nodes,
        "entries": dict(sorted(entries.items(),
                               key=lambda kv: tuple(map(int, kv[0].split("-"))))),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=None, separators=(",", ":")).replace(
        '},"', '},\n"') + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
