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
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(os.geteuid() != 0,
                                 reason="the walls drop root to the `ceph` account"),
              pytest.mark.usefixtures("ceph_account")]

#: The caller, run with a pty as its controlling terminal and stdin: starts the probe through
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
got["walled"] = json.loads(cp.stdout)["got"]
got["bare"] = json.loads(run(["/usr/bin/python3", "-c", probe]).stdout)["got"]
Path(out).write_text(json.dumps(got))
"""


def test_the_ceph_cli_holds_no_terminal_and_cannot_type_into_one(
        tmp_path: Path, terminal_probe: str, under_a_pty: Callable[..., tuple[int, str]]
        ) -> None:
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
    _, seen = under_a_pty([sys.executable, "-c", CALLER, str(base), terminal_probe, str(out)],
                          env=env, timeout=90)
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
