"""A throwaway OpenStack Swift all-in-one on 127.0.0.1 (or `bind`) from Debian's packages,
started without systemd: memcached, one account, container and object server, a proxy with
tempauth and s3api; three devices on a loop-mounted XFS image (plain directories when
loop devices are not available, or when asked).

Debian's proxy config says `workers = 20`; ours are explicit (`workers`, `proxy_workers`).
Everything is under one directory, except /etc/swift/swift.conf (hash prefix/suffix and
the storage policy), which Swift reads from that fixed path: the package's file is used.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PortTaken
from ._util import (
    check_bind,
    check_endpoint_daemon,
    fresh_cluster_dir,
    trusted_cluster_dir,
    logs_kept_on_failure,
    ClusterError,
    HTTP_ATTEMPT_SECONDS,
    RUNNING,
    Daemon,
    http_request,
    keep_logs_only,
    listener_is_daemons,
    load_state,
    present_cluster_dir,
    pid_present,
    port_free,
    private_files,
    read_record,
    run,
    save_state,
    stop_pid,
    stop_strays,
    wait_until,
)

DEVICES = ("d1", "d2", "d3")
SERVERS = ("account", "container", "object")
#: The benchmark's account and user (tempauth); its key is drawn per cluster.
USER = "test:tester"


@dataclass
class SwiftOptions:
    replicas: int = 3
    workers: int = 1  # per account/container/object server
    proxy_workers: int = 2
    port: int = 8080  # proxy
    storage_port: int = 6200  # object; container +1, account +2
    memcached_port: int = 11311
    part_power: int = 10
    storage: str = "loop"  # loop (XFS image) | dir
    disk_bytes: int = 2 << 30
    tie_to_parent: bool = False  # daemons die with the starting process (tests)
    bind: str = "127.0.0.1"  # where the proxy and servers listen (memcached: loopback)


class SwiftCluster:
    kind = "swift"

    def __init__(self, base: Path | None = None) -> None:
        self.dir = trusted_cluster_dir(base, "swift")
        self.state_file = self.dir / "cluster.json"
        self.node = self.dir / "node"

    def state(self) -> dict[str, Any] | None:
        """The saved state; None when there is none, or no directory (`present_cluster_dir`)."""
        return load_state(self.state_file, self.kind) if present_cluster_dir(self.dir) else None

    def _daemon(self, name: str, argv: list[str]) -> Daemon:
        tie = bool((self.state() or {}).get("tie_to_parent"))
        return Daemon(name, argv, self.dir / "log" / f"{name}.log",
                      self.dir / "run" / f"{name}.pid", tie_to_parent=tie)

    def _server_daemon(self, server: str) -> Daemon:
        prog = f"swift-{server}-server"
        return self._daemon(server, [prog, str(self.dir / f"{server}-server.conf"), "-v"])

    # ------------------------------------------------------------------ conf
    def _ports(self, o: SwiftOptions) -> dict[str, int]:
        return {"object": o.storage_port, "container": o.storage_port + 1,
                "account": o.storage_port + 2}

    def _write_confs(self, o: SwiftOptions, user: str, key: str, admin_key: str) -> None:
        d = self.dir
        for server, port in self._ports(o).items():
            (d / f"{server}-server.conf").write_text("\n".join([
                "[DEFAULT]", f"devices = {self.node}", "mount_check = false",
                f"bind_ip = {o.bind}", f"bind_port = {port}", f"workers = {o.workers}",
                f"user = {user}", f"swift_dir = {d}", "log_level = WARNING",
                "log_address = /dev/null-storlab",  # no syslog here: console (-v) only
                "", "[pipeline:main]", f"pipeline = healthcheck {server}-server", "",
                f"[app:{server}-server]", f"use = egg:swift#{server}",
                "[filter:healthcheck]", "use = egg:swift#healthcheck", ""]))
        (d / "proxy-server.conf").write_text("\n".join([
            "[DEFAULT]", f"bind_ip = {o.bind}", f"bind_port = {o.port}",
            f"workers = {o.proxy_workers}", f"user = {user}", f"swift_dir = {d}",
            "log_level = WARNING", "log_address = /dev/null-storlab", "",
            "[pipeline:main]",
            "pipeline = catch_errors gatekeeper healthcheck cache listing_formats s3api "
            "tempauth copy slo dlo proxy-server", "",
            "[app:proxy-server]", "use = egg:swift#proxy", "account_autocreate = true", "",
            "[filter:tempauth]", "use = egg:swift#tempauth",
            f"user_admin_admin = {admin_key} .admin .reseller_admin",
            f"user_test_tester = {key} .admin", "token_life = 86400", "",
            "[filter:s3api]", "use = egg:swift#s3api", "location = us-east-1", "",
            "[filter:cache]", "use = egg:swift#memcache",
            f"memcache_servers = 127.0.0.1:{o.memcached_port}", "",
            *(x for f in ("catch_errors", "gatekeeper", "healthcheck", "listing_formats",
                          "copy", "slo", "dlo")
              for x in (f"[filter:{f}]", f"use = egg:swift#{f}", "")),
        ]))

    def _build_rings(self, o: SwiftOptions) -> None:
        """Three builders in parallel (each swift-ring-builder call is ~1 s of Python)."""
        def build(server: str, port: int) -> None:
            b = str(self.dir / f"{server}.builder")
            run(["swift-ring-builder", b, "create", str(o.part_power), str(o.replicas), "1"])
            devs = [a for z, dev in enumerate(DEVICES, start=1)
                    for a in (f"r1z{z}-{o.bind}:{port}/{dev}", "100")]
            run(["swift-ring-builder", b, "add", *devs])
            # rebalance exits 1 on warnings (e.g. balance) but still writes the ring
            run(["swift-ring-builder", b, "rebalance"], check=False)
            if not (self.dir / f"{server}.ring.gz").exists():
                raise ClusterError(f"swift-ring-builder did not write {server}.ring.gz")
        with ThreadPoolExecutor(3) as ex:
            for f in [ex.submit(build, s, p) for s, p in self._ports(o).items()]:
                f.result()

    # ------------------------------------------------------------------ storage
    def _mount(self, o: SwiftOptions, state: dict[str, Any]) -> None:
        self.node.mkdir(parents=True, exist_ok=True)
        if o.storage == "loop":
            img = self.dir / "disk.img"
            # made anew in the fresh directory, never through a link at its name
            fd = os.open(img, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.truncate(o.disk_bytes)
            try:
                run(["mkfs.xfs", "-q", "-f", str(img)], timeout=60)
                dev = run(["losetup", "--find", "--show", str(img)]).stdout.strip()
                state["loop"] = dev
                save_state(self.state_file, state)
                run(["mount", "-o", "noatime", dev, str(self.node)])
                state["mounted"] = str(self.node)
                save_state(self.state_file, state)
            except ClusterError as exc:
                raise ClusterError(f"cannot mount an XFS loop image ({exc}); use "
                                   "--storage dir for plain directories") from None
        for dev in DEVICES:
            (self.node / dev).mkdir(exist_ok=True)

    # ------------------------------------------------------------------ up
    def up(self, o: SwiftOptions | None = None, timeout: float = 90) -> dict[str, Any]:
        """Build rings, mount storage, start memcached, servers and proxy; wait until the
        proxy authenticates and an account answers. Returns the cluster's state."""
        o = o or SwiftOptions()
        if not 1 <= o.replicas <= len(DEVICES):
            raise ClusterError(f"replicas {o.replicas} must be between 1 and {len(DEVICES)}")
        if o.workers < 1 or o.proxy_workers < 1:
            raise ClusterError("workers and proxy workers must be at least 1")
        if o.storage not in ("loop", "dir"):
            raise ClusterError(f"storage {o.storage!r} must be loop or dir")
        if self.state() is not None or any(pid_present(p) for p in self._pidfiles()):
            raise ClusterError(f"a swift cluster already exists in {self.dir}; run "
                               "`storlab cluster down swift` first")
        check_bind(o.bind)
        busy = [p for p in (o.port, *self._ports(o).values()) if not port_free(p, o.bind)]
        busy += [o.memcached_port] if not port_free(o.memcached_port) else []
        if busy:
            raise ClusterError(f"port(s) {busy} on {o.bind} are in use (another cluster?)")
        if not Path("/etc/swift/swift.conf").exists():
            raise ClusterError("/etc/swift/swift.conf is missing (install the swift package: "
                               "scripts/sysdeps.sh)")
        t0 = time.monotonic()
        fresh_cluster_dir(self.dir)
        # The servers read their confs and rings after dropping to `user`: the swift user
        # (owning the 0700 directory) only if it can reach it (pytest's and other private
        # temp dirs are 0700 all the way up), else root.
        user = ("swift" if _user_exists("swift") and _others_can_enter(self.dir)
                else "root")
        key, admin_key = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
        with private_files():  # confs hold the accounts' keys: their owner alone reads them
            for sub in ("run", "log"):
                (self.dir / sub).mkdir(parents=True, exist_ok=True)
            state: dict[str, Any] = {
                "kind": "swift", "dir": str(self.dir), "replicas": o.replicas,
                "workers": o.workers, "proxy_workers": o.proxy_workers, "storage": o.storage,
                "bind": o.bind, "proxy": f"http://{o.bind}:{o.port}",
                "auth_url": f"http://{o.bind}:{o.port}/auth/v1.0",
                "user": USER, "key": key, "admin_key": admin_key, "run_as": user,
                "ports": {**self._ports(o), "proxy": o.port, "memcached": o.memcached_port},
                "s3": {"endpoint": f"http://{o.bind}:{o.port}", "access_key": USER,
                       "secret_key": key, "region": "us-east-1"},
                "started": time.time(), "ready": False, "tie_to_parent": o.tie_to_parent}
            save_state(self.state_file, state)
            with logs_kept_on_failure(self.down, self.dir / "log", "swift"):
                self._mount(o, state)
                self._write_confs(o, user, key, admin_key)
                self._build_rings(o)
                # what the tools created with modes of their own (rings are 0644)
                run(["chmod", "-R", "go-rwx", str(self.dir)])
                if user != "root":
                    # only the storage is the daemons' own; the confs and rings they
                    # read stay root's, readable by their group (0640): a server starts
                    # as root and reads its conf before it drops to `user`, so a daemon
                    # able to rewrite it (`user = root`) would be root at the next start.
                    # The builders, state, PID records, logs and disk image are root's
                    # alone; the directory is only traversable by others
                    run(["chown", "-R", "-h", f"{user}:", str(self.node)])
                    read = [str(p) for p in sorted(self.dir.iterdir())
                            if p.name.endswith((".conf", ".ring.gz"))]
                    group = pwd.getpwnam(user).pw_gid
                    for f in read:
                        os.chown(f, 0, group, follow_symlinks=False)
                        os.chmod(f, 0o640)
                    os.chmod(self.dir, 0o711)
                self._start(o, timeout)
        state.update(ready=True, up_seconds=round(time.monotonic() - t0, 1))
        save_state(self.state_file, state)
        return state

    def _start(self, o: SwiftOptions, timeout: float) -> None:
        mc_user = "memcache" if _user_exists("memcache") else "nobody"
        mc = self._daemon("memcached", ["memcached", "-l", "127.0.0.1", "-p",
                                        str(o.memcached_port), "-U", "0", "-m", "64",
                                        "-u", mc_user])
        mc.start()
        # each port asked only once the daemon storlab started holds it: a local user
        # may bind a port after the "port free" check (the proxy's got the Swift key)
        wait_until(lambda: listener_is_daemons(mc.pidfile, mc.name, "127.0.0.1",
                                               o.memcached_port)
                   and _memcached_ok(o.memcached_port), timeout, "memcached", [mc])
        daemons = [mc] + [self._server_daemon(s) for s in SERVERS]
        for d in daemons[1:]:
            d.start()
        proxy = self._daemon("proxy", ["swift-proxy-server",
                                       str(self.dir / "proxy-server.conf"), "-v"])
        proxy.start()
        daemons.append(proxy)
        ports = {**self._ports(o), "proxy": o.port}
        held = [(d, ports[d.name]) for d in daemons[1:]]
        # every request bounded as a whole by the wait's deadline (and in bytes): the
        # servers run as `swift`, and one dripping its answer held root's `up` for ever
        end = time.monotonic() + timeout
        wait_until(lambda: all(listener_is_daemons(d.pidfile, d.name, o.bind, p)
                               and _healthcheck(o.bind, p, _attempt(end)) is None
                               for d, p in held), timeout,
                   "the swift servers' healthchecks", daemons)
        key = (self.state() or {}).get("key", "")
        end = time.monotonic() + timeout
        wait_until(lambda: listener_is_daemons(proxy.pidfile, proxy.name, o.bind, o.port)
                   and self._account_ok(o.bind, o.port, key, end), timeout,
                   "an authenticated account on the proxy", daemons)

    def _account_ok(self, host: str, port: int, key: str, end: float) -> bool:
        """The proxy authenticates the user and answers HEAD on its account, each request
        by `end` and within `HTTP_ATTEMPT_SECONDS` (ClusterError when one is cut)."""
        url, token = swift_auth(f"http://{host}:{port}/auth/v1.0", USER, key,
                                deadline=_attempt(end))
        h, p, path = _storage_address(url, host, port)
        r = http_request(h, p, _attempt(end), "HEAD", path, {"X-Auth-Token": token})
        return r is not None and 200 <= r.status < 300

    def check_endpoint(self, st: dict[str, Any]) -> None:
        """Refuse (ClusterError) to send anything to the state's auth URL unless what
        listens there is the proxy storlab started: another process holding the port, or
        nothing listening (the proxy is gone, and whoever binds the port next would be sent
        the key): `check_endpoint_daemon`."""
        if st.get("auth_url"):  # where the key goes: the state's own word for it
            check_endpoint_daemon(st["auth_url"], self.dir / "run" / "proxy.pid", "proxy",
                                  "swift", "nothing (no key)")

    def restart(self, name: str, timeout: float = 60) -> float:
        """Stop one server (account, container, object or proxy) by pid and start time,
        start it once, wait until the daemon just started listens on its port (not a
        process that bound it in the gap: that is refused at once) and its healthcheck
        answers. Returns the seconds it took."""
        if name not in (*SERVERS, "proxy"):
            raise ClusterError(f"swift daemon {name!r} must be one of "
                               f"{', '.join((*SERVERS, 'proxy'))}")
        st = self.state() or {}
        port = (st.get("ports") or {}).get(name)
        if port is None:
            raise ClusterError(f"the cluster's state in {self.dir} names no port for {name}")
        t0 = time.monotonic()
        d = self._server_daemon(name) if name != "proxy" else self._daemon(
            "proxy", ["swift-proxy-server", str(self.dir / "proxy-server.conf"), "-v"])
        stop_pid(d.pidfile, grace=10)
        d.start()
        host = st.get("bind", "127.0.0.1")
        end = time.monotonic() + timeout
        wait_until(lambda: listener_is_daemons(d.pidfile, d.name, host, int(port))
                   and _healthcheck(host, int(port), _attempt(end)) is None, timeout,
                   f"the {name} server listening on its port and its healthcheck", [d])
        return time.monotonic() - t0

    # ------------------------------------------------------------------ down / status
    def _pidfiles(self) -> list[Path]:
        if not present_cluster_dir(self.dir):  # nothing of ours to signal
            return []
        return sorted((self.dir / "run").glob("*.pid")) if (self.dir / "run").exists() else []

    def down(self, keep_logs: bool = False) -> dict[str, Any]:
        """Stop every daemon by PID (proxy first), unmount, detach the loop device, remove
        the directory (all but the daemons' logs with `keep_logs`). Safe to call on a
        half-built cluster."""
        if not present_cluster_dir(self.dir):  # no cluster: nothing to read or signal
            return {"kind": "swift", "stopped": [], "loop_detached": [], "removed": None}
        stopped = []
        order = sorted(self._pidfiles(), key=lambda p: (p.stem != "proxy",
                                                        p.stem == "memcached", p.stem))
        for pf in order:
            if stop_pid(pf, grace=10):
                stopped.append(pf.stem)
        # safety net: a server still running with one of our confs lost its PID file
        for conf in sorted(self.dir.glob("*-server.conf")):
            stopped += [f"pid {p}" for p in stop_strays(str(conf))]
        try:
            st = self.state() or {}
        except ClusterError:  # a state of another shape names no loop device to trust
            st = {}
        if self.node.exists() and _is_mount(self.node):
            run(["umount", str(self.node)], check=False, timeout=60)
            if _is_mount(self.node):
                run(["umount", "-l", str(self.node)], check=False)
        img = self.dir / "disk.img"
        loops = set(filter(None, [st.get("loop")]))
        if img.exists():
            out = run(["losetup", "-j", str(img)], check=False).stdout
            loops |= {line.split(":")[0] for line in out.splitlines() if line.strip()}
        for dev in sorted(loops):
            run(["losetup", "-d", dev], check=False)
        existed = self.dir.exists()
        if not _is_mount(self.node):
            if keep_logs:
                keep_logs_only(self.dir, "log")
            else:
                shutil.rmtree(self.dir, ignore_errors=True)
        return {"kind": "swift", "stopped": stopped, "loop_detached": sorted(loops),
                "removed": str(self.dir) if existed else None}

    def status(self, probe: bool = False) -> dict[str, Any] | None:
        """State, every daemon storlab started (running or not), each server's own
        healthcheck, and with `probe` a tiny object PUT and read back through the proxy.
        `healthy` is True only when all of them agree."""
        st = self.state()
        if st is None:
            return None
        running = {pf.stem: (read_record(pf) is not None and
                             read_record(pf).state() == RUNNING) for pf in self._pidfiles()}
        for n in ("memcached", *SERVERS, "proxy"):
            running.setdefault(n, False)  # its PID file is gone: stopped or lost
        out: dict[str, Any] = {**st, "daemons": dict(sorted(running.items()))}
        problems = [f"{n} not running" for n, ok in sorted(running.items()) if not ok]
        ports = st.get("ports") or {}
        host = st.get("bind", "127.0.0.1")
        for name in ("memcached", *SERVERS, "proxy"):
            if name not in ports:
                continue
            try:  # what answers there must be the daemon storlab started
                mine = listener_is_daemons(self.dir / "run" / f"{name}.pid", name,
                                           "127.0.0.1" if name == "memcached" else host,
                                           int(ports[name]))
            except PortTaken:
                problems.append(f"{name}: port {ports[name]} is held by another process")
                continue
            except ClusterError as exc:  # an address it cannot read: says which
                problems.append(f"{name}: {exc}")
                continue
            if not running.get(name):
                continue  # said above
            if not mine:
                problems.append(f"{name} does not listen on port {ports[name]}")
            elif name != "memcached":
                why = _healthcheck(host, int(ports[name]),
                                   time.monotonic() + HTTP_ATTEMPT_SECONDS)
                if why is not None:
                    problems.append(f"{name} healthcheck {why}")
        if probe:
            out["probe"] = self.probe()
            if not out["probe"].startswith("ok"):
                problems.append("probe failed")
        out["healthy"] = not problems and bool(st.get("ready"))
        out["health"] = "ok" if out["healthy"] else "; ".join(problems) or "not ready"
        return out

    def probe(self, timeout: float = 10.0) -> str:
        """PUT a 4 KiB object through the proxy and GET it back, within `timeout` seconds
        each, whatever the proxy sends (each request bounded as a whole, its answer to
        64 KiB: the proxy runs as `swift`), the token sent only to the proxy's own
        address: 'ok (… ms)' or what failed (a 503 when the object servers are gone)."""
        st = self.state() or {}
        t0 = time.monotonic()
        data = secrets.token_bytes(4096)
        try:
            self.check_endpoint(st)  # the key only to the proxy storlab started
        except ClusterError as exc:
            return f"failed: {exc}"
        try:
            u = urllib.parse.urlsplit(str(st["auth_url"]))
            url, token = swift_auth(st["auth_url"], st["user"], st["key"], timeout=timeout)
            host, port, prefix = _storage_address(url, u.hostname or "", u.port or 80)
            h = {"X-Auth-Token": token}
            got = b""
            for method, path, body in (("PUT", "/storlab-probe", b""),
                                       ("PUT", "/storlab-probe/probe", data),
                                       ("GET", "/storlab-probe/probe", b"")):
                r = http_request(host, port, time.monotonic() + timeout, method,
                                 prefix + path, h, body, limit=64 << 10)
                if r is None:
                    return f"failed: nothing answers on {host}:{port}"
                if not 200 <= r.status < 300:
                    return f"failed: {r.status} {r.reason} on {url + path}"
                got = r.body
            if got != data:
                return "failed: the object read back differs from the one written"
        except ClusterError as exc:
            return f"failed: {exc}"
        except (OSError, KeyError, ValueError) as exc:
            return f"failed: {type(exc).__name__}: {exc}"
        return f"ok (4 KiB put+get in {(time.monotonic() - t0) * 1e3:.0f} ms)"


