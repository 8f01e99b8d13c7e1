"""The real-Swift comparison's measuring plan (examples/swift-calibrate): the order of the
healthy and failed-device blocks, the subset selection, the paired ratio by order, and the
proxy conf switch of probe_quorum.py. Pure functions; no Swift is started here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

HERE = Path(__file__).resolve().parents[2] / "examples" / "swift-calibrate"


def _load(name: str):
    sys.path.insert(0, str(HERE))
    try:
        spec = importlib.util.spec_from_file_location(f"swift_calibrate_{name}", HERE / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(HERE))


run = _load("run")
probe_quorum = _load("probe_quorum")


@pytest.mark.parametrize("repeats", [1, 2, 7, 8, 10])
def test_block_orders_are_balanced_and_seeded(repeats):
    a = run.block_orders(repeats, seed=3)
    assert len(a) == repeats
    assert sum(a) == repeats // 2  # failed first in half (the odd one out healthy-first)
    assert a == run.block_orders(repeats, seed=3)
    if repeats >= 8:  # some seed orders them differently
        assert any(run.block_orders(repeats, seed=s) != a for s in range(5))


def test_select_filters_the_plan_and_refuses_an_empty_choice():
    got = run.select(list(run.PLAN), "calibration,failed device", "GET", "16KiB")
    assert [(p[1], p[4], p[6]) for p in got] == [(False, "GET", "calibration"),
                                                (True, "GET", "failed device")]
    assert len(run.select(list(run.PLAN), None, None, None)) == len(run.PLAN)
    with pytest.raises(SystemExit, match="select no point"):
        run.select(list(run.PLAN), "no such group", None, None)


def _pairs(ratios_healthy_first, ratios_failed_first):
    rows = []
    for rep, (r, first) in enumerate([(r, False) for r in ratios_healthy_first]
                                     + [(r, True) for r in ratios_failed_first]):
        for config, ops in (("replicas=3", 100.0), ("replicas=3;failed_disks=1", 100.0 * r)):
            rows.append({"config": config, "clients": 8, "object_size": "16KiB", "op": "GET",
                         "repeat": rep, "ops_s": ops, "failed_first": first, "load1": 1.0})
    return pd.DataFrame(rows)


def test_paired_ratio_tells_drift_from_behaviour():
    # A second block 20 % faster whatever it holds: the order's effect, not the failure's.
    drift = _pairs([1.2, 1.21, 1.19], [1 / 1.2, 1 / 1.21, 1 / 1.19])
    text = "\n".join(run.paired_by_order(drift))
    assert "healthy block first: 1.200" in text and "failed block first: 0.833" in text
    m = drift.pivot_table(index="repeat", columns="config", values="ops_s")
    ratio = m["replicas=3;failed_disks=1"] / m["replicas=3"]
    assert np.exp(np.log(ratio).mean()) == pytest.approx(1.0, abs=1e-3)


def test_order_balanced_reads_the_failed_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "OUT", tmp_path)
    assert run.order_balanced("GET") == ""
    _pairs([0.98, 1.03, 0.99], [1.01, 0.97, 1.02]).to_csv(tmp_path / "failed_get_1.csv",
                                                       index=False)
    text = run.order_balanced("GET")
    assert "6 pairs" in text and "inside the interval" in text
    _pairs([0.80, 0.81, 0.79], [0.80, 0.82, 0.78]).to_csv(tmp_path / "failed_get_1.csv",
                                                       index=False)
    assert "outside the interval" in run.order_balanced("GET")


def test_post_quorum_timeout_switch(tmp_path):
    conf = tmp_path / "proxy-server.conf"
    base = "[DEFAULT]\nworkers = 2\n\n[app:proxy-server]\nuse = egg:swift#proxy\n"
    conf.write_text(base)
    probe_quorum._set_post_quorum_timeout(conf, 0.0)
    assert "[app:proxy-server]\npost_quorum_timeout = 0.0\nuse" in conf.read_text()
    probe_quorum._set_post_quorum_timeout(conf, 0.0)  # set twice: one line
    assert conf.read_text().count("post_quorum_timeout") == 1
    probe_quorum._set_post_quorum_timeout(conf, None)
    assert conf.read_text() == base


def test_order_balanced_judges_against_the_model_ratio(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "OUT", tmp_path)
    df = _pairs([1.40, 1.50, 1.45], [1.48, 1.42, 1.47]).replace({"op": {"GET": "PUT"}})
    df["async_pendings"] = np.where(df["config"].str.contains("failed"), 1.0, 0.0)
    df.to_csv(tmp_path / "failed_put_1.csv", index=False)
    assert "model's 1.46 lies inside" in run.order_balanced("PUT", 1.46)
    assert "model's 1.00 lies outside" in run.order_balanced("PUT")
    assert "async pendings per failed-device PUT, by repetition: 1.00, 1.00" in \
        run.order_balanced("PUT", 1.46)


def test_paired_by_order_splits_failed_runs_by_container_position():
    df = _pairs([1.0], [1.0])
    failed = df["config"].str.contains("failed")
    df["failed_container_pos"] = np.nan
    df.loc[failed, "failed_container_pos"] = [1.0, 2.0]  # one repetition each
    df["async_pendings"] = np.where(df["failed_container_pos"] == 1.0, 1.6, 0.0)
    df["disk_flushes"] = 9.0
    text = "\n".join(run.paired_by_order(df))
    assert "position 1 of the container's ring nodes (1 runs)" in text
    assert "async pendings 1.60" in text and "async pendings 0.00" in text
