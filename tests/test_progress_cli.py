"""Long commands that run no campaign show progress on a terminal, as `storlab run` does
(report, importance-eval, simulate --calibrate), and keep piped output clean."""

from __future__ import annotations

import itertools
import os
import pty
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


def on_a_terminal(argv: list[str], *args: str) -> tuple[int, str, str]:
    """Run storlab (`argv`, the program) with stderr on a pseudo-terminal (stdout piped):
    (code, stdout, what the terminal showed)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([*argv, *args], stdout=subprocess.PIPE,
                         stderr=slave, text=True, cwd=ROOT,
                         env={**os.environ, "COLUMNS": "120"})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out, _ = p.communicate(timeout=300)
    os.close(master)
    return p.returncode, out, b"".join(chunks).decode(errors="replace")


@pytest.fixture
def table(tmp_path: Path) -> Path:
    grid = list(itertools.product(["a", "b", "c"], ["x", "y"], [1, 2], ["u", "v"]))
    df = pd.DataFrame(grid, columns=["p", "q", "r", "s"])
    rng = np.random.default_rng(0)
    df["y"] = 100 + 30 * (df["p"] == "a") + 5 * (df["q"] == "y") + rng.normal(0, 1, len(df))
    path = tmp_path / "full.csv"
    df.to_csv(path, index=False)
    return path


def test_importance_eval_shows_progress_on_a_terminal(table: Path,
                                                      storlab_argv: list[str]) -> None:
    code, out, tty = on_a_terminal(storlab_argv, "importance-eval", str(table), "-y", "y",
                                   "--fractions", "0.5", "--repeats", "40", "--ranks", "1",
                                   "-j", "1")
    assert code == 0, tty
    assert "importance-eval" in tty and "/40" in tty  # the bar: done/total repetitions
    assert "ground truth" in out  # the result on stdout, untouched by the bar


def test_report_shows_progress_on_a_terminal_and_not_when_piped(
        tmp_path: Path, storlab: Any, storlab_argv: list[str]) -> None:
    # two factors: the report's steps are what is checked, not its figures (4 factors drew
    # 6 interaction panels, most of the test's time)
    df = pd.DataFrame(list(itertools.product(["a", "b", "c"], ["x", "y"], [0, 1])),
                      columns=["p", "q", "rep"]).drop(columns="rep")
    df["y"] = 100 + 30 * (df["p"] == "a") + np.random.default_rng(0).normal(0, 1, len(df))
    table = tmp_path / "two.csv"
    df.to_csv(table, index=False)
    html = tmp_path / "r.html"
    code, out, tty = on_a_terminal(storlab_argv, "report", str(table), "-y", "y", "-o",
                                   str(html))
    assert code == 0, tty
    assert "report" in tty and "/3" in tty and html.exists()
    p = storlab("report", str(table), "-y", "y", "-o", str(html), timeout=300)
    assert p.returncode == 0 and p.stderr == ""  # piped: no bar, no escape codes
