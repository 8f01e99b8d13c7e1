"""What a fio job is granted in the sandbox and what it may not do with it: the grants fio
gets for its own needs (the host's network held to the job's TCP ports, io_uring rings,
Unix sockets), given only to the system's fio; options that start a program or load code,
which would inherit them; and the files and directories the sandbox would not open (a file
not made yet elsewhere, a file made in the campaign's read-only directory, an existing
directory handed whole to a program fio starts)."""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..spec import CampaignError
from .fio_cmdline import (LOADED_FILES, REMOTE_ENGINES, WRITTEN_FILES, FioSettings,
                          exact_fio_option, given_options, job_options, split_names,
                          target_option, unix_net)
from ._sandbox import opens_declared, refused_outside
from .fio_targets import HARMLESS, candidates, sandbox_targets
from ...fileio import within

#: Engines that talk over the network (a run with one shares the host's network; the
#: sandbox gives other runs a network namespace of their own).
NETWORK_ENGINES = REMOTE_ENGINES - {"libcufile"} | {"libiscsi", "rdma", "gfapi",
                                                   "gfapi_async", "dfs", "libhdfs"}
#: Engines that make io_uring rings (the sandbox refuses rings to other programs: their
#: operations pass round the seccomp filter). fio's io_uring engines issue reads, writes,
#: syncs and, `io_uring_cmd`, passthrough commands on the files fio opened itself (through
#: the walls: only declared device nodes exist in the sandbox's /dev); no option makes them
#: open, make a socket or connect.
IO_URING_ENGINES = frozenset({"io_uring", "io_uring_cmd", "xnvme", "libblkio"})
#: fio options that run a program (`exec_prerun`, `exec_postrun`: system(3); the
#: command-line triggers' commands). A program fio starts inherits fio's seccomp filter,
#: so it would get what storlab grants fio itself for its engine (Unix sockets for
#: `protocol=unix`, rings for an io_uring engine, the host's network for a network engine
#: or client mode): refused in such a job unless the
#: campaign declares that grant (`FioRunner.refused_grant`).
PROGRAM_OPTIONS = ("exec_prerun", "exec_postrun", "trigger", "trigger-remote")
#: A Ceph cluster's TCP ports (its monitors' msgr2 and msgr1, its daemons' default
#: `ms_bind_port_min`..`ms_bind_port_max`): fio's rbd and rados engines reach them.
CEPH_PORTS = (3300, 6789, *range(6800, 7301))


def network_reason(job: FioSettings, opts: Mapping[str, str] | None = None) -> str | None:
    """Why this job needs the host's network (client mode, a network engine), or None;
    `opts`: a run's job options (default: the runner's own)."""
    if job.clients:
        return "fio client mode"
    given = given_options(job, opts)
    engines = {str(v) for k, v in given if k == "ioengine"} & NETWORK_ENGINES
    if unix_net(given):
        engines -= {"net", "netsplice"}  # a Unix socket: the sandbox's own, no network
    return f"ioengine {min(engines)}" if engines else None


def network_ports(job: FioSettings, opts: Mapping[str, str] | None = None
                  ) -> tuple[int, ...]:
    """The TCP ports this job names, the only ones its fio (and what it starts) may bind
    or connect to when its network is the runner's implicit need (Landlock): each
    client's (`host,port`, fio's default 8765), a net engine's `port` (a range of
    `numjobs` ports from it, as fio uses) and the port in a `host/port[/proto]`
    `filename`, the port of an `nbd://`, `nfs://` or `iscsi://` address, http's 80 or
    443, Ceph's (3300, 6789, its daemons' 6800-7300) for the rbd and rados engines.
    An engine whose ports are not named here needs `sandbox.network: true`."""
    out: set[int] = set()
    for c in job.clients:
        c = str(c)
        if not c.startswith("sock:"):
            port = c.rsplit(",", 1)[1] if "," in c else "8765"
            out.update(_ports(port))
    given = given_options(job, opts)
    engines = {str(v) for k, v in given if k == "ioengine"}
    numjobs = max([n for k, v in given if k == "numjobs" and (n := fio_int(v)) is not None]
                  + [1])
    for k, v in given:
        v = str(v)
        if k == "port":
            # fio adds the copy's number to the port and keeps 16 bits of it (65535 with
            # numjobs=3 also reaches ports 0 and 1)
            out.update((p + i) % 65536 for p in _ports(v) for i in range(min(numjobs, 4096)))
        elif k == "filename" and engines & {"net", "netsplice", "rdma"}:
            for name in split_names(v):
                parts = name.split("/")
                if len(parts) > 1:
                    out.update(_ports(parts[1]))
        m = re.search(r"\b(nbd|nfs|iscsi)://\[?[^/\]]*?\]?:(\d+)", v)
        if m:
            out.update(_ports(m.group(2)))
    defaults = {"nbd": (10809,), "nfs": (2049, 111), "libiscsi": (3260,),
                "http": (80, 443), "rbd": CEPH_PORTS, "rados": CEPH_PORTS}
    for e in engines:
        out.update(defaults.get(e, ()))
    return tuple(sorted(out))


