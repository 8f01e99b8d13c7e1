"""fio's network engines get the host's network without a declaration, held by Landlock to
the ports the job names: the job picks the ports, so a service of this host listening on
one (a root Redis, a scheduler) would get the job's bytes. Real listeners (root), real
fio, the real CLI: such a destination is refused before any run and again right before
each fio start; `sandbox.network: true` reaches it; a job listening itself and another
connecting to it in the same fio run."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("fio") is None,
                                 reason="needs bwrap and fio"),
              pytest.mark.xdist_group("fio")]


class Service:
    """A TCP listener on `host` (a free port, or `port`) counting what it accepts."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            # drained to the end, not closed at once: fio writing to a closed peer dies of
            # SIGPIPE (fio 3.33 then aborts with a double free), a flaky failure
            threading.Thread(target=self._drain, args=(c,), daemon=True).start()

    @staticmethod
    def _drain(c: socket.socket) -> None:
        with c:
            c.settimeout(30)
            try:
                while c.recv(65536):
                    pass
            except OSError:
                pass

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


@pytest.fixture
def service() -> Iterator[Service]:
    s = Service()
    try:
        yield s
    finally:
        s.close()


def campaign(d: Path, options: dict[str, Any], **sandbox: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "l", "timeout": 30, "seed": 1, "randomize": False,
            "space": {"factors": [{"name": "bs", "kind": "categorical",
                                   "values": ["4k", "8k"]}]},
            "design": {"configs": [{"bs": "4k"}]}, "sandbox": sandbox,
            "runner": {"type": "fio", "options": options}}
    (d / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return d / "campaign.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", None])
