"""A root daemon's socket that the host's own /proc/net/unix does not name where it lies
(a daemon in another network namespace, a socket bound by a relative name, a socket whose
directory was renamed after it was bound), and a fio net engine's Unix socket named by
`hostname`: real daemons (one in a network namespace of its own, `unshare -n`), real bwrap,
real fio. The daemon records every connection it accepts in a file: none may come.
"""

from __future__ import annotations

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

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("unshare") is None
                                 or os.geteuid() != 0, reason="needs bwrap, unshare, root"),
              pytest.mark.xdist_group("fio")]

#: A daemon (root) that listens at argv[1] (argv[2] "rel": bound by its base name after a
#: chdir; "moved": its directory renamed to argv[3] once bound) and appends a line to
#: argv[4] for each connection; it writes argv[5] once it listens.
DAEMON = r"""
import os, socket, sys
path, how, moved, log, ready = sys.argv[1:6]
s = socket.socket(socket.AF_UNIX)
if how == "rel":
    os.chdir(os.path.dirname(path)); s.bind(os.path.basename(path))
else:
    s.bind(path)
os.chmod(path, 0o600)
s.listen(8)
if how == "moved":
    os.rename(os.path.dirname(path), moved)
open(ready, "w").close()
while True:
    c, _ = s.accept()
    with open(log, "a") as fh:
        fh.write("connected\n")
    c.close()
"""


class Daemon:
    def __init__(self, tmp: Path, where: str = "/etc", netns: bool = True,
                 how: str = "abs") -> None:
        self.dir = Path(where) / f"storlab-test-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir(mode=0o755)
        self.path = str(self.dir / "ctl.sock")
        self.moved = Path(f"{self.dir}-moved")
        self.log = tmp / "daemon.log"
        ready = tmp / "ready"
        argv = [sys.executable, "-c", DAEMON, self.path, how, str(self.moved),
                str(self.log), str(ready)]
        self.proc = subprocess.Popen((["unshare", "-n"] if netns else []) + argv)
        for _ in range(100):
            if ready.exists():
                break
            time.sleep(0.05)
        assert ready.exists(), "the daemon did not start"
        #: where its socket lies now
        self.at = str(self.moved / "ctl.sock") if how == "moved" else self.path

    def connections(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.moved, ignore_errors=True)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path)
    try:
        yield d
    finally:
        d.close()


def fio_campaign(camp: Path, options: dict[str, Any], sandbox: dict[str, Any] | None = None
                 ) -> Path:
    camp.mkdir(parents=True, exist_ok=True)
    spec = {"name": "n", "timeout": 30, "seed": 1, "randomize": False,
            "space": {"factors": [{"name": "bs", "kind": "categorical",
                                   "values": ["4k", "8k"]}]},
            "design": {"configs": [{"bs": "4k"}]}, "sandbox": sandbox or {},
            "runner": {"type": "fio", "options": options}}
    (camp / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return camp / "campaign.yaml"


@pytest.mark.parametrize("proto", ["protocol", "proto"])
def test_a_net_engines_unix_socket_named_by_hostname_is_a_target(
        tmp_path: Path, storlab: Any, daemon: Daemon, proto: str) -> None:
    """fio's net engine with `protocol=unix` (or its alias `proto`) takes the socket's path
    from `hostname` when no `filename` is given: a root daemon's socket outside the
    campaign's directory (here one bound in another network namespace, in /etc) is refused
    before any run, naming the option, and by the runner before fio starts; nothing
    connects."""
    opts = {"ioengine": "net", proto: "unix", "hostname": daemon.path, "rw": "write",
            "size": "64k"}
    r = storlab("run", fio_campaign(tmp_path / "c", opts), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "hostname" in r.stderr and daemon.path in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert daemon.connections() == 0

    # the runner's own check, before fio starts (a campaign's preflight aside)
    from storlab.campaign.runners import make_runner
    from storlab.campaign.spec import CampaignError

    runner = make_runner("fio", opts)
    with pytest.raises(CampaignError, match="hostname"):
        runner.run({"bs": "4k"}, tmp_path / "c" / "scratch" / "c1-r1", timeout=30)
    assert daemon.connections() == 0
