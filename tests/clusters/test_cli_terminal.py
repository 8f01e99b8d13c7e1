"""The Ceph CLI storlab starts (as the `ceph` account, in its walls) never holds the
terminal root started storlab from. It ran with root's tty as its stdin and in root's
session: a process of the `ceph` account traced it (same uid) and made it call
`ioctl(0, TIOCSTI)` byte by byte, typing a command into root's terminal that root's shell
ran once storlab returned. Now, in depth: its stdin is /dev/null and it starts in a
session of its own (`_util.run`), bwrap gives the program a session of its own again
(`--new-session`), and the seccomp filter refuses TIOCSTI and TIOCLINUX whatever the
descriptor (tried on a terminal the program owns, as its controlling one, where the
kernel would allow it).

Real: the caller is a process whose controlling terminal and stdin are a pty (as an
operator's ssh session), the program is a real program started by the real
`CephCluster.cli` (bwrap, setpriv to `ceph`) and by the bare `_util.run` root's helpers
use."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(os.geteuid() != 0,
                                 reason="the walls drop root to the `ceph` account"),
              pytest.mark.usefixtures("ceph_account")]

#: The program: what it holds of a terminal, and TIOCSTI/TIOCLINUX on one of its own (a
#: pty it made, the controlling terminal of its child), where only a filter refuses them.
PROBE = r"""
import errno, fcntl, json, os, pty, termios
def ioc(fd, req, arg):
    try:
        fcntl.ioctl(fd, req, arg)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
r = {"tty0": os.isatty(0), "sid": os.getsid(0), "pid": os.getpid(),
     "sti0": ioc(0, 0x5412, b"x")}
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
print(json.dumps(r))
"""

#: The caller, run with a pty as its controlling terminal and stdin: starts PROBE through
#: `CephCluster.cli` (walled, as `ceph` when the account exists) and bare `_util.run`.
CALLER = r"""
import json, os, sys
from pathlib import Path
from storlab.campaign.runners import register_cluster_walls
from storlab.clusters._util import run
from storlab.clusters.ceph import CephCluster
register_cluster_walls()
base, probe, out = sys.argv[1:4]
fd = os.open("/dev/tty", os.O_RDWR)  # the caller has a controlling terminal
os.close(fd)
got = {"caller_sid": os.getsid(0), "caller_tty": os.isatty(0)}
cp = CephCluster(Path(base)).cli(["/usr/bin/python3", "-c", probe], timeout=60)
got["walled"] = json.loads(cp.stdout)
got["bare"] = json.loads(run(["/usr/bin/python3", "-c", probe]).stdout)
Path(out).write_text(json.dumps(got))
"""


def _under_a_pty(argv: list[str], env: dict[str, str], timeout: float = 90) -> str:
    """Run argv with a new pty as its controlling terminal, stdin, stdout and stderr;
    what it wrote there."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    seen = b""
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                pid = 0
                break
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    return seen.decode(errors="replace")


def test_the_ceph_cli_holds_no_terminal_and_cannot_type_into_one(tmp_path: Path) -> None:
    base = tmp_path / "base"
    d = base / "ceph"
    d.mkdir(parents=True, mode=0o700)
    (d / "ceph.conf").write_text("[global]\nfsid = 11111111-2222-3333-4444-555555555555\n")
    (d / "admin.keyring").write_text("[client.admin]\n\tkey = AQBx7eRkAAAAABAAdGVzdA==\n")
    for f in d.iterdir():
        f.chmod(0o600)
    out = tmp_path / "got.json"
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    seen = _under_a_pty([sys.executable, "-c", CALLER, str(base), PROBE, str(out)], env)
    assert out.exists(), seen[-3000:]
    got = json.loads(out.read_text())
    assert got["caller_tty"] is True  # the test's premise: the caller sits on a terminal
    for how in ("walled", "bare"):
        r = got[how]
        # not the caller's terminal, as stdin nor as a controlling terminal, not its session
        assert r["tty0"] is False, (how, r)
        assert r["devtty"] == "ENXIO", (how, r)
        assert r["sti0"] != "ok", (how, r)
        assert r["sid"] != got["caller_sid"], (how, r)
    w = got["walled"]
    # bwrap's --new-session: the session's leader is inside the sandbox (its init), not
    # bwrap outside it (a pid the sandbox does not see: 0)
    assert w["sid"] != 0, w
    # the filter: TIOCSTI and TIOCLINUX refused on a terminal the program owns (EPERM),
    # another terminal request on it allowed
    assert w["own"] == ["EPERM", "EPERM", "ok"], w
    # outside the walls the same terminal takes TIOCSTI (where dev.tty.legacy_tiocsti=1):
    # the refusal above is the filter's, not the kernel's
    legacy = Path("/proc/sys/dev/tty/legacy_tiocsti")
    if not legacy.exists() or legacy.read_text().strip() == "1":
        assert got["bare"]["own"][0] == "ok", got["bare"]
