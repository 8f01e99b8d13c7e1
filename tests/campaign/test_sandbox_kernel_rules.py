"""Routes the by-name covering of Unix sockets missed, closed by kernel rules instead: a
root daemon's socket bound in another network namespace (so this namespace's
/proc/net/unix does not list it), one renamed after bind, one bound after the program
started, and a program that connects through io_uring (whose operations never pass the
seccomp filter). Each with the real CLI, real bwrap and a real program; the listener
counts the connections it accepted (its "victim bytes": a daemon that does what it is
asked)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(os.geteuid() != 0, reason="a root daemon's socket under /opt"),
              pytest.mark.xdist_group("fio")]

#: A root daemon in a network namespace of its own (`unshare -n`): binds `path` (renamed
#: to `rename` right after bind when given, bound only once `after` exists when given),
#: then appends a line to `count` per connection it accepts.
DAEMON = """
import os, socket, sys, time
path, rename, after, count = sys.argv[1:5]
while after and not os.path.exists(after):
    time.sleep(0.02)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
if rename:
    os.rename(path, rename)
s.listen(8)
open(count + ".ready", "w").close()
while True:
    c, _ = s.accept()
    with open(count, "a") as fh:
        fh.write("1\\n")
    try:  # a client that hung up at once (storlab asking who listens) ends nothing
        c.sendall(b"hi")
    except OSError:
        pass
    c.close()
"""

#: The run's program: connects to argv[1] (waiting up to 10 s for it to appear) with
#: socket() and connect(), prints what it got as the metric line.
PROBE = """
import json, os, socket, sys, time
p = sys.argv[1]
for _ in range(500):
    if os.path.exists(p):
        break
    time.sleep(0.02)
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    s.connect(p)
    got = s.recv(2).decode()
except OSError as exc:
    got = type(exc).__name__
print(json.dumps({"y": 1, "got": got}))
"""

class Daemon:
    """A root listener under /opt in another network namespace."""

    def __init__(self, base: Path, tmp: Path, rename: bool = False, after: str = "") -> None:
        self.dir = base
        self.dir.mkdir(parents=True, exist_ok=True)
        bound = self.dir / "bound.sock"
        self.path = self.dir / ("renamed.sock" if rename else "bound.sock")
        self.count = tmp / f"count-{uuid.uuid4().hex[:6]}"
        self.proc = subprocess.Popen(
            ["unshare", "-n", sys.executable, "-c", DAEMON, str(bound),
             str(self.path) if rename else "", after, str(self.count)])
        if not after:
            self.wait()

    def wait(self) -> None:
        for _ in range(500):
            if Path(f"{self.count}.ready").exists():
                return
            time.sleep(0.02)
        raise AssertionError("the daemon did not start")

    @property
    def accepted(self) -> int:
        return len(self.count.read_text().splitlines()) if self.count.exists() else 0

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def opt_dir() -> Iterator[Path]:
    d = Path("/opt") / f"storlab-test-{uuid.uuid4().hex[:8]}"
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def shown(d: Path) -> dict[str, Any]:
    """`d` declared readable: outside the campaign's directory, with the opt-in."""
    return {"readable": [str(d)], "allow_destructive": True}


