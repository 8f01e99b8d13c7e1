"""Campaigns end to end with the real fio and real programs: store, resume after SIGKILL,
failures, argv safety, destructive-target refusal, Ctrl-C, executors (local and Dask)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from storlab.campaign.campaign import Campaign
from storlab.campaign.spec import CampaignError

FIO = {"ioengine": "psync", "size": "1M", "runtime": "400ms", "time_based": 1}
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")

def write_campaign(d: Path, **fields: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "t", "seed": 5, "timeout": 60, **fields}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def fio_campaign(d: Path, **fields: Any) -> Path:
    base = {
        "space": {"factors": [{"name": "bs", "kind": "ordinal", "values": ["4k", "64k"]},
                              {"name": "rw", "kind": "categorical",
                               "values": ["randread", "randwrite"]}]},
        "design": {"kind": "full"},
        "runner": {"type": "fio", "options": dict(FIO)},
        "repetitions": 2,
    }
    base.update(fields)
    return write_campaign(d, **base)


@pytest.fixture
def cli(storlab_forked: Any) -> Any:
    """`storlab ARGS...` in a process of its own forked from the started program (each fresh
    start cost ~1.2 s of CPU: 25 calls here), asserting success unless check=False. The
    SIGKILL test forks its child too (`storlab_forked.start`); the Ctrl-C test starts the
    program itself (its SIGINT handler is the subject)."""
    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        p = storlab_forked(*args, timeout=240)
        if check:
            assert p.returncode == 0, p.stderr
        return p
    return run


def rows(db: Path) -> dict[str, dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    out = {r["key"]: dict(r) for r in con.execute("SELECT * FROM runs")}
    con.close()
    return out


# A deterministic "benchmark": prints its argv and a metric computed from it, as JSON.
ECHO = ("import json, sys; a = sys.argv[1:]; "
        "print('banner'); print(json.dumps({'argv': a, 'y': len(a[0]) * 10 + int(a[1])}))")


def command_campaign(d: Path, **fields: Any) -> Path:
    base = {
        "space": {"factors": [{"name": "name", "kind": "categorical",
                               "values": ["; rm -rf x", "plain"]},
                              {"name": "n", "kind": "integer", "values": [1, 2]}]},
        "design": {"kind": "full"},
        "runner": {"type": "command",
                   "options": {"command": [sys.executable, "-c", ECHO, "{name}", "{n}"],
                               "json_metrics": {"y": "y", "argc": "argv"}}},
        "repetitions": 2,
    }
    base["runner"]["options"]["json_metrics"] = {"y": "y"}
    base.update(fields)
    return write_campaign(d, **base)


# --------------------------------------------------------------------------- fio, end to end
@needs_fio
def test_small_fio_campaign_end_to_end(tmp_path: Path, cli: Any) -> None:
    camp = fio_campaign(tmp_path / "c", warmup=1)
    cli("run", str(camp))
    stored = rows(tmp_path / "c" / "campaign.db")
    measured = [r for r in stored.values() if not r["warmup"]]
    assert len(measured) == 8 and len(stored) == 12  # 4 configs x 2 reps + 4 warm-ups
    assert all(r["status"] == "ok" for r in stored.values())
    doc = json.loads(measured[0]["raw"])  # fio's JSON kept whole
    assert "jobs" in doc and "bins" in doc["jobs"][0]["read"]["clat_ns"]
    # The order is randomised: not configuration by configuration.
    seq = [r["key"] for r in sorted(measured, key=lambda r: r["seq"])]
    assert seq != sorted(seq)
    cli("results", str(camp), "-o", str(tmp_path / "r.csv"))
    cli("results", str(camp), "--level", "run", "-o", str(tmp_path / "runs.parquet"))
    res = pd.read_csv(tmp_path / "r.csv")
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    assert len(res) == 4 and len(runs) == 8
    assert set(res["bs"]) == {"4k", "64k"} and (res["_n_ok"] == 2).all()
    reads = res[res["rw"] == "randread"]
    assert (reads["read_iops"] > 0).all() and (reads["write_iops"] == 0).all()
    # configuration averages are the means of the per-repetition rows
    mean = runs.groupby("config_id")["total_iops"].mean()
    assert res.set_index("config_id")["total_iops"].to_numpy() == pytest.approx(mean.to_numpy())
    # running again does nothing: everything is finished
    again = cli("run", str(camp), "--json")
    assert json.loads(again.stdout)["ran"] == 0


@needs_fio
def test_resume_after_sigkill_keeps_finished_runs(tmp_path: Path, cli: Any,
                                                  storlab_forked: Any,
                                                  act_on_a_stopped_look: Any) -> None:
    camp = fio_campaign(tmp_path / "c", repetitions=2)
    db = tmp_path / "c" / "campaign.db"
    proc = storlab_forked.start("run", str(camp), "-q")  # a process of its own, SIGKILLed

    def in_a_run() -> str | None:
        """The running run's key, once two runs are done and it has run for 0.3 s."""
        try:
            now = rows(db) if db.exists() else {}
        except sqlite3.OperationalError:
            return None
        ok = [r for r in now.values() if r["status"] == "ok"]
        running = [r for r in now.values() if r["status"] == "running"]
        if len(ok) >= 2 and running and time.time() - running[0]["started"] > 0.3:
            return str(running[0]["key"])
        return None

    # looked at with storlab stopped: the run cannot finish between the look and the kill
    killed_key = act_on_a_stopped_look(
        proc, in_a_run, lambda _: proc.send_signal(signal.SIGKILL))  # mid 1-second fio run
    proc.kill()
    proc.wait()
    assert killed_key is not None, "the campaign finished before it could be killed"
    before = {k: r for k, r in rows(db).items() if r["status"] == "ok"}
    assert rows(db)[killed_key]["status"] == "running"
    time.sleep(1.5)  # let the orphaned fio of the killed run finish its second
    cli("run", str(camp), "-q")
    after = rows(db)
    assert len(after) == 8 and all(r["status"] == "ok" for r in after.values())
    for k, r in before.items():  # finished runs kept as they were, not repeated
        assert after[k] == r
    assert after[killed_key]["attempts"] == 2
    assert sum(r["attempts"] for r in after.values()) == 9


