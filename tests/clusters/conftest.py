"""Shared checks for the cluster integration tests: what a cluster left behind (exposed as
the `leftovers` fixture; the tests import no helper module, --import-mode=importlib)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def can_run(*programs: str) -> str | None:
    """Why the integration tests cannot run here, or None (they need root and packages)."""
    if os.geteuid() != 0:
        return "cluster integration tests need root"
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        return f"missing {missing}: run scripts/sysdeps.sh as root"
    return None


def processes_under(base: Path) -> list[str]:
    """Command lines of live (non-zombie) processes that mention `base`."""
    out = []
    needle = str(base).encode()
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/cmdline", "rb") as fh:
                cmd = fh.read()
            with open(f"/proc/{e}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmd and state != b"Z" and int(e) != os.getpid():
            out.append(cmd.replace(b"\0", b" ").decode(errors="replace"))
    return out


def mounts_under(base: Path) -> list[str]:
    with open("/proc/self/mounts") as fh:
        return [line.split()[1] for line in fh if line.split()[1].startswith(str(base))]


def loops_for(base: Path) -> list[str]:
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(base) in line]


@pytest.fixture
def leftovers():
    """leftovers(base) -> {processes, mounts, loops} a cluster rooted at `base` left."""
    def check(base: Path) -> dict[str, list[str]]:
        return {"processes": processes_under(base), "mounts": mounts_under(base),
                "loops": loops_for(base)}
    return check


@pytest.fixture(scope="module")
def free_ports():
    """free_ports(n) -> the first of n consecutive free loopback ports (random, so two test
    runs on one machine do not collide)."""
    from storlab.clusters._util import free_port_block

    return free_port_block


@pytest.fixture
def two_size_campaign():
    """two_size_campaign(d, runner, timeout) -> the Campaign (loaded, not run) the multi-host
    tests drive: `bs` 4k then 16k, a CSV design in that order, each run by `runner` (the
    campaign's `runner:` mapping), files written in `d`."""
    import yaml

    from storlab.campaign.campaign import Campaign

    def write(d: Path, runner: dict, timeout: int) -> Campaign:
        (d / "space.yaml").write_text("factors:\n  - {name: bs, kind: categorical, "
                                      "values: [4k, 16k]}\n")
        (d / "c.csv").write_text("bs\n4k\n16k\n")
        (d / "camp.yaml").write_text(yaml.safe_dump(
            {"space": "space.yaml", "design": {"csv": "c.csv"}, "randomize": False,
             "timeout": timeout, "runner": runner}, sort_keys=False))
        return Campaign.load(d / "camp.yaml")
    return write


@pytest.fixture
def serve():
    """serve(talk): a real TCP server on loopback (an HTTP server's stand-in) that reads each
    connection's request (up to its blank line) and calls talk(conn, request, stop), `stop`
    an Event set when the test ends; (host, port, every request's bytes)."""
    import socket
    import threading

    stops: list[tuple[threading.Event, socket.socket, threading.Thread]] = []

    def start(talk) -> tuple[str, int, list[bytes]]:
        stop = threading.Event()
        srv = socket.create_server(("127.0.0.1", 0))
        srv.settimeout(0.2)
        asked: list[bytes] = []

        def conn(c: socket.socket) -> None:
            with c:
                try:
                    c.settimeout(5)
                    req = b""
                    while b"\r\n\r\n" not in req:
                        chunk = c.recv(65536)
                        if not chunk:
                            return
                        req += chunk
                    asked.append(req)
                    talk(c, req, stop)
                except OSError:
                    pass

        def loop() -> None:
            while not stop.is_set():
                try:
                    c, _ = srv.accept()
                except OSError:
                    continue
                threading.Thread(target=conn, args=(c,), daemon=True).start()
        t = threading.Thread(target=loop, daemon=True)
        t.start()
        stops.append((stop, srv, t))
        host, port = srv.getsockname()[:2]
        return host, port, asked
    yield start
    for stop, srv, t in stops:
        stop.set()
        t.join(5)
        srv.close()


@pytest.fixture(scope="session")
def bounded():
    """bounded(f, limit) -> (f()'s result or the exception it raised, seconds taken): f run in
    a thread given `limit` seconds; the test fails if it is still running by then."""
    import threading
    import time

    def call(f, limit: float) -> tuple[object, float]:
        out: list[object] = []

        def run() -> None:
            try:
                out.append(f())
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                out.append(exc)
        t0 = time.monotonic()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(limit)
        assert not t.is_alive(), f"still waiting after {limit} s"
        return out[0], time.monotonic() - t0
    return call


@pytest.fixture
def ceph_account() -> None:
    """Skips the test where this host has no `ceph` account (the walls drop to it)."""
    import pwd

    try:
        pwd.getpwnam("ceph")
    except KeyError:
        pytest.skip("needs the `ceph` account")
