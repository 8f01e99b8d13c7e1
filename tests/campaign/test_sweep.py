"""`storlab simulate --sweep` runs as a campaign: its points land in the store, a SIGKILLed
sweep resumes without redoing finished points and gives the table an uninterrupted one
gives, and the sweep's old executor names still work (mapped to the campaign's)."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from storlab.campaign.campaign import Campaign
from storlab.campaign.sweep_campaign import campaign_executor, run_sweep
from storlab.errors import SimError
from storlab.sim.spec import load_raw

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "sim" / "small.yaml"
POINTS = 5


def sweep_args(d: Path, *extra: str) -> list[str]:
    """`storlab`'s arguments for the sweep into campaign `d`."""
    return ["simulate", str(SMALL), "--requests", "5000", "--sweep",
            "nodes=" + ",".join(str(n) for n in range(2, 2 + POINTS)), "--sweep",
            "replicas=3", "--executor", "serial", "--campaign", str(d), "-o",
            str(d.parent / f"{d.name}.csv"), *extra]


def ok_runs(db: Path) -> dict[str, float]:
    if not db.exists():
        return {}
    try:
        with sqlite3.connect(db) as c:
            return dict(c.execute("SELECT key, ended FROM runs WHERE status='ok'").fetchall())
    except sqlite3.OperationalError:  # the writer is creating it
        return {}


def test_a_killed_sweep_resumes_and_gives_the_same_table(tmp_path: Path, storlab: Any,
                                                         storlab_forked: Any,
                                                         act_on_a_stopped_look: Any) -> None:
    d = tmp_path / "killed"
    proc = storlab_forked.start(*sweep_args(d))  # a process of its own, SIGKILLed
    try:  # killed once a point is done, on a look taken with the sweep stopped
        act_on_a_stopped_look(proc, lambda: ok_runs(d / "campaign.db") or None,
                              lambda _: proc.send_signal(signal.SIGKILL), every=0.02)
    finally:
        proc.kill()
        proc.wait()
    finished = ok_runs(d / "campaign.db")  # as the kill left it
    assert 1 <= len(finished) < POINTS, finished
    assert not (tmp_path / "killed.csv").exists()

    r = storlab(*sweep_args(d), timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"{POINTS} runs planned, {len(finished)} done" in r.stderr
    with sqlite3.connect(d / "campaign.db") as c:
        rows = {k: (s, a, e) for k, s, a, e in
                c.execute("SELECT key, status, attempts, ended FROM runs").fetchall()}
    assert len(rows) == POINTS and all(s == "ok" for s, _, _ in rows.values())
    for key, ended in finished.items():  # not redone: the same record, one attempt
        assert rows[key][1:] == (1, ended), key

    fresh = tmp_path / "fresh"
    r2 = storlab(*sweep_args(fresh), timeout=300)
    assert r2.returncode == 0, r2.stderr
    resumed, whole = pd.read_csv(tmp_path / "killed.csv"), pd.read_csv(tmp_path / "fresh.csv")
    assert list(resumed["nodes"]) == list(range(2, 2 + POINTS))  # the sweep's order
    assert list(resumed["replicas"]) == [3] * POINTS  # a one-value axis: a constant column
    pd.testing.assert_frame_equal(resumed, whole)

    # the same command once more: nothing runs again, the same table
    r3 = storlab(*sweep_args(d, "--json"), timeout=300)
    assert r3.returncode == 0, r3.stderr
    with sqlite3.connect(d / "campaign.db") as c:  # (the run the kill interrupted was
        # attempted twice; nothing is attempted again now)
        again = {k: (a, e) for k, a, e in
                 c.execute("SELECT key, attempts, ended FROM runs").fetchall()}
    assert again == {k: (a, e) for k, (_, a, e) in rows.items()}
    # and the store reads like any campaign's
    camp = Campaign.load(d / "campaign.yaml")
    assert len(camp.results()) == POINTS and camp.design_meta()["kind"] == "full"


def test_another_sweep_in_the_same_directory_is_refused(tmp_path: Path) -> None:
    raw = load_raw(SMALL)
    run_sweep(raw, {"nic": ["10", "25"]}, analytic=True, executor="serial",
              campaign=tmp_path / "c")
    with pytest.raises(SimError, match="holds another sweep"):
        run_sweep(raw, {"nic": ["10", "40"]}, analytic=True, executor="serial",
                  campaign=tmp_path / "c")
    # the same sweep of the same cluster, named by another path: the same campaign
    again = run_sweep(raw, {"nic": ["10", "25"]}, analytic=True, executor="serial",
                      campaign=tmp_path / "c", source="elsewhere/cluster.yaml")
    assert again.campaign == (tmp_path / "c").absolute() and len(again.rows) == 2


def test_a_point_that_cannot_be_built_keeps_its_row_with_the_reason(tmp_path: Path) -> None:
    res = run_sweep(load_raw(SMALL), {"replicas": ["3", "100"]}, analytic=True,
                    executor="serial", campaign=tmp_path / "c")
    df = res.table()
    assert list(df["replicas"]) == [3, 100] and df["ops_s"].iloc[0] > 0
    assert pd.isna(df["ops_s"].iloc[1]) and "100 replicas" in df["error"].iloc[1]
    assert list(df.columns)[-2:] == ["error", "x_base"]


@pytest.mark.parametrize("name,workers,points,expect", [
    ("serial", None, 4, "sequential"), ("sequential", None, 4, "sequential"),
    ("local", 3, 4, "parallel:3"), ("local", None, 1, "sequential"),
    ("local", 1, 4, "sequential"), ("parallel:2", None, 4, "parallel:2"),
    ("dask://127.0.0.1:8786", None, 4, "dask://127.0.0.1:8786"),
])
def test_the_sweep_executor_names_map_to_the_campaign_executors(name, workers, points,
                                                                expect) -> None:
    with campaign_executor(name, workers, points) as ex:
        assert ex == expect


@pytest.mark.parametrize("name", ["bogus", "parallel:0", "parallel:x"])
def test_unknown_executors_are_refused_before_anything_is_written(tmp_path, name) -> None:
    with pytest.raises(SimError, match="--executor"):
        run_sweep(load_raw(SMALL), {"nic": ["10", "25"]}, analytic=True, executor=name,
                  campaign=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_dask_starts_a_local_cluster_for_the_sweep(tmp_path: Path) -> None:
    res = run_sweep(load_raw(SMALL), {"nic": ["10", "25"]}, analytic=True, executor="dask",
                    workers=1, campaign=tmp_path / "c")
    assert res.table()["ops_s"].gt(0).all()
    assert os.path.exists(tmp_path / "c" / "campaign.db")