@needs_fio
def test_failing_run_is_recorded_and_campaign_goes_on(tmp_path: Path, cli: Any) -> None:
    camp = fio_campaign(
        tmp_path / "c", repetitions=1,
        space={"factors": [{"name": "rw", "kind": "categorical",
                            "values": ["randread", "no-such-pattern"]}]})
    p = cli("run", str(camp), "--json")
    assert json.loads(p.stdout)["failed"] == 1 and json.loads(p.stdout)["ok"] == 1
    stored = rows(tmp_path / "c" / "campaign.db")
    bad = [r for r in stored.values() if r["status"] != "ok"]
    assert len(bad) == 1 and bad[0]["status"] == "failed"
    assert "no-such-pattern" in bad[0]["stderr_tail"] and bad[0]["exit_code"] != 0
    assert json.loads(cli("run", str(camp), "--json").stdout)["ran"] == 0
    # the one run retried fails again: every run of this invocation failed, exit 1
    p = cli("run", str(camp), "--retry-failed", "--json", check=False)
    retry = json.loads(p.stdout)
    assert p.returncode == 1 and retry["ran"] == 1 and retry["failed"] == 1, p.stderr
    assert "the one run failed" in p.stderr and "--failures" in p.stderr
    assert rows(tmp_path / "c" / "campaign.db")[bad[0]["key"]]["attempts"] == 2
    st = json.loads(cli("status", str(camp), "--json").stdout)
    assert {c["status"]: c["runs"] for c in st["counts"]} == {"ok": 1, "failed": 1}


