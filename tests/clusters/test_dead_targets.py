"""The load generator against a server that is gone or does not answer (a dead OSD behind
radosgw accepts connections and never answers): a bounded time, and a message that says
connection error or timeout, never "answered 0"."""

from __future__ import annotations

import http.server
import json
import socket
import threading
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


class _Counting(http.server.BaseHTTPRequestHandler):
    """Answers every request with 201 and counts it (the server's `hits`)."""

    def _answer(self) -> None:
        self.server.hits += 1  # type: ignore[attr-defined]
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_HEAD = do_DELETE = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def auth_elsewhere():
    """A Swift auth service whose storage URL lies on another port of loopback (a local
    service the load was not pointed at): (auth port, the other server)."""
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    other.hits = 0
    storage = f"http://127.0.0.1:{other.server_address[1]}/v1/AUTH_t"

    class Auth(_Counting):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("X-Storage-Url", storage)
            self.send_header("X-Auth-Token", "tok")
            self.send_header("Content-Length", "0")
            self.end_headers()

    auth = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Auth)
    auth.hits = 0
    for s in (other, auth):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield auth.server_address[1], other
    for s in (other, auth):
        s.shutdown()
        s.server_close()


def test_cli_load_reaches_only_its_endpoints_port(auth_elsewhere, tmp_path, storlab):
    """`storlab cluster load` runs its load as a child in the walls a campaign's run gets:
    TCP to the cluster's endpoint's port only (Landlock). An auth service that sends the
    load to another local port: in storlab's own process the load went there; in the walls
    it cannot connect, and the command says so in one line."""
    port, other = auth_elsewhere
    d = tmp_path / "swift"
    d.mkdir()
    (d / "cluster.json").write_text(json.dumps({
        "kind": "swift", "ready": True, "auth_url": f"http://127.0.0.1:{port}/auth/v1.0",
        "user": "test:tester", "key": "k", "proxy": f"http://127.0.0.1:{port}"}))
    # what the load did in storlab's own process (root): the other port took its requests
    target = Target(api="swift", auth_url=f"http://127.0.0.1:{port}/auth/v1.0",
                    user="test:tester", key="k")
    run_load(target, LoadSpec(duration=0.3, clients=1, objects=1, timeout=2))
    assert other.hits > 0
    other.hits = 0
    r = storlab("cluster", "load", "swift", "--dir", str(tmp_path), "--duration", "1",
                "--objects", "1", "--timeout", "2", timeout=120)
    assert r.returncode == 2, r.stderr
    assert "connection error" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert f"reaches TCP only at port {port}," in r.stderr
    assert other.hits == 0