#: Network engines whose destination is judged against the host's own services
#: (`refused_local_service`); rbd and rados speak Ceph's protocol, which authenticates
#: before any byte the job chooses, to the cluster the job names (a local one storlab
#: started is their purpose); client mode talks to fio servers.
JUDGED_ENGINES = NETWORK_ENGINES - {"rbd", "rados"}
#: The options that name where a network engine connects: net/netsplice/rdma's
#: `hostname`, http's `http_host` (default localhost, `host[:port]`), libhdfs's
#: `namenode`, gfapi's `brick`.
HOST_OPTIONS = ("hostname", "http_host", "namenode", "brick")


#: The options that name where each network engine connects; an engine of the job none
#: of whose options is given connects to fio's default, this host (`localhost`).
_NAMED_BY = {"net": ("hostname", "filename"), "netsplice": ("hostname", "filename"),
             "rdma": ("hostname", "filename"), "http": ("http_host",),
             "libhdfs": ("namenode",), "gfapi": ("brick",), "gfapi_async": ("brick",),
             "nbd": ("uri",), "nfs": ("nfs_url",), "libiscsi": ("filename",)}

#: An `nbd://`, `nfs://` or `iscsi://` address's host and port.
_URL_HOST = re.compile(r"\b(?:nbds?|nfs|iscsi)(?:\+\w+)?://\[?([^/\]:?]*)\]?(?::(\d+))?")


#: The options among `_NAMED_BY` whose value is an address (`nbd://`, `nfs://`): one
#: `_URL_HOST` does not read is judged as this host (fails closed).
_URL_OPTIONS = ("uri", "nfs_url")


def _destinations(given: Sequence[tuple[str, str]], engines: set[str]
                  ) -> list[tuple[str, str, int | None]]:
    """(option, host, port or None) of every place these options could make a network
    engine connect to, and fio's default, this host (`localhost`), for each engine of
    `engines` that none of its own options names a destination for (`_NAMED_BY`).

    Every host an option could name is judged, whichever fio takes: the `HOST_OPTIONS`;
    a net/netsplice/rdma `filename`, which fio reads as the host (`127.0.0.1`), or
    `host/port[/proto]` (a leading `/` leaves the host empty, fio's localhost), each
    ':'-separated name and the whole value (fio takes the later of `hostname` and
    `filename`: both are judged); an `nbd://`, `nfs://` or `iscsi://` address in any
    option's value; a `uri`/`nfs_url` no such address is read from, as this host. An
    address in another option (`description`) or another engine's option is judged but
    never stands for an engine's own destination, so it never hides fio's default. With
    `protocol=unix` the net engines' names are socket paths (judged as targets)."""
    out: list[tuple[str, str, int | None]] = []
    unix = unix_net(given)
    for k, v in given:
        v = str(v).strip()
        if k in HOST_OPTIONS and not (unix and k == "hostname"):
            host, port = v, None
            m = re.fullmatch(r"\[([^\]]*)\](?::(\d+))?|([^:]*):(\d+)", v)
            if m:
                host = m.group(1) if m.group(1) is not None else m.group(3)
                port = (_ports(m.group(2) or m.group(4) or "") or [None])[0]
            out.append((k, host, port))
        elif k == "filename" and engines & {"net", "netsplice", "rdma"} and not unix:
            for name in dict.fromkeys([*split_names(v), v]):
                parts = name.split("/")
                out.append((k, parts[0], (_ports(parts[1]) or [None])[0]
                            if len(parts) > 1 else None))
        urls = list(_URL_HOST.finditer(v))
        for m in urls:
            out.append((k, m.group(1), (_ports(m.group(2) or "") or [None])[0]))
        if k in _URL_OPTIONS and v and not urls:
            out.append((k, "", None))
    keys = {k for k, v in given if str(v).strip()}
    if any(not keys & set(_NAMED_BY.get(e, ())) for e in engines) or not out:
        out.append(("(none: fio's default)", "localhost", None))
    return out


