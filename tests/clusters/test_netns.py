"""The namespace LAN: hosts reach the root end and each other, commands run inside, and
nothing is left behind (also when making it fails half-way)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from storlab.clusters.netns import Lan, NetnsError, unavailable, wait_port

pytestmark = [pytest.mark.xdist_group("lan")]

ECHO = ("import socket,sys\n"
        "s=socket.create_server((sys.argv[1],int(sys.argv[2])))\n"
        "while True:\n"
        "    c,_=s.accept(); c.sendall(open('/proc/net/dev').read().encode()); c.close()\n")


def _links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def _netns() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def _names() -> set[str]:
    """The names of the network namespaces and links there are now."""
    ns = {line.split()[0] for line in _netns().splitlines() if line.strip()}
    links = {line.split(":")[1].strip().split("@")[0] for line in _links().splitlines()
             if line.count(":") >= 2}
    return ns | links


def test_hosts_are_separate_and_reach_the_root(lan):
    assert len(lan.hosts) == 2
    assert len({h.addr for h in lan.hosts}) == 2
    for h in lan.hosts:
        inside = lan.run(h.index, ["ip", "-o", "-4", "addr"]).stdout
        assert h.addr in inside and lan.gateway not in inside
    # a server inside host 1, reached from the root namespace and from host 0
    h1 = lan.hosts[1]
    lan.popen(1, [sys.executable, "-c", ECHO, h1.addr, "8778"])
    wait_port(h1.addr, 8778)
    got = lan.run(0, [sys.executable, "-c", "import socket;s=socket.create_connection(("
                      f"'{h1.addr}',8778),timeout=5);print(s.recv(100000).decode())"])
    # what it answered is host 1's own interface list: eth0, not the root's bridge
    assert "eth0" in got.stdout and lan.bridge not in got.stdout


def test_everything_removed_also_after_a_failure():
    why = unavailable()
    if why:
        pytest.skip(why)
    with pytest.raises(RuntimeError):
        with Lan(2) as net:
            names = [h.netns for h in net.hosts] + [net.bridge]
            net.popen(0, ["sleep", "300"])
            raise RuntimeError("boom")
    assert not any(n in _netns() or n in _links() for n in names)
    # a LAN that fails half-way (an address `ip` refuses, after the bridge exists)
    # leaves nothing either
    # (compared by name, and only for what is new: a module-scoped LAN of this worker may
    # be torn down meanwhile, which is not this LAN's doing)
    before = _names()
    with pytest.raises(NetnsError):
        Lan(1, subnet=300).__enter__()
    assert not _names() - before
