"""Waiting for a daemon's HTTP answer (radosgw at `cluster up ceph`) is bounded as a whole:
radosgw runs as the `ceph` user, and a compromised account answering one byte per 0.5 s
(each read under urllib's per-read timeout) held root's `cluster up` forever. Real socket
servers in threads: a drip, an endless line, an endless body, a refusal."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from storlab.clusters._util import HTTP_ANSWER_LIMIT, http_answer, wait_http
from storlab.errors import ClusterError


def _drip(c: socket.socket, req: bytes, stop: threading.Event) -> None:
    for b in b"HTTP/1.1 200 OK":  # the status line's start, never its end
        if stop.wait(0.5):
            return
        c.sendall(bytes([b]))
    while not stop.wait(0.5):
        c.sendall(b"x")


def _flood(c: socket.socket, req: bytes, stop: threading.Event) -> None:
    while not stop.is_set():
        c.sendall(b"y" * 4096)


def _endless_body(c: socket.socket, req: bytes, stop: threading.Event) -> None:
    c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n\r\n")
    while not stop.is_set():
        c.sendall(b"z" * 4096)
        time.sleep(0.01)


@pytest.fixture
def drip(serve) -> tuple[str, int]:
    return serve(_drip)[:2]


@pytest.fixture
def flood(serve) -> tuple[str, int]:
    return serve(_flood)[:2]


@pytest.fixture
def endless_body(serve) -> tuple[str, int]:
    return serve(_endless_body)[:2]


def test_a_dripping_listener_cannot_hold_the_wait_past_its_deadline(bounded, drip) -> None:
    host, port = drip
    got, took = bounded(lambda: wait_http(host, port, 3, f"radosgw on {host}:{port}"), 15)
    assert isinstance(got, ClusterError), got
    assert 2.5 < took < 4.5, took
    msg = str(got)
    assert f"timed out after 3 s waiting for radosgw on {host}:{port}" in msg, msg
    assert "no complete HTTP status line in time" in msg and "bytes received" in msg, msg
    # one attempt alone: ends by its own deadline
    got, took = bounded(lambda: http_answer(host, port, time.monotonic() + 1.2), 10)
    assert isinstance(got, ClusterError) and took < 2, (got, took)


def test_an_endless_line_is_cut_at_the_byte_limit(bounded, flood) -> None:
    host, port = flood
    got, took = bounded(lambda: http_answer(host, port, time.monotonic() + 30), 10)
    assert isinstance(got, ClusterError) and took < 5, (got, took)
    assert f"sent {HTTP_ANSWER_LIMIT} bytes without an HTTP status line" in str(got), got


def test_any_http_answer_counts_its_body_never_awaited(bounded, endless_body) -> None:
    host, port = endless_body
    got, took = bounded(lambda: wait_http(host, port, 30, "an answer"), 10)
    assert not isinstance(got, BaseException) and took < 2, (got, took)
    assert http_answer(host, port, time.monotonic() + 5) == "HTTP/1.1 403 Forbidden"


def test_nothing_listening_is_waited_for_until_the_timeout(bounded) -> None:
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # the port free now: refused
    assert http_answer("127.0.0.1", port, time.monotonic() + 2) is None
    got, took = bounded(lambda: wait_http("127.0.0.1", port, 1, "radosgw"), 10)
    assert isinstance(got, ClusterError) and "last attempt" not in str(got), got
    assert took < 3, took
    # a listener not the daemon started is never asked
    asked: list[int] = []
    got, _ = bounded(lambda: wait_http("127.0.0.1", port, 1, "radosgw",
                                        ours=lambda: bool(asked.append(1))), 10)
    assert isinstance(got, ClusterError) and asked, got


def test_the_last_attempt_said_is_the_last_one(bounded, flood) -> None:
    # the first attempt meets a flood, the later ones another listener (not the daemon
    # started): the error must not blame the flood, long past
    host, port = flood
    calls: list[int] = []

    def ours() -> bool:
        calls.append(1)
        return len(calls) == 1
    got, _ = bounded(lambda: wait_http(host, port, 1.5, "radosgw", ours=ours), 10)
    assert isinstance(got, ClusterError) and len(calls) > 1, (got, calls)
    assert "last attempt" not in str(got), got
