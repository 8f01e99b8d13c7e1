"""Landlock must not fail open: where the kernel's ABI has scopes (6, Linux 6.12) but the
ruleset cannot be made, the walls are refused in one line, and the next try makes it.
The failure here is the kernel's own: `landlock_create_ruleset` with no descriptor left
(EMFILE), in a fresh process so nothing was made before."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from storlab.campaign.runners._sandbox import landlock_missing

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")

SRC = str(Path(__file__).resolve().parents[2] / "src")

NO_FD_LEFT = r"""
import os, resource, tempfile
from storlab.campaign.runners import _sandbox
from storlab.campaign.runners._program import run_program
d = tempfile.mkdtemp()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
free = os.dup(0); os.close(free)
resource.setrlimit(resource.RLIMIT_NOFILE, (free, hard))  # no descriptor left to make
print("probe1", _sandbox.probe(_sandbox.bwrap_exe()))
print("refused1", _sandbox.landlock_refused())
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
print("probe2", _sandbox.probe(_sandbox.bwrap_exe()))
print("ruleset2", _sandbox.landlock_ruleset() is not None)
r = run_program(["/bin/true"], cwd=d, timeout=60)
print("run2", r.exit_code)
"""


def test_a_ruleset_the_kernel_could_not_make_refuses_and_is_tried_again() -> None:
    if landlock_missing() is not None:
        pytest.skip(f"Landlock: {landlock_missing()}")
    cp = subprocess.run([sys.executable, "-c", NO_FD_LEFT], capture_output=True, text=True,
                        timeout=120, env={**os.environ, "PYTHONPATH": SRC})
    assert cp.returncode == 0, cp.stderr
    out = dict(line.split(" ", 1) for line in cp.stdout.splitlines())
    assert out["probe1"].startswith("Landlock: ") and "landlock_create_ruleset failed: " \
        "Too many open files" in out["probe1"], cp.stdout
    assert out["refused1"] != "None" and "\n" not in out["probe1"], cp.stdout
    assert out["probe2"] == "None" and out["ruleset2"] == "True", cp.stdout
    assert out["run2"] == "0", cp.stdout + cp.stderr