def _local(host: str) -> list[str] | None:
    """The addresses of `host` that reach this host (loopback, the wildcard, which Linux
    connects to the loopback, an address of one of its interfaces, a multicast or
    broadcast address, whose datagrams this host's own sockets get too): an empty host is
    fio's localhost; a name is resolved as fio would (here, outside the walls: inside,
    fio sees the same /etc/hosts, resolver configuration and network). Empty when it
    resolves to none of them; None when it does not resolve at all. A link-local IPv6
    address is tried with the interface its `%zone` names (without it no bind succeeds,
    while fio, resolving the name, connects through that interface to a listener of this
    host); an IPv4-mapped one as the IPv4 address it carries."""
    import ipaddress
    import socket

    host = host or "localhost"
    try:
        infos = {(i[4][0].partition("%")[0], i[4][3] if i[0] == socket.AF_INET6 else 0)
                 for i in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return None
    out = []
    for a, scope in sorted(infos):
        ip = ipaddress.ip_address(a)
        if ip.version == 6 and ip.ipv4_mapped is not None:
            ip, scope = ip.ipv4_mapped, 0
        if ip.is_loopback or ip.is_unspecified or ip.is_multicast or \
                str(ip) == "255.255.255.255":
            out.append(a)
            continue
        fam = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        with socket.socket(fam, socket.SOCK_DGRAM) as s:
            try:  # only an address of this host's interfaces binds
                s.bind((str(ip), 0, 0, scope) if fam == socket.AF_INET6 else (str(ip), 0))
                out.append(a)
            except OSError:
                pass
    return out


def refused_local_service(job: FioSettings, opts: Mapping[str, str], network: bool
                          ) -> str | None:
    """Why this job may not run now, or None: its network engine gets the host's network
    without the campaign's `sandbox.network` (held to the job's ports by Landlock, but
    the job picks the ports), and a place it connects to on this host (loopback, an
    address of this host, a name resolving to one, fio's default localhost, the wildcard
    `0`/`0.0.0.0`/`::`, which Linux connects to the loopback) has a service listening on
    one of those ports on any address of this host (TCP; UDP for `protocol=udp`): somebody
    else's (a root Redis or scheduler would get the job's bytes, `buffer_pattern` a
    command line). Asked before any run and again right before each fio start (a
    service may start between runs); a job's own listener (`listen`) binds after, so a
    job listening and another connecting to it in the same fio run. A destination name
    that does not resolve is refused (fio resolves it again later), as is a `port` or
    `numjobs` value storlab does not read with certainty (`fio_int`). Remote hosts, rbd
    and rados, and client mode are not judged."""
    if network or job.clients or network_reason(job, opts) is None:
        return None
    given = given_options(job, opts)
    engines = {str(v) for k, v in given if k == "ioengine"} & JUDGED_ENGINES
    if not engines:
        return None
    from ...clusters import listening

    for k, v in given:
        if k in PORT_NUMBERS and fio_int(v) is None:
            return (f"fio option {k}={str(v).strip()!r}: storlab cannot read it as fio "
                    f"does, so cannot tell which ports the job reaches (write it as decimal "
                    f"digits), or declare sandbox.network: true")
    udp = any(k in ("protocol", "proto") and str(v).strip().startswith("udp")
              for k, v in given)
    ports = set(network_ports(job, opts))
    for option, host, port in _destinations(given, engines):
        judged = ports | ({port} if port else set())
        local = _local(host)
        if local is None:
            # fio resolves the name again when it connects: a name without an answer now
            # (a DNS name whose author answers later, an /etc/hosts line added since) may
            # lead to this host then
            return (f"fio option {option}: {host!r} does not resolve here, so storlab "
                    f"cannot tell whether it leads to a service of this host (fio resolves "
                    f"it again when it connects): name a host that resolves, or declare "
                    f"sandbox.network: true")
        if local:
            # a destination of this host reaches more than the listeners bound to its own
            # address (the wildcard connects to the loopback, 127.0.0.0/8 is all loopback,
            # an IPv4 address is also ::ffff:ADDR): a listener on the port on any address
            # of this host counts
            held = listening(None, judged, udp=udp)
            if held:
                p = min(held)
                return (f"fio option {option}: {host or 'localhost'} port {p} is a service "
                        f"of this host ({'UDP' if udp else 'TCP'}, listening now, not the "
                        f"run's): the job's bytes would go to it with the network storlab "
                        f"grants fio for its engine; declare sandbox.network: true if that "
                        f"service is meant to be reached")
    return None


def io_uring_reason(job: FioSettings, opts: Mapping[str, str] | None = None) -> str | None:
    """Why this job's fio makes io_uring rings (an io_uring engine), or None."""
    engines = {str(v) for k, v in given_options(job, opts)
               if k == "ioengine"} & IO_URING_ENGINES
    return f"ioengine {min(engines)}" if engines else None


def lockmem_reason(job: FioSettings, opts: Mapping[str, str] | None = None) -> str | None:
    """Why this job's fio locks memory past RLIMIT_MEMLOCK, which needs CAP_IPC_LOCK (kept
    only with `sandbox.lock_memory`): `lockmem` (fio pins that much with mlock in each job)
    above the soft limit its programs inherit from storlab (their hard limit too: the walls
    lower the hard one to it, `_sandbox.clamp_memlock`, so no program raises past it), or
    a value storlab cannot read as a size; or None."""
    import resource

    from ... import units

    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    for k, v in given_options(job, opts):
        if k != "lockmem":
            continue
        text = str(v).strip()
        try:
            n = units.parse_size(text, "lockmem", allow_zero=True)
        except units.UnitsError:
            return f"fio lockmem={text} (memory locked with mlock)"
        if n and soft != resource.RLIM_INFINITY and n > soft:
            return (f"fio lockmem={text} (memory locked with mlock, past the "
                    f"RLIMIT_MEMLOCK of {soft} bytes)")
    return None


def realtime_reason(job: FioSettings, opts: Mapping[str, str] | None = None) -> str | None:
    """Why this job's fio raises its priority, which needs CAP_SYS_NICE (kept only with
    `sandbox.realtime`): the real-time I/O class (`prioclass=1`, `cmdprio_class` with a
    1, or `cmdprio_percentage`/`cmdprio_bssplit` for a direction whose `cmdprio_class` is
    not set: fio's default there is the real-time class; a `cmdprio_bssplit` entry
    `bs/perc/1/level`) or a negative `nice`; or None. A best-effort `prio` needs nothing."""
    given = given_options(job, opts)
    classes = _per_direction(next((str(v) for k, v in given if k == "cmdprio_class"), ""))
    for k, v in given:
        text = str(v).strip()
        if k == "prioclass" and text == "1":
            return "fio prioclass=1 (the real-time I/O class)"
        if k == "cmdprio_class" and "1" in text.replace(",", ":").split(":"):
            return f"fio cmdprio_class={text} (the real-time I/O class)"
        if k == "nice" and text.startswith("-") and text.lstrip("-0") != "":
            return f"fio nice={text} (a negative nice value)"
        if k in ("cmdprio_percentage", "cmdprio_bssplit"):
            for d, part in enumerate(_per_direction(text)):
                entries = [e.split("/") for e in part.split(":")] \
                    if k == "cmdprio_bssplit" else [["", part]]
                for e in entries:
                    used = len(e) > 1 and e[1].strip() not in ("", "0")
                    cls = e[2].strip() if len(e) > 2 and e[2].strip() else classes[d]
                    if used and cls in ("", "0", "1"):
                        return (f"fio {k}={text} with "
                                + ("a real-time class entry" if len(e) > 2 and cls == "1"
                                   else "no cmdprio_class (fio's default there is the "
                                   "real-time I/O class; cmdprio_class=2 is best-effort)"))
    return None


def _per_direction(value: str) -> list[str]:
    """A fio `read[,write]` value per direction (reads, writes): one value is both."""
    parts = [p.strip() for p in value.split(",")]
    return [parts[0], parts[1] if len(parts) > 1 else parts[0]]


def unix_socket_reason(job: FioSettings, opts: Mapping[str, str] | None = None
                       ) -> str | None:
    """Why this job's fio makes Unix sockets of its own (the net engines with
    `protocol=unix`: its listener and its client, both in the sandbox; a client
    reaching its server by `sock:<path>`, a path the campaign also declares in
    `sandbox.sockets` for it to be there), or None."""
    if any(str(c).startswith("sock:") for c in job.clients):
        return "fio client mode, sock:"
    given = given_options(job, opts)
    if unix_net(given):
        return "ioengine net, protocol=unix"
    return None


def refused_grant(job: FioSettings, opts: Mapping[str, str], sockets: bool, io_uring: bool,
                  network: bool = False) -> str | None:
    """Why this job may not run as given, or None: storlab grants fio Unix sockets
    (`unix_socket_reason`), io_uring rings (`io_uring_reason`) or the host's network
    (`network_reason`: a network engine, client mode) implicitly (the campaign
    declares neither `sandbox.sockets` nor `sandbox.unix_sockets`, `sockets`, nor
    `sandbox.io_uring`, `io_uring`, nor `sandbox.network`, `network`), and an option
    would start a program
    (`PROGRAM_OPTIONS`, or an abbreviation fio accepts) or an `ioengine` value runs or
    loads code other than fio's own engines (`exec`, `external:`, a library path:
    `_loads_code`; libaio beside io_uring is fine), which would inherit that grant."""
    grants = [f"{why} gets {what}" for why, what, decl in (
        (unix_socket_reason(job, opts), "Unix sockets", sockets),
        (io_uring_reason(job, opts), "io_uring rings", io_uring),
        (network_reason(job, opts), "the host's network", network)) if why and not decl]
    if not grants:
        return None
    declare = ("sandbox.unix_sockets: true (or the socket paths in sandbox.sockets)"
               if "Unix" in grants[0] else "sandbox.io_uring: true"
               if "io_uring" in grants[0] else "sandbox.network: true")
    if not job.system_fio():
        return (f"fio: {job.fio!r} is not the system's fio (a root-owned program under "
                f"/usr) and would get what storlab grants fio itself for this job "
                f"({'; '.join(grants)}); declare {declare} in the campaign if it should "
                "have it")
    what = starts_program(job, opts)
    if what is None:
        return None
    return (f"{what}, which would inherit what storlab grants fio itself for this "
            f"job ({'; '.join(grants)}); declare {declare} in the campaign if that "
            "program should have it, or drop the option")


def starts_program(job: FioSettings, opts: Mapping[str, str]) -> str | None:
    """The first option of this job that starts a program (`PROGRAM_OPTIONS`, or an
    abbreviation fio accepts) or runs or loads code other than fio's own engines
    (`exec`, `external:`, a library path: `_loads_code`), in words; None when none."""
    for k, v in given_options(job, opts):
        runs = [p for p in PROGRAM_OPTIONS if p.startswith(k)]
        if runs and (k in runs or not exact_fio_option(k)):
            return f"fio option {k}={v!r} starts a program"
        if (k == "ioengine" or len(k) > 2 and "ioengine".startswith(k)
                and not exact_fio_option(k)) and _loads_code(str(v)):
            return f"fio option {k}={v!r} runs or loads code other than fio's engines"
    return None


def refused_program_dir(job: FioSettings, opts: Mapping[str, str], workdir: Path,
                        writable: Sequence[str], allow: bool = False) -> str | None:
    """Why this job may not run as given, or None: an existing directory its options
    name (`directory`, a log prefix's or a `filename_format`'s directory, a `filename`
    that is a directory) opens writable to fio, and an option starting a program
    (`starts_program`) would get it whole: an `exec_prerun` appended to a file in
    /var/spool/cron/crontabs or ~/.ssh. Allowed when that directory lies inside the
    run's directory `workdir` or a declared `writable` directory (real paths), or
    with `allow` (allow_destructive)."""
    if allow or job.allow_destructive:
        return None
    what = starts_program(job, opts)
    if what is None:
        return None
    own = [os.path.realpath(workdir), *writable]
    for t in sandbox_targets(job, opts, Path(workdir)):
        real = os.path.realpath(t)
        if os.path.isdir(real) and not any(within(real, d) for d in own):
            return (f"{what}, which would get the existing directory {t} that the job "
                    "names, writable whole (fio's own files and logs go there); declare "
                    "that directory in sandbox.writable if that program may write all "
                    "of it, or drop the option")
    return None


def check_home(job: FioSettings, config: Mapping[str, Any], home: Path, workdir: Path
               ) -> None:
    """Refuse a file fio would make directly in the campaign's directory `home` (beside
    the campaign file and the store), which the sandbox keeps read-only: every run
    would fail with `Read-only file system`. Called unless the campaign declares that
    directory writable or sets allow_destructive."""
    if job.allow_destructive:
        return
    home = Path(home).resolve()
    opts = job_options(job, config, Path(workdir).absolute(), check=False)
    for c in candidates(job, opts, Path(workdir).absolute()):
        if not c.pattern and not c.opendir and not os.path.lexists(c.path) \
                and Path(os.path.realpath(os.path.dirname(c.path))) == home:
            raise CampaignError(
                f"fio target {c.given} (as {c.path}) would be made directly in the "
                "campaign's directory, which the sandbox keeps read-only (it holds the "
                f"campaign file and the store); name it relative (made in each run's "
                f"directory), or in a directory inside declared in sandbox.writable "
                f"(data/{os.path.basename(c.path)})")


def refused_new_file(job: FioSettings, config: Mapping[str, Any], workdir: Path,
                     writable: Sequence[str]) -> str | None:
    """Why a file this job would make is refused, or None: a file not made yet in an
    existing directory other than the run's directory `workdir` (the sandbox opens no
    such directory for it: the whole directory would be writable, another campaign's
    store or a ~/.ssh beside the file), unless that
    directory lies in a declared `writable` directory (real paths) or the runner sets
    allow_destructive (the directory then opens whole)."""
    if job.allow_destructive:
        return None
    workdir = Path(workdir).absolute()
    opts = job_options(job, config, workdir, check=False)
    given = given_options(job, opts)
    own = [os.path.realpath(workdir)]
    for c in candidates(job, opts, workdir):
        # `..` taken from the name: the run's directory may not be made yet
        path = os.path.normpath(c.path)
        parent = os.path.dirname(path)
        if c.opendir or (glob.glob(path) if c.pattern else os.path.lexists(path)) \
                or c.pattern and glob.has_magic(parent):
            continue
        real = os.path.realpath(parent)
        if not os.path.isdir(real) or any(within(real, d) for d in (*own, *writable)):
            continue
        # A pattern's directory (filename_format, a log prefix) opens whole inside the
        # campaign's directory only (`opens_declared`): the job names the whole file (a
        # `filename_format` without a token), so elsewhere it could make a .pth file in
        # a site-packages or a script beside a root-run one.
        if c.pattern and opens_declared(real, False):
            continue
        option = c.option if c.pattern or c.option == "hostname" else next(
            (k for k, v in given if k in WRITTEN_FILES and v == c.given), "filename")
        shown = c.given if c.given == c.path else f"{c.given} (as {c.path})"
        if c.pattern:
            return (f"fio option {option}: {shown} is not made yet in the existing "
                    f"directory {parent} outside the campaign's directory, which the "
                    "sandbox does not open without allow_destructive: name a file inside "
                    "the campaign's directory, or set allow_destructive: true in the "
                    "runner options if writing there is really meant")
        return (f"fio option {option}: {shown} is not made yet in the "
                f"existing directory {parent}, which the sandbox does not open for it: "
                "make the file first, or declare its directory in sandbox.writable")
    return None


def refused_outside_target(job: FioSettings, config: Mapping[str, Any], workdir: Path,
                           home: str | Sequence[str]) -> str | None:
    """Why a target directory of this job (`directory`, a pattern's directory) or a file
    it names lies outside the campaign's directory `home` (or every one of several)
    without allow_destructive, in
    one line naming the option, or None. A deny-list of the system's trees cannot name
    every root-owned directory a root-run script or an interpreter lives in (/work/app,
    a venv's site-packages): the job names whole files there (a `filename_format`
    without a token) and a program the campaign names writes the whole directory."""
    if job.allow_destructive:
        return None
    workdir = Path(workdir).absolute()
    opts = job_options(job, config, workdir, check=False)
    given = given_options(job, opts)
    homes = [os.path.realpath(h) for h in ([home] if isinstance(home, str) else home)]
    named: list[tuple[str, str, str]] = [
        (k, d, d if os.path.isabs(d) else f"{workdir}/{d}") for k, v in given
        if "directory" in target_option(k) for d in split_names(v)]
    # a remote engine's `filename` names an object, a host or a port, no file here (the
    # http engine's `/bucket/obj`); a Unix socket's path stays judged
    remote = bool({str(v) for k, v in given if k == "ioengine"} & REMOTE_ENGINES) \
        and not unix_socket_reason(job, opts)
    for c in ([] if remote else candidates(job, opts, workdir)):
        option = c.option if c.pattern or c.option == "hostname" else next(
            (k for k, v in given if v == c.given), "filename")
        named.append((option, c.given, os.path.dirname(c.path) if c.pattern else c.path))
    for option, value, path in named:
        path = os.path.normpath(path)
        if glob.has_magic(path) or os.path.realpath(path) in HARMLESS \
                or path.startswith("/dev/") or path == "/proc" or path.startswith("/proc/"):
            continue  # devices: refused by the target check; /proc never opens
        why = refused_outside(path, homes)
        if why:
            return (f"field runner.options.{option}: {value}: {why}; the runs' programs "
                    "may write only inside it unless the campaign sets "
                    "sandbox.allow_destructive: true or the runner's allow_destructive: "
                    "true")
    return None


def pattern_files(value: str) -> list[str]:
    """The files a fio pattern (`buffer_pattern`, `verify_pattern`) reads, as fio's
    parser finds them (lib/pattern.c): each part in single quotes ('file') outside a
    double-quoted string ("abc", which has no escape); a quote left open is taken whole
    (fio refuses the pattern)."""
    out: list[str] = []
    i = 0
    while i < len(value):
        c = value[i]
        if c in "'\"":
            end = value.find(c, i + 1)
            end = len(value) if end < 0 else end
            if c == "'":
                out.append(value[i + 1:end])
            i = end + 1
        else:
            i += 1
    return out


def loaded_files(job: FioSettings, opts: Mapping[str, str] | None = None
                 ) -> list[tuple[str, str, str]]:
    """(option, its value, a file it names) for each file this job's fio reads and puts
    into what it writes or sends, or replays (`LOADED_FILES`): a pattern's 'file' parts,
    each of `read_iolog`'s ':'-separated logs."""
    out: list[tuple[str, str, str]] = []
    for k, v in given_options(job, opts):
        if k in ("buffer_pattern", "verify_pattern"):
            out += [(k, str(v), f) for f in pattern_files(str(v))]
        elif k == "read_iolog":
            out += [(k, str(v), f) for f in split_names(str(v))]
    return out


def refused_loaded_file(job: FioSettings, config: Mapping[str, Any], workdir: Path,
                        home: str | Sequence[str]) -> str | None:
    """Why a file this job's fio would read into what it writes or sends (`loaded_files`:
    `buffer_pattern='file'`, `verify_pattern`, `read_iolog`) lies outside the campaign's
    directory `home` (or every one of several) without allow_destructive, in one line
    naming the option, or None. Judged as a target is (`refused_outside`: what the name
    leads to, links resolved, and no link on the way another user may change); a
    relative name is fio's, in the run's directory `workdir`. The walls show fio the
    system's trees read-only, /etc whole: a quoted root-only file there went, as the
    buffers of the net engine, to the campaign's listener."""
    if job.allow_destructive:
        return None
    workdir = Path(workdir).absolute()
    opts = job_options(job, config, workdir, check=False)
    homes = [os.path.realpath(h) for h in ([home] if isinstance(home, str) else home)]
    for option, value, name in loaded_files(job, opts):
        path = os.path.normpath(name if os.path.isabs(name) else f"{workdir}/{name}")
        why = refused_outside(path, homes)
        if why:
            return (f"field runner.options.{option}: {value}: fio reads {name} and puts its "
                    f"bytes in what it writes or sends; {why}; such a file is read only "
                    "inside it unless the campaign sets sandbox.allow_destructive: true or "
                    "the runner's allow_destructive: true")
    return None


def system_program(name: str) -> str | None:
    """The real path of the root-owned file under /usr that others cannot write which
    `name` resolves to on PATH (links followed), or None when it resolves to no such file."""
    exe = shutil.which(name)
    if exe is None:
        return None
    real = os.path.realpath(exe)
    try:
        st = os.stat(real)
    except OSError:
        return None
    ok = within(real, "/usr", strict=True) and st.st_uid == 0 and not st.st_mode & 0o022
    return real if ok else None


def _loads_code(engine: str) -> bool:
    """Whether an `ioengine` value runs or loads code other than fio's built-in engines:
    `exec` (a program), `external:<lib>` or a library path."""
    return engine == "exec" or engine.startswith("external") or "/" in engine


#: The spellings of an integer option's value storlab reads as fio does: decimal digits
#: (leading zeros are decimal to fio, not octal) or `0x` hexadecimal, an optional `+`.
_FIO_INT = re.compile(r"\+?(?:0[xX][0-9a-fA-F]+|[0-9]+)")
#: fio's integer options that decide which ports a net engine job reaches: `port`, and
#: `numjobs` (the job's n-th copy uses `port` + n).
PORT_NUMBERS = ("port", "numjobs")


def fio_int(value: object) -> int | None:
    """fio's reading of an integer option's value (`str_to_decimal`: strtoll in base 16
    when the text holds `0x`, else 10; then k/m/g... suffixes, `(expressions)`, trailing
    text ignored), for the spellings storlab reads with certainty (`_FIO_INT`, blanks
    around); None for any other (fio may read a number there: `46k` is 47104, `47311x`
    is 47311)."""
    text = str(value).strip(" \t\n\r\f\v")
    if not _FIO_INT.fullmatch(text):
        return None
    text = text.lstrip("+")
    return int(text, 16) if text[:2] in ("0x", "0X") else int(text, 10)


def _ports(value: str) -> list[int]:
    """The port `value` names (a number 1-65535, read as fio reads it: `fio_int`), or
    none."""
    n = fio_int(value)
    return [n] if n is not None and 0 < n < 65536 else []


#: Client mode: a fio server runs outside storlab's walls (storlab did not start it), so
#: the servers get only options whose value is a number, size, time, boolean, enum or
#: CPU/NUMA list and names no file, program, host or account: each of fio 3.33's options
#: (`fio --cmdhelp=all`, and `--enghelp` of each engine in `CLIENT_ENGINES`) is either
#: here or in `CLIENT_REFUSED` with the reason, judged by its help text. The targets
#: (`filename`, `directory`, `filename_format`) are here: the target guard checks them.
CLIENT_OPTIONS = frozenset((
    # targets and files (the target guard reads these)
    "filename", "directory", "filename_format", "unique_filename", "lockfile", "nrfiles",
    "nr_files", "file_service_type", "openfiles", "fallocate", "create_serialize",
    "create_fsync", "create_on_open", "create_only", "allow_file_create", "pre_read",
    "unlink", "unlink_each_loop", "file_append", "overwrite", "fill_device", "fill_fs",
    # pattern and randomness
    "rw", "readwrite", "rw_sequencer", "rwmixread", "rwmixwrite", "percentage_random",
    "randrepeat", "allrandrepeat", "randseed", "random_distribution", "random_generator",
    "norandommap", "ignore_error", "continue_on_error", "error_dump", "serialize_overlap",
    # sizes and offsets
    "bs", "blocksize", "ba", "blockalign", "bsrange", "blocksize_range", "bssplit",
    "bs_unaligned", "blocksize_unaligned", "size", "filesize", "io_size", "io_limit",
    "offset", "fileoffset", "offset_increment", "offset_align", "number_ios", "loops",
    # engine, queueing, caching and syncs
    "ioengine", "iodepth", "iodepth_batch", "iodepth_batch_submit",
    "iodepth_batch_complete_min", "iodepth_batch_complete", "iodepth_batch_complete_max",
    "iodepth_low", "io_submit_mode", "direct", "atomic", "buffered", "sync", "fsync",
    "fdatasync", "write_barrier", "sync_file_range", "end_fsync", "fsync_on_close",
    "invalidate", "fadvise_hint", "write_hint",
    # memory (`mem` without a file: `CLIENT_VALUES`)
    "mem", "iomem", "hugepage-size", "lockmem",
    # zoned devices
    "zonemode", "zonesize", "zonecapacity", "zonerange", "zoneskip", "read_beyond_wp",
    "max_open_zones", "job_max_open_zones", "ignore_zone_limits", "zone_reset_threshold",
    "zone_reset_frequency",
    # time, jobs, rate, latency targets, flow, steady state
    "runtime", "timeout", "time_based", "ramp_time", "startdelay", "numjobs", "thread",
    "stonewall", "wait_for_previous", "new_group", "exitall", "exit_what",
    "exitall_on_error", "rate", "rate_min", "ratemin", "rate_process", "rate_cycle",
    "ratecycle", "rate_ignore_thinktime", "rate_iops", "rate_iops_min", "thinktime",
    "thinktime_spin", "thinktime_blocks", "thinktime_blocks_type", "thinktime_iotime",
    "max_latency", "latency_target", "latency_window", "latency_percentile", "latency_run",
    "flow_id", "flow", "flow_sleep", "steadystate", "ss", "steadystate_duration", "ss_dur",
    "steadystate_ramp_time", "ss_ramp",
    # CPU, NUMA and priority (a real-time class: `realtime_reason`, client mode too)
    "cpumask", "cpus_allowed", "cpus_allowed_policy", "numa_cpu_nodes", "numa_mem_policy",
    "gtod_cpu", "nice", "prio", "prioclass",
    # buffer contents
    "zero_buffers", "refill_buffers", "scramble_buffers", "buffer_compress_percentage",
    "buffer_compress_chunk", "dedupe_percentage", "dedupe_mode",
    "dedupe_working_set_percentage", "dedupe_global",
    # reporting and timing (the log options shape logs, which are refused: no file)
    "group_reporting", "stats", "clat_percentiles", "lat_percentiles", "slat_percentiles",
    "percentile_list", "significant_figures", "disk_util", "gtod_reduce", "disable_lat",
    "disable_clat", "disable_slat", "disable_bw_measurement", "disable_bw",
    "unified_rw_reporting", "block_error_percentiles", "clocksource", "kb_base",
    "unit_base", "description", "bwavgtime", "iopsavgtime", "per_job_logs", "log_entries",
    "log_avg_msec", "log_hist_msec", "log_hist_coarseness", "log_max_value", "log_offset",
    "log_prio", "log_compression", "log_compression_cpus", "log_store_compressed",
    "log_unix_epoch", "log_alternate_epoch", "log_alternate_epoch_clock_id",
    # the engines' own (`fio --enghelp=io_uring`, libaio, pvsync2, mmap)
    "hipri", "hipri_percentage", "cmdprio", "cmdprio_class", "cmdprio_percentage",
    "cmdprio_bssplit", "fixedbufs", "registerfiles", "sqthread_poll", "sqthread_poll_cpu",
    "nonvectored", "uncached", "nowait", "force_async", "userspace_reap", "thp",
    # the rbd and rados engines' target (`fio --enghelp=rbd`), plain names only
    # (`CLIENT_NAMES`)
    "pool", "rbdname", "clientname", "busy_poll", "touch_objects"))
#: fio 3.33's options refused in client mode, and why (see `CLIENT_OPTIONS`).
CLIENT_REFUSED = {
    **dict.fromkeys(("opendir",), "names a directory the target check does not walk"),
    **dict.fromkeys(("name", "wait_for"), "names another job (the job file holds one)"),
    **dict.fromkeys(("exec_prerun", "exec_postrun"), "runs a program"),
    **dict.fromkeys(("write_iolog", "read_iolog", "read_iolog_chunked", "replay_no_stall",
                     "replay_redirect", "replay_scale", "replay_align", "replay_time_scale",
                     "replay_skip", "merge_blktrace_file", "merge_blktrace_scalars",
                     "merge_blktrace_iters"),
                    "an I/O log or trace names its own files (and devices)"),
    **dict.fromkeys(("write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log"),
                    "writes a log file it names"),
    **dict.fromkeys(("verify", "do_verify", "verify_interval", "verify_offset",
                     "verify_pattern", "verify_fatal", "verify_dump", "verify_async",
                     "verify_backlog", "verify_backlog_batch", "experimental_verify",
                     "verify_state_load", "verify_state_save", "verify_only",
                     "trim_percentage", "trim_verify_zero", "trim_backlog",
                     "trim_backlog_batch"),
                    "verification writes state and dump files on the server"),
    "buffer_pattern": "reads a file when its value is quoted ('file')",
    "ioscheduler": "writes the device's scheduler in sysfs",
    "allow_mounted_write": "lifts fio's own refusal to write a mounted device",
    **dict.fromkeys(("cgroup", "cgroup_nodelete", "cgroup_weight"),
                    "makes and writes a cgroup directory"),
    **dict.fromkeys(("uid", "gid"), "runs the job as another account"),
    "profile": "a built-in profile takes options of its own (act's device names)",
    **dict.fromkeys(("conf", "clustername"),
                    "a ceph.conf the server reads sets log and socket files"),
    "cmd_type": "an option of io_uring_cmd, not a client-mode engine"}
#: Client-mode options that take only these values (`mem=mmap:FILE` names a file).
CLIENT_VALUES = dict.fromkeys(("mem", "iomem"), frozenset((
    "malloc", "shm", "shmhuge", "mmap", "mmaphuge", "mmapshared", "cudamalloc")))
#: Client-mode options whose value names a Ceph object, not a path: plain names only.
CLIENT_NAMES = frozenset(("pool", "rbdname", "clientname"))
#: Engines a client-mode job may name: plain reads and writes of the job's own files.
CLIENT_ENGINES = frozenset(("sync", "psync", "vsync", "pvsync", "pvsync2", "libaio",
                            "posixaio", "mmap", "io_uring", "null", "rbd", "rados"))
#: fio's command-line options a client-mode `extra_args` may hold: the local client's
#: progress output only (`--trigger-remote` would run a command on every server).
CLIENT_COMMAND_LINE = frozenset(("eta", "eta-newline", "eta-interval", "status-interval",
                                 "warnings-fatal"))


def refused_client_option(job: FioSettings, opts: Mapping[str, str]) -> str | None:
    """In client mode, why an option may not go to the fio servers (not on the allow-list
    `CLIENT_OPTIONS`, an engine not in `CLIENT_ENGINES`, a value outside
    `CLIENT_VALUES`), or None; always None outside client mode or with
    `allow_destructive`."""
    if not job.clients or job.allow_destructive:
        return None
    cmd = dict(given_options(job, {}))
    outside = ("the fio servers run outside storlab's walls, so only options that name "
               "no file, program or host go to them (docs/guarantees-targets.md)")
    accept = ("drop it, or set allow_destructive: true if the servers may run it outside "
              "any wall (that also turns off storlab's target checks)")
    for name, value in [*cmd.items(), *opts.items()]:
        ok = name in CLIENT_COMMAND_LINE if name in cmd else name in CLIENT_OPTIONS
        if not ok:
            why = CLIENT_REFUSED.get(name, "not on the client-mode list")
            return (f"fio option {name}={value!r}: refused in client mode ({why}): "
                    f"{outside}; {accept}")
        if name in CLIENT_NAMES and not re.fullmatch(r"[A-Za-z0-9_.-]+", str(value)):
            return (f"fio option {name}={value!r}: refused in client mode: a Ceph name is "
                    "letters, digits, '_', '.' or '-'")
        if name == "ioengine" and value not in CLIENT_ENGINES:
            return (f"fio option ioengine={value!r}: refused in client mode: {outside}: use "
                    f"one of {', '.join(sorted(CLIENT_ENGINES))}; or {accept}")
        if name in CLIENT_VALUES and str(value) not in CLIENT_VALUES[name]:
            return (f"fio option {name}={value!r}: refused in client mode (a file-backed "
                    f"buffer names a file): use one of {', '.join(sorted(CLIENT_VALUES[name]))};"
                    f" or {accept}")
    return None