def swift_auth(auth_url: str, user: str, key: str, timeout: float = 5,
               deadline: float | None = None) -> tuple[str, str]:
    """tempauth v1: (storage URL, token), the whole answer within `timeout` seconds (or
    by `deadline`, `time.monotonic()`) and 16 KiB whatever the proxy sends (it runs as
    `swift`: one dripping its answer held root's `up` and `status` for ever under a
    per-read timeout). ClusterError when it does not answer so, or without both."""
    u = urllib.parse.urlsplit(auth_url)
    if u.scheme != "http" or not u.hostname:
        raise ClusterError(f"auth URL {auth_url!r}: only http://HOST:PORT/... is asked")
    end = time.monotonic() + timeout if deadline is None else deadline
    r = http_request(u.hostname, u.port or 80, end, "GET", u.path or "/",
                     {"X-Auth-User": user, "X-Auth-Key": key})
    if r is None:
        raise ClusterError(f"nothing answers on {u.hostname}:{u.port or 80}")
    if not 200 <= r.status < 300:
        raise ClusterError(f"auth answered {r.status} {r.reason}")
    url, token = r.headers.get("x-storage-url"), r.headers.get("x-auth-token")
    if not url or not token:
        raise ClusterError("auth answered without X-Storage-Url and X-Auth-Token")
    return url, token


