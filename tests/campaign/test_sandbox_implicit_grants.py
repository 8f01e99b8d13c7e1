"""Routes round the sandbox's Unix-socket and io_uring rules that an attack found, closed:
a datagram socketpair that `sendto`s a root daemon's path socket (or is `connect`ed
again), and programs fio starts (`exec_prerun`...) inheriting the grant fio's own engine
gets (a Unix socket for `protocol=unix`, a ring for io_uring). Each with the real CLI,
real bwrap and real programs; the root daemon logs what reached it (its "victim bytes")."""

from __future__ import annotations

import json
import os
import shutil
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

#: A root daemon in a network namespace of its own (`unshare -n`, so this namespace's
#: /proc/net/unix does not list its sockets): a datagram socket `dg.sock` and a stream
#: listener `st.sock` in `dir`; one line in `log` per datagram or connection.
DAEMON = """
import os, select, socket, sys
d, log = sys.argv[1:3]
dg = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
dg.bind(os.path.join(d, "dg.sock"))
st = socket.socket(socket.AF_UNIX)
st.bind(os.path.join(d, "st.sock"))
st.listen(8)
open(log + ".ready", "w").close()
while True:
    for s in select.select([dg, st], [], [])[0]:
        if s is dg:
            line = "dgram " + dg.recv(4096).decode(errors="replace")
        else:
            c, _ = st.accept()
            c.close()
            line = "stream"
        with open(log, "a") as fh:
            fh.write(line + "\\n")
"""

#: The run's program: every socketpair route to the daemon's sockets in argv[1], then
#: Python's multiprocessing and asyncio (which use stream pairs); prints what each got.
PAIRS = """
import asyncio, json, multiprocessing, os, socket, sys
d = sys.argv[1]
dg, st = os.path.join(d, "dg.sock"), os.path.join(d, "st.sock")
got = {}
def attempt(name, f):
    try:
        got[name] = f()
    except OSError as exc:
        got[name] = type(exc).__name__
def dgram(kind):
    a, b = socket.socketpair(socket.AF_UNIX, kind)
    a.sendto(b"sendto", dg)
    return "sent"
def reconnect():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.connect(dg)
    a.send(b"connect")
    return "sent"
def stream(kind, close_peer):
    a, b = socket.socketpair(socket.AF_UNIX, kind | socket.SOCK_CLOEXEC)
    if close_peer:
        b.close()
    a.connect(st)
    return "connected"
def seq_sendto():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    a.sendto(b"seq", dg)
    return "peer:" + b.recv(10).decode()  # the address is ignored: the pair's other end
attempt("dgram", lambda: dgram(socket.SOCK_DGRAM))
attempt("raw", lambda: dgram(socket.SOCK_RAW))  # AF_UNIX makes SOCK_RAW a datagram socket
attempt("reconnect", reconnect)
attempt("stream", lambda: stream(socket.SOCK_STREAM, False))
attempt("stream_closed", lambda: stream(socket.SOCK_STREAM, True))
attempt("seqpacket", lambda: stream(socket.SOCK_SEQPACKET, False))
attempt("seq_sendto", seq_sendto)
def square(x):
    return x * x
if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    with multiprocessing.Pool(2) as pool:
        got["pool"] = sum(pool.map(square, range(4)))
    a, b = multiprocessing.Pipe()
    a.send("pipe")
    got["pipe"] = b.recv()
    async def main():
        p = await asyncio.create_subprocess_exec(sys.executable, "-c", "print(7)",
                                                 stdout=asyncio.subprocess.PIPE)
        return (await p.communicate())[0].decode().strip()
    got["asyncio"] = asyncio.run(main())
    print(json.dumps({"y": 1, "got": got}))
"""


