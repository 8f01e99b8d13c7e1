"""The load generator against a server that is gone or does not answer (a dead OSD behind
radosgw accepts connections and never answers): a bounded time, and a message that says
connection error or timeout, never "answered 0"."""

from __future__ import annotations

import json
import socket
import time

import pytest

from storlab.campaign.runners.objload import LoadError, LoadSpec, Target, run_load


@pytest.fixture
def silent_port():
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s.getsockname()[1]


@pytest.fixture
def closed_port():
    """A port that refuses connections: bound here and never listened on, so it stays
    closed while the test runs (a port freed again could be taken by another process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def _s3(port: int) -> Target:
    return Target(api="s3", endpoint=f"http://127.0.0.1:{port}", access_key="a",
                  secret_key="b")


def test_silent_server_times_out_once(silent_port):
    t0 = time.monotonic()
    with pytest.raises(LoadError, match=r"no answer within 1 s \(timeout\)"):
        run_load(_s3(silent_port), LoadSpec(duration=1, clients=2, objects=2, timeout=1))
    assert time.monotonic() - t0 < 10  # one timeout, no retry


def test_closed_port_is_a_connection_error(closed_port):
    with pytest.raises(LoadError, match="connection error"):
        run_load(_s3(closed_port), LoadSpec(duration=1, clients=2, objects=2, timeout=1))


def test_cli_load_against_a_silent_proxy(silent_port, tmp_path, storlab):
    """`storlab cluster load` with a cluster whose proxy stopped answering: bounded by
    --timeout, one clear line."""
    d = tmp_path / "swift"
    d.mkdir()
    url = f"http://127.0.0.1:{silent_port}"
    (d / "cluster.json").write_text(json.dumps({
        "kind": "swift", "ready": True, "auth_url": f"{url}/auth/v1.0", "user": "test:tester",
        "key": "k", "proxy": url}))
    t0 = time.monotonic()
    r = storlab("cluster", "load", "swift", "--dir", str(tmp_path), "--duration", "1",
                "--timeout", "2", timeout=120)
    assert r.returncode == 2, r.stderr
    assert "no answer within 2 s (timeout)" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert time.monotonic() - t0 < 60
