"""The host's network a runner grants its program implicitly (fio's network engines and
client mode, the ceph runner's load), closed round what it names: a program fio would
start beside a network engine is refused before any run unless the campaign declares
`sandbox.network`, and the program holding the implicit network binds and connects over
TCP only to the job's ports (Landlock's network rules). With real fio, bwrap, a root
listener on 127.0.0.1 standing in for an unauthenticated root service (a Dask scheduler)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.runners import _sandbox
from storlab.campaign.runners._program import run_program

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed"),
              pytest.mark.xdist_group("fio")]


class Listener:
    """A TCP listener on 127.0.0.1 counting the connections it accepted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            c.close()


@pytest.fixture
def listeners() -> Iterator[tuple[Listener, Listener]]:
    a, b = Listener(), Listener()
    yield a, b
    a.sock.close()
    b.sock.close()


#: The prerun / program: connects to each port given, prints what each got.
CONNECT = """
import errno, json, socket, sys
got = {}
for port in sys.argv[1:]:
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", int(port)))
        got[port] = "ok"
    except OSError as e:
        got[port] = errno.errorcode.get(e.errno, str(e.errno))
    s.close()
print(json.dumps({"y": 1, "got": got}))
"""


def _fio_campaign(d: Path, options: dict[str, Any], **sandbox: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "net", "space": {"factors": [{"name": "bs", "kind": "categorical",
                                                  "values": ["4k", "8k"]}],
                                     "responses": [{"name": "write_bw_mbps",
                                                    "goal": "maximize"}]},
            "design": {"configs": [{"bs": "4k"}]},
            "runner": {"type": "fio", "options": options}, "sandbox": sandbox}
    (d / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return d / "campaign.yaml"


def test_a_prerun_beside_a_net_engine_is_refused_unless_declared(
        tmp_path: Path, storlab: Any, listeners: tuple[Listener, Listener]) -> None:
    """The attack: `ioengine: net` gives fio the host's network, its `exec_prerun`
    inherited it and reached a root scheduler on another port. Refused before any run,
    in one line naming the option and `sandbox.network`; the victim saw nothing."""
    job, victim = listeners
    d = tmp_path / "c"
    d.mkdir()
    (d / "attack.py").write_text(CONNECT)
    opts = {"ioengine": "net", "hostname": "127.0.0.1", "port": job.port, "protocol": "tcp",
            "rw": "write", "size": "64k",
            "exec_prerun": f"/usr/bin/python3 {d / 'attack.py'} {victim.port}"}
    r = storlab("run", str(_fio_campaign(d, opts)), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    said = r.stderr.strip().splitlines()
    assert len(said) == 1 and "exec_prerun" in said[0] and "sandbox.network: true" in said[0], \
        r.stderr
    assert victim.count == 0 and job.count == 0
    assert "Traceback" not in r.stdout + r.stderr


def test_the_implicit_network_reaches_only_the_named_tcp_ports(
        tmp_path: Path, listeners: tuple[Listener, Listener]) -> None:
    """Landlock holds a program given the host's network for a runner's need to the TCP
    ports named (bind and connect); the campaign's `sandbox.network` opens every port."""
    named, other = listeners
    d = tmp_path / "run"
    d.mkdir()
    (d / "c.py").write_text(CONNECT)
    argv = ["/usr/bin/python3", str(d / "c.py"), str(named.port), str(other.port)]

    def got() -> dict[str, str]:
        out = run_program(argv, cwd=d, network=True, ports=[named.port])
        assert out.exit_code == 0, out.stderr[-600:]
        return json.loads(out.stdout.strip().splitlines()[-1])["got"]

    assert got() == {str(named.port): "ok", str(other.port): "EACCES"}
    assert other.count == 0
    with _sandbox.declared(_sandbox.Declared(network=True)):
        assert got() == {str(named.port): "ok", str(other.port): "ok"}


def test_fio_net_ports(tmp_path: Path) -> None:
    """The ports a fio job names: `port` (a range over numjobs), a `host/port` filename,
    a client's `host,port` (fio's 8765 by default), an nbd URI's."""
    from storlab.campaign.runners.fio import FioRunner

    f = FioRunner(ioengine="net", hostname="h", port="9000", numjobs="3")
    assert f.network_ports() == (9000, 9001, 9002)
    assert FioRunner(ioengine="net", filename="h/9100/tcp").network_ports() == (9100,)
    assert FioRunner(ioengine="nbd", uri="nbd://127.0.0.1:10900/x").network_ports() == (
        10809, 10900)
    assert FioRunner(clients=["h", "g,9300"], rw="read").network_ports() == (8765, 9300)
    assert FioRunner(ioengine="net", protocol="unix", filename="s").network_reason() is None


def test_a_net_job_reaches_its_own_port_and_status_says_so(
        tmp_path: Path, storlab: Any, listeners: tuple[Listener, Listener]) -> None:
    """The net engine still reaches the port it names under Landlock's rules (a receiver
    job of the same fio listens there: a service of this host on the named port is
    refused, `tests/campaign/test_fio_local_service.py`), and `storlab status` says the
    runner's network is held to its ports."""
    _, other = listeners
    with socket.socket() as s:  # a free port: the receiver job's
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    opts = {"extra_args": ["--name=receiver", "--ioengine=net", "--listen", f"--port={port}",
                           "--rw=read", "--size=64k"],
            "ioengine": "net", "hostname": "127.0.0.1", "port": port, "protocol": "tcp",
            "rw": "write", "size": "64k", "startdelay": 1}
    camp = _fio_campaign(tmp_path / "c", opts)
    r = storlab("status", str(camp))
    missing = _sandbox.landlock_net_missing()
    assert ("the runner's network: TCP to its own ports only (Landlock)" if missing is None
            else f"the runner's network: not applied ({missing})") in r.stdout, r.stdout
    r = storlab("run", str(camp), timeout=120)
    assert "Traceback" not in r.stdout + r.stderr
    assert r.returncode == 0 and "ok 1" in r.stdout and other.count == 0, r.stdout + r.stderr
