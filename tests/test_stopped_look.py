"""The tests' `act_on_a_stopped_look` (tests/conftest.py): what a look reads of a running
program's output is what the signal meets, however busy the program or the machine."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# A writer as busy as can be: the count it has reached, rewritten in place, endlessly.
WRITER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
i = 0
while True:
    i += 1
    os.pwrite(fd, b"%012d" % i, 0)
"""


def test_the_state_looked_at_is_the_state_killed(tmp_path: Path,
                                                 act_on_a_stopped_look: Any) -> None:
    count = tmp_path / "count"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(count)])
    try:
        def far_enough() -> int | None:
            text = count.read_bytes() if count.exists() else b""
            n = int(text) if len(text) == 12 else 0
            return n if n >= 10_000 else None

        def kill_late(_: int) -> None:  # the program is stopped: however late the signal
            time.sleep(0.1)                # comes, it meets the state the look read
            proc.send_signal(signal.SIGKILL)

        seen = act_on_a_stopped_look(proc, far_enough, kill_late, every=0.01)
    finally:
        proc.kill()
        proc.wait()
    assert seen is not None and seen >= 10_000
    # not one write more after the look (a look at the running writer is stale at once)
    assert int(count.read_bytes()) == seen
    assert proc.returncode == -signal.SIGKILL
