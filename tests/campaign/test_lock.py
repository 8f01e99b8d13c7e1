"""One writer per campaign, with real concurrent `storlab run` processes: the second one is
refused with one line naming the holder (or waits with --wait), and a lock left by a
SIGKILLed holder is taken over."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.lock import CampaignLocked, hold
from storlab.campaign.runners.base import RunResult
from storlab.campaign.spec import CampaignError
from storlab.campaign.store import Store

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

pytestmark = pytest.mark.xdist_group("lock")

# A "benchmark" that notes (pid, run, start time) in a log (in `io/`, the directory its
# sandbox may write besides its run's), then waits until the file `go` exists (the test
# decides when runs may finish), then sleeps a little.
SLEEPER = ("import json, os, sys, time; "
           "open(sys.argv[1], 'a').write(f'{os.getpid()} {sys.argv[2]} {time.time()}\\n'); "
           "[time.sleep(0.05) for _ in range(1200) if not os.path.exists(sys.argv[4])]; "
           "time.sleep(float(sys.argv[3])); print(json.dumps({'y': 1}))")


def sleeper_campaign(d: Path, seconds: float = 0.1, runs: int = 4) -> Path:
    (d / "io").mkdir(parents=True, exist_ok=True)
    spec: dict[str, Any] = {
        "name": "lock", "seed": 1, "timeout": 60, "randomize": False,
        "space": {"factors": [{"name": "n", "kind": "categorical",
                               "values": [f"v{i}" for i in range(runs)]}]},
        "design": {"kind": "full"},
        "runner": {"type": "command",
                   "options": {"command": [sys.executable, "-c", SLEEPER, str(d / "io" / "log.txt"),
                                           "{n}", str(seconds), str(d / "go")],
                               "json_metrics": {"y": "y"}}},
        "repetitions": 1,
        "sandbox": {"writable": ["io"]},
    }
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def log_lines(d: Path) -> list[list[str]]:
    p = d / "io" / "log.txt"
    return [ln.split() for ln in p.read_text().splitlines()] if p.exists() else []


@pytest.fixture
def start(storlab_argv: list[str]) -> Any:
    """Start `storlab run CAMP -q EXTRA...` in the background (its pipes captured)."""
    def popen(camp: Path, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*storlab_argv, "run", str(camp), "-q", *extra], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return popen


def wait_for(pred: Any, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def rows(db: Path) -> dict[str, dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    out = {r["key"]: dict(r) for r in con.execute("SELECT * FROM runs")}
    con.close()
    return out


def test_second_run_is_refused_with_one_line_naming_the_holder(tmp_path: Path, start: Any,
                                                               storlab: Any) -> None:
    camp = sleeper_campaign(tmp_path / "c")
    a = start(camp)
    try:
        wait_for(lambda: log_lines(tmp_path / "c"))  # a is running its first run
        b = storlab("run", str(camp), "-q", timeout=60)
        (tmp_path / "c" / "go").touch()
        a_out, a_err = a.communicate(timeout=60)
    finally:
        a.kill()
    assert b.returncode == 2, b.stderr
    lines = b.stderr.strip().splitlines()
    assert len(lines) == 1, b.stderr
    assert f"pid {a.pid} on " in lines[0] and " since " in lines[0] and "--wait" in lines[0]
    assert "Traceback" not in b.stderr
    assert a.returncode == 0, a_err
    # exactly one process ran the campaign: each run once
    ran = [ln[1] for ln in log_lines(tmp_path / "c")]
    assert sorted(ran) == ["v0", "v1", "v2", "v3"]
    assert all(r["attempts"] == 1 and r["status"] == "ok"
               for r in rows(tmp_path / "c" / "campaign.db").values())


def test_wait_waits_for_the_holder_then_finds_nothing_left(tmp_path: Path, start: Any,
                                                           storlab_argv: list[str]) -> None:
    camp = sleeper_campaign(tmp_path / "c")
    a = start(camp)
    try:
        wait_for(lambda: log_lines(tmp_path / "c"))
        err = tmp_path / "b.err"
        with open(err, "w") as fh:
            b = subprocess.Popen([*storlab_argv, "run", str(camp), "-q", "--wait", "--json"],
                                 text=True, stdout=subprocess.PIPE, stderr=fh)
            wait_for(lambda: "waiting for" in err.read_text())  # b waits while a runs
            assert b.poll() is None and a.poll() is None
            (tmp_path / "c" / "go").touch()
            b_out, _ = b.communicate(timeout=60)
        b_err = err.read_text()
        a.communicate(timeout=60)
    finally:
        a.kill()
    assert a.returncode == 0
    assert b.returncode == 0, b_err
    assert f"waiting for pid {a.pid} on " in b_err
    summary = json.loads(b_out)
    assert summary["ran"] == 0 and summary["already_done"] == 4
    assert len(log_lines(tmp_path / "c")) == 4


def test_lock_of_a_sigkilled_holder_is_taken_over(tmp_path: Path, start: Any, storlab: Any) -> None:
    camp = sleeper_campaign(tmp_path / "c")
    d = tmp_path / "c"
    a = start(camp)
    try:
        wait_for(lambda: log_lines(d))
        holder = json.loads((d / "campaign.db.lock").read_text())
        assert holder["pid"] == a.pid
    finally:
        a.send_signal(signal.SIGKILL)
        a.wait()
    # the file still names the dead holder; the kernel has released its lock
    assert json.loads((d / "campaign.db.lock").read_text())["pid"] == a.pid
    (d / "go").touch()
    b = storlab("run", str(camp), "-q", timeout=60)
    assert b.returncode == 0, b.stderr
    assert f"taking over the lock of {d / 'campaign.db'} left by pid {a.pid} on " in b.stderr
    after = rows(d / "campaign.db")
    assert len(after) == 4 and all(r["status"] == "ok" for r in after.values())
    assert after["c1-r1"]["attempts"] == 2  # the run cut off by the kill, repeated once
    # a clean release leaves nothing to take over
    assert (d / "campaign.db.lock").read_text() == ""
    c = storlab("run", str(camp), "-q", timeout=60)
    assert c.returncode == 0 and "taking over" not in c.stderr


def test_two_stores_sharing_one_scratch_directory_do_not_run_at_once(tmp_path: Path, start: Any,
                                                                     storlab: Any) -> None:
    d = tmp_path / "c"
    camp = sleeper_campaign(d)
    other = d / "other.yaml"  # same directory, own store, the default scratch directory
    other.write_text(yaml.safe_dump({**yaml.safe_load(camp.read_text()), "store": "b.db"}))
    a = start(camp)
    try:
        wait_for(lambda: log_lines(d))
        b = storlab("run", str(other), "-q", timeout=60)
        (d / "go").touch()
        a.communicate(timeout=60)
    finally:
        a.kill()
    assert a.returncode == 0
    assert b.returncode == 2 and len(b.stderr.strip().splitlines()) == 1, b.stderr
    assert f"{d / 'scratch'}: scratch directory is in use" in b.stderr
    assert f"pid {a.pid} on " in b.stderr
    assert all(r["status"] == "ok" for r in rows(d / "campaign.db").values())


def test_runs_are_written_only_under_the_lock(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as st:
        with pytest.raises(CampaignError, match="writer_lock"):
            st.mark_running("c1-r1", 1, 1, 1, False, {"a": 1})
        with st.writer_lock():
            st.mark_running("c1-r1", 1, 1, 1, False, {"a": 1})
            st.record("c1-r1", RunResult("ok", {"y": 1.0}, "", "", 0, 1.0, 2.0))
            # a second writer in the same process is refused too (flock is per open file)
            with pytest.raises(CampaignLocked, match=r"pid \d+ on .* since "):
                with Store(tmp_path / "s.db") as other, other.writer_lock():
                    pass
        with pytest.raises(CampaignError, match="writer_lock"):
            st.record("c1-r1", RunResult("ok", {"y": 1.0}, "", "", 0, 1.0, 2.0))
        assert st.statuses() == {"c1-r1": "ok"}
        owner = json.loads(st.db.execute("SELECT owner FROM runs").fetchone()[0])
        assert owner["pid"] > 0 and owner["start"] > 0 and owner["host"]


HOLD_AND_FORK = """
import os, sys, time
from pathlib import Path
from storlab.campaign.lock import hold
with hold(Path(sys.argv[1])):
    if os.fork() == 0:  # a forked worker that outlives its parent
        time.sleep(30)
        os._exit(0)
    print("ready", flush=True)
    time.sleep(30)