class Daemon:
    """The root daemon (`DAEMON`), in another network namespace, with its sockets in the
    install tree of a tool under /opt (`<base>/tool/run`): the sandbox shows that tree
    read-only to the tool (`<base>/tool/bin/`) it starts, without walking it for sockets."""

    def __init__(self, base: Path, tmp: Path) -> None:
        self.base = base
        self.dir = base / "tool" / "run"
        self.dir.mkdir(parents=True, exist_ok=True)
        (base / "tool" / "bin").mkdir()
        self.log = tmp / f"log-{uuid.uuid4().hex[:6]}"
        self.proc = subprocess.Popen(["unshare", "-n", sys.executable, "-c", DAEMON,
                                      str(self.dir), str(self.log)])
        for _ in range(500):
            if Path(f"{self.log}.ready").exists():
                return
            time.sleep(0.02)
        self.close()
        raise AssertionError("the daemon did not start")

    def tool(self, code: str) -> str:
        """A program of the tool's install tree running `code` (the system's python3)."""
        prog = self.base / "tool" / "bin" / f"prog-{uuid.uuid4().hex[:6]}"
        prog.write_text("#!/usr/bin/python3\n" + code)
        prog.chmod(0o755)
        return str(prog)

    @property
    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(Path("/opt") / f"storlab-test-{uuid.uuid4().hex[:8]}", tmp_path)
    try:
        yield d
    finally:
        d.close()
        shutil.rmtree(d.base, ignore_errors=True)


