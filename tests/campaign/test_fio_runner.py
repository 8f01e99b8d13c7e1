"""The fio runner against the real fio: tiny jobs in tmp dirs."""

from __future__ import annotations

import math
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from storlab.campaign.runners.fio import FioRunner
from storlab.campaign.runners.fio_parse import (METRICS, job_records, parse_json_output,
                                                percentile_from_bins, summarize)
from storlab.campaign.spec import CampaignError

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")

TINY = dict(ioengine="psync", size="2M", runtime=1, time_based=1)


def test_real_run_reports_every_metric(tmp_path: Path) -> None:
    res = FioRunner(**TINY).run({"rw": "randrw", "bs": "4k", "rwmixread": 70}, tmp_path)
    assert res.ok, res.stderr
    assert set(METRICS) <= set(res.metrics)
    m = res.metrics
    assert m["read_iops"] > 0 and m["write_iops"] > 0
    assert m["total_iops"] == pytest.approx(m["read_iops"] + m["write_iops"])
    assert m["read_bw_bytes"] == pytest.approx(m["read_iops"] * 4096, rel=0.02)
    assert m["read_clat_p50_us"] <= m["read_clat_p95_us"] <= m["read_clat_p99_us"] \
        <= m["read_clat_p99_9_us"]
    assert res.raw.lstrip().startswith("{")  # the JSON kept whole
    assert (tmp_path / "storlab.0.0").exists()  # default target: the run's own directory


def test_read_only_job_has_no_write_latency(tmp_path: Path) -> None:
    res = FioRunner(rw="randread", bs="4k", **TINY).run({}, tmp_path)
    assert res.ok, res.stderr
    assert res.metrics["write_iops"] == 0
    assert math.isnan(res.metrics["write_clat_p99_us"])


def test_histogram_percentiles_match_fio_and_warnings_are_skipped(tmp_path: Path) -> None:
    res = FioRunner(rw="randread", **TINY).run({}, tmp_path)
    noisy = ("fio: this platform does not support {something}\n" + res.raw
             + "\nfio: file hash not empty on exit\n")
    rec = job_records(parse_json_output(noisy))[0]
    clat = rec["read"]["clat_ns"]
    for p in (1.0, 50.0, 95.0, 99.0, 99.9):
        assert percentile_from_bins(clat["bins"], p) == clat["percentile"][f"{p:f}"]


def test_merged_jobs_sum_rates_and_recompute_percentiles(tmp_path: Path) -> None:
    # numjobs=2 without group_reporting gives two records: the runner must merge them.
    res = FioRunner(rw="randread", numjobs=2, group_reporting=0, **TINY).run({}, tmp_path)
    assert res.ok, res.stderr
    recs = job_records(parse_json_output(res.raw))
    assert len(recs) == 2
    one = [summarize([r]) for r in recs]
    assert res.metrics["read_iops"] == pytest.approx(sum(o["read_iops"] for o in one))
    p99 = res.metrics["read_clat_p99_us"]
    assert min(o["read_clat_p99_us"] for o in one) <= p99 <= max(o["read_clat_p99_us"]
                                                                for o in one)


def test_bad_option_fails_with_stderr(tmp_path: Path) -> None:
    res = FioRunner(**TINY).run({"rw": "bogus"}, tmp_path)
    assert res.status == "failed"
    assert res.exit_code != 0
    assert "rw=bogus" in res.stderr


def test_timeout_kills_fio(tmp_path: Path) -> None:
    t0 = time.time()
    res = FioRunner(ioengine="psync", size="1M", runtime=30, time_based=1).run(
        {"rw": "read"}, tmp_path, timeout=1.0)
    assert res.status == "timeout"
    assert time.time() - t0 < 10


def _a_block_device() -> str | None:
    for name in sorted(os.listdir("/dev")):
        p = f"/dev/{name}"
        try:
            if stat.S_ISBLK(os.stat(p).st_mode):
                return p
        except OSError:
            continue
    return None


def test_block_device_needs_opt_in(tmp_path: Path) -> None:
    dev = _a_block_device() or "/dev/storlab-no-such-disk"
    with pytest.raises(CampaignError, match="block device"):
        FioRunner(filename=dev, rw="write", **TINY).run({}, tmp_path)
    assert not list(tmp_path.iterdir())  # refused before anything ran
    FioRunner(filename=dev, allow_destructive=True).check_target({})  # opted in: no error


def test_client_server_aggregates_hosts(tmp_path: Path) -> None:
    from storlab.clusters._util import free_port_block
    from storlab.clusters.netns import wait_port

    # a port below the ephemeral range (an outgoing connection may take one in it between
    # the check and fio's bind), and the servers waited for until they listen (a fixed
    # pause was not always enough under load)
    port = free_port_block(1)
    hosts = [f"127.0.0.1,{port}", f"127.0.0.2,{port}"]
    servers = [subprocess.Popen(["fio", f"--server={h}"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for h in hosts]
    try:
        for h in hosts:
            wait_port(h.split(",")[0], port, timeout=60)
        res = FioRunner(clients=hosts, rw="randread", bs="4k", **TINY).run({}, tmp_path)
    finally:
        for s in servers:
            s.terminate()
            s.wait()
    assert res.ok, res.stderr
    assert len(res.rows) == 2
    assert {r["host"] for r in res.rows} == {"127.0.0.1", "127.0.0.2"}
    assert res.metrics["read_iops"] == pytest.approx(sum(r["read_iops"] for r in res.rows))
    lo = min(r["read_clat_p99_us"] for r in res.rows)
    hi = max(r["read_clat_p99_us"] for r in res.rows)
    assert lo <= res.metrics["read_clat_p99_us"] <= hi
