"""Routes through which storlab (often root) wrote or showed a file it should not: a sweep
directory through a planted link, an input file through a link to a root-only file, a
fio file not made yet that opened its whole directory, a program's stream files that the
program could change the mode of. Each through the real CLI (and real bwrap/fio)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)
ROOT = Path(__file__).resolve().parents[2]


def test_sweep_refuses_a_planted_simulate_sweep_link(storlab, tmp_path: Path) -> None:
    """`simulate --sweep` made its default directory with mkdir(parents=True): a
    `simulate-sweep` link in the working directory made root write the campaign, its
    store and scratch where the link led. Now: one line naming the link, exit 2, nothing
    written there."""
    victim, work = tmp_path / "victim", tmp_path / "work"
    victim.mkdir()
    work.mkdir()
    (work / "simulate-sweep").symlink_to(victim)
    r = storlab("simulate", ROOT / "examples/sim/small.yaml", "--sweep", "nodes=4,8",
                cwd=work, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out, out
    assert "simulate-sweep is a symbolic link" in out, out
    assert list(victim.iterdir()) == []