def test_a_datagram_socketpair_reaches_no_path_socket(tmp_path: Path, storlab: Any,
                                                      daemon: Daemon, program_got: Any,
                                                      command_campaign: Any) -> None:
    """Without `sandbox.sockets` a datagram pair (SOCK_DGRAM, or SOCK_RAW which AF_UNIX
    makes one) is refused: neither `sendto` a daemon's path nor a second `connect` reach
    it. Stream and seqpacket pairs stay and reach only their other end (EISCONN; an
    address given to a seqpacket `sendto` is ignored), so multiprocessing and asyncio run.
    The daemon, in another network namespace, has its sockets covered as well (every
    namespace's sockets are): a stream pair's `connect` there meets /dev/null
    (ECONNREFUSED). With the daemon's sockets declared (and `allow_destructive`: they
    are root's), so not covered, a stream pair's `connect` still reaches only its other
    end (EISCONN) while datagram pairs are made again (the declared rule: sockets) and
    reach the daemon."""
    argv = [daemon.tool(PAIRS), str(daemon.dir)]
    g = program_got(command_campaign(tmp_path / "plain", argv))
    assert g == {"dgram": "PermissionError", "raw": "PermissionError",
                 "reconnect": "PermissionError", "stream": "ConnectionRefusedError",
                 "stream_closed": "ConnectionRefusedError",
                 "seqpacket": "ConnectionRefusedError",
                 "seq_sendto": "peer:seq", "pool": 14, "pipe": "pipe", "asyncio": "7"}, g
    assert daemon.lines == []
    # the stream pairs' error is EISCONN (OSError's errno) where the path leads to the
    # listener, checked in the same program
    declared = {"sockets": [str(daemon.dir / "st.sock"), str(daemon.dir / "dg.sock")],
                "allow_destructive": True}
    errno_probe = ("import errno, socket, sys\na, b = socket.socketpair()\ntry:\n"
                   "    a.connect(sys.argv[1])\nexcept OSError as e:\n"
                   "    print('{\"y\": 1, \"got\": \"%s\"}' % errno.errorcode[e.errno])\n")
    assert program_got(command_campaign(tmp_path / "errno", [
        daemon.tool(errno_probe), str(daemon.dir / "st.sock")], **declared)) == "EISCONN"
    assert daemon.lines == []
    # declared sockets: the campaign opted into Unix sockets (the documented rule: then
    # what the program sees decides), datagram pairs are made and reach the daemon
    g = program_got(command_campaign(tmp_path / "declared", argv, **declared))
    assert g["dgram"] == g["raw"] == "sent", g
    assert daemon.lines[:2] == ["dgram sendto", "dgram sendto"], daemon.lines


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_program_fio_starts_does_not_inherit_fios_own_unix_grant(
        tmp_path: Path, storlab: Any, daemon: Daemon) -> None:
    """fio's net engine with `protocol=unix` gets Unix sockets without a declaration (its
    own listener and client); a program its options start (`exec_prerun`,
    `exec_postrun`, an abbreviation, a trigger in extra_args) would inherit them: the
    job is refused before any run, in one line naming `sandbox.unix_sockets` and
    `sandbox.sockets`; the daemon gets nothing. Declared (either), the job starts."""
    camp = tmp_path / "c"
    camp.mkdir()
    connect = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
               "s.connect(sys.argv[1])\nprint('CONNECTED')\n")
    prog = daemon.tool(connect)
    base = {"ioengine": "net", "protocol": "unix", "filename": "nosock", "rw": "write",
            "size": "64k"}

    def run(extra: dict[str, Any], **sandbox: Any) -> Any:
        spec = {"name": "u", "timeout": 30, "space": {"factors": [
                    {"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}],
                    "responses": [{"name": "write_iops", "goal": "maximize"}]},
                "design": {"configs": [{"bs": "4k"}]},
                "runner": {"type": "fio", "options": {**base, **extra}}, "sandbox": sandbox}
        (camp / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        return storlab("run", str(camp / "campaign.yaml"), timeout=120)

    cmd = f"{prog} {daemon.dir / 'st.sock'}"
    r = run({"exec_pre": cmd})  # an abbreviation: refused as one (a full name to write)
    assert r.returncode == 2 and "full name 'exec_prerun'" in r.stderr, r.stderr
    for extra in ({"exec_prerun": cmd}, {"exec_postrun": cmd},
                  {"extra_args": ["--trigger-timeout=1", f"--trigger={cmd}"]}):
        r = run(extra)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "starts a program" in r.stderr and "sandbox.sockets" in r.stderr, r.stderr
        assert "sandbox.unix_sockets: true" in r.stderr, r.stderr
    assert daemon.lines == []
    # either declaration lifts the refusal: socket paths, or the run's own sockets
    for decl in ({"sockets": [str(camp / "fio.sock")]}, {"unix_sockets": True}):
        r = run({"exec_prerun": cmd}, **decl)
        assert "starts a program" not in r.stdout + r.stderr, (decl, r.stdout + r.stderr)


def test_an_engine_other_than_the_granted_one_is_refused_in_a_granted_job() -> None:
    """An `ioengine` value given twice (extra_args, an abbreviation) decides which engine
    fio loads: in a job granted rings for io_uring, `external:` or a library path is
    refused; `sandbox.io_uring: true` declared, nothing is."""
    from storlab.campaign.runners.fio import FioRunner

    f = FioRunner(ioengine="io_uring", rw="read")
    assert f.refused_grant(f.options, sockets=False, io_uring=False) is None
    for opts in ({"ioengine": "io_uring", "ioeng": "external:/tmp/x.so"},
                 {"ioengine": "io_uring", "ioengi": "/tmp/x.so"}):
        why = f.refused_grant(opts, sockets=False, io_uring=False)
        assert why is not None and "sandbox.io_uring: true" in why, why
        assert f.refused_grant(opts, sockets=False, io_uring=True) is None
    # another of fio's own engines beside the granted one loads no foreign code
    h = FioRunner(ioengine="io_uring", extra_args=["--ioengine=libaio"])
    assert h.refused_grant(h.options, False, False) is None
    assert "runs or loads code" in str(f.refused_grant(
        {"ioengine": "io_uring", "ioeng": "exec"}, False, False))
    g = FioRunner(ioengine="io_uring", extra_args=["--trigger=/bin/true"])
    assert "starts a program" in str(g.refused_grant(g.options, False, False))