def test_a_service_of_this_host_on_the_jobs_port_is_refused(
        tmp_path: Path, storlab: Any, service: Service, host: str | None) -> None:
    """`ioengine: net` to a port of this host where a service listens (named as an
    address, as `localhost`, or not at all: fio's default), no `sandbox.network`: refused
    before any run in one line naming the option, the port and the opt-in; the service
    accepts nothing. Declared `sandbox.network: true`, the job reaches it."""
    opts = {"ioengine": "net", "port": service.port, "rw": "write", "size": "64k",
            **({"hostname": host} if host else {})}
    r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(service.port) in r.stderr and "sandbox.network: true" in r.stderr, r.stderr
    assert ("hostname" if host else "fio's default") in r.stderr, r.stderr
    assert service.accepted == 0
    if host:
        r = storlab("run", campaign(tmp_path / "n", opts, network=True), timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert service.accepted >= 1


def test_a_service_started_after_the_preflight_is_refused_before_fio_starts(
        tmp_path: Path) -> None:
    """The runner asks again right before each fio start: a service that listens on the
    job's port since (between runs) gets nothing, the run does not start."""
    from storlab.campaign.runners import make_runner
    from storlab.campaign.spec import CampaignError

    port = free_port()
    runner = make_runner("fio", {"ioengine": "net", "hostname": "127.0.0.1", "port": port,
                                 "rw": "write", "size": "64k"})
    opts = runner.job_options({"bs": "4k"}, tmp_path / "run", check=False)
    assert runner.refused_grant(opts, False, False, False) is None  # the preflight's ask
    s = Service(port=port)
    try:
        with pytest.raises(CampaignError, match=f"port {port} is a service of this host"):
            runner.run({"bs": "4k"}, tmp_path / "scratch" / "c1-r1", timeout=30)
        assert s.accepted == 0
    finally:
        s.close()


def test_the_http_engine_to_a_service_of_this_host_is_refused(tmp_path: Path,
                                                              storlab: Any) -> None:
    """fio's http engine (`http_host`, default localhost; ports 80 and 443): a service of
    this host on port 80 is refused as well."""
    try:
        s = Service(port=80)
    except OSError:
        pytest.skip("port 80 is taken here")
    try:
        opts = {"ioengine": "http", "http_host": "127.0.0.1", "filename": "/b/o",
                "rw": "write", "size": "64k"}
        r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
        assert r.returncode == 2 and "http_host: 127.0.0.1 port 80" in r.stderr, r.stderr
        opts.pop("http_host")  # fio's default: localhost
        r = storlab("run", campaign(tmp_path / "d", opts), timeout=120)
        assert r.returncode == 2 and "port 80" in r.stderr, r.stderr
        assert s.accepted == 0
    finally:
        s.close()


def test_a_job_listening_and_one_connecting_to_it_in_one_fio_run(tmp_path: Path,
                                                                  storlab: Any) -> None:
    """A receiver job (`listen`, from `extra_args`) and the runner's job connecting to it
    on a free port: nobody listens there when storlab asks, so the run goes on, and fio
    moves the data between its own jobs."""
    port = free_port()
    opts = {"extra_args": ["--name=receiver", "--ioengine=net", "--listen", f"--port={port}",
                           "--rw=read", "--size=64k"],
            "ioengine": "net", "hostname": "127.0.0.1", "port": port, "rw": "write",
            "size": "64k", "startdelay": 1}
    r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
    assert r.returncode == 0 and "ok 1" in r.stdout, r.stdout + r.stderr


def udp_write(port: Any, **more: Any) -> dict[str, Any]:
    """The runner options of a fio job writing 64 KiB over UDP to 127.0.0.1:`port` (`more`
    adds options or replaces these: `hostname`, `numjobs`)."""
    return {"ioengine": "net", "protocol": "udp", "hostname": "127.0.0.1", "port": port,
            "rw": "write", "size": "64k", **more}


def assert_udp_service_refused(r: Any, port: int) -> None:
    """`storlab run` (`r`) refused before any run: `port` is a UDP service of this host."""
    assert r.returncode == 2 and f"port {port} is a service of this host (UDP" in r.stderr, \
        r.stdout + r.stderr


def test_a_udp_socket_of_this_host_on_a_udp_jobs_port_is_refused(tmp_path: Path,
                                                                 storlab: Any) -> None:
    """`protocol=udp` (Landlock holds no UDP): a datagram socket of this host bound on the
    job's port is refused as a TCP listener is; it receives nothing."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    try:
        port = s.getsockname()[1]
        opts = udp_write(port)
        r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
        assert_udp_service_refused(r, port)
        with pytest.raises(BlockingIOError):
            s.recv(10)
    finally:
        s.close()


def link_local() -> str | None:
    """A link-local IPv6 address of this host with its interface (`fe80::1%eth0`), or
    None (/proc/net/if_inet6: the address in hex, the scope 20 for link)."""
    import ipaddress

    try:
        rows = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        return None
    for f in (r.split() for r in rows):
        if len(f) == 6 and f[3] == "20":
            return f"{ipaddress.IPv6Address(bytes.fromhex(f[0]))}%{f[5]}"
    return None


def test_a_link_local_address_of_this_host_is_this_host(tmp_path: Path,
                                                        storlab: Any) -> None:
    """`hostname: fe80::...%eth0` (an interface's link-local address with its zone) is
    an address of this host: a listener on `::` is refused before any run, as for `::1`;
    the service accepts nothing. The check's bind without the zone failed, so the address
    was taken for another machine's and the run started (fio 3.33's net engine then drops
    the zone and its connect fails, EINVAL; an engine whose client keeps the zone
    reaches the listener)."""
    host = link_local()
    if host is None:
        pytest.skip("no link-local IPv6 address here")
    s = Service("::")
    try:
        opts = {"ioengine": "net", "protocol": "tcpv6", "hostname": host, "port": s.port,
                "rw": "write", "size": "64k"}
        r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"port {s.port} is a service of this host" in r.stderr, r.stderr
        assert s.accepted == 0
    finally:
        s.close()


def test_an_address_in_another_option_does_not_hide_fios_default_host(
        tmp_path: Path, storlab: Any) -> None:
    """An `nfs://` address in `description` (judged, a remote host) is not where the http
    engine connects: without `http_host` it still connects to fio's default, localhost,
    and a service of this host on port 80 is refused there (the address was taken for
    the job's destination, and localhost was not judged)."""
    try:
        s = Service(port=80)
    except OSError:
        pytest.skip("port 80 is taken here")
    try:
        opts = {"ioengine": "http", "filename": "o", "rw": "write", "size": "64k",
                "description": "copy of nfs://192.0.2.1/export"}
        r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "fio's default): localhost port 80 is a service" in r.stderr, r.stderr
        assert s.accepted == 0
    finally:
        s.close()


@pytest.mark.parametrize("option", ["port", "numjobs"])
def test_a_number_of_digits_int_refuses_is_no_traceback(tmp_path: Path, storlab: Any,
                                                        option: str) -> None:
    """`port: "²"`, `numjobs: "²"` (str.isdigit() says yes, int() refuses): the
    local-service check, asked before any run, reads no number from it instead of a
    ValueError traceback out of `storlab run`; the run then fails as fio's, in its own
    line."""
    opts = {"ioengine": "net", "hostname": "127.0.0.1", "port": 8999, "rw": "write",
            "size": "64k", option: "²"}
    r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
    assert "Traceback" not in r.stderr and "ValueError" not in r.stdout + r.stderr, r.stderr
    assert r.returncode != 0, r.stdout + r.stderr


@pytest.mark.parametrize("host,bind,proto", [("0", "127.0.0.1", "tcp"),
                                             ("0.0.0.0", "127.0.0.1", "tcp"),
                                             ("::", "::1", "tcpv6"),
                                             ("127.0.0.2", "127.0.0.1", "tcp")])
def test_the_wildcard_destination_reaches_a_loopback_service_and_is_refused(
        tmp_path: Path, storlab: Any, host: str, bind: str, proto: str) -> None:
    """Linux connects a socket aimed at the wildcard (`0`, `0.0.0.0`, `::`) to the
    loopback: a service bound to 127.0.0.1 (resp. ::1) only gets the job's bytes. A
    destination of this host is judged against a listener on the port on any address of
    this host (127.0.0.2 to a service on 127.0.0.1 only as well: storlab does not reason
    about which local address reaches which listener): refused, the service accepts
    nothing."""
    s = Service(bind)
    try:
        opts = {"ioengine": "net", "hostname": host, "port": s.port, "protocol": proto,
                "rw": "write", "size": "64k"}
        r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
        assert r.returncode == 2 and f"port {s.port} is a service of this host" in r.stderr, \
            r.stdout + r.stderr
        assert s.accepted == 0
    finally:
        s.close()


class UdpService:
    """A datagram socket bound on 127.0.0.1 (a free port, or `port`)."""

    def __init__(self, port: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def got_nothing(self) -> bool:
        try:
            self.sock.recv(10)
        except BlockingIOError:
            return True
        return False

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("spell", [hex, lambda p: f"+{p}", lambda p: f"  {p}",
                                   lambda p: f"0{p}", lambda p: hex(p).upper().replace("X", "x")])
def test_a_udp_port_spelled_as_fio_reads_it_is_judged(tmp_path: Path, storlab: Any,
                                                       spell: Any) -> None:
    """fio reads `port` as strtoll does (base 16 with `0x`, a `+`, blanks, leading zeros
    decimal): each spelling names the same UDP port, judged as the decimal one (UDP: no
    Landlock rule holds the port, this check is the only wall)."""
    s = UdpService()
    try:
        opts = udp_write(spell(s.port))
        r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
        assert_udp_service_refused(r, s.port)
        assert s.got_nothing()
    finally:
        s.close()


@pytest.mark.parametrize("option,value", [("port", "{p}x"), ("port", "(0+{p})"),
                                          ("numjobs", "2k"), ("numjobs", "${{N}}")])
def test_a_port_number_storlab_cannot_read_as_fio_does_is_refused(
        tmp_path: Path, storlab: Any, option: str, value: str) -> None:
    """A `port` or `numjobs` value in a spelling storlab does not read with certainty
    (fio ignores trailing text, reads k/m suffixes and expressions): refused before any
    run in one line naming the option (fail closed), UDP included."""
    s = UdpService()
    try:
        opts = {**udp_write(s.port), option: value.format(p=s.port)}
        r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"fio option {option}=" in r.stderr and "cannot read it as fio does" \
            in r.stderr, r.stderr
        assert s.got_nothing()
    finally:
        s.close()


def test_numjobs_spelled_in_hex_and_port_wrapping_are_judged(tmp_path: Path,
                                                             storlab: Any) -> None:
    """fio's n-th copy of a job (`numjobs`) uses `port` + n, kept to 16 bits: `numjobs:
    0x2` reaches the next port, `port: 65535` with 3 copies reaches ports 0 and 1."""
    s = UdpService()
    try:
        opts = udp_write(s.port - 1, numjobs="0x2")
        r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
        assert_udp_service_refused(r, s.port)
        assert s.got_nothing()
    finally:
        s.close()
    try:
        s = UdpService(1)
    except OSError:
        pytest.skip("UDP port 1 is taken here")
    try:
        opts = udp_write(65535, numjobs=3)
        r = storlab("run", campaign(tmp_path / "w", opts), timeout=120)
        assert_udp_service_refused(r, 1)
        assert s.got_nothing()
    finally:
        s.close()


@pytest.mark.parametrize("host", ["storlab-nowhere.invalid", "127.0.0.1 x"])
def test_a_destination_name_that_does_not_resolve_is_refused(
        tmp_path: Path, storlab: Any, host: str) -> None:
    """A name without an answer when storlab looks would be resolved again by fio when it
    connects (a DNS name whose author answers with 127.0.0.1 then, an /etc/hosts line
    added since): refused before any run, one line naming the option; with
    `sandbox.network: true` it is fio's to try (and fail)."""
    s = UdpService()
    try:
        opts = udp_write(s.port, hostname=host)
        r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "fio option hostname" in r.stderr and "does not resolve" in r.stderr, r.stderr
        assert s.got_nothing()
        r = storlab("run", campaign(tmp_path / "n", opts, network=True), timeout=120)
        assert "does not resolve" not in r.stderr, r.stderr
    finally:
        s.close()


@pytest.mark.parametrize("short,full,value", [
    ("por", "port", "{p}"), ("protoco", "protocol", "udp"), ("numjob", "numjobs", "2"),
    ("hostnam", "hostname", "127.0.0.1")])
@pytest.mark.parametrize("where", ["options", "factor", "extra_args", "job_file"])
def test_an_abbreviated_option_name_is_refused_naming_the_full_one(
        tmp_path: Path, storlab: Any, short: str, full: str, value: str,
        where: str) -> None:
    """fio takes any unique prefix of an option's name (`por` is `port`), while storlab's
    checks read options by their full names: an abbreviation, wherever the campaign gives
    it (runner options, a factor, `extra_args`, a job file), is refused before any run in
    one line naming the full name to write; a root UDP service on the port gets nothing."""
    s = UdpService()
    try:
        opts = udp_write(s.port)
        opts.pop(full, None)
        v = value.format(p=s.port)
        d = tmp_path / "c"
        if where == "options":
            opts[short] = v
        elif where == "extra_args":
            opts["extra_args"] = [f"--{short}={v}"]
        elif where == "job_file":
            d.mkdir()
            (d / "j.fio").write_text(f"[global]\n{short}={v}\n[j]\n")
            opts["job_file"] = "j.fio"
        path = campaign(d, opts)
        if where == "factor":
            spec = yaml.safe_load(path.read_text())
            spec["space"]["factors"].append({"name": short, "kind": "categorical",
                                             "values": [v, v + "0"]})
            spec["design"]["configs"] = [{"bs": "4k", short: v}]
            path.write_text(yaml.safe_dump(spec, sort_keys=False))
        r = storlab("run", path, timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"'{short}'" in r.stderr and f"full name '{full}'" in r.stderr, r.stderr
        assert s.got_nothing()
    finally:
        s.close()


def test_option_names_fio_lists_are_full_names_and_prefixes_are_not(tmp_path: Path
                                                                     ) -> None:
    """The names fio itself lists (its options, each engine's, their aliases: `proto`,
    `blocksize`, `readwrite`) and fio's command-line options in `extra_args` are taken;
    a prefix of none of them is refused too, and the names storlab's destination checks
    read are all taken as full names (a packaged fio may lack their engines)."""
    from storlab.campaign.runners import fio_guard
    from storlab.campaign.runners.fio import FioRunner
    from storlab.campaign.runners.fio_cmdline import UNLISTED_READ, full_option_name

    for name in ("port", "protocol", "proto", "numjobs", "hostname", "blocksize",
                 "readwrite", "bs", "rw", "direct", "sqthread_poll", "http_host"):
        assert full_option_name(name) is None, name
    assert "full name 'protocol'" in (full_option_name("protoc") or "")
    assert "not the full name" in (full_option_name("blocksiz") or "")
    assert set(fio_guard.HOST_OPTIONS) | {k for v in fio_guard._NAMED_BY.values()
                                          for k in v} <= UNLISTED_READ | {"filename"}
    FioRunner(extra_args=["--eta=never", "--output-format=json"], bs="4k")
    with pytest.raises(Exception, match="full name 'eta-newline'"):
        FioRunner(extra_args=["--eta-new=1"], bs="4k")


def test_exact_option_names_still_run(tmp_path: Path, storlab: Any,
                                      service: Service) -> None:
    """Full names and fio's aliases run as before (a job listening on a free port and
    another connecting to it is not this check's business: a plain file job here)."""
    opts = {"ioengine": "sync", "readwrite": "write", "size": "64k", "numjobs": 1,
            "blocksize": "4k", "extra_args": ["--eta=never"]}
    r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("extra", [{"description": "copy of nfs://192.0.2.1:2049/export"},
                                   {"hostname": "192.0.2.1"}])
def test_a_net_filename_naming_this_host_is_judged(tmp_path: Path, storlab: Any,
                                                   service: Service,
                                                   extra: dict[str, str]) -> None:
    """fio's net engine reads a `filename` without a '/' as its host (and takes the later
    of `hostname` and `filename`): `filename: 127.0.0.1` is judged, and neither an
    address in `description` nor a remote `hostname` given before it hides it; a root
    service on 127.0.0.1 gets nothing."""
    opts = {"ioengine": "net", **extra, "filename": "127.0.0.1", "port": service.port,
            "rw": "write", "size": "64k"}
    r = storlab("run", campaign(tmp_path / "c", opts), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"fio option filename: 127.0.0.1 port {service.port} is a service" in r.stderr, \
        r.stderr
    assert service.accepted == 0


def test_destinations_judge_every_host_and_fios_default(tmp_path: Path) -> None:
    """`_destinations` (unit): a net `filename` as host, `host/port`, `/port` (fio's
    localhost), the whole value beside its ':'-parts, an unreadable `uri` as this host,
    and fio's default for an engine none of whose own options is given, whatever other
    options hold."""
    from storlab.campaign.runners.fio_guard import _destinations

    d = _destinations([("ioengine", "net"), ("filename", "127.0.0.1")], {"net"})
    assert ("filename", "127.0.0.1", None) in d
    d = _destinations([("ioengine", "net"), ("filename", "h/4000/tcp")], {"net"})
    assert ("filename", "h", 4000) in d
    d = _destinations([("ioengine", "net"), ("filename", "/4000")], {"net"})
    assert ("filename", "", 4000) in d
    d = _destinations([("ioengine", "net"), ("filename", "::1")], {"net"})
    assert ("filename", "::1", None) in d
    d = _destinations([("ioengine", "nbd"), ("uri", "NBD://127.0.0.1/")], {"nbd"})
    assert ("uri", "", None) in d
    d = _destinations([("ioengine", "http"), ("description", "nfs://192.0.2.1/x"),
                       ("hostname", "192.0.2.1")], {"http"})
    assert ("(none: fio's default)", "localhost", None) in d


def test_option_names_are_judged_by_the_runners_own_fio(tmp_path: Path) -> None:
    """The names are the full names of the fio the runs start (the runner's `fio:`, a
    path), not of a `fio` on PATH: with none on PATH an abbreviation is still refused,
    in runner options, extra_args and a job file (asked in a process of its own, whose
    PATH holds bwrap alone)."""
    import os
    import subprocess
    import sys

    exe, bwrap = shutil.which("fio"), shutil.which("bwrap")
    assert exe is not None and bwrap is not None
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "bwrap").symlink_to(bwrap)
    (tmp_path / "j.fio").write_text("[global]\nhostnam=127.0.0.1\n[j]\nrw=read\n")
    code = f"""
import pytest, shutil
from pathlib import Path
from storlab.campaign.runners.fio import FioRunner
assert shutil.which("fio") is None
with pytest.raises(Exception, match="full name 'port'"):
    FioRunner(fio={exe!r}, extra_args=["--por=6379"])
with pytest.raises(Exception, match="full name 'hostname'"):
    FioRunner(fio={exe!r}, job_file={str(tmp_path / "j.fio")!r})
r = FioRunner(fio={exe!r}, ioengine="net", hostnam="127.0.0.1", port="6379")
with pytest.raises(Exception, match="full name 'hostname'"):
    r.job_options({{}}, Path({str(tmp_path)!r}))
FioRunner(fio={exe!r}, ioengine="net", hostname="127.0.0.1", port="6379"
          ).job_options({{"blocksize": "4k"}}, Path({str(tmp_path)!r}))
print("checked")
"""
    env = {**os.environ, "PATH": str(tmp_path / "bin")}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "checked" in p.stdout, p.stdout + p.stderr


def test_a_fio_that_lists_no_option_names_passes_none(tmp_path: Path) -> None:
    """A fio that cannot be asked for its option names (here: no bwrap to wall the
    question in, in a process of its own) lets no name pass, not every name; and the
    failed answer is not kept for the rest of the process."""
    import os
    import subprocess
    import sys

    exe = shutil.which("fio")
    assert exe is not None
    code = f"""
from storlab.campaign.runners import fio_cmdline as f
print(repr(f.full_option_name("bs", {exe!r})))
print(f._fio_options.cache_info().currsize)
"""
    env = {**os.environ, "PATH": str(tmp_path)}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    said, kept = p.stdout.strip().splitlines()
    assert "listed no option names" in said and kept == "0", p.stdout
