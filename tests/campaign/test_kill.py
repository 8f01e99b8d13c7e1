"""Killed means stopped: programs started for runs, and everything they started, die with a
SIGKILLed `storlab run` (real SIGKILL, real children, real fio), and a resume kills whatever
escaped before it runs anything again, so no two attempts of a run ever overlap."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.store import Store

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
pytestmark = pytest.mark.xdist_group("lock")

# A "benchmark": notes its pid (and a detached grandchild's), whether an earlier attempt of
# its run still holds the run's lock file (the grandchild inherits it), then sleeps 30 s
# unless the marker file exists. It runs in the run's sandbox: its pids are the sandbox's
# own (`log` finds them on the host) and it writes only to the declared directory `io`.
CHILD = r"""
import fcntl, json, os, subprocess, sys, time
log, key, marker, detach = sys.argv[1:5]
held = open(os.path.join(os.path.dirname(log), "lock." + key), "a")
try:
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    busy = ""
except BlockingIOError:  # an earlier attempt (or what it started) still runs
    busy = "1"
line = f"{key} {os.getpid()}"
if detach == "1" and not os.path.exists(marker):
    g = subprocess.Popen(["sleep", "60"], start_new_session=True, pass_fds=[held.fileno()])
    line += f" {g.pid}"
line += f" overlap={busy} t={time.time()}"
with open(log, "a") as fh:
    fh.write(line + "\n")
if not os.path.exists(marker):
    time.sleep(30)
print(json.dumps({"y": 1}))
"""

ESCAPED = CHILD.replace("{", "{{").replace("}", "}}")  # no `{name}` fields for the runner


def child_campaign(d: Path, detach: bool = False, runs: int = 2) -> Path:
    io = d / "io"
    io.mkdir(parents=True, exist_ok=True)
    spec: dict[str, Any] = {
        "name": "kill", "seed": 1, "timeout": 120, "randomize": False,
        "space": {"factors": [{"name": "n", "kind": "categorical",
                               "values": [f"v{i}" for i in range(runs)]}]},
        "design": {"kind": "full"},
        "runner": {"type": "command",
                   "options": {"command": [sys.executable, "-c", ESCAPED, str(io / "log.txt"),
                                           "{n}", str(io / "marker"), str(int(detach))],
                               "json_metrics": {"y": "y"}}},
        "repetitions": 1,
        "sandbox": {"writable": ["io"]},  # the log, the marker, the lock files
    }
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def _status_nspid(pid: int) -> list[int]:
    try:
        for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
            if ln.startswith("NSpid:"):
                return [int(x) for x in ln.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def host_pid(ns_pid: int, like: Any) -> int:
    """The host pid of the process the sandbox calls `ns_pid` and for which `like(pid)`
    holds; -1 if there is none (it is gone)."""
    for e in os.listdir("/proc"):
        if e.isdigit() and _status_nspid(int(e))[-1:] == [ns_pid] and like(int(e)):
            return int(e)
    return -1


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def _pidns(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


_HOST: dict[tuple[str, int], tuple[int, int | None]] = {}


def log(d: Path) -> list[dict[str, Any]]:
    """The children's lines, their pids as the host sees them (found once, while alive)."""
    p = d / "io" / "log.txt"
    out = []
    for i, ln in enumerate(p.read_text().splitlines() if p.exists() else []):
        w = ln.split()
        pids = [int(x) for x in w[1:] if x.isdigit()]
        if (str(p), i) not in _HOST:
            child = host_pid(pids[0], lambda h: str(p) in _argv(h) and w[0] in _argv(h))
            grand = None
            if len(pids) > 1:
                grand = host_pid(pids[1], lambda h: _pidns(h) == _pidns(child)) \
                    if child > 0 else -1
            _HOST[(str(p), i)] = (child, grand)
        child, grand = _HOST[(str(p), i)]
        ov = next(x for x in w if x.startswith("overlap="))[len("overlap="):]
        out.append({"key": w[0], "pid": child, "grandchild": grand,
                    "overlap": [int(x) for x in ov.split(",") if x], "t": float(w[-1][2:])})
    return out


