"""What the examples' run.py scripts share: run the storlab CLI as a user would."""

from __future__ import annotations

import subprocess
import sys


def storlab(*args: str) -> str:
    """`storlab ARGS` (this interpreter's storlab), echoed; its stdout, or exit with its
    stderr when it fails."""
    print("$ storlab " + " ".join(args), flush=True)
    cp = subprocess.run([sys.executable, "-m", "storlab.cli", *args], text=True,
                        capture_output=True)
    if cp.returncode != 0:
        sys.exit(f"storlab {' '.join(args)} failed:\n{cp.stderr}")
    return cp.stdout
