"""How long `regex_metrics` patterns take over the largest output storlab keeps (16 MiB,
`STDOUT_TAIL`), in CPU seconds of the matching thread, against the limit's floor
(`MIN_MATCH_S`) measured in the same run: the ratio says how far a plain pattern stays
from failing a legitimate run.

    .venv/bin/python benchmarks/bench_regex_metrics.py
"""

from __future__ import annotations

import time

from storlab.campaign.runners.command import MIN_MATCH_S, CommandRunner

SIZE = 16 << 20
CASES = {
    "4M short lines, n=(\\d+)": ("n=1\n", r"n=(?P<n>\d+)"),
    "fio-like lines, IOPS=(\\d+)": ("[ 12345] read: IOPS=8123, BW=123MiB/s avg=12.5\n",
                                   r"IOPS=(?P<iops>\d+)"),
    "fio-like lines, every number": ("[ 12345] read: IOPS=8123, BW=123MiB/s avg=12.5\n",
                                     r"(?P<x>[\d.]+)"),
}


def main() -> None:
    for name, (line, pattern) in CASES.items():
        text = line * (SIZE // len(line))
        r = CommandRunner(["true"], regex_metrics=[pattern])
        t = time.thread_time()
        r.extract(text)
        took = time.thread_time() - t
        print(f"{name:32s} {took:6.2f} CPU s; floor {MIN_MATCH_S:.0f} s = "
              f"{MIN_MATCH_S / took:.1f}x that")


if __name__ == "__main__":
    main()