"""


def test_lock_is_not_kept_by_a_forked_child_of_a_killed_holder(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    p = subprocess.Popen([sys.executable, "-c", HOLD_AND_FORK, str(db)], text=True,
                         stdout=subprocess.PIPE)
    child = 0
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        child = int(subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                                   text=True).stdout.split()[0])
        with pytest.raises(CampaignLocked, match=f"pid {p.pid} on "):
            with hold(db):
                pass
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert Path(f"/proc/{child}").exists()  # the child lives on
        with hold(db) as (_, stale):  # and the lock is free all the same
            assert stale is not None and stale.pid == p.pid
    finally:
        p.kill()
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


ROOT = Path(__file__).resolve().parents[2]


def _refused_then_waits(storlab_forked: Any, store: Path, args: list[str], cwd: Path) -> str:
    """With `store`'s lock held here: `storlab ARGS` is refused with one line that points at
    the same command's --wait (not at `storlab run`); `storlab ARGS --wait` waits, says so,
    and finishes once the lock is released. Returns the waiting command's stdout. Both are
    processes of their own forked from the started program (`storlab_forked`: a fresh
    start cost ~1.2 s of CPU each), one after the other."""
    with hold(store):
        b = storlab_forked(*args, cwd=cwd, timeout=120)
        assert b.returncode == 2, b.stderr
        lines = b.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {os.getpid()} on " in lines[0], b.stderr
        assert "give the same command --wait" in lines[0] and "storlab run" not in lines[0]
        w = storlab_forked.start(*args, "--wait", cwd=cwd)
        try:
            wait_for(lambda: w.err.exists() and "waiting for" in w.err.read_text(), timeout=120)
            assert w.poll() is None  # still waiting while the lock is held
        except BaseException:
            w.kill()
            w.wait()
            raise
    code = w.wait(180)
    done = w.result()
    assert code == 0, done.stderr
    return done.stdout


def test_a_simulate_sweep_waits_with_wait(tmp_path: Path, storlab_forked: Any) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    out = _refused_then_waits(
        storlab_forked, sweep / "campaign.db",
        ["simulate", str(ROOT / "examples/sim/small.yaml"), "--sweep",
         "object_workers=14,28", "--analytic", "--campaign", str(sweep), "--json", "-q"],
        tmp_path)
    assert [str(r["object_workers"]) for r in json.loads(out)["rows"]] == ["14", "28"]


def test_confirm_waits_with_wait(tmp_path: Path, storlab_forked: Any) -> None:
    camp = sleeper_campaign(tmp_path / "c", seconds=0.0, runs=2)
    (tmp_path / "c" / "go").touch()  # the runs need not wait for the test here
    out = _refused_then_waits(
        storlab_forked, tmp_path / "c" / "confirm.db",
        ["confirm", str(camp), "--config", "n=v0", "--against", "n=v1",
         "--runs", "2", "-y", "y:maximize", "-q", "--json"], tmp_path)
    assert [c["runs"] for c in json.loads(out)["configs"]] == [2, 2]


@pytest.mark.skipif(__import__("shutil").which("fio") is None, reason="fio is not installed")
def test_estimate_measure_waits_with_wait(tmp_path: Path, storlab_forked: Any) -> None:
    """`estimate measure` runs through the campaign loop: refused while another storlab holds
    its campaign, and like `storlab run` it waits with --wait (issue 15: it had no --wait,
    yet its refusal pointed at one)."""
    camp = tmp_path / "measure"
    camp.mkdir()
    out = _refused_then_waits(
        storlab_forked, camp / "campaign.db",
        ["estimate", "measure", "--sizes", "4k", "--repeats", "1", "--runtime",
         "1", "--file-size", "4m", "--campaign", str(camp), "-O", "numjobs=1", "--json"],
        tmp_path)
    runs = json.loads(out)["runs"]
    assert len(runs) == 2 and {r["status"] for r in runs} == {"ok"}
