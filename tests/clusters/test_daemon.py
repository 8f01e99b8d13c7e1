"""Daemon start and stop by pid AND start time, on small programs whose lives we control
(no cluster): one copy only, a dying process is not taken for gone, the exit status or
signal of a daemon that dies is reported, the log writer caps the log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from storlab.clusters import ClusterError
from storlab.clusters._util import (
    EXITING,
    GONE,
    RUNNING,
    Daemon,
    proc_state,
    read_record,
    stop_pid,
    wait_until,
)


def _daemon(tmp_path, code: str, name: str = "d") -> Daemon:
    return Daemon(name, [sys.executable, "-c", code, str(tmp_path)], tmp_path / f"{name}.log",
                  tmp_path / f"{name}.pid")


def test_start_once_stop_exactly(tmp_path):
    d = _daemon(tmp_path, "import time; print('hello', flush=True); time.sleep(60)")
    d.start()
    rec = read_record(d.pidfile)
    assert rec.start is not None and rec.log_pid
    # (a child still inside execve shows an empty command line for a moment: EXITING)
    wait_until(lambda: rec.state() == RUNNING, 20, "the daemon to run", [d])
    wait_until(lambda: "hello" in d.log.read_text(), 20, "the greeting in the log", [d])
    # a second copy is refused, through this PID file or any other
    with pytest.raises(ClusterError, match="second copy"):
        d.start()
    with pytest.raises(ClusterError, match="second copy"):
        _daemon(tmp_path, "import time; print('hello', flush=True); time.sleep(60)",
                "other").start()
    # a recycled pid (same pid, another start time) is not ours
    assert proc_state(rec.pid, rec.start + 1) == GONE
    assert stop_pid(d.pidfile, grace=5)
    assert proc_state(rec.pid, rec.start) == GONE and not d.pidfile.exists()
    assert proc_state(rec.log_pid, rec.log_start) == GONE  # the log writer followed
    assert not stop_pid(d.pidfile)


def test_a_dying_process_is_not_gone_until_it_is(tmp_path):
    """The leader thread exited, another thread still runs (what an exiting daemon looks
    like in /proc): EXITING, never GONE, so a restart waits for it."""
    code = ("import ctypes, threading, time\n"
            "threading.Thread(target=time.sleep, args=(600,)).start()\n"
            "time.sleep(0.2)\n"
            "ctypes.CDLL(None).pthread_exit(None)\n")
    d = _daemon(tmp_path, code)
    d.start()
    rec = read_record(d.pidfile)
    wait_until(lambda: proc_state(rec.pid, rec.start) == EXITING, 20, "the leader to exit")
    d.check_alive()  # not gone: no "exited" error
    with pytest.raises(ClusterError, match="second copy"):
        d.start()
    assert stop_pid(d.pidfile, grace=5)  # SIGTERM ends the remaining thread
    assert proc_state(rec.pid, rec.start) == GONE


def test_death_by_signal_is_reported(tmp_path):
    d = _daemon(tmp_path, "import time; print('up', flush=True); time.sleep(60)")
    d.start()
    time.sleep(0.3)
    os.kill(d.proc.pid, signal.SIGKILL)
    with pytest.raises(ClusterError) as exc:
        wait_until(lambda: False, 20, "the daemon", [d])
    assert "d exited during start-up (killed by signal 9 (SIGKILL))" in str(exc.value)


def test_log_is_capped_and_memstore_dump_left_out(tmp_path, monkeypatch):
    import storlab.clusters._util as u

    monkeypatch.setattr(u, "LOG_CAP_BYTES", 20000)
    dump = ("print('2026-01-01T00:00:00.000+0000 7f 0 memstore(/x/osd.0) dump:{', flush=True)\n"
            "for i in range(5000): print('    \"name\": \"obj%d\",' % i)\n"
            "print('}')\n")
    code = ("for i in range(2000): print('2026-01-01T00:00:00.000+0000 7f 1 line %d' % i)\n"
            + dump + "print('2026-01-01T00:00:01.000+0000 7f 0 after the dump', flush=True)\n")
    d = _daemon(tmp_path, code)
    d.start()
    wait_until(lambda: d.state() == GONE, 20, "the program to finish")
    stop_pid(d.pidfile)
    text = d.log.read_text()
    old = (tmp_path / "d.log.1").read_text()
    assert len(text) <= 20000 and len(old) <= 20000
    assert "obj1" not in text + old and "dump: (left out)" in text + old
    assert "left out of this log" in text and text.rstrip().endswith("after the dump")


def test_free_ports_stay_below_the_ephemeral_range():
    """An outgoing connection may take any port of the kernel's ephemeral range between the
    check and a daemon's bind (a Swift test failed on 127.0.0.1:38218 that way)."""
    from pathlib import Path

    from storlab.clusters._util import free_port_block

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(50):
        base = free_port_block(5)
        assert 1024 <= base and base + 5 <= low


