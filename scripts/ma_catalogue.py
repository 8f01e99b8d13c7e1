"""Regenerate storlab's catalogue of minimum-aberration 2^(k-p) generators.

    .venv/bin/python scripts/ma_catalogue.py [--max-runs 128] [--time-limit 300]
        [-o src/storlab/design/data/ma_catalogue.json] [--resume]

Every case k factors in 2^n runs (k > n, k <= 2^n - 1, 2^n <= --max-runs) is solved by
storlab's own exact branch and bound (storlab.design.factorial.search_generators, the
same function the design command falls back to). Only searches that finished inside the
time limit are written: a time-limited answer is not known to be minimum aberration, so
those cases stay with the search (and are listed under "not_covered" with the reason);
after the first cut case of a run size the larger ones are not tried (the search grows
steeply with the factors: 2^(17-12) takes ~4 s, 2^(18-13) more than 20 s).
Cases whose defining relation has more than 2^MAX_P words are skipped: storlab cannot
build their alias structure either. The output is sorted and carries no timestamps, so
rerunning it on any machine gives the same file when every search finishes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from storlab.design.factorial import MA_CATALOGUE_MAX_P, search_generators

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src/storlab/design/data/ma_catalogue.json"


def cases(max_runs: int) -> list[tuple[int, int]]:
    out = []
    n = 2
    while 2**n <= max_runs:
        for k in range(n + 1, 2**n):
            out.append((k, n))
        n += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-runs", type=int, default=128)
    ap.add_argument("--time-limit", type=float, default=300.0,
                    help="seconds per case; a case cut by it is left to the search")
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--resume", action="store_true",
                    help="keep the output file's entries and search only the other cases")
    args = ap.parse_args(argv)
    entries: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    if args.resume and args.output.exists():
        entries = dict(json.loads(args.output.read_text())["entries"])
    given_up: set[int] = set()
    for k, n in cases(args.max_runs):
        key = f"{k}-{n}"
        if key in entries:
            continue
        if n in given_up:  # the search only gets slower with more factors per run size
            skipped[key] = f"not tried: 2^({k - 1}-{k - 1 - n}) was already cut"
            continue
        if k - n > MA_CATALOGUE_MAX_P:
            skipped[key] = f"p = {k - n} > {MA_CATALOGUE_MAX_P}: 2^p words, not enumerable"
            continue
        t0 = time.monotonic()
        res = search_generators(k, n, time_limit=args.time_limit)
        dt = time.monotonic() - t0
        assert res is not None  # resolution III always exists for k <= 2^n - 1
        print(f"2^({k}-{k - n}) {2**n:4d} runs: {dt:8.2f} s  exact={res.exact}  "
              f"wlp={res.wlp[2:6]}", flush=True)
        if res.exact:
            entries[key] = {"columns": res.columns, "wlp": res.wlp}
        else:
            skipped[key] = f"search cut after {args.time_limit:g} s"
            given_up.add(n)
        # Written after every case: a long run can be stopped and still leave a catalogue.
        _write(args.output, args.max_runs, entries, skipped)
    print(f"{len(entries)} cases written to {args.output}; {len(skipped)} not covered")
    return 0


def _write(path: Path, max_runs: int, entries: dict, skipped: dict) -> None:
    doc = {
        "about": "Minimum-aberration 2^(k-p) generators found by storlab's exact search "
                 "(scripts/ma_catalogue.py). Key 'k-n': k factors in 2^n runs; columns: "
                 "the added factors' base-bit masks (bit i = base factor i); wlp: A1..Ak.",
        "max_runs": max_runs,
        "entries": dict(sorted(entries.items(), key=lambda kv: tuple(map(int, kv[0].split("-"))))),
        "not_covered": dict(sorted(skipped.items(),
                                   key=lambda kv: tuple(map(int, kv[0].split("-"))))),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=None, separators=(",", ":")).replace(
        '},"', '},\n"') + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