def gone(pid: int) -> bool:
    """Not running any more (no process, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def seconds_until_gone(pids: list[int], limit: float = 10.0) -> float:
    t0 = time.monotonic()
    while not all(gone(p) for p in pids) and time.monotonic() - t0 < limit:
        time.sleep(0.01)
    return time.monotonic() - t0


def descendants(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(e))
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def program(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return ""


def wait_for(pred: Any, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, "timed out"
        time.sleep(0.02)


def rows(db: Path) -> dict[str, dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    out = {r["key"]: dict(r) for r in con.execute("SELECT * FROM runs")}
    con.close()
    return out


@pytest.fixture
def kill_storlab_when(storlab_forked: Any) -> Any:
    """Start `storlab run` (a process forked from the started program), SIGKILL it once
    `ready(its pid)` holds; its pid and its descendants at that moment (pid -> program)."""
    def kill(camp: Path, ready: Any, *extra: str) -> tuple[int, dict[int, str]]:
        p = storlab_forked.start("run", str(camp), "-q", *extra)
        try:
            wait_for(lambda: ready(p.pid))
            below = {c: program(c) for c in descendants(p.pid)}
            p.send_signal(signal.SIGKILL)
        finally:
            p.kill()
            p.wait()
        return p.pid, below
    return kill


@pytest.fixture
def resume(storlab: Any) -> Any:
    """`storlab run CAMP -q`, finished."""
    def run(camp: Path) -> subprocess.CompletedProcess[str]:
        return storlab("run", str(camp), "-q", timeout=120)
    return run


def test_child_dies_with_storlab_and_the_resume_does_not_overlap(
        tmp_path: Path, kill_storlab_when: Any, resume: Any) -> None:
    d = tmp_path / "c"
    camp = child_campaign(d)
    _, below = kill_storlab_when(camp, lambda _: log(d))
    child = log(d)[0]["pid"]
    assert child in below
    took = seconds_until_gone(list(below))
    print(f"children gone {took:.3f} s after SIGKILL of storlab")
    assert took < 2.0, f"{[p for p in below if not gone(p)]} still running"
    (d / "io" / "marker").touch()
    r = resume(camp)
    assert r.returncode == 0, r.stderr
    again = [e for e in log(d) if e["key"] == "v0"]
    assert len(again) == 2 and again[1]["overlap"] == []
    after = rows(d / "campaign.db")
    assert all(x["status"] == "ok" for x in after.values()) and after["c1-r1"]["attempts"] == 2


def test_detached_grandchild_dies_with_storlab_too(tmp_path: Path, kill_storlab_when: Any) -> None:
    d = tmp_path / "c"
    camp = child_campaign(d, detach=True)
    _, below = kill_storlab_when(camp, lambda _: log(d))
    first = log(d)[0]
    try:
        assert first["grandchild"] in below
        # setsid'd: out of the program's group and session, yet gone with storlab
        took = seconds_until_gone([first["pid"], first["grandchild"]])
        assert took < 2.0
    finally:
        if not gone(first["grandchild"]):
            os.kill(first["grandchild"], signal.SIGKILL)


def test_resume_kills_a_leftover_before_running_again(tmp_path: Path, storlab_argv: list[str],
                                                      storlab: Any) -> None:
    """A process that escaped is killed by the resume first. In the sandbox nothing escapes
    (the whole PID namespace dies with its guard); unsandboxed (STORLAB_UNSANDBOXED=1, as a
    `system_writable` step runs) it can: here storlab is frozen and the run's guard killed
    with SIGKILL, so nothing was left to kill the detached grandchild."""
    d = tmp_path / "c"
    camp = child_campaign(d, detach=True)
    env = {**os.environ, "STORLAB_UNSANDBOXED": "1"}
    p = subprocess.Popen([*storlab_argv, "run", str(camp), "-q"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    grandchild = 0
    try:
        # the whole line (the file exists, empty, from its open until the write)
        line = d / "io" / "log.txt"
        wait_for(lambda: line.exists() and line.read_text().endswith("\n"))
        w = [int(x) for x in line.read_text().split()[1:3]]
        first, grandchild = {"pid": w[0]}, w[1]  # unsandboxed: the host's own pids
        with open(f"/proc/{first['pid']}/stat") as fh:
            guard = int(fh.read().rsplit(")", 1)[1].split()[1])
        p.send_signal(signal.SIGSTOP)  # so that it cannot record the run as failed
        os.kill(guard, signal.SIGKILL)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert seconds_until_gone([first["pid"]]) < 2.0  # the program died with its guard
        assert not gone(grandchild)  # but this one is left over
        (d / "io" / "marker").touch()
        r = storlab("run", str(camp), "-q", timeout=120, env={"STORLAB_UNSANDBOXED": "1"})
        assert r.returncode == 0, r.stderr
        assert "killing 1 process(es) left running for run(s) c1-r1" in r.stderr
        assert f"{grandchild} (sleep 60)" in r.stderr
        assert gone(grandchild)
        again = [e for e in (d / "io" / "log.txt").read_text().splitlines()
                 if e.startswith("v0 ")]
        assert len(again) == 2 and "overlap= " in again[1]  # dead before the run restarted
        assert all(x["status"] == "ok" for x in rows(d / "campaign.db").values())
    finally:
        p.kill()
        if grandchild and not gone(grandchild):
            with contextlib.suppress(ProcessLookupError):
                os.kill(grandchild, signal.SIGKILL)


def test_sandboxed_run_leaves_nothing_when_its_guard_is_killed(
        tmp_path: Path, storlab_argv: list[str]) -> None:
    """The same escape attempt inside the sandbox: killing the run's guard ends the PID
    namespace, the detached grandchild with it; nothing is left for a resume to find."""
    d = tmp_path / "c"
    camp = child_campaign(d, detach=True)
    p = subprocess.Popen([*storlab_argv, "run", str(camp), "-q"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: log(d) and log(d)[0]["grandchild"])
        first = log(d)[0]
        assert first["pid"] > 0 and first["grandchild"] > 0
        guard = first["pid"]
        while "bwrap" not in program(guard):  # up to the sandbox, then its guard
            with open(f"/proc/{guard}/stat") as fh:
                guard = int(fh.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{guard}/stat") as fh:
            guard = int(fh.read().rsplit(")", 1)[1].split()[1])
        p.send_signal(signal.SIGSTOP)
        os.kill(guard, signal.SIGKILL)
        assert seconds_until_gone([first["pid"], first["grandchild"]]) < 2.0
    finally:
        p.kill()
        p.wait()


def test_parallel_workers_and_their_children_die_with_storlab(
        tmp_path: Path, kill_storlab_when: Any, resume: Any) -> None:
    d = tmp_path / "c"
    camp = child_campaign(d, runs=2)
    _, below = kill_storlab_when(camp, lambda _: len(log(d)) == 2, "-e", "parallel:2")
    children = [e["pid"] for e in log(d)]
    assert set(children) <= set(below) and len(below) >= 4  # 2 workers + 2 programs
    took = seconds_until_gone(list(below))
    print(f"workers and children gone {took:.3f} s after SIGKILL of storlab")
    assert took < 2.0, f"{[p for p in below if not gone(p)]} still running"
    (d / "io" / "marker").touch()
    r = resume(camp)
    assert r.returncode == 0, r.stderr
    assert all(x["status"] == "ok" for x in rows(d / "campaign.db").values())


@needs_fio
def test_fio_dies_with_storlab(tmp_path: Path, kill_storlab_when: Any, resume: Any) -> None:
    d = tmp_path / "c"
    d.mkdir()
    spec: dict[str, Any] = {
        "name": "fiokill", "seed": 1, "timeout": 120, "randomize": False,
        "space": {"factors": [{"name": "rw", "kind": "categorical",
                               "values": ["randwrite", "randread"]}]},
        "design": {"kind": "full"},
        "runner": {"type": "fio", "options": {"ioengine": "psync", "size": "4M",
                                              "runtime": "30s", "time_based": 1}},
        "repetitions": 1,
    }
    camp = d / "campaign.yaml"
    camp.write_text(yaml.safe_dump(spec))
    db = d / "campaign.db"

    def fio_running(storlab: int) -> bool:
        """The first run marked running and its fio started below storlab (a second after
        the mark, under load, it was not always started yet; and fio checks the options
        before the store exists)."""
        try:
            r = rows(db).get("c1-r1") if db.exists() else None
        except sqlite3.OperationalError:
            return False
        return bool(r) and any(program(p).endswith("fio") for p in descendants(storlab))

    _, below = kill_storlab_when(camp, fio_running)
    fios = [p for p, prog in below.items() if prog.endswith("fio")]
    assert fios, below
    took = seconds_until_gone(list(below))
    print(f"fio ({len(fios)} processes) gone {took:.3f} s after SIGKILL of storlab")
    assert took < 2.0, f"{[p for p in below if not gone(p)]} still running"
    spec["runner"]["options"]["runtime"] = "300ms"  # same plan, a quick resume
    camp.write_text(yaml.safe_dump(spec))
    # storlab refuses to mix runs measured with other settings in one store; this test
    # only wants a quick resume, so it makes the store forget the settings it recorded.
    con = sqlite3.connect(db)
    con.execute("DELETE FROM meta WHERE key = 'measurement'")
    con.commit()
    con.close()
    t_resume = time.time()
    r = resume(camp)
    assert r.returncode == 0, r.stderr
    after = rows(db)
    assert all(x["status"] == "ok" for x in after.values())
    assert after["c1-r1"]["attempts"] == 2 and after["c1-r1"]["started"] >= t_resume


def test_old_store_gains_the_owner_column(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE runs (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, config_id INTEGER
        NOT NULL, repetition INTEGER NOT NULL, warmup INTEGER NOT NULL, config TEXT NOT NULL,
        status TEXT NOT NULL, exit_code INTEGER, started REAL, ended REAL, host TEXT,
        attempts INTEGER NOT NULL DEFAULT 0, stderr_tail TEXT, raw TEXT, metrics TEXT,
        rows TEXT);
        INSERT INTO runs (key, seq, config_id, repetition, warmup, config, status, attempts,
        metrics) VALUES ('c1-r1', 1, 1, 1, 0, '{"a": 1}', 'ok', 1, '{"y": 2.5}');
    """)
    con.commit()
    con.close()
    with Store(db) as st:
        cols = [r[1] for r in st.db.execute("PRAGMA table_info(runs)")]
        assert cols[-1] == "owner"
        assert st.runs()[0]["metrics"] == {"y": 2.5} and st.statuses() == {"c1-r1": "ok"}
        with st.writer_lock():
            st.mark_running("c2-r1", 2, 2, 1, False, {"a": 2})
        owner = st.db.execute("SELECT owner FROM runs WHERE key='c2-r1'").fetchone()[0]
        assert json.loads(owner)["pid"] == os.getpid()
    with Store(db) as st:  # opening again changes nothing
        assert [r[1] for r in st.db.execute("PRAGMA table_info(runs)")].count("owner") == 1


