"""Several "hosts" on one machine: network namespaces on a private /24, joined to this
(the root) namespace by veth pairs on a bridge. The root end of the bridge (x.x.x.1) is
where a cluster binds (`storlab cluster up --bind`) so that every namespace reaches it; host
i is x.x.x.(i+2), with its default route through the bridge.

    with Lan(2) as lan:
        lan.gateway             # "10.77.N.1": bind the cluster here
        lan.hosts[0].addr       # "10.77.N.2"
        lan.run(0, ["ip", "-br", "addr"])
        p = lan.popen(1, ["fio", "--server=ip:10.77.N.3,8765"])

Everything it made (processes in the namespaces, namespaces, veths, the bridge) is removed
when the block ends, also when making it failed half-way. Needs root and iproute2.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import time
import contextlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import NetnsError  # also here for old imports

#: The private range the LANs come from: 10.77.N.0/24 with N picked free.
PREFIX = "10.77"


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "needs `ip` (iproute2)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL, start_new_session=True)
    if check and r.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {r.stderr.strip() or r.returncode}")
    return r


def _used_subnets() -> set[int]:
    """Third octets of PREFIX.N.0/24 already on an interface of this namespace."""
    out = _ip("-o", "-4", "addr", "show").stdout
    used = set()
    for line in out.split("\n"):
        parts = line.split()
        if "inet" in parts:
            addr = parts[parts.index("inet") + 1].split("/")[0]
            if addr.startswith(PREFIX + "."):
                used.add(int(addr.split(".")[2]))
    return used


@dataclass
class Host:
    index: int
    netns: str
    addr: str
    veth: str  # the root end


class DaskLan(NamedTuple):
    """What `Lan.dask` yields: the scheduler's `tls://HOST:PORT`, the workers' processes,
    the client's credentials (a `distributed.security.Security`) and the environment
    variables that give a `storlab` child the same (Dask's TLS configuration)."""
    address: str
    workers: list[subprocess.Popen[Any]]
    security: Any
    env: dict[str, str]


@dataclass
class Lan:
    """`n` namespaces on one bridge; a context manager (see the module's doc)."""

    n: int = 2
    subnet: int | None = None  # third octet of PREFIX.N.0/24; None: the first free one
    hosts: list[Host] = field(default_factory=list)
    gateway: str = ""
    bridge: str = ""
    _procs: list[subprocess.Popen[Any]] = field(default_factory=list)

    def __enter__(self) -> Lan:
        why = unavailable()
        if why:
            raise NetnsError(why)
        if not 1 <= self.n <= 200:
            raise NetnsError(f"hosts {self.n} must be between 1 and 200")
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _make(self) -> None:
        # interface names: at most 15 characters, unique per LAN (pid + a counter)
        tag = f"{os.getpid() % 100000:x}{int(time.monotonic() * 1000) % 4096:x}"
        net = self.subnet
        if net is None:
            free = [k for k in range(1, 255) if k not in _used_subnets()]
            if not free:
                raise NetnsError(f"no free {PREFIX}.N.0/24")
            net = free[os.getpid() % len(free)]  # parallel test workers rarely collide
        self.subnet = net
        self.gateway = f"{PREFIX}.{net}.1"
        self.bridge = f"stlb{tag}"
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(self.n):
            h = Host(i, f"stl{tag}h{i}", f"{PREFIX}.{net}.{i + 2}", f"stl{tag}v{i}")
            _ip("netns", "add", h.netns)
            self.hosts.append(h)
            _ip("link", "add", h.veth, "type", "veth", "peer", "name", "eth0",
                "netns", h.netns)
            _ip("link", "set", h.veth, "master", self.bridge)
            _ip("link", "set", h.veth, "up")
            _ip("-n", h.netns, "addr", "add", f"{h.addr}/24", "dev", "eth0")
            _ip("-n", h.netns, "link", "set", "eth0", "up")
            _ip("-n", h.netns, "link", "set", "lo", "up")
            _ip("-n", h.netns, "route", "add", "default", "via", self.gateway)

    # ------------------------------------------------------------------ commands inside
    def argv(self, host: int, argv: Sequence[str]) -> list[str]:
        """`argv` as run inside host `host`'s namespace."""
        return ["ip", "netns", "exec", self.hosts[host].netns, *argv]

    def run(self, host: int, argv: Sequence[str], timeout: float = 60, check: bool = True,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command in host `host` to its end; its output."""
        r = subprocess.run(self.argv(host, argv), capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, **(env or {})},
                           stdin=subprocess.DEVNULL, start_new_session=True)
        if check and r.returncode != 0:
            raise NetnsError(f"{self.hosts[host].netns}: {' '.join(argv)} exited "
                             f"{r.returncode}: {r.stderr.strip()[-500:]}")
        return r

    def popen(self, host: int, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kw: Any) -> subprocess.Popen[Any]:
        """Start a long-running command in host `host`; stopped by `close()`."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        p = subprocess.Popen(self.argv(host, argv), env={**os.environ, **(env or {})},
                             start_new_session=True, **kw)
        self._procs.append(p)
        return p

    @contextlib.contextmanager
    def dask(self, timeout: float = 60) -> Iterator[DaskLan]:
        """A Dask scheduler on the root end and one single-threaded worker per host (the
        load hosts of `cluster load --dask`); yields its `tls://` address, the workers'
        processes, the client's credentials and the environment a `storlab` child reaches
        it with, and stops them all on the way out.

        The scheduler listens on the gateway, an address of the host's own network
        namespace that every local user reaches, and it and the workers run as root: they
        speak distributed's mutual TLS with a certificate made for this LAN
        (`Security.temporary()`), so a client without it is refused at the handshake
        instead of running code as root. The certificate and key are files in the private
        scratch directory (`mkdtemp`, 0700, removed afterwards), which is also Dask's
        scratch space, never its default `<tmp>/dask-scratch-space`: a shared path another
        user may have made first, which Dask puts on the processes' `sys.path`."""
        from distributed import Client
        from distributed.security import Security

        from ..fileio import temporary_directory
        from ._util import free_port_block
        from .dask_tls import client_env, write_credentials

        port = free_port_block(1)
        sec = Security.temporary()
        address = f"tls://{self.gateway}:{port}"
        with temporary_directory("storlab-dask-") as scratch:
            env = {"DASK_TEMPORARY_DIRECTORY": scratch}
            files = write_credentials(sec, Path(scratch))
            tls = ["--tls-ca-file", files["ca"], "--tls-cert", files["cert"],
                   "--tls-key", files["key"]]
            # -P and the private directory as the working one: `python -m` would put the
            # operator's working directory first on sys.path (a typing.py there, run as root)
            sched = subprocess.Popen([sys.executable, "-P", "-m",
                                      "distributed.cli.dask_scheduler", "--host", self.gateway,
                                      "--port", str(port), "--protocol", "tls", *tls,
                                      "--no-dashboard"],
                                     env={**os.environ, **env}, cwd=scratch,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            workers: list[subprocess.Popen[Any]] = []
            try:
                wait_port(self.gateway, port, timeout=timeout)
                workers = [self.popen(h.index, [sys.executable, "-P", "-m",
                                                "distributed.cli.dask_worker", address,
                                                "--host", h.addr, "--protocol", "tls", *tls,
                                                "--nthreads", "1", "--no-nanny",
                                                "--no-dashboard", "--local-directory", scratch],
                                      env=env, cwd=scratch)
                           for h in self.hosts]
                with Client(address, timeout=30, security=sec) as cl:
                    cl.wait_for_workers(len(self.hosts), timeout=timeout)
                yield DaskLan(address, workers, sec, client_env(files))
            finally:
                for p in [*workers, sched]:
                    p.terminate()
                    try:
                        p.wait(20)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()

    # ------------------------------------------------------------------ clean-up
    def pids(self, host: int) -> list[int]:
        """Processes running inside host `host`'s namespace."""
        r = _ip("netns", "pids", self.hosts[host].netns, check=False)
        return [int(x) for x in r.stdout.split()]

    def close(self) -> None:
        """Stop what runs in the namespaces, remove them, their veths and the bridge."""
        for p in self._procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self._procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self._procs.clear()
        for h in self.hosts:
            # anything started by others inside (e.g. a daemonised child): a namespace with
            # live processes would outlive `ip netns del`
            for pid in self.pids(h.index):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _ip("netns", "del", h.netns, check=False)  # takes its veth pair along
            _ip("link", "del", h.veth, check=False)
        self.hosts.clear()
        if self.bridge:
            _ip("link", "del", self.bridge, check=False)
            self.bridge = ""


def wait_port(addr: str, port: int, timeout: float = 20) -> None:
    """Wait until something listens on addr:port (reachable from here)."""
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((addr, port), timeout=1):
                return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise NetnsError(f"nothing listens on {addr}:{port} after {timeout:g} s "
                                 f"({exc})") from None
            time.sleep(0.1)


def is_lan_address(addr: str) -> bool:
    """True for loopback and private (RFC 1918) addresses: where storlab may send load."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return addr == "localhost"
    return ip.is_loopback or ip.is_private
