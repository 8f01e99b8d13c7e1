"""A `regex_metrics` pattern that backtracks cannot hang storlab: matching has a limit in
CPU seconds of the matching thread (the campaign's `timeout:` held to MIN_MATCH_S..
MAX_MATCH_S), and hitting it fails the run with one line naming the pattern. Before,
Python's `re` ran `(a|a)+b` over a line of a's for hours after a run of milliseconds,
past `timeout:`, and again on every resume (the attack). Real storlab, real /bin/sh."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from storlab.campaign.runners import command
from storlab.campaign.runners.command import CommandRunner, match_limit
from storlab.errors import CampaignError

BACKTRACKS = r"v=(?P<v>(a|a)+)b"  # 2^40 ways to fail on v=aaaa...a!


def test_a_backtracking_pattern_fails_the_run_not_storlab(tmp_path: Path, storlab,
                                                          monkeypatch) -> None:
    """The run fails with one line naming the pattern; storlab goes on (the floor is
    lowered here, in this process, to keep the test short: 10 s by default)."""
    monkeypatch.setattr(command, "MIN_MATCH_S", 0.5)
    r = CommandRunner(["sh", "-c", "printf 'v=%s!\\n' " + "a" * 40],
                      regex_metrics=[BACKTRACKS])
    started = time.thread_time()
    res = r.run({}, tmp_path / "run", timeout=0.1)
    assert time.thread_time() - started < 5
    assert res.status == "failed", res
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("storlab: pattern") and "0.5 CPU seconds" in line, res.stderr


def test_the_limit_does_not_shrink_with_the_run_time() -> None:
    """A run that used all of `timeout:` still gets at least MIN_MATCH_S to be read."""
    assert command.MIN_MATCH_S >= 10
    assert match_limit(2) == command.MIN_MATCH_S and match_limit(30) == 30
    assert match_limit(3600) == match_limit(None) == command.MAX_MATCH_S


def test_another_busy_thread_does_not_spend_the_patterns_time() -> None:
    """`regex`'s own limit counts the whole process's CPU time: a thread hashing beside
    the matching (GIL released) spends it too (a pattern that needs 0.22 s timed out
    at a 0.44 s limit, its process at 0.5-0.65 s). Counted per thread, it gets its
    numbers."""
    text = "n=1\n" * 300_000 + "n=7\n"
    r = CommandRunner(["echo"], regex_metrics=[r"n=(?P<n>\d+)"])
    t = time.thread_time()
    assert r.extract(text) == {"n": 7.0}
    need = time.thread_time() - t
    stop = threading.Event()

    def busy() -> None:
        data = b"x" * (8 << 20)
        while not stop.is_set():
            hashlib.sha256(data).digest()  # releases the GIL: another core's CPU time

    th = threading.Thread(target=busy)
    th.start()
    try:
        for _ in range(3):
            assert r.extract(text, limit=2 * need) == {"n": 7.0}
    finally:
        stop.set()
        th.join()


def test_patterns_are_checked_when_the_campaign_loads() -> None:
    with pytest.raises(CampaignError, match="bad regular expression"):
        CommandRunner(["echo"], regex_metrics=["(?P<v>[0-9]+"])


def test_re_syntax_still_reads() -> None:
    r = CommandRunner(["echo"], regex_metrics=[r"(?<=n: )(?P<n>\d+)(?= ops)",
                                               r"^lat (?P<lat>[\d.]+)$"])
    assert r.extract("x\nn: 12 ops\nn: 34 ops\nlat 1.5\n") == {"n": 34.0, "lat": 1.5}
