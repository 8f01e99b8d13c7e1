"""Start-up cost: CPU time of `storlab --help` (and `python -m storlab --help`, and one
command's help) against `python -c pass` measured in the same run, as a ratio.

CPU time (user + system of the child, from resource.getrusage) rather than wall time: on a
machine shared with other jobs the wall clock mostly measures the queue.

Run as the environment is, and once more with storlab's byte-code cached (a temporary
PYTHONPYCACHEPREFIX): with PYTHONDONTWRITEBYTECODE set (as on the development machine)
Python compiles storlab's modules from source on every start, which an installed copy (pip
byte-compiles) does not.

    .venv/bin/python benchmarks/bench_startup.py [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def cpu_of(argv: list[str], env: dict[str, str] | None = None) -> float:
    """CPU seconds (user + system) one run of `argv` takes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env=env)
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
    with tempfile.TemporaryDirectory() as tmp:
        cached = dict(os.environ, PYTHONPYCACHEPREFIX=tmp)
        cached.pop("PYTHONDONTWRITEBYTECODE", None)
        envs = {"as is": None, "pyc": cached}
        for argv in cases.values():  # warm the byte-code cache and the page cache
            cpu_of(argv, cached)
        times: dict[tuple[str, str], list[float]] = {(k, e): [] for k in cases for e in envs}
        for _ in range(args.repeats):  # interleaved, so load changes hit every case alike
            for name, argv in cases.items():
                for e, env in envs.items():
                    times[name, e].append(cpu_of(argv, env))
    base = statistics.median(times["python -c pass", "as is"])
    print(f"CPU time, median of {args.repeats} runs (user + system); load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; PYTHONDONTWRITEBYTECODE="
          f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")
    print(f"{'command':28} {'as is s':>8} {'min s':>7} {'.pyc s':>7} {'min s':>7} "
          f"{'vs python -c pass':>18}")
    for name in cases:
        a, c = times[name, "as is"], times[name, "pyc"]
        print(f"{name:28} {statistics.median(a):8.3f} {min(a):7.3f} "
              f"{statistics.median(c):7.3f} {min(c):7.3f} "
              f"{statistics.median(a) / base:17.1f}x")


if __name__ == "__main__":
    main()