def test_run_exits_1_when_every_run_of_the_invocation_failed(tmp_path: Path,
                                                              cli: Any) -> None:
    """`storlab run` exited 0 with every run failed (a caller trusting it hid the failure):
    now 1 (2 stays bad input) with a last line saying how many and where to see why; 0
    when some succeeded, saying "N of M runs failed"; --fail-on-error: 1 then too."""
    fail = ("import json, sys; sys.argv[1].startswith('bad') and sys.exit(3); "
            "print(json.dumps({'y': 1}))")
    spec = {"space": {"factors": [{"name": "name", "kind": "categorical",
                                   "values": ["bad", "good"]}]},
            "design": {"kind": "full"}, "repetitions": 1,
            "runner": {"type": "command", "options": {
                "command": [sys.executable, "-c", fail, "{name}"],
                "json_metrics": {"y": "y"}}}}
    every = write_campaign(tmp_path / "every", **{
        **spec, "space": {"factors": [{"name": "name", "kind": "categorical",
                                       "values": ["bad", "bad2"]}]}})
    p = cli("run", str(every), check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("all 2 runs failed") and f"storlab status {every} --failures" \
        in last, p.stdout
    again = cli("run", str(every), check=False)  # nothing left to run: nothing failed now
    assert again.returncode == 0, again.stdout + again.stderr
    some = write_campaign(tmp_path / "some", **spec)
    p = cli("run", str(some), check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip().splitlines()[-1].startswith("1 of 2 runs failed"), p.stdout
    strict = write_campaign(tmp_path / "strict", **spec)
    p = cli("run", str(strict), "--fail-on-error", check=False)
    assert p.returncode == 1 and "1 of 2 runs failed" in p.stdout, p.stdout + p.stderr
    fine = write_campaign(tmp_path / "fine", **{
        **spec, "space": {"factors": [{"name": "name", "kind": "categorical",
                                       "values": ["good", "good2"]}]}})
    p = cli("run", str(fine), "--fail-on-error", check=False)
    assert p.returncode == 0 and "failed" not in p.stdout.splitlines()[-1], p.stdout


def _a_block_device() -> str:
    for name in sorted(os.listdir("/dev")):
        try:
            if stat.S_ISBLK(os.stat(f"/dev/{name}").st_mode):
                return f"/dev/{name}"
        except OSError:
            continue
    return "/dev/storlab-no-such-disk"


def test_block_device_target_refused_before_anything_runs(tmp_path: Path, cli: Any) -> None:
    sentinel = tmp_path / "setup-ran"
    camp = fio_campaign(tmp_path / "c", repetitions=1,
                        runner={"type": "fio", "options": {**FIO, "filename": _a_block_device()}},
                        setup=[["touch", str(sentinel)]])
    p = cli("run", str(camp), check=False)
    assert p.returncode == 2
    assert "block device" in p.stderr and "allow_destructive" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not sentinel.exists() and not (tmp_path / "c" / "campaign.db").exists()


def test_existing_file_outside_the_campaign_needs_opt_in(tmp_path: Path, cli: Any) -> None:
    precious = tmp_path / "precious.dat"
    precious.write_bytes(b"keep me" * 1000)
    camp = fio_campaign(tmp_path / "c", repetitions=1,
                        runner={"type": "fio", "options": {**FIO, "filename": str(precious)}})
    p = cli("run", str(camp), check=False)
    assert p.returncode == 2 and "outside the campaign directory" in p.stderr
    assert precious.read_bytes() == b"keep me" * 1000
    assert not (tmp_path / "c" / "campaign.db").exists()
    # a file inside the campaign's scratch area is the campaign's own
    inside = tmp_path / "c" / "scratch" / "scratch.dat"
    inside.parent.mkdir()
    inside.write_bytes(b"x" * 4096)
    camp = fio_campaign(tmp_path / "c", repetitions=1,
                        runner={"type": "fio", "options": {**FIO, "filename": str(inside)}})
    Campaign.load(camp).preflight()


# --------------------------------------------------------------------------- argv safety
def test_shell_metacharacters_reach_the_program_as_one_argument(tmp_path: Path) -> None:
    victim = tmp_path / "c" / "x"
    victim.mkdir(parents=True)
    camp = command_campaign(
        tmp_path / "c", repetitions=1, keep_scratch=True,
        setup=[[sys.executable, "-c", "import sys; open('setup.txt','w').write(sys.argv[1])",
                "{name}"],
               {"run": "printf '%s' {name} > shell.txt", "shell": True}])
    c = Campaign.load(camp)
    s = c.run()
    assert s.ok == 4 and s.failed == 0
    stored = rows(tmp_path / "c" / "campaign.db")
    for r in stored.values():
        cfg = json.loads(r["config"])
        argv = json.loads(r["raw"].splitlines()[1])["argv"]
        assert argv == [cfg["name"], str(cfg["n"])]  # one literal element each
        wd = tmp_path / "c" / "scratch" / r["key"]
        assert (wd / "setup.txt").read_text() == cfg["name"]
        assert (wd / "shell.txt").read_text() == cfg["name"]  # quoted in shell steps
    assert victim.exists()
    m = c.results("run")
    assert (m["y"] == m["name"].str.len() * 10 + m["n"]).all()


def test_values_are_validated_against_the_space_before_any_step(tmp_path: Path, cli: Any) -> None:
    d = tmp_path / "c"
    d.mkdir()
    pd.DataFrame({"name": ["plain", "evil"], "n": [1, 2]}).to_csv(d / "configs.csv",
                                                                    index=False)
    sentinel = tmp_path / "setup-ran"
    camp = command_campaign(d, design={"csv": "configs.csv"},
                            setup=[["touch", str(sentinel)]])
    p = cli("run", str(camp), check=False)
    assert p.returncode == 2 and "configs.csv" in p.stderr and "'evil'" in p.stderr
    assert not sentinel.exists()


@pytest.mark.parametrize("make, says", [
    (lambda f: f.mkdir(), "is a directory"),                 # was an IsADirectoryError
    (lambda f: f.write_bytes(b"name,n\n\xe9,1\n"), "not a UTF-8 text file"),  # a traceback too
    (lambda f: f.write_text("name,n,n\nplain,1,1\n"), "duplicate column name(s) 'n'"),
])
def test_a_design_csv_is_read_as_every_table_is(tmp_path: Path, make: Any, says: str) -> None:
    d = tmp_path / "c"
    d.mkdir()
    make(d / "configs.csv")
    camp = command_campaign(d, design={"csv": "configs.csv"})
    with pytest.raises(CampaignError) as err:
        Campaign.load(camp)
    assert str(err.value).startswith(f"{camp}: field design.csv: {d / 'configs.csv'}: ")
    assert says in str(err.value) and "\n" not in str(err.value)


def test_bad_field_is_one_line_naming_file_field_value(tmp_path: Path, cli: Any) -> None:
    camp = command_campaign(tmp_path / "c", repetitions=0)
    p = cli("run", str(camp), check=False)
    assert p.returncode == 2
    assert "campaign.yaml" in p.stderr and "repetitions" in p.stderr and "0" in p.stderr
    camp = command_campaign(tmp_path / "d", setup=[["echo", "{nope}"]])
    p = cli("run", str(camp), check=False)
    assert p.returncode == 2 and "setup[0]" in p.stderr and "{nope}" in p.stderr


def test_changed_plan_is_refused(tmp_path: Path) -> None:
    camp = command_campaign(tmp_path / "c", repetitions=1)
    Campaign.load(camp).run()
    spec = yaml.safe_load(camp.read_text())
    spec["space"]["factors"][1]["values"] = [1, 3]
    camp.write_text(yaml.safe_dump(spec))
    with pytest.raises(CampaignError, match="another plan"):
        Campaign.load(camp).run()


def test_timeout_and_failure_of_a_command(tmp_path: Path) -> None:
    script = "import sys, time; n = int(sys.argv[1]); time.sleep(30 if n == 2 else 0); " \
             "sys.exit(0 if n == 1 else 3)"
    camp = command_campaign(
        tmp_path / "c", repetitions=1, timeout=1.5,
        runner={"type": "command", "options": {"command": [sys.executable, "-c", script, "{n}"],
                                               "regex_metrics": []}})
    t0 = time.time()
    s = Campaign.load(camp).run()
    assert time.time() - t0 < 25  # both timeouts held: one 30-s sleep would pass this bound
    stored = rows(tmp_path / "c" / "campaign.db")
    by_n = {json.loads(r["config"])["n"]: r["status"] for r in stored.values()}
    assert by_n == {1: "ok", 2: "timeout"}
    assert s.ok == 2 and s.failed == 2


# --------------------------------------------------------------------------- Ctrl-C
@needs_fio
def test_ctrl_c_stops_after_the_current_run(tmp_path: Path, storlab_argv: list[str],
                                            act_on_a_stopped_look: Any) -> None:
    camp = fio_campaign(tmp_path / "c", repetitions=2)
    db = tmp_path / "c" / "campaign.db"
    proc = subprocess.Popen([*storlab_argv, "run", str(camp), "-q"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def in_a_run() -> str | None:
        try:
            running = [r for r in rows(db).values() if r["status"] == "running"] \
                if db.exists() else []
        except sqlite3.OperationalError:
            return None
        if running and time.time() - running[0]["started"] > 0.2:
            return str(running[0]["key"])
        return None

    # the SIGINT lands (handled once storlab goes on) in the run the stopped look saw; a C
    # call it was stopped in (a commit) completes first, which the asserts below allow
    interrupted = act_on_a_stopped_look(proc, in_a_run,
                                        lambda _: proc.send_signal(signal.SIGINT), timeout=60)
    out, err = proc.communicate(timeout=60)
    assert interrupted is not None
    assert proc.returncode == 130, err
    after = rows(db)
    assert after[interrupted]["status"] == "ok"  # the current run was allowed to finish
    assert sum(r["status"] == "ok" for r in after.values()) < 8  # and nothing after it
    assert all(r["status"] == "ok" for r in after.values())


# --------------------------------------------------------------------------- executors
def _comparable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["started", "ended", "host"]).sort_values(
        ["config_id", "repetition"]).reset_index(drop=True)


def test_parallel_executor_gives_the_same_rows(tmp_path: Path) -> None:
    a = Campaign.load(command_campaign(tmp_path / "a"))
    b = Campaign.load(command_campaign(tmp_path / "b"))
    assert a.run().ok == 8
    assert b.run(executor="parallel:2").ok == 8
    pd.testing.assert_frame_equal(_comparable(a.results("run")), _comparable(b.results("run")))


@needs_fio
def test_dask_executor_on_local_cluster_matches_local(tmp_path: Path,
                                                     tls_dask_cluster: Any) -> None:
    addr = "dask://" + tls_dask_cluster.scheduler_address.split("://", 1)[1]
    local = Campaign.load(command_campaign(tmp_path / "local"))
    remote = Campaign.load(command_campaign(tmp_path / "dask"))
    assert local.run().ok == 8
    assert remote.run(executor=addr).ok == 8
    pd.testing.assert_frame_equal(_comparable(local.results("run")),
                                  _comparable(remote.results("run")))
    # real fio through Dask: same plan, same stored keys and metrics, all ok
    lf = Campaign.load(fio_campaign(tmp_path / "lf", repetitions=1))
    df = Campaign.load(fio_campaign(tmp_path / "df", repetitions=1))
    lf.run()
    df.run(executor=addr)
    rl, rd = rows(tmp_path / "lf" / "campaign.db"), rows(tmp_path / "df" / "campaign.db")
    assert rl.keys() == rd.keys()
    for k in rl:
        assert rl[k]["status"] == rd[k]["status"] == "ok"
        assert rl[k]["config"] == rd[k]["config"] and rl[k]["seq"] == rd[k]["seq"]
        assert json.loads(rl[k]["metrics"]).keys() == json.loads(rd[k]["metrics"]).keys()


# --------------------------------------------------------------------------- failures shown
@needs_fio
def test_fio_own_error_is_shown_by_status_and_the_report(tmp_path: Path, cli: Any) -> None:
    """With an engine fio cannot load, the store keeps fio's stderr and storlab's note
    after it; `status` (table, --failures, JSON) and the report show fio's own words
    ("engine nosuchengine not loadable"), not only "no fio JSON document"."""
    camp = fio_campaign(tmp_path / "c", repetitions=1,
                        runner={"type": "fio", "options": {**FIO, "ioengine": "nosuchengine"}},
                        space={"factors": [{"name": "bs", "kind": "ordinal",
                                            "values": ["4k", "64k"]}]})
    run = cli("run", str(camp), check=False)
    assert run.returncode == 1 and "all 2 runs failed" in run.stdout  # every run failed
    assert "not loadable" in run.stderr  # the progress line of each failed run
    table = cli("status", str(camp)).stdout
    assert "engine nosuchengine not loadable" in table and "no fio JSON document" in table
    full = cli("status", str(camp), "--failures").stdout
    assert "engine nosuchengine not loadable" in full
    data = json.loads(cli("status", str(camp), "--failures", "--json").stdout)
    assert len(data["failed"]) == 2
    for f in data["failed"]:
        assert any("engine nosuchengine not loadable" in ln for ln in f["stderr"])
        assert f["stderr"][-1] == "storlab: no fio JSON document in the output"
    cli("report", str(camp), "-o", str(tmp_path / "report.html"))
    html = (tmp_path / "report.html").read_text()
    assert html.count("engine nosuchengine not loadable") >= 2


@needs_fio
def test_results_table_leaves_out_columns_empty_on_every_row(tmp_path: Path, cli: Any) -> None:
    """A write-only design has no read latency: the terminal table shows the write p99
    instead of an empty read p99 column (the export keeps every column)."""
    camp = fio_campaign(tmp_path / "c", repetitions=1, space={"factors": [
        {"name": "bs", "kind": "ordinal", "values": ["4k", "64k"]}]},
        runner={"type": "fio", "options": {**FIO, "rw": "randwrite"}})
    cli("run", str(camp), "-q")
    shown = cli("results", str(camp)).stdout
    header = next(ln for ln in shown.splitlines() if "config_id" in ln)
    assert "write_clat_p99_us" in header and "read_clat" not in header, shown
    cli("results", str(camp), "-o", str(tmp_path / "r.csv"))
    assert pd.read_csv(tmp_path / "r.csv")["read_clat_p99_us"].isna().all()


def test_an_lhs_planned_before_the_seeded_extra_levels_resumes(tmp_path: Path) -> None:
    """A store planned by storlab before the LHS drew which levels get the extra runs (its
    design meta has no `extra_levels`) resumes with that plan instead of being refused as
    another plan."""
    from storlab.campaign.store import Store
    from storlab.design import make_design

    camp = command_campaign(tmp_path / "c", repetitions=1, seed=7,
                            design={"kind": "lhs", "runs": 6})
    spec = yaml.safe_load(camp.read_text())
    spec["space"]["factors"][1]["values"] = [1, 2, 3, 4, 5]
    camp.write_text(yaml.safe_dump(spec))
    c = Campaign.load(camp)
    old = make_design(c.space, "lhs", runs=6, seed=7, randomize_order=False,
                      extra_levels="first")
    new = [cfg for _, cfg, _ in c.configs]
    planned = [{n: (int(v) if n == "n" else v) for n, v in row.items() if n in c.space.names}
               for row in old.table.to_dict("records")]
    assert planned != new  # the two mappings differ for this seed
    with Store(c.store_path) as st:  # the earlier version's plan and metadata
        st.save_configs([(i, cfg, {}) for i, cfg in enumerate(planned, start=1)])
        meta = {k: v for k, v in old.meta.items() if k != "extra_levels"}
        st.set_meta("design", json.dumps(meta, default=str))
    Campaign.load(camp).run()
    Campaign.load(camp).run()  # and again: the mapping it resumed with is recorded
    ran = sorted(json.dumps(json.loads(r["config"]), sort_keys=True)
                 for r in rows(c.store_path).values())
    assert ran == sorted(json.dumps(p, sort_keys=True) for p in planned)
