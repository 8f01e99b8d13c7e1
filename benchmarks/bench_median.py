"""Why `storlab.analysis.importance._median` is hand-written: its time against
`statistics.median` and `np.median` on the repeat-noise input (one RSD per repeated
configuration: 30 to 3000 values), measured in the same run, and the import each
alternative adds to the command's start-up (a fresh process, `-X importtime`).

    .venv/bin/python benchmarks/bench_median.py
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import timeit

import numpy as np

from storlab.analysis.importance import _median


def _import_ms(module: str) -> float:
    """Cumulative import time of `module` after storlab's importance module (median of 5)."""
    times = []
    for _ in range(5):
        err = subprocess.run([sys.executable, "-X", "importtime", "-c",
                              f"import storlab.analysis.importance; import {module}"],
                             capture_output=True, text=True, check=True).stderr
        m = re.search(rf"\|\s*(\d+)\s*\|\s*{re.escape(module)}$", err, re.M)
        times.append(int(m.group(1)) / 1000 if m else 0.0)  # 0: already imported
    return statistics.median(times)


def main() -> None:
    rng = np.random.default_rng(1)
    print(f"{'values':>7} {'_median us':>11} {'statistics us':>14} {'np.median us':>13}"
          f" {'x statistics':>13} {'x np':>6}")
    for n in (30, 300, 3000):
        v = rng.random(n)
        assert _median(v) == statistics.median(v.tolist()) == float(np.median(v))
        t = [min(timeit.repeat(f, number=200, repeat=5)) / 200 * 1e6 for f in (
            lambda: _median(v), lambda: statistics.median(v.tolist()),
            lambda: np.median(v))]
        print(f"{n:>7} {t[0]:>11.1f} {t[1]:>14.1f} {t[2]:>13.1f} {t[1] / t[0]:>13.1f}"
              f" {t[2] / t[0]:>6.1f}")
    for module in ("statistics", "numpy.ma"):
        print(f"import {module}: {_import_ms(module):.1f} ms added to the start-up")


if __name__ == "__main__":
    main()
