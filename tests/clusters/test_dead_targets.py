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

from storlab.campaign.runners import run_load_walled
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


def test_cli_load_refuses_a_proxy_port_storlab_did_not_start(silent_port, tmp_path, storlab):
    """`storlab cluster load` with a cluster whose proxy port another process holds (here
    the test's silent listener; a local user who bound the port after `up`'s check): one
    clear line, exit 2, the key never sent."""
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
    assert f"port 127.0.0.1:{silent_port} is held by another process" in r.stderr
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


def test_the_load_reaches_only_its_endpoints_port(auth_elsewhere):
    """`storlab cluster load` runs its load as a child in the walls a campaign's run gets
    (`run_load_walled`): TCP to the cluster's endpoint's port only (Landlock). An auth
    service that sends the load to another local port: in storlab's own process the load
    went there; in the walls it cannot connect, and says so in one line. (Through the CLI
    such a hand-written cluster is refused earlier: its port is not held by a daemon
    storlab started.)"""
    port, other = auth_elsewhere
    target = Target(api="swift", auth_url=f"http://127.0.0.1:{port}/auth/v1.0",
                    user="test:tester", key="k")
    # what the load did in storlab's own process (root): the other port took its requests
    run_load(target, LoadSpec(duration=0.3, clients=1, objects=1, timeout=2))
    assert other.hits > 0
    other.hits = 0
    with pytest.raises(LoadError) as exc:
        run_load_walled(target, LoadSpec(duration=1, clients=1, objects=1, timeout=2))
    msg = str(exc.value)
    assert "connection error" in msg and "\n" not in msg.strip(), msg
    assert f"reaches TCP only at port {port}," in msg
    assert other.hits == 0


class _Drip:
    """A server (a local user's, on a port the load was pointed at) that answers PUT and
    HEAD at once and every GET with a body that never ends, one byte at a time: with
    `headers`, even the status line and headers drip (the Swift login's answer)."""

    def __init__(self, headers: bool = False) -> None:
        import http.server
        import threading

        drip_headers = headers

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _drip(self, data: bytes) -> None:
                for i in range(len(data)):
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.2)

            def do_GET(self):  # noqa: N802 (the stdlib's name)
                try:
                    if drip_headers:
                        self._drip(b"HTTP/1.1 200 OK\r\nX-Storage-Url: http://x/v1\r\n" * 1000)
                    self.send_response(200)
                    self.send_header("Content-Length", str(10 ** 9))
                    self.end_headers()
                    self._drip(b"x" * 10 ** 6)
                except OSError:
                    return

            def _empty(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_PUT = do_HEAD = _empty  # noqa: N815

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.srv.daemon_threads = True
        self.port = self.srv.server_port
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def test_a_dripping_server_cannot_hold_the_load_past_its_time():
    """Every request ends at its timeout whatever the server sends (a socket timeout
    bounds one recv only): the load takes duration + timeout + a margin, its GETs
    counted as timed out, never as answered."""
    drip = _Drip()
    try:
        t0 = time.monotonic()
        res = run_load(_s3(drip.port), LoadSpec(duration=2, clients=2, objects=1,
                                                timeout=2, mix={"get": 1}))
        took = time.monotonic() - t0
    finally:
        drip.close()
    assert took < 2 + 2 + 1.5, took
    rec = res.records
    assert len(rec) >= 2 and (rec["status"] == 1).all(), rec["status"].tolist()  # TIMED_OUT


def test_a_dripping_swift_login_is_a_timeout():
    drip = _Drip(headers=True)
    target = Target(api="swift", auth_url=f"http://127.0.0.1:{drip.port}/auth/v1.0",
                    user="u", key="k")
    try:
        t0 = time.monotonic()
        with pytest.raises(LoadError, match=r"swift auth .* no answer within 2 s"):
            run_load(target, LoadSpec(duration=1, clients=1, objects=1, timeout=2))
        took = time.monotonic() - t0
    finally:
        drip.close()
    assert took < 2 + 1.5, took