@pytest.mark.skipif(os.geteuid() != 0, reason="the walls' daemons are root's (cluster up)")
@pytest.mark.parametrize("opt_out, tie", [(False, True), (False, False), (True, True)])
def test_a_walled_daemon_is_recorded_by_its_own_pid_and_stopped(tmp_path, monkeypatch,
                                                                opt_out, tie):
    """A daemon started in walls (`Daemon(walls=...)`, as Ceph's are): its PID record
    names the program itself, not bwrap: pid 1 of its sandbox (bwrap's `--info-fd`) when it
    may outlive storlab, the child of bwrap's init (pid 2) when tied to storlab; the
    root it sees is read-only but for its writable place; SIGTERM by the record ends it and
    bwrap with it, and its exit status is bwrap's. Opted out of the sandbox
    (`STORLAB_UNSANDBOXED=1`), the program is started as it is."""
    import storlab.campaign.runners.cluster_walls  # noqa: F401  (registers the walls)

    if opt_out:
        monkeypatch.setenv("STORLAB_UNSANDBOXED", "1")
    own = tmp_path / "own"
    own.mkdir()
    code = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
            "open(os.path.join(sys.argv[1], 'mine'), 'w').close()\n"
            "if sys.argv[2] == 'probe':  # only in walls: unwalled root would write it\n"
            "    try:\n        open('/etc/storlab-walled-probe', 'w')\n"
            "    except OSError as e:\n        print('refused', e.errno, flush=True)\n"
            "time.sleep(60)\n")
    d = Daemon("w", ["python3", "-c", code, str(own), "-" if opt_out else "probe"],
               tmp_path / "w.log",
               tmp_path / "run" / "w.pid", tie_to_parent=tie,
               walls={"cwd": str(own), "writable": [str(own)]})
    pid = d.start()
    wait_until(lambda: (own / "mine").exists(), 20, "the daemon to write its place", [d])
    rec = read_record(d.pidfile)
    assert rec.pid == pid and rec.state() == RUNNING
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        # the program, not bwrap
        assert os.path.basename(fh.read().split(b"\0")[0]).startswith(b"python")
    with open(f"/proc/{pid}/status") as fh:
        nspid = next(line for line in fh if line.startswith("NSpid:")).split()[1:]
    if opt_out:
        assert nspid == [str(pid)]
    else:
        assert nspid[-1] == ("2" if tie else "1")
        wait_until(lambda: "refused 30" in d.log.read_text(), 20, "EROFS on /etc", [d])
    assert not os.path.exists("/etc/storlab-walled-probe")
    os.kill(pid, signal.SIGTERM)  # by the record's pid: the program's own handler runs
    wait_until(lambda: proc_state(pid, rec.start) == GONE, 20, "the daemon to end")
    with pytest.raises(ClusterError, match="exit status 7"):  # bwrap's status is its own
        d.check_alive()
    stop_pid(d.pidfile, grace=10)
    assert not d.pidfile.exists()


def test_give_tree_refuses_a_deep_tree_or_a_link_in_one_line(tmp_path):
    """`give_tree` walks by hand, one descriptor a level: a normal tree is given (modes
    for the owner alone, links left as they are); a tree deeper than GIVE_DEPTH (its owner
    may make one while `up` runs) and a top swapped for a link are refused in one line, no
    RecursionError, EMFILE or ELOOP traceback, and no descriptor is left open."""
    from storlab.clusters._util import GIVE_DEPTH, give_tree

    uid, gid = os.getuid(), os.getgid()
    top = tmp_path / "t"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "f").write_text("x")
    os.chmod(top / "a" / "f", 0o666)
    os.chmod(top / "a", 0o777)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.chmod(outside, 0o755)
    os.symlink(outside, top / "a" / "link")
    give_tree(top, uid, gid)
    assert [oct(os.lstat(p).st_mode & 0o777) for p in (top, top / "a", top / "a" / "b",
                                                      top / "a" / "f")] == \
        ["0o700", "0o700", "0o700", "0o600"]
    assert os.lstat(outside).st_mode & 0o777 == 0o755  # the link was not followed
    fds = len(os.listdir("/proc/self/fd"))
    deep = tmp_path / "deep"
    (deep / "/".join(["d"] * (GIVE_DEPTH + 5))).mkdir(parents=True)
    with pytest.raises(ClusterError, match=f"deeper than {GIVE_DEPTH} directories") as exc:
        give_tree(deep, uid, gid)
    assert "\n" not in str(exc.value)
    os.symlink(top, tmp_path / "swapped")
    with pytest.raises(ClusterError, match="swapped: cannot be given .*a link is never"):
        give_tree(tmp_path / "swapped", uid, gid)
    assert len(os.listdir("/proc/self/fd")) == fds


