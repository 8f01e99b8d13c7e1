"""postmark and sysbench fileio runners against the real Debian programs (tiny runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from storlab.campaign.runners.postmark import PostmarkRunner, parse_terse
from storlab.campaign.runners.sysbench import SysbenchRunner
from storlab.campaign.spec import CampaignError


@pytest.mark.skipif(shutil.which("postmark") is None, reason="postmark not installed")
def test_postmark_runs_and_parses(tmp_path: Path) -> None:
    res = PostmarkRunner(number=100, transactions=300).run(
        {"max_size": "16k", "buffering": False}, tmp_path)
    assert res.ok, res.stderr
    m = res.metrics
    assert m["transactions_per_s"] > 0 and m["read_bytes_per_s"] > 0
    assert "set size 500 16384" in (tmp_path / "postmark.cfg").read_text()


def test_postmark_rejected_command_is_a_failure() -> None:
    with pytest.raises(ValueError, match="Eh"):
        parse_terse("pm>Eh?\n1 1 500.00 462.00 200.00 262.00 257.00 243.00 462.00 224.00 "
                    "238.00 1566635.00 2990197.00\n")
    with pytest.raises(CampaignError, match="unknown option"):
        PostmarkRunner(colour="blue")


@pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench not installed")
def test_sysbench_fileio_runs_parses_and_fails_cleanly(tmp_path: Path) -> None:
    sb = SysbenchRunner(time=1, file_total_size="4M", file_num=2)
    res = sb.run({"file_test_mode": "rndrw", "file_block_size": 4096}, tmp_path / "a")
    assert res.ok, res.stderr
    m = res.metrics
    assert m["reads_per_s"] > 0 and m["writes_per_s"] > 0 and "latency_p95_ms" in m
    assert not list((tmp_path / "a").glob("test_file.*"))  # cleaned up
    bad = sb.run({"file_test_mode": "bogus"}, tmp_path / "b")
    assert bad.status == "failed" and "bogus" in bad.stderr
