"""The TCP ports the Ceph runner's load may reach, read from its `ceph.conf`."""

from __future__ import annotations

from pathlib import Path

import pytest

from storlab.campaign.runners.ceph import CEPH_PORTS, _ceph_ports


@pytest.mark.parametrize("line, ports", [
    ("mon host = v2:127.0.0.1:3300", {3300}),
    ("mon host = [v2:10.1.2.3:3301,v1:10.1.2.3:6790]", {3301, 6790}),
    ("mon_host = [v2:[::1]:3302/0,v1:[::1]:6791/0]", {3302, 6791}),
    ("  mon host = 192.168.0.9:6792, 192.168.0.10", {6792}),
    ("mon host = mon1.example:6793 mon2.example", {6793}),
    ("mon host = ::1", set()),
    ("mon host = 10.0.0.1", set()),
    ("mon initial members = a:1234", set()),
])
def test_the_monitors_ports_never_an_address_octet(tmp_path: Path, line: str,
                                                   ports: set[int]) -> None:
    """`mon host = v2:127.0.0.1:3300` also opened TCP port 127 (the address's first octet
    read as a port). Now only the port after each address counts."""
    conf = tmp_path / "ceph.conf"
    conf.write_text(f"[global]\nfsid = x\n{line}\n")
    assert set(_ceph_ports(str(conf))) == ports | set(CEPH_PORTS)