def test_a_listener_checked_by_a_host_name(tmp_path, free_ports):
    """A cluster state may name its host (`localhost`): the check resolves it and finds
    the daemon's own socket (it said "held by another process"); a port another process
    holds is still that, and a name that does not resolve says so, not "held"."""
    import socket

    from storlab.clusters._util import listener_is_daemons
    from storlab.errors import PortTaken

    port = free_ports(2)
    d = _daemon(tmp_path, "import socket, time\n"
                          f"s = socket.socket(); s.bind(('127.0.0.1', {port}))\n"
                          "s.listen(); print('up', flush=True); time.sleep(60)\n")
    d.start()
    try:
        wait_until(lambda: "up" in d.log.read_text(), 20, "the daemon to listen", [d])
        for host in ("localhost", "127.0.0.1"):
            assert listener_is_daemons(d.pidfile, "d", host, port)
        with socket.socket() as other:  # this test's own socket: not the daemon's
            other.bind(("127.0.0.1", port + 1))
            other.listen()
            with pytest.raises(PortTaken, match="held by another process"):
                listener_is_daemons(d.pidfile, "d", "localhost", port + 1)
        with pytest.raises(ClusterError, match="resolves") as exc:
            listener_is_daemons(d.pidfile, "d", "no-such-host.invalid", port)
        assert not isinstance(exc.value, PortTaken)
    finally:
        stop_pid(d.pidfile, grace=5)


#: Started in a process of its own: a walled daemon tied to it (as test clusters start
#: Ceph's), which changes its credentials as `ceph-mon --setuser ceph` does; prints its pid.
_TIED_STARTER = """
import sys, time
import storlab.campaign.runners.cluster_walls  # registers the walls
from pathlib import Path
from storlab.clusters._util import Daemon

own = Path(sys.argv[1])
code = ("import os, pwd, time\\n"
        "u = pwd.getpwnam('ceph')\\n"
        "os.setgroups([]); os.setgid(u.pw_gid); os.setuid(u.pw_uid)\\n"
        "print('dropped', os.getuid(), flush=True)\\n"
        "time.sleep(300)\\n")
d = Daemon("w", ["python3", "-c", code], own / "w.log", own / "run" / "w.pid",
           tie_to_parent=True, walls={"cwd": str(own), "writable": [str(own)]})
print(d.start(), flush=True)
time.sleep(300)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the walls' daemons are root's (cluster up)")
def test_a_tied_walled_daemon_that_drops_root_dies_with_its_starter(tmp_path):
    """A walled daemon was its sandbox's pid 1 (`--as-pid-1`); changing its credentials
    (`--setuser ceph`) cleared the parent-death signal bwrap gave it, so a killed test run
    left it running. Tied, it now runs under bwrap's init, which dies with the starter and
    takes the PID namespace down: gone within seconds of a SIGKILL of the starter."""
    import pwd

    try:
        ceph_uid = pwd.getpwnam("ceph").pw_uid
    except KeyError:
        pytest.skip("no ceph user")
    own = tmp_path / "own"
    own.mkdir()
    starter = subprocess.Popen([sys.executable, "-c", _TIED_STARTER, str(own)],
                               stdout=subprocess.PIPE, text=True)
    rec = None
    try:
        pid = int(starter.stdout.readline())
        rec = read_record(own / "run" / "w.pid")
        assert rec is not None and rec.pid == pid
        wait_until(lambda: f"dropped {ceph_uid}" in (own / "w.log").read_text(), 20,
                   "the daemon to drop root")
        with open(f"/proc/{pid}/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        assert fields["Uid"].split()[0] == str(ceph_uid)
        # the record names the program itself, not bwrap's init
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            assert os.path.basename(fh.read().split(b"\0")[0]).startswith(b"python")
        starter.kill()
        starter.wait()
        deadline = time.monotonic() + 5
        while proc_state(pid, rec.start) != GONE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc_state(pid, rec.start) == GONE, "the daemon outlived its starter"
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if rec is not None and proc_state(rec.pid, rec.start) != GONE:
            os.kill(rec.pid, signal.SIGKILL)


def test_a_daemon_gets_no_hard_memlock_above_its_soft_one(tmp_path):
    """A cluster's daemon (Swift's start unwalled, as here) starts with its hard
    RLIMIT_MEMLOCK lowered to the soft one storlab has: it used to inherit the hard one and
    could raise its soft limit to it (lock memory the host cannot reclaim)."""
    import resource

    old = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    low = 64 << 10
    if old[1] != resource.RLIM_INFINITY and old[1] <= low:
        pytest.skip("the hard RLIMIT_MEMLOCK here is already at most 64 KiB")
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (low, old[1]))
    code = ("import resource, sys, time; print('memlock', *resource.getrlimit("
            "resource.RLIMIT_MEMLOCK), flush=True); time.sleep(60)")
    d = _daemon(tmp_path, code)
    try:
        d.start()
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, old)
    try:
        wait_until(lambda: "memlock" in d.log.read_text(), 20, "the limits in the log", [d])
        said = next(x for x in d.log.read_text().splitlines() if x.startswith("memlock"))
        assert said.split()[1:] == [str(low), str(low)], said
    finally:
        stop_pid(d.pidfile)