def test_dask_leftovers_are_killed_before_the_resume_runs(tmp_path: Path, storlab: Any,
                                                          kill_storlab_when: Any,
                                                          tls_dask_cluster: Any) -> None:
    """A Dask worker finishes a task whose client was SIGKILLed: the resume kills it first
    (on the campaign's host, and through the scheduler on every worker)."""
    from storlab.campaign.executors import DaskExecutor

    d = tmp_path / "c"
    camp = child_campaign(d)
    stray = None
    addr = "dask://" + tls_dask_cluster.scheduler_address.split("://", 1)[1]
    _, _ = kill_storlab_when(camp, lambda _: log(d), "-e", addr)
    child = log(d)[0]["pid"]
    time.sleep(1.0)
    assert not gone(child)  # the worker goes on with the orphaned task
    (d / "io" / "marker").touch()
    r = storlab("run", str(camp), "-q", "-e", addr, timeout=120)
    assert r.returncode == 0, r.stderr
    # the program and its sandbox (bwrap and the namespace's init carry the tag too)
    assert "killing 3 process(es) left running for run(s) c1-r1" in r.stderr
    assert gone(child)
    again = [e for e in log(d) if e["key"] == "v0"]
    assert len(again) == 2 and again[1]["overlap"] == []
    # the workers' own check: a tagged process on a worker's host is killed through the
    # scheduler (here the worker shares our host)
    from storlab.campaign.runners import campaign_identity

    owner = campaign_identity(d / "campaign.db")
    stray = subprocess.Popen(["sleep", "60"], start_new_session=True,
                             env={**os.environ, "STORLAB_RUN": f"{owner}/c2-r1"})
    ex = DaskExecutor(addr)
    try:
        ex._reap(owner)
    finally:
        ex.client.close()
    assert stray.wait(timeout=5) == -signal.SIGKILL
    if stray is not None and stray.poll() is None:
        stray.kill()


