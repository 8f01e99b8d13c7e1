"""A run's program cannot type into a terminal: it starts in a session of its own (bwrap's
`--new-session` on top of storlab's own session and /dev/null for stdin), and the
seccomp filter refuses `ioctl` TIOCSTI (push bytes into a terminal's input, which the
shell reading it runs) and TIOCLINUX (paste a console's selection into it) whatever the
descriptor. Checked for real: `storlab run` started on a pty (its controlling terminal,
as an operator's ssh session), the program tries both on the caller's terminal and on a
pty of its own (the controlling terminal of its child, where only the filter refuses)."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(not os.path.exists("/usr/bin/python3"),
                                 reason="the program is the system's python3")]

PROBE = r"""
import errno, fcntl, json, os, pty, termios
def ioc(fd, req, arg):
    try:
        fcntl.ioctl(fd, req, arg)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
r = {"tty0": os.isatty(0), "sid": os.getsid(0), "sti0": ioc(0, 0x5412, b"x")}
try:
    os.close(os.open("/dev/tty", os.O_RDWR))
    r["devtty"] = "opened"
except OSError as e:
    r["devtty"] = errno.errorcode[e.errno]
rd, wr = os.pipe()
pid, master = pty.fork()
if pid == 0:
    os.write(wr, json.dumps([ioc(0, 0x5412, b"x"), ioc(0, 0x541C, bytes([2]) + bytes(12)),
                             ioc(0, termios.TIOCGWINSZ, bytes(8))]).encode())
    os._exit(0)
os.close(wr)
os.waitpid(pid, 0)
r["own"] = json.loads(os.read(rd, 4096))
print(json.dumps({"y": 1, "got": r}))
"""


def under_a_pty(argv: list[str], cwd: Path, timeout: float = 120) -> tuple[int, str]:
    """argv run with a new pty as its controlling terminal and standard streams: its exit
    status and what it wrote."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.chdir(cwd)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    seen, status = b"", -1
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    seen += os.read(fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    pass
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                pid, status = 0, os.waitstatus_to_exitcode(st)
                break
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    return status, seen.decode(errors="replace")


def test_a_run_program_cannot_type_into_a_terminal(
        tmp_path: Path, command_campaign: Callable[..., Path],
        storlab_argv: list[str]) -> None:
    camp = command_campaign(tmp_path / "c", ["/usr/bin/python3", "-c", PROBE])
    status, seen = under_a_pty([*storlab_argv, "run", str(camp)], camp.parent)
    assert status == 0, seen[-3000:]
    outs = list((camp.parent / "campaign.db.output").glob("*.stdout"))
    assert len(outs) == 1, (outs, seen[-3000:])
    lines = [ln for ln in outs[0].read_text().splitlines() if ln.startswith("{")]
    assert lines, outs[0].with_suffix(".stderr").read_text()
    got = json.loads(lines[-1])["got"]
    # the caller's terminal: not its stdin, not its controlling terminal
    assert got["tty0"] is False and got["sti0"] != "ok" and got["devtty"] == "ENXIO", got
    # its session's leader is inside the sandbox (bwrap's --new-session), not a process
    # outside that the sandbox does not see (0)
    assert got["sid"] != 0, got
    # the filter: TIOCSTI, TIOCLINUX refused on the program's own terminal; another
    # terminal request allowed
    assert got["own"] == ["EPERM", "EPERM", "ok"], got
