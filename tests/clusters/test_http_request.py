"""Every HTTP request root makes to a Swift server (`cluster up swift`'s healthchecks and
account check, `status`'s healthchecks, tempauth and the probe) is bounded as a whole,
in time and in bytes: Swift's servers run as the `swift` user, and under urllib's
per-read timeout a compromised account answering one byte at a time held root's `up` or
`status` for ever. Real socket servers in threads: drips of the status line, of the
headers and of the body, bodies longer than announced or than the limit, an auth giving a
storage URL elsewhere."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from storlab.clusters._util import HTTP_ANSWER_LIMIT, HTTP_ATTEMPT_SECONDS, http_request
from storlab.clusters.swift import SwiftCluster, _healthcheck, swift_auth
from storlab.errors import ClusterError

Talk = Callable[[socket.socket, bytes, threading.Event], None]


def _drip(data: bytes, then: bytes = b"x") -> Talk:
    """Send `data` one byte every 0.3 s, then `then` for ever at the same pace."""
    def talk(c: socket.socket, req: bytes, stop: threading.Event) -> None:
        for b in data:
            if stop.wait(0.3):
                return
            c.sendall(bytes([b]))
        while not stop.wait(0.3):
            c.sendall(then)
    return talk


def _answer(status: str, headers: dict[str, str], body: bytes = b"",
            length: int | None = None) -> Talk:
    def talk(c: socket.socket, req: bytes, stop: threading.Event) -> None:
        h = {**headers, "Content-Length": str(len(body) if length is None else length)}
        c.sendall(f"HTTP/1.1 {status}\r\n".encode() +
                  b"".join(f"{k}: {v}\r\n".encode() for k, v in h.items()) + b"\r\n" + body)
    return talk


@pytest.mark.parametrize("data", [
    b"HTTP/1.1 200 OK",  # the status line's start, never its end
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-A",  # headers never ending
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nOK",  # a body never complete
], ids=["status-line", "headers", "body"])
def test_a_drip_anywhere_in_the_answer_ends_at_the_deadline(bounded, serve, data) -> None:
    host, port, _ = serve(_drip(data))
    got, took = bounded(lambda: http_request(host, port, time.monotonic() + 2,
                                              path="/healthcheck"), 10)
    assert isinstance(got, ClusterError), got
    assert 1.8 < took < 3, took
    assert f"{host}:{port} gave no complete HTTP answer to GET /healthcheck in time" \
        in str(got), got


def test_answers_longer_than_the_limit_are_cut(bounded, serve) -> None:
    # announced: refused at the headers, not read
    host, port, _ = serve(_answer("200 OK", {}, b"", length=1 << 40))
    got, took = bounded(lambda: http_request(host, port, time.monotonic() + 30), 10)
    assert isinstance(got, ClusterError) and took < 2, (got, took)
    assert f"announced a {1 << 40}-byte body, more than the {HTTP_ANSWER_LIMIT}" in str(got)

    # not announced, sent until the close: cut at the limit
    def endless(c: socket.socket, req: bytes, stop: threading.Event) -> None:
        c.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
        while not stop.is_set():
            c.sendall(b"z" * 4096)
    host, port, _ = serve(endless)
    got, took = bounded(lambda: http_request(host, port, time.monotonic() + 30), 10)
    assert isinstance(got, ClusterError) and took < 2, (got, took)
    assert f"sent more than {HTTP_ANSWER_LIMIT} bytes of answer to GET /" in str(got), got
    # a larger limit reads what fits
    body = b"b" * (40 << 10)
    host, port, _ = serve(_answer("200 OK", {}, body + b"trailing", length=len(body)))
    r = http_request(host, port, time.monotonic() + 5, limit=64 << 10)
    assert r is not None and r.status == 200 and r.body == body


def test_a_whole_answer_is_read_and_parsed(serve) -> None:
    host, port, asked = serve(_answer("201 Created", {"X-Trans-Id": "tx1"}, b"done"))
    r = http_request(host, port, time.monotonic() + 5, "PUT", "/v1/AUTH_t/c/o",
                     {"X-Auth-Token": "tok"}, b"0123")
    assert r is not None and (r.status, r.reason, r.body) == (201, "Created", b"done")
    assert r.headers["x-trans-id"] == "tx1"
    req = asked[0]
    assert req.startswith(b"PUT /v1/AUTH_t/c/o HTTP/1.0\r\n"), req
    assert b"\r\nX-Auth-Token: tok\r\n" in req and b"\r\nContent-Length: 4\r\n" in req, req
    # HEAD: its Content-Length is no body to wait for
    host, port, _ = serve(_answer("204 No Content", {}, b"", length=12345))
    r = http_request(host, port, time.monotonic() + 5, "HEAD", "/v1/AUTH_t")
    assert r is not None and r.status == 204 and r.body == b""
    # a close before the body is whole is an error, not a short answer
    host, port, _ = serve(_answer("200 OK", {}, b"abc", length=10))
    with pytest.raises(ClusterError, match="closed mid-answer"):
        http_request(host, port, time.monotonic() + 5)
    # no HTTP at all
    host, port, _ = serve(lambda c, req, stop: c.sendall(b"SSH-2.0-x\r\n\r\n"))
    with pytest.raises(ClusterError, match="answered no HTTP"):
        http_request(host, port, time.monotonic() + 5)
    # nothing listening: None
    s = socket.create_server(("127.0.0.1", 0))
    free = s.getsockname()[1]
    s.close()
    assert http_request("127.0.0.1", free, time.monotonic() + 2) is None


def test_swift_auth_is_bounded_and_needs_both_headers(bounded, serve) -> None:
    host, port, _ = serve(_drip(b"HTTP/1.1 200 OK\r\nX-Auth-Token: t\r\n"))
    got, took = bounded(lambda: swift_auth(f"http://{host}:{port}/auth/v1.0", "u", "k",
                                            timeout=1.5), 10)
    assert isinstance(got, ClusterError) and 1.3 < took < 2.5, (got, took)
    assert "no complete HTTP answer to GET /auth/v1.0 in time" in str(got), got
    host, port, asked = serve(_answer("200 OK", {
        "X-Storage-Url": "http://127.0.0.1:1/v1/AUTH_t", "X-Auth-Token": "AUTH_tk"}))
    assert swift_auth(f"http://{host}:{port}/auth/v1.0", "u", "k") == \
        ("http://127.0.0.1:1/v1/AUTH_t", "AUTH_tk")
    assert b"\r\nX-Auth-User: u\r\nX-Auth-Key: k\r\n" in asked[0], asked
    host, port, _ = serve(_answer("200 OK", {"X-Auth-Token": "AUTH_tk"}))
    with pytest.raises(ClusterError, match="without X-Storage-Url and X-Auth-Token"):
        swift_auth(f"http://{host}:{port}/auth/v1.0", "u", "k")
    host, port, _ = serve(_answer("401 Unauthorized", {}))
    with pytest.raises(ClusterError, match="auth answered 401 Unauthorized"):
        swift_auth(f"http://{host}:{port}/auth/v1.0", "u", "k")


def test_a_dripping_healthcheck_ends_by_its_deadline(bounded, serve) -> None:
    host, port, _ = serve(_drip(b"HTTP/1.1 200 OK\r\n"))
    got, took = bounded(lambda: _healthcheck(host, port, time.monotonic() + 1.5), 10)
    assert 1.3 < took < 2.5, took
    assert isinstance(got, str) and got.startswith("failed: ") and "in time" in got, got
    host, port, _ = serve(_answer("200 OK", {}, b"OK"))
    assert _healthcheck(host, port, time.monotonic() + 2) is None
    host, port, _ = serve(_answer("503 Service Unavailable", {}, b"no"))
    assert _healthcheck(host, port, time.monotonic() + 2) == "answered 503 Service Unavailable"


def test_the_account_check_is_bounded_and_sends_the_token_only_to_the_proxy(
        bounded, serve, tmp_path) -> None:
    """`cluster up`'s account check: auth, then HEAD on the account, each within
    HTTP_ATTEMPT_SECONDS whatever the proxy does; a storage URL elsewhere gets no token."""
    def proxy(head: Talk, storage: Callable[[int], str]) -> tuple[str, int, list[bytes]]:
        port: list[int] = []

        def talk(c: socket.socket, req: bytes, stop: threading.Event) -> None:
            if req.startswith(b"GET /auth/v1.0 "):
                _answer("200 OK", {"X-Storage-Url": storage(port[0]),
                                   "X-Auth-Token": "AUTH_tk"})(c, req, stop)
            else:
                head(c, req, stop)
        host, p, asked = serve(talk)
        port.append(p)
        return host, p, asked

    c = SwiftCluster(tmp_path)
    host, port, asked = proxy(_drip(b"HTTP/1.1 204 No Content\r\n"),
                              lambda p: f"http://127.0.0.1:{p}/v1/AUTH_test")
    got, took = bounded(lambda: c._account_ok(host, port, "k", time.monotonic() + 60), 15)
    assert isinstance(got, ClusterError) and "HEAD /v1/AUTH_test" in str(got), got
    assert HTTP_ATTEMPT_SECONDS - 0.2 < took < HTTP_ATTEMPT_SECONDS + 1.5, took
    host, port, asked = proxy(_answer("204 No Content", {}),
                              lambda p: f"http://127.0.0.1:{p}/v1/AUTH_test")
    assert c._account_ok(host, port, "k", time.monotonic() + 10) is True
    assert asked[1].startswith(b"HEAD /v1/AUTH_test HTTP/1.0\r\n"), asked
    assert b"X-Auth-Token: AUTH_tk" in asked[1]
    # a storage URL on another port: refused, the token never sent there
    other, other_port, other_asked = serve(_answer("204 No Content", {}))
    host, port, asked = proxy(_answer("204 No Content", {}),
                              lambda p: f"http://127.0.0.1:{other_port}/v1/AUTH_test")
    with pytest.raises(ClusterError, match="not on the proxy's .* no token is sent"):
        c._account_ok(host, port, "k", time.monotonic() + 10)
    assert len(asked) == 1 and not other_asked


@pytest.mark.parametrize("head", [
    b"HTTP/1.0 200 OK\r\nContent-Length: \xb2\r\n\r\n",  # latin-1's superscript two
    b"HTTP/1.0 200 OK\r\nContent-Length: " + b"1" * 5000 + b"\r\n\r\n",  # past int()'s 4300
    b"HTTP/1.0 \xb200 OK\r\n\r\n",
], ids=["superscript-length", "5000-digit-length", "superscript-status"])
def test_digits_int_refuses_are_the_servers_error_not_a_traceback(serve, head) -> None:
    # str.isdigit() takes them, int() raised ValueError: a traceback out of `status`'s
    # healthcheck and `up`'s wait (which hold ClusterError only)
    host, port, _ = serve(lambda c, req, stop: c.sendall(head))
    with pytest.raises(ClusterError, match=f"{host}:{port} "):
        http_request(host, port, time.monotonic() + 5)
    why = _healthcheck(host, port, time.monotonic() + 5)
    assert why is not None and why.startswith(f"failed: {host}:{port} "), why


@pytest.mark.parametrize("storage", ["http://127.0.0.1:99999/v1/AUTH_test",
                                     "http://127.0.0.1:x/v1/AUTH_test",
                                     "http://[::1/v1/AUTH_test"])
def test_a_storage_url_urllib_cannot_read_is_refused_not_a_traceback(
        serve, tmp_path, storage) -> None:
    # the proxy's word: urlsplit's port raised ValueError, out of `up`'s wait (which holds
    # ClusterError only) as a traceback
    def talk(c: socket.socket, req: bytes, stop: threading.Event) -> None:
        _answer("200 OK", {"X-Storage-Url": storage, "X-Auth-Token": "AUTH_tk"})(c, req, stop)
    host, port, asked = serve(talk)
    with pytest.raises(ClusterError, match="no token is sent there"):
        SwiftCluster(tmp_path)._account_ok(host, port, "k", time.monotonic() + 10)
    assert len(asked) == 1  # the auth only