def _storage_address(url: str, host: str, port: int) -> tuple[str, int, str]:
    """(host, port, path) of the storage URL auth gave, refused (ClusterError) unless it
    is the proxy's own `host`:`port` over http: the token goes nowhere else."""
    try:  # the proxy's word: a port past 65535 or not a number is refused, not a traceback
        u = urllib.parse.urlsplit(url)
        where = (u.scheme, u.hostname, u.port or 80)
    except ValueError:
        where = None
    if where != ("http", host, port):
        raise ClusterError(f"auth gave the storage URL {url[:120]!r}, not on the proxy's "
                           f"{host}:{port}: no token is sent there")
    return host, port, u.path.rstrip("/")


def _attempt(end: float) -> float:
    """One request's deadline in a wait ending at `end`."""
    return min(end, time.monotonic() + HTTP_ATTEMPT_SECONDS)


def _healthcheck(host: str, port: int, deadline: float) -> str | None:
    """None when the server on `host`:`port` answers its healthcheck with 200 by
    `deadline` (the whole answer, 16 KiB at most), else what it did."""
    try:
        r = http_request(host, port, deadline, "GET", "/healthcheck")
    except ClusterError as exc:
        return f"failed: {exc}"
    if r is None:
        return "does not answer"
    return None if r.status == 200 else f"answered {r.status} {r.reason}"


def _memcached_ok(port: int) -> bool:
    """memcached answers `version` on its port."""
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"version\r\n")
            return sock.recv(64).startswith(b"VERSION")
    except OSError:
        return False


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _others_can_enter(path: Path) -> bool:
    """Every directory above `path` is searchable by other users."""
    import stat

    for p in [*path.resolve().parents][::-1]:
        try:
            if not p.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _is_mount(path: Path) -> bool:
    target = str(path.resolve()) if path.exists() else str(path)
    try:
        with open("/proc/self/mounts") as fh:
            return any(line.split()[1] == target for line in fh)
    except OSError:
        return subprocess.run(["mountpoint", "-q", target], stdin=subprocess.DEVNULL,
                              start_new_session=True).returncode == 0
