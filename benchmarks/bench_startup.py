"""Start-up cost: CPU time of `storlab --help` (and `python -m storlab --help`, and one
command's help) against `python -c pass` measured in the same run, as a ratio.

CPU time (user + system of the child, from resource.getrusage) rather than wall time: on a
machine shared with other jobs the wall clock mostly measures the queue.

    .venv/bin/python benchmarks/bench_startup.py [--repeats N]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path


def cpu_of(argv: list[str]) -> float:
    """CPU seconds (user + system) one run of `argv` takes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    script = shutil.which("storlab", path=str(Path(sys.executable).parent)) or "storlab"
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "storlab --help": [script, "--help"],
        "python -m storlab --help": [sys.executable, "-m", "storlab", "--help"],
        "storlab design --help": [script, "design", "--help"],
    }
    for argv in cases.values():  # warm the byte-code cache and the page cache
        cpu_of(argv)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.repeats):  # interleaved, so load changes hit every case alike
        for name, argv in cases.items():
            times[name].append(cpu_of(argv))
    base = statistics.median(times["python -c pass"])
    print(f"CPU time, median of {args.repeats} runs (user + system)")
    print(f"{'command':28} {'median s':>9} {'min s':>7} {'vs python -c pass':>18}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:28} {med:9.3f} {min(ts):7.3f} {med / base:17.1f}x")


if __name__ == "__main__":
    main()