def test_program_status_and_output_pass_through_the_guard(tmp_path: Path) -> None:
    from storlab.campaign.runners._program import run_program

    out = run_program(["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path)
    assert (out.exit_code, out.stdout, out.stderr) == (3, "out\n", "err\n")
    # in the sandbox, bwrap's init reports a death by signal as 128 + the signal
    assert run_program(["sh", "-c", "kill -9 $$"], cwd=tmp_path).exit_code == \
        128 + signal.SIGKILL
    assert run_program("cat", shell=True, stdin_text="hello", cwd=tmp_path).stdout == "hello"
    missing = run_program(["/nonexistent/program"], cwd=tmp_path)
    assert missing.exit_code is None and "cannot start" in missing.stderr


def test_timeout_kills_a_detached_grandchild_whose_parent_exited(tmp_path: Path) -> None:
    """The subshell exits at once, so its setsid'd `sleep` is nobody's child any more, and
    it holds the program's stdout open: the 1-second timeout still holds (it used to return
    only after 60 s), and the sleep dies with the sandbox's PID namespace."""
    from storlab.campaign.runners._program import run_program

    unique = f"60.{secrets.randbelow(10**6):06d}"  # finds the sleep on the host
    out = run_program(["sh", "-c", f"(setsid sleep {unique} &); echo started; sleep 30"],
                      timeout=1.0, cwd=tmp_path)
    assert out.timed_out and out.ended - out.started < 10 and out.stdout == "started\n"
    left = [int(e) for e in os.listdir("/proc") if e.isdigit()
            and program(int(e)) == "sleep" and unique in _argv(int(e))]
    try:
        assert seconds_until_gone(left) < 2.0
    finally:
        for pid in left:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_detached_child_ends_with_the_program_and_does_not_hold_the_run(
        tmp_path: Path) -> None:
    """A program that leaves a daemon behind (holding stdout open) returns when it exits,
    and the daemon ends with the sandbox."""
    from storlab.campaign.runners._program import run_program

    unique = f"70.{secrets.randbelow(10**6):06d}"
    out = run_program(["sh", "-c", f"setsid sleep {unique} & echo done"], timeout=30,
                      cwd=tmp_path)
    # returned when the program exited, not at the 30-s timeout (nor the daemon's 70 s)
    assert out.exit_code == 0 and out.stdout == "done\n" and not out.timed_out
    assert out.ended - out.started < 20
    # the daemon ends with the sandbox: the kernel tears the namespace down (not instant
    # under load), so wait for it to be gone rather than look once after a fixed pause
    left = [int(e) for e in os.listdir("/proc") if e.isdigit() and unique in _argv(int(e))]
    assert seconds_until_gone(left) < 10.0, left
