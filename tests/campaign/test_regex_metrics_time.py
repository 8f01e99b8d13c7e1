"""A `regex_metrics` pattern that backtracks cannot hang storlab: matching has a CPU-time
limit (the `regex` package's), the run's remaining time under `timeout:` capped to
MAX_MATCH_S, and hitting it fails the run with one line naming the pattern. Before,
Python's `re` ran `(a|a)+b` over a line of a's for hours after a run of milliseconds,
past `timeout:`, and again on every resume (the attack). Real storlab, real /bin/sh."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml

from storlab.campaign.runners.command import CommandRunner
from storlab.errors import CampaignError

BACKTRACKS = r"v=(?P<v>(a|a)+)b"  # 2^40 ways to fail on v=aaaa...a!


def test_a_backtracking_pattern_fails_the_run_not_storlab(tmp_path: Path, storlab) -> None:
    d = tmp_path / "c"
    d.mkdir()
    (d / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "redos", "design": {"kind": "full"}, "repetitions": 1, "timeout": 2,
        "space": {"factors": [{"name": "x", "kind": "categorical", "values": ["c", "d"]}],
                  "responses": [{"name": "v", "goal": "minimize"}]},
        "runner": {"type": "command", "options": {
            "command": ["sh", "-c", "printf 'v=%s!\\n' " + "a" * 40],
            "regex_metrics": [BACKTRACKS]}}}))
    r = storlab("run", d / "campaign.yaml", timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    con = sqlite3.connect(d / "campaign.db")
    try:
        rows = con.execute("SELECT status, stderr_tail FROM runs").fetchall()
    finally:
        con.close()
    assert [s for s, _ in rows] == ["failed", "failed"], rows
    for _, err in rows:
        line = err.strip().splitlines()[-1]
        assert line.startswith("storlab: pattern") and "CPU seconds" in line, err


def test_patterns_are_checked_when_the_campaign_loads() -> None:
    with pytest.raises(CampaignError, match="bad regular expression"):
        CommandRunner(["echo"], regex_metrics=["(?P<v>[0-9]+"])


def test_re_syntax_still_reads() -> None:
    r = CommandRunner(["echo"], regex_metrics=[r"(?<=n: )(?P<n>\d+)(?= ops)",
                                               r"^lat (?P<lat>[\d.]+)$"])
    assert r.extract("x\nn: 12 ops\nn: 34 ops\nlat 1.5\n") == {"n": 34.0, "lat": 1.5}
