"""The runner registry's metric names: each runner declares the measurement columns it
writes (`runners.METRICS`), and `runners.is_metric` answers for the analyses, which take it
as an argument (they sit below the campaign and never import it)."""

from __future__ import annotations

import pytest

from storlab.campaign.runners import METRICS, REGISTRY, is_metric
from storlab.errors import CampaignError


def test_every_registered_runner_declares_its_metrics() -> None:
    assert set(METRICS) == set(REGISTRY)


@pytest.mark.parametrize("name", [
    "fio.read.iops", "fio.read.bw", "fio.read.clat_ns.percentile.99.000000",
    "fio.jobs.0.sync.lat_ns.mean", "total_iops", "read_bw_bytes", "write_clat_p99_9_us",
    "usr_cpu", "ops_s", "get_lat_p99_ms", "reads_per_s", "latency_p95_ms", "util_disk",
    "transactions_s", "total_events", "put_ops_per_s", "prepare_s", "bottleneck_util"])
def test_measurement_columns_are_metrics(name: str) -> None:
    assert is_metric(name)


@pytest.mark.parametrize("name", ["bs", "iodepth", "rwmixread", "numjobs", "read_ahead_kb",
                                  "journal", "clients", "object_size", "", "total_iops_x y"])
def test_settings_are_not_metrics(name: str) -> None:
    assert not is_metric(name)


def test_the_answer_for_some_runners_only() -> None:
    assert is_metric("ops_s", ["simulator"]) and not is_metric("ops_s", ["fio"])
    assert is_metric("read_clat_p99_us", ["fio"]) and not is_metric("read_clat_p99_us",
                                                                    ["simulator"])
    assert not is_metric("total_iops", ["command"])  # a command's are named by its user
    with pytest.raises(CampaignError, match="runner type 'nope' must be one of fio"):
        is_metric("x", ["nope"])


def test_fio_declares_every_metric_it_reports() -> None:
    from storlab.campaign.runners.fio import FioRunner

    names = FioRunner().metric_names()
    assert "read_clat_p99_us" in names
    assert [n for n in names if not is_metric(n, ["fio"])] == []