def campaign(make: Any, d: Path, program: str, target: Path, **sandbox: Any) -> Path:
    """A one-run command campaign whose program (`program`'s code) tries `target`."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "probe.py").write_text(program)
    return make(d, [sys.executable, str(d / "probe.py"), str(target)], **sandbox)


def test_a_root_daemon_under_opt_in_another_network_namespace(
        tmp_path: Path, opt_dir: Path, program_got: Any, command_campaign: Any,
        storlab: Any) -> None:
    """Not on this namespace's /proc/net/unix, so never covered by name. /opt is no longer
    shown; shown (`sandbox.readable`), the program cannot make a Unix socket without
    `sandbox.sockets`; declared there, a root daemon's socket is refused before any run
    (storlab's question, SO_PEERCRED, is the one connection it accepts); declared with
    `allow_destructive`, exactly that socket is reached."""
    d = Daemon(opt_dir, tmp_path)
    try:
        assert str(d.path) not in Path("/proc/net/unix").read_text()
        assert program_got(campaign(command_campaign, tmp_path / "hidden", PROBE, d.path)) == \
            "PermissionError"  # no Unix socket at all (it would not be there either)
        assert program_got(campaign(command_campaign, tmp_path / "shown", PROBE, d.path,
                                     **shown(opt_dir))) == "PermissionError"
        assert d.accepted == 0
        r = storlab("run", campaign(command_campaign, tmp_path / "declared", PROBE, d.path,
                                    sockets=[str(d.path)]), timeout=120)
        assert r.returncode == 2 and "runs as root" in r.stderr, r.stderr
        assert d.accepted == 1  # storlab's question
        assert program_got(campaign(command_campaign, tmp_path / "allowed", PROBE, d.path,
                                     sockets=[str(d.path)], allow_destructive=True)) == "hi"
        assert d.accepted == 2
    finally:
        d.close()


def test_a_socket_renamed_after_bind_and_one_bound_after_the_start(
        tmp_path: Path, opt_dir: Path, program_got: Any, command_campaign: Any) -> None:
    """/proc/net/unix names a renamed socket by its old name, and a socket bound while the
    program runs was not there to cover: neither is reached, shown in a readable
    directory, without a declared socket. With another socket declared (Unix sockets can
    be made), the renamed one is still covered (the walk of the readable directory)."""
    d = Daemon(opt_dir, tmp_path, rename=True)
    try:
        assert not d.path.with_name("bound.sock").exists() and d.path.exists()
        assert program_got(campaign(command_campaign, tmp_path / "renamed", PROBE, d.path,
                                     **shown(opt_dir))) == "PermissionError"
        other = str(tmp_path / "other.sock")
        assert program_got(campaign(command_campaign, tmp_path / "renamed2", PROBE, d.path,
                                     **shown(opt_dir), sockets=[other])) == \
            "ConnectionRefusedError"
        assert d.accepted == 0
    finally:
        d.close()
    late = opt_dir.with_name(opt_dir.name + "-late")
    # bound once the run's directory exists: the program is starting or running
    camp = campaign(command_campaign, tmp_path / "late", PROBE, late / "bound.sock",
                    **shown(late))
    late.mkdir()
    d = Daemon(late, tmp_path, after=str(tmp_path / "late" / "scratch" / "c1-r1"))
    try:
        assert program_got(camp) == "PermissionError"
        assert d.accepted == 0
    finally:
        d.close()


def test_io_uring_is_refused_unless_declared(tmp_path: Path, storlab: Any,
                                             opt_dir: Path, program_got: Any,
                                             command_campaign: Any,
                                             uring_connect: str) -> None:
    """A program that connects through io_uring alone gets no ring (EPERM); with
    `sandbox.io_uring: true` it gets one, and its IORING_OP_CONNECT meets the walls'
    second layer: the socket in the shown directory is covered (ECONNREFUSED)."""
    d = Daemon(opt_dir, tmp_path)
    try:
        assert program_got(campaign(command_campaign, tmp_path / "plain", uring_connect,
                                    d.path, **shown(opt_dir))) == "setup:1"
        assert program_got(campaign(command_campaign, tmp_path / "declared", uring_connect,
                                    d.path, **shown(opt_dir), io_uring=True)) == \
            "connect:-111"
        assert d.accepted == 0
    finally:
        d.close()


@pytest.mark.skipif(shutil.which("fio") is None or not os.path.exists("/usr/bin/python3"),
                    reason="fio or the system's python3 not installed")
def test_only_fio_with_an_io_uring_engine_gets_a_ring(tmp_path: Path, storlab: Any,
                                                      uring_connect: str) -> None:
    """The fio runner with `ioengine=io_uring` runs (its ring allowed); a program fio
    starts for a job with another engine (`exec_prerun`) gets no ring. A program fio
    would start for an io_uring job would inherit fio's ring: such a job is refused
    before any run unless the campaign declares `sandbox.io_uring: true` (then every
    program gets rings, the prerun's included)."""
    camp = tmp_path / "fio"
    camp.mkdir()
    (camp / "uring.py").write_text(uring_connect)
    out = camp / "data"
    out.mkdir()

    def spec(engines: list[str], **sandbox: Any) -> Path:
        s = {"name": "f", "timeout": 60, "keep_scratch": True, "space": {"factors": [
                {"name": "ioengine", "kind": "categorical", "values": engines}],
                "responses": [{"name": "write_iops", "goal": "maximize"}]},
             "design": {"kind": "full"},
             "runner": {"type": "fio", "options": {
                 "rw": "write", "bs": "4k", "size": "64k", "directory": str(out),
                 "exec_prerun": f"/usr/bin/python3 {camp / 'uring.py'} /nowhere.sock"}},
             # (the job's directory declared: a program fio starts gets it too)
             "sandbox": {"writable": ["data"], **sandbox}}
        (camp / "campaign.yaml").write_text(yaml.safe_dump(s, sort_keys=False))
        return camp / "campaign.yaml"

    def preruns() -> set[str]:
        # fio writes what the prerun printed to <job>.prerun.txt in the run's directory
        got = {json.loads(p.read_text().strip().splitlines()[-1])["got"]
               for p in (camp / "scratch").glob("*/*.prerun.txt")}
        shutil.rmtree(camp / "scratch")
        for p in camp.glob("campaign.db*"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        return got

    r = storlab("run", str(spec(["io_uring", "psync"])), timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "exec_prerun" in r.stderr and "sandbox.io_uring: true" in r.stderr and \
        len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list(camp.glob("scratch/*/*.prerun.txt"))
    r = storlab("run", str(spec(["psync", "sync"])), timeout=120)
    assert r.returncode == 0 and "ran 2" in r.stdout, r.stdout + r.stderr
    assert preruns() == {"setup:1"}
    r = storlab("run", str(spec(["io_uring", "psync"], io_uring=True)), timeout=120)
    assert r.returncode == 0 and "ran 2" in r.stdout, r.stdout + r.stderr
    assert preruns() == {"connect:-2"}


@pytest.mark.skipif(any(shutil.which(p) is None for p in ("initdb", "pg_ctl", "sysbench")),
                    reason="PostgreSQL or sysbench not installed")
def test_sysbench_reaches_a_database_only_through_its_declared_socket(
        tmp_path: Path, storlab: Any, command_campaign: Any) -> None:
    """sysbench's PostgreSQL driver talks to the server over its Unix socket: without
    `sandbox.sockets` the run fails with EPERM and storlab's hint names the declaration;
    with the socket declared, the benchmark runs."""
    import pwd
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="storlab-pg-", dir="/var/tmp"))
    nobody = pwd.getpwnam("nobody")
    os.chown(base, nobody.pw_uid, nobody.pw_gid)

    def as_nobody(*argv: str) -> None:
        subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                        "--clear-groups", *argv], check=True, capture_output=True,
                       timeout=120)

    try:
        as_nobody("initdb", "-D", str(base / "data"), "-U", "root", "--auth=trust")
        as_nobody("pg_ctl", "-D", str(base / "data"), "-w", "-l", str(base / "log"),
                  "-o", f"-k {base} -c listen_addresses=", "start")
        sock = base / ".s.PGSQL.5432"
        sb = (f"sysbench --db-driver=pgsql --pgsql-host={base} --pgsql-user=root "
              "--pgsql-db=postgres --tables=1 --table-size=100 oltp_read_only")
        script = (f"{sb} prepare >&2 && {sb} --time=1 run | grep -q 'transactions:' "
                  f"&& {sb} cleanup >&2 && echo '{{\"y\": 1}}'")
        for declared in (False, True):
            camp = tmp_path / f"pg-{declared}"
            command_campaign(camp, ["sh", "-c", script],
                             **({"sockets": [str(sock)]} if declared else {}))
            r = storlab("run", str(camp / "campaign.yaml"), timeout=120)
            assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
            out = camp / "campaign.db.output"
            said = "".join(p.read_text() for p in out.glob("*.std*"))
            if declared:
                assert '{"y": 1}' in said, said[-1500:]
            else:
                assert '{"y": 1}' not in said and "Operation not permitted" in said, said
                import sqlite3

                with sqlite3.connect(camp / "campaign.db") as db:
                    tails = [t for (t,) in db.execute("SELECT stderr_tail FROM runs")]
                assert any("sandbox.sockets" in (t or "") for t in tails), tails
    finally:
        subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                        "--clear-groups", "pg_ctl", "-D", str(base / "data"), "-m",
                        "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)
