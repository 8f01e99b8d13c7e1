"""A throwaway single-host Ceph cluster (1 monitor, 1 manager, 1-3 OSDs) from Debian's
packages, bootstrapped by hand without systemd or cephadm.

Everything lives under one directory (conf, keyrings, daemon data, logs, PID files); the
daemons run in the foreground (`-d`, logging to stderr) in their own sessions so storlab holds their PIDs.

Walls: each daemon runs as the `ceph` user (`--setuser ceph --setgroup ceph`, as Debian's
units start them; radosgw, which defers that drop until its frontends listen, starts as
`ceph` instead) in a sandbox of its own (`walled`: the system read-only, a private /dev
and /proc, TCP held to Ceph's ports) where it sees, besides the system's trees, the conf
read-only and, writable, only its own data directory and the cluster's runtime directory
`var/` (admin sockets, Ceph's own logs, crash reports), both the `ceph` user's. Root's
files stay root's: the conf, the keyrings of the monitor's bootstrap and of the admin, the
state, storlab's PID records (`run/`) and the daemons' captured output (`log/`). Every CLI
call (`ceph`, `rados`, `rbd`, `radosgw-admin`, the OSDs' mkfs) runs in such walls too, as
the `ceph` user with no capability: the conf and the admin keyring shown as read-only
copies it reads (root's 0600 files on the host), nothing writable but the one place a call
makes; only the local bootstrap tools that make root's keyrings and the monitor's store
(`ceph-authtool`, `monmaptool`, the monitor's mkfs), before any daemon runs, are root.
Every program's hard RLIMIT_MEMLOCK is its soft one (none of them locks memory).
Pitfall kept in mind (notes/real-systems.md 4): every daemon gets its own `keyring =` in
its own section; a global `keyring =` makes the manager and OSDs authenticate as admin.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PortTaken, StorlabError
from ..fileio import check_trusted_dir, temporary_directory, within, write_in_dir
from ._util import (
    check_bind,
    check_endpoint_daemon,
    fresh_cluster_dir,
    give_tree,
    trusted_cluster_dir,
    logs_kept_on_failure,
    ClusterError,
    RUNNING,
    Daemon,
    asok_command,
    chmod_dir,
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
    wait_http,
    wait_until,
    walled,
    walls_opted_out,
)

POOL = "bench"
IMAGE = "storlab"
STORES = ("memstore", "bluestore")
#: The user Ceph's daemons run as (Debian's ceph-common package makes it).
CEPH_USER = "ceph"
#: The TCP ports a cluster's programs may bind and connect to besides the monitor's and
#: radosgw's (Landlock): the monitor's defaults and the OSDs' and manager's range
#: (ms_bind_port_min..max).
MSGR_PORTS = (3300, 6789, *range(6800, 7301))
#: The cluster's runtime directory, the `ceph` user's: admin sockets (`run`), Ceph's own
#: logs (`log`), crash reports (`crash`).
VAR = "var"
#: Health checks that say nothing about a throwaway cluster's fitness for a benchmark.
BENIGN_CHECKS = {"MGR_MODULE_DEPENDENCY", "MGR_MODULE_ERROR", "POOL_NO_REDUNDANCY",
                 "AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED", "TOO_FEW_OSDS",
                 "POOL_APP_NOT_ENABLED", "RECENT_CRASH", "OSD_NO_SORTBITWISE"}


@dataclass
class CephOptions:
    osds: int = 1
    replicas: int | None = None  # default: min(osds, 3)
    store: str = "memstore"
    osd_bytes: int = 1 << 30  # memstore RAM cap / bluestore sparse file size per OSD
    mon_port: int = 3300
    pg_num: int = 32
    rgw: bool = False
    rgw_port: int = 7480
    tie_to_parent: bool = False  # daemons die with the starting process (tests)
    bind: str = "127.0.0.1"  # the one address every daemon listens on and advertises


class CephCluster:
    """A cluster rooted at `base/ceph`. `up()` builds and starts it; `down()` stops every
    daemon by PID and removes the directory; `status()` reads what is running."""

    kind = "ceph"

    def __init__(self, base: Path | None = None) -> None:
        self.dir = trusted_cluster_dir(base, "ceph")
        self.conf = self.dir / "ceph.conf"
        self.state_file = self.dir / "cluster.json"

    # ------------------------------------------------------------------ helpers
    def ceph(self, *args: str, timeout: float = 30, check: bool = True,
             writable: tuple[Path, ...] = ()) -> str:
        """Run the `ceph` CLI against this cluster, in its walls (`cli`); stdout."""
        return self.cli(["ceph", "-c", str(self.conf), "--connect-timeout", "10", *args],
                        timeout=timeout, check=check, writable=writable).stdout

    def cli(self, argv: list[str], *, timeout: float = 60, check: bool = True,
            writable: tuple[Path, ...] = (), unix_sockets: bool = False,
            proc_writable: bool = False, as_root: bool = False
            ) -> subprocess.CompletedProcess[str]:
        """Run a Ceph program in its walls: the system read-only, `writable` the only
        places it may write, TCP to the cluster's ports only (`ports`), no Unix socket
        unless `unix_sockets`, /proc read-only unless `proc_writable` (its kernel-wide parts
        stay read-only). It runs as the `ceph` user from its start (no capability), the
        conf and the admin keyring shown as read-only copies it reads (root's files on the
        host stay root's 0600): what talks to the daemons is never root. `as_root`: the
        local bootstrap tools that make root's files (keyrings, the monitor's map and
        store) before any daemon runs; they see the conf and keyring read-only."""
        keys = [str(self.conf), str(self.dir / "admin.keyring")]
        drop = not as_root and not walls_opted_out()
        w = walled(argv, cwd="/", writable=[str(p) for p in writable],
                   readable=[] if drop else keys, copies=keys if drop else [],
                   user=CEPH_USER if drop else None, ports=self.ports(),
                   unix_sockets=unix_sockets, proc_writable=proc_writable)
        return run(argv, timeout=timeout, check=check, walls=w)

    def ports(self) -> tuple[int, ...]:
        """The TCP ports the cluster's programs may reach: its monitor's and radosgw's, and
        Ceph's defaults (`MSGR_PORTS`)."""
        st = self.state() or {}
        own = [int(st[k]) for k in ("mon_port", "rgw_port") if st.get(k)]
        return tuple(sorted({*own, *MSGR_PORTS}))

    def ceph_json(self, *args: str, timeout: float = 30) -> Any:
        # the format first: after a `--` in args it would be read as a positional
        return json.loads(self.ceph("--format", "json", *args, timeout=timeout) or "null")

    def _daemon(self, name: str, argv: list[str]) -> Daemon:
        """Daemon `name` running `argv` as the `ceph` user in its walls: writable, only its
        data directory (`name`: mon.a, osd.0, rgw...) and the runtime directory `var/`."""
        tie = bool((self.state() or {}).get("tie_to_parent"))
        d = self.dir
        walls = {"cwd": str(d / VAR), "writable": [str(d / VAR), str(d / name)],
                 "readable": [str(self.conf)], "ports": self.ports(), "unix_sockets": True}
        drop = [] if walls_opted_out() else ["--setuser", CEPH_USER, "--setgroup", CEPH_USER]
        if name == "rgw" and drop:
            # radosgw defers `--setuser` until its frontends listen: it would connect to
            # the cluster, and name its threads, as root. It starts as the `ceph` user
            # instead (setpriv in its walls), the conf a read-only copy it reads. It names
            # a thread through /proc/self/task/TID/comm and aborts when /proc is
            # read-only (rgw_notify.cc: ceph_assert): its own processes' entries stay
            # writable, to it alone (no capability); the kernel's parts read-only
            walls.update(readable=[], copies=[str(self.conf)], user=CEPH_USER,
                         proc_writable=True)
            drop = []
        return Daemon(name, [*argv, *drop],
                      d / "log" / f"{name}.out", d / "run" / f"{name}.pid",
                      tie_to_parent=tie, walls=walls)

    def _osd_daemon(self, i: int) -> Daemon:
        return self._daemon(f"osd.{i}", ["ceph-osd", "-c", str(self.conf), "-i", str(i), "-d"])

    def _give(self, sub: str) -> None:
        """The directory `sub` of the cluster, and all it holds, to the `ceph` user, for
        it alone (no group or other bits). The daemons may be writing in it meanwhile
        (`var/` after the monitor starts): `give_tree` works from held descriptors, so a
        directory they swap for a link leads nowhere."""
        give_tree(self.dir / sub, *_ceph_ids())

    def state(self) -> dict[str, Any] | None:
        """The saved state; None when there is none, or no directory (`present_cluster_dir`)."""
        return load_state(self.state_file, self.kind) if present_cluster_dir(self.dir) else None

    # ------------------------------------------------------------------ conf
    def _write_conf(self, fsid: str, o: CephOptions, replicas: int) -> None:
        d = self.dir
        osd_store = [f"osd objectstore = {o.store}"]
        if o.store == "memstore":
            # a clean stop saves memstore's contents (fast shutdown would drop them), so
            # OSD restarts for start-up-only parameters keep the data
            osd_store += [f"memstore device bytes = {o.osd_bytes}", "osd fast shutdown = false",
                          # memstore's own byte count can go below zero (seen: 65 KiB
                          # more available than its size after OSD restarts); the OSD then
                          # takes itself for failsafe-full, drops every write, and after
                          # its next restart never boots ("osdmap fullness state needs
                          # update"). Ceph's option counts the PGs' bytes instead.
                          f"fake statfs for testing = {o.osd_bytes}"]
        else:
            osd_store += ["bluestore block create = true",
                          f"bluestore block size = {o.osd_bytes}",
                          "bluestore block db create = false", "bluestore block wal create = false",
                          # a sparse file on a shared VM disk: don't let fsck/discard dominate
                          "bluestore fsck on mount = false", "bdev enable discard = false"]
        lines = [
            "[global]", f"fsid = {fsid}",
            f"mon host = v2:{o.bind}:{o.mon_port}", "mon initial members = a",
            # every daemon binds (and advertises) the one address clients can reach
            f"public addr = {o.bind}", f"public network = {o.bind}/32",
            "ms bind ipv6 = false", "ms bind msgr1 = false",
            "auth cluster required = cephx", "auth service required = cephx",
            "auth client required = cephx",
            "auth allow insecure global id reclaim = false",
            f"run dir = {d}/{VAR}/run", f"admin socket = {d}/{VAR}/run/$cluster-$name.asok",
            f"log file = {d}/{VAR}/log/$name.log",
            f"mon cluster log file = {d}/{VAR}/log/$cluster.$channel.log",
            f"crash dir = {d}/{VAR}/crash", f"exporter sock dir = {d}/{VAR}/run",
            f"osd pool default size = {replicas}", "osd pool default min size = 1",
            "osd pool default pg autoscale mode = off", "osd pool default pg num = 8",
            "osd crush chooseleaf type = 0", "mon allow pool delete = true",
            "mon allow pool size one = true", "mon warn on pool no redundancy = false",
            # a shared VM disk is often < 30 % free: the default warning is noise here
            "mon data avail warn = 5", "mon data avail crit = 1",
            "osd max object name len = 460",
            "osd max object namespace len = 64",
            "mgr initial modules = ", "",
            "[mon.a]", f"mon data = {d}/mon.a", f"keyring = {d}/mon.a/keyring", "",
            "[mgr.x]", f"mgr data = {d}/mgr.x", f"keyring = {d}/mgr.x/keyring", "",
            "[osd]", f"osd data = {d}/osd.$id", f"keyring = {d}/osd.$id/keyring",
            *osd_store, "",
            # the CLI writes nothing: no log, no admin socket (its walls are read-only)
            "[client.admin]", f"keyring = {d}/admin.keyring", "log file = ",
            "admin socket = ", "",
            "[client.rgw.storlab]", f"keyring = {d}/rgw/keyring",
            # tcp_nodelay: without it small GETs wait ~40 ms on delayed ACKs
            f"rgw frontends = beast endpoint={o.bind}:{o.rgw_port} tcp_nodelay=1",
            f"rgw data = {d}/rgw", "rgw thread pool size = 64", "",
        ]
        self.conf.write_text("\n".join(lines))

    # ------------------------------------------------------------------ up
    def up(self, o: CephOptions | None = None, timeout: float = 120) -> dict[str, Any]:
        """Bootstrap and start the cluster; wait for HEALTH_OK. Returns its state."""
        o = o or CephOptions()
        if o.store not in STORES:
            raise ClusterError(f"store {o.store!r} must be one of {', '.join(STORES)}")
        if not 1 <= o.osds <= 8:
            raise ClusterError(f"osds {o.osds} must be between 1 and 8")
        replicas = o.replicas or min(o.osds, 3)
        if not 1 <= replicas <= o.osds:
            raise ClusterError(f"replicas {replicas} must be between 1 and the OSD count "
                               f"({o.osds}) on a single host")
        if self.state() is not None or any(pid_present(p) for p in self._pidfiles()):
            raise ClusterError(f"a ceph cluster already exists in {self.dir}; run "
                               "`storlab cluster down ceph` first")
        check_bind(o.bind)
        for port in (o.mon_port, *((o.rgw_port,) if o.rgw else ())):
            if not port_free(port, o.bind):
                raise ClusterError(f"port {o.bind}:{port} is in use (another cluster?)")
        t0 = time.monotonic()
        fresh_cluster_dir(self.dir)
        with private_files():  # keys, keyrings, the conf and the monitor's db: root only
            for sub in ("run", "log", f"{VAR}/run", f"{VAR}/log", f"{VAR}/crash", "mon.a",
                        "mgr.x"):
                (self.dir / sub).mkdir(parents=True, exist_ok=True)
            self._give(VAR)
            fsid = str(uuid.uuid4())
            self._write_conf(fsid, o, replicas)
            state: dict[str, Any] = {
                "kind": "ceph", "dir": str(self.dir), "conf": str(self.conf), "fsid": fsid,
                "osds": o.osds, "replicas": replicas, "store": o.store, "pool": POOL,
                "image": IMAGE, "mon_port": o.mon_port, "bind": o.bind,
                **({"rgw_port": o.rgw_port} if o.rgw else {}),
                "started": time.time(), "ready": False, "tie_to_parent": o.tie_to_parent}
            save_state(self.state_file, state)
            with logs_kept_on_failure(self.down, self.dir / "log", "ceph"):
                self._bootstrap(o, replicas, timeout)
                if o.rgw:
                    state.update(self._start_rgw(o, timeout))
        state.update(ready=True, up_seconds=round(time.monotonic() - t0, 1))
        save_state(self.state_file, state)
        return state

    def _bootstrap(self, o: CephOptions, replicas: int, timeout: float) -> None:
        d, c = self.dir, str(self.conf)
        monkey, admin = d / "mon.keyring", d / "admin.keyring"
        # the local bootstrap tools as root (they make root's keyrings and talk to no
        # daemon), in walls where only the cluster's directory is writable; what the
        # daemons keep is given to the `ceph` user after
        self.cli(["ceph-authtool", "--create-keyring", str(monkey), "--gen-key", "-n", "mon.",
                  "--cap", "mon", "allow *"], writable=(d,), as_root=True)
        self.cli(["ceph-authtool", "--create-keyring", str(admin), "--gen-key", "-n",
                  "client.admin", "--cap", "mon", "allow *", "--cap", "osd", "allow *",
                  "--cap", "mgr", "allow *", "--cap", "mds", "allow *"], writable=(d,),
                 as_root=True)
        self.cli(["ceph-authtool", str(monkey), "--import-keyring", str(admin)],
                 writable=(d,), as_root=True)
        self.cli(["monmaptool", "--create", "--fsid", self.state()["fsid"], "--addv", "a",
                  f"[v2:{o.bind}:{o.mon_port}]", str(d / "monmap")], writable=(d,),
                 as_root=True)
        self.cli(["ceph-mon", "-c", c, "--mkfs", "-i", "a", "--monmap", str(d / "monmap"),
                  "--keyring", str(monkey)], timeout=60, writable=(d,), unix_sockets=True,
                 as_root=True)
        shutil.copy(monkey, d / "mon.a" / "keyring")
        self._give("mon.a")
        self._give(VAR)  # the log the mkfs began is the daemon's to append to
        mon = self._daemon("mon.a", ["ceph-mon", "-c", c, "-i", "a", "-d"])
        mon.start()
        # ready: its admin socket says it leads the (one-monitor) quorum
        wait_until(lambda: self._asok("mon.a", "mon_status").get("state") == "leader",
                   timeout, "the monitor to lead its quorum", [mon])
        # Small clusters: no noisy defaults (these live in the mon's config database).
        self.ceph("config", "set", "mgr", "mgr/balancer/active", "false", check=False)
        self._give("mgr.x")  # the CLI (the `ceph` user) writes the manager's keyring there
        self.ceph("auth", "get-or-create", "mgr.x", "mon", "allow profile mgr", "osd", "allow *",
                  "mds", "allow *", "-o", str(d / "mgr.x" / "keyring"), writable=(d / "mgr.x",))
        self._give("mgr.x")
        _open_mgr_caches()
        mgr = self._daemon("mgr.x", ["ceph-mgr", "-c", c, "-i", "x", "-d"])
        mgr.start()
        for i in range(o.osds):
            self._create_osd(i)
        osds = [self._osd_daemon(i) for i in range(o.osds)]
        for osd in osds:
            osd.start()
        self.wait_osds_ready(range(o.osds), timeout, [mon, mgr, *osds])
        self.ceph("osd", "pool", "create", POOL, str(o.pg_num), str(o.pg_num))
        self.ceph("osd", "pool", "set", POOL, "size", str(replicas),
                  "--yes-i-really-mean-it")
        self.ceph("osd", "pool", "application", "enable", POOL, "rbd")
        self.wait_healthy(timeout, [mon, mgr, *osds])
        # An RBD image for fio's rbd engine (thin: costs nothing until written).
        self.cli(["rbd", "-c", c, "create", f"{POOL}/{IMAGE}", "--size", "256M"], timeout=60)

    def _create_osd(self, i: int) -> None:
        d, c = self.dir, str(self.conf)
        osd_uuid = str(uuid.uuid4())
        (d / f"osd.{i}").mkdir(parents=True, exist_ok=True)
        self._give(f"osd.{i}")  # its keyring and mkfs: made by the `ceph` user
        got = self.ceph("osd", "new", osd_uuid).strip()
        if got != str(i):
            raise ClusterError(f"ceph osd new gave id {got}, expected {i}")
        # The key first: mkfs then fetches the mon's config database like a started OSD.
        self.ceph("auth", "get-or-create", f"osd.{i}", "osd", "allow *", "mon",
                  "allow profile osd", "mgr", "allow profile osd",
                  "-o", str(d / f"osd.{i}" / "keyring"), writable=(d / f"osd.{i}",))
        self.cli(["ceph-osd", "-c", c, "-i", str(i), "--mkfs", "--osd-uuid", osd_uuid],
                 timeout=120, writable=(d / f"osd.{i}", d / VAR), unix_sockets=True)
        self._give(f"osd.{i}")
        self._give(VAR)

    def _start_rgw(self, o: CephOptions, timeout: float) -> dict[str, Any]:
        """radosgw with beast on `bind` and an S3 user with keys of its own."""
        d = self.dir
        (d / "rgw").mkdir(exist_ok=True)
        self._give("rgw")  # its keyring: written by the CLI, the `ceph` user
        self.ceph("config", "set", "global", "osd_pool_default_pg_num", "8")
        self.ceph("auth", "get-or-create", "client.rgw.storlab", "mon", "allow rw", "osd",
                  "allow rwx", "mgr", "allow rw", "-o", str(d / "rgw" / "keyring"),
                  writable=(d / "rgw",))
        self._give("rgw")
        rgw = self._daemon("rgw", ["radosgw", "-c", str(self.conf), "-n", "client.rgw.storlab",
                                   "-d"])
        rgw.start()
        # the port held by the radosgw storlab started, not by whoever bound it after
        # `up`'s "port free" check (the state would send the S3 load there); any HTTP
        # answer counts, the whole wait bounded in time and bytes (radosgw runs as the
        # `ceph` user: a compromised account dripping its answer held root's `up`)
        wait_http(o.bind, o.rgw_port, timeout, f"radosgw on {o.bind}:{o.rgw_port}", [rgw],
                  lambda: listener_is_daemons(rgw.pidfile, "radosgw", o.bind, o.rgw_port))
        # radosgw-admin generates the keys: a secret given on its command line would be
        # readable by every local user in /proc/PID/cmdline while it runs.
        cp = self.cli(["radosgw-admin", "-c", str(self.conf), "user", "create", "--uid=bench",
                       "--display-name=bench", "--gen-access-key", "--gen-secret"], timeout=60,
                      proc_writable=True)  # names a thread, as radosgw does
        try:
            key = json.loads(cp.stdout)["keys"][0]
            access, secret = str(key["access_key"]), str(key["secret_key"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise ClusterError("radosgw-admin user create printed no S3 key: "
                               + cp.stdout.strip()[-200:]) from None
        return {"s3": {"endpoint": f"http://{o.bind}:{o.rgw_port}", "access_key": access,
                       "secret_key": secret, "region": "us-east-1"}}

    def check_endpoint(self, st: dict[str, Any]) -> None:
        """Refuse (ClusterError) to send S3 requests to the state's endpoint unless what
        listens there is the radosgw storlab started: another process holding the port, or
        nothing listening (radosgw is gone, and whoever binds the port next would be sent
        the signed requests): `check_endpoint_daemon`."""
        if (st.get("s3") or {}).get("endpoint"):
            check_endpoint_daemon(st["s3"]["endpoint"], self.dir / "run" / "rgw.pid",
                                  "radosgw", "ceph")

    def prefill(self, nbytes: int, timeout: float = 300) -> None:
        """Write the first `nbytes` of the RBD image once (sequential 4 MiB writes): an
        unwritten extent of a thin image is answered by librbd without asking an OSD, so
        reads measured on it would measure nothing."""
        self.cli(["rbd", "-c", str(self.conf), "bench", "--io-type", "write", "--io-size",
                  "4M", "--io-total", str(nbytes), "--io-pattern", "seq", f"{POOL}/{IMAGE}"],
                 timeout=timeout)

    # ------------------------------------------------------------------ clients
    def client_conf(self, dest: Path) -> dict[str, str]:
        """A client's ceph.conf (monitor address, cephx) and a copy of the admin keyring in
        `dest` (made 0700; both files 0600), for a load host such as a fio server in a
        network namespace: point it at them with CEPH_CONF. `dest` must be a directory no
        other user could change (`check_trusted_dir`), and each file is written under a
        fresh name made there exclusively without following a link, then renamed in: a
        link planted at a file's name is replaced, never written through. The paths."""
        st = self.state()
        if st is None or not st.get("ready"):
            raise ClusterError(f"no ceph cluster is up in {self.dir}")
        dest = Path(os.path.abspath(dest))
        if within(os.path.realpath(dest), os.path.realpath(self.dir)):
            raise ClusterError(f"{dest}: not inside the cluster's own directory (it goes "
                               "away with `cluster down`)")
        try:
            dest = check_trusted_dir(dest, "client-conf DEST")  # made where it was checked
            with private_files():
                dest.mkdir(parents=True, exist_ok=True)
                dest = check_trusted_dir(dest, "client-conf DEST")
                real = str(dest)  # resolved by the check: not resolved a second time
                chmod_dir(real, 0o700)
                conf, keyring = Path(real) / "ceph.conf", Path(real) / "ceph.client.admin.keyring"
                write_in_dir(real, keyring.name, (self.dir / "admin.keyring").read_bytes(),
                             "client-conf DEST")
                write_in_dir(real, conf.name, "\n".join([
                    "[global]", f"fsid = {st['fsid']}",
                    f"mon host = v2:{st.get('bind', '127.0.0.1')}:{st['mon_port']}",
                    "ms bind msgr1 = false", "auth cluster required = cephx",
                    "auth service required = cephx", "auth client required = cephx",
                    # no admin socket or log under /var on the load host
                    "admin socket = ", "log file = ", "",
                    "[client.admin]", f"keyring = {keyring}", ""]), "client-conf DEST")
        except StorlabError as exc:
            raise ClusterError(str(exc)) from None
        except OSError as exc:
            raise ClusterError(f"client-conf DEST {dest}: {exc.strerror or exc}") from None
        return {"conf": str(conf), "keyring": str(keyring)}

    # ------------------------------------------------------------------ health
    def health(self) -> tuple[str, list[str]]:
        """(status, the names of the checks that are not benign)."""
        h = self.ceph_json("health")
        checks = [k for k in (h.get("checks") or {}) if k not in BENIGN_CHECKS]
        return h.get("status", "?"), checks

    def wait_healthy(self, timeout: float = 120, daemons: list[Daemon] | None = None) -> float:
        """Wait for HEALTH_OK (benign warnings allowed) with every PG active+clean."""

        last: dict[str, Any] = {}

        def ok() -> bool:
            status, checks = self.health()
            last["health"] = f"{status} {checks}"
            if checks:
                return False
            pg = self.ceph_json("pg", "stat")
            states = pg.get("pg_summary", pg).get("num_pg_by_state", [])
            last["pgs"] = {s["name"]: s["num"] for s in states}
            total = sum(s["num"] for s in states)
            clean = sum(s["num"] for s in states if s["name"] == "active+clean")
            return total > 0 and clean == total
        daemons = daemons if daemons is not None else self._daemons()
        try:
            return wait_until(ok, timeout, "HEALTH_OK with all PGs active+clean", daemons)
        except ClusterError as exc:
            raise ClusterError(f"{exc}\nlast seen: {last}") from None

    # ------------------------------------------------------------------ parameters
    def _daemons(self) -> list[Daemon]:
        st = self.state() or {}
        c = str(self.conf)
        out = [self._daemon("mon.a", ["ceph-mon", "-c", c, "-i", "a", "-d"]),
               self._daemon("mgr.x", ["ceph-mgr", "-c", c, "-i", "x", "-d"])]
        out += [self._osd_daemon(i) for i in range(int(st.get("osds", 0)))]
        return out

    def restart_osds(self, timeout: float = 120) -> float:
        """Stop every OSD by PID and start it again (reads the mon's config database anew);
        memstore keeps its data across a clean stop. Returns seconds until healthy."""
        st = self.state() or {}
        n = int(st.get("osds", 0))
        t0 = time.monotonic()
        osds = [self._osd_daemon(i) for i in range(n)]
        for osd in osds:
            # returns once the old process is gone by pid and start time: a dying OSD still
            # holds its data directory, and a second one must never start beside it
            stop_pid(osd.pidfile, grace=30)
        for osd in osds:
            osd.start()
        self.wait_osds_ready(range(n), timeout, osds, after="restart")
        self.wait_healthy(timeout)
        return time.monotonic() - t0

    def daemon_states(self, st: dict[str, Any] | None = None) -> dict[str, bool]:
        """{daemon: running} for every daemon storlab started (a lost PID file: False)."""
        st = st if st is not None else (self.state() or {})
        expected = {"mon.a", "mgr.x", *(f"osd.{i}" for i in range(int(st.get("osds", 0))))}
        if st.get("s3"):
            expected.add("rgw")
        running = {}
        for pf in self._pidfiles():
            rec = read_record(pf)
            running[pf.stem] = rec is not None and rec.state() == RUNNING
        for n in expected - set(running):  # its PID file is gone: it was stopped or lost
            running[n] = False
        return dict(sorted(running.items()))

    def check_daemons(self) -> None:
        """Raise naming every daemon storlab started that no longer runs."""
        dead = [n for n, ok in self.daemon_states().items() if not ok]
        if dead:
            raise ClusterError(f"ceph daemon(s) not running: {', '.join(dead)} (logs in "
                               f"{self.dir / 'log'}); bring the cluster down and up again")

    def _asok(self, name: str, prefix: str) -> Any:
        out = asok_command(self.dir / VAR / "run" / f"ceph-{name}.asok", prefix)
        return out if isinstance(out, dict) else {}

    def osds_up_in(self) -> dict[int, tuple[bool, bool]]:
        """{osd id: (up, in)} from the monitor's OSD map."""
        dump = self.ceph_json("osd", "dump")
        return {int(x["osd"]): (bool(x["up"]), bool(x["in"])) for x in dump.get("osds", [])}

    def wait_osds_ready(self, ids: Any, timeout: float, daemons: list[Daemon],
                        after: str = "start") -> float:
        """Wait until each OSD says it is active on its admin socket and the OSD map shows
        it up and in (the OSD's own readiness, not a count that an old copy could fill)."""
        ids = list(ids)

        def ready() -> bool:
            if any(self._asok(f"osd.{i}", "status").get("state") != "active" for i in ids):
                return False
            m = self.osds_up_in()
            return all(m.get(i) == (True, True) for i in ids)
        return wait_until(ready, timeout, f"OSD(s) {ids} active, up and in after {after}",
                          daemons)

    # ------------------------------------------------------------------ down / status
    def _pidfiles(self) -> list[Path]:
        if not present_cluster_dir(self.dir):  # nothing of ours to signal
            return []
        return sorted((self.dir / "run").glob("*.pid")) if (self.dir / "run").exists() else []

    def down(self, keep_logs: bool = False) -> dict[str, Any]:
        """Stop every daemon by its PID file (clients first, monitor last); remove the dir
        (all but the daemons' logs with `keep_logs`: a failed bring-up keeps them)."""
        stopped = []
        # radosgw before the OSDs: stopped after them it waits out the whole grace period
        # (15 s) on requests to OSDs that are gone
        order = sorted(self._pidfiles(), key=lambda p: (p.stem.startswith("mon"),
                                                        p.stem.startswith("mgr"),
                                                        p.stem.startswith("osd"), p.stem))
        for pf in order:
            if stop_pid(pf, grace=15):
                stopped.append(pf.stem)
        # safety net: any daemon still running with our conf lost its PID file somehow
        stopped += [f"pid {p}" for p in stop_strays(str(self.conf))]
        existed = present_cluster_dir(self.dir)  # checked again: removed as it is now
        if existed and keep_logs:
            keep_logs_only(self.dir, "log")
        elif existed:
            shutil.rmtree(self.dir, ignore_errors=True)
        return {"kind": "ceph", "stopped": stopped, "removed": str(self.dir) if existed else None}

    def status(self, probe: bool = False) -> dict[str, Any] | None:
        """State, every daemon storlab started (running or not, with what is known of how
        it ended), Ceph's own health, OSDs down/out in the OSD map, and with `probe` a tiny
        object written and read back. `healthy` is True only when all of them agree."""
        st = self.state()
        if st is None:
            return None
        running = self.daemon_states(st)
        out: dict[str, Any] = {**st, "daemons": running}
        problems = [f"{n} not running" for n, ok in sorted(running.items()) if not ok]
        if running.get("mon.a"):
            try:
                status, checks = self.health()
                out["ceph_health"] = status + (f" {checks}" if checks else "")
                if checks:
                    problems.append(f"ceph reports {status} {checks}")
                bad = [f"osd.{i}" for i, (up, inn) in sorted(self.osds_up_in().items())
                       if not (up and inn)]
                if bad:
                    problems.append(f"down or out in the OSD map: {', '.join(bad)}")
            except ClusterError as exc:
                problems.append(f"ceph does not answer ({_one_line(exc)})")
        if running.get("rgw") and st.get("rgw_port"):
            try:
                if not listener_is_daemons(self.dir / "run" / "rgw.pid", "radosgw",
                                           st.get("bind", "127.0.0.1"), int(st["rgw_port"])):
                    problems.append(f"radosgw does not listen on port {st['rgw_port']}")
            except PortTaken:
                problems.append(f"rgw: port {st['rgw_port']} is held by another process")
            except ClusterError as exc:  # an address it cannot read: says which
                problems.append(f"rgw: {exc}")
        if probe:
            out["probe"] = self.probe()
            if not out["probe"].startswith("ok"):
                problems.append("probe failed")
        out["healthy"] = not problems and bool(st.get("ready"))
        out["health"] = "HEALTH_OK" if out["healthy"] else "; ".join(problems) or "not ready"
        return out

    def probe(self, timeout: float = 10.0) -> str:
        """Write a 4 KiB object to the pool and read it back, within `timeout` seconds
        (librados would wait forever on a dead OSD): 'ok (… ms)' or what failed."""
        st = self.state() or {}
        base = ["rados", "-c", str(self.conf), "-p", str(st.get("pool", POOL)),
                "--rados-osd-op-timeout", f"{timeout:g}", "--rados-mon-op-timeout",
                f"{timeout:g}"]
        t0 = time.monotonic()
        # removed through its held parent, never by a path the `ceph` user could swap
        with temporary_directory("storlab-probe-") as tmp:
            src, back = os.path.join(tmp, "in"), os.path.join(tmp, "out")
            data = secrets.token_bytes(4096)
            dfd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                _prepare_probe_dir(dfd, data)
                for args in (("put", "storlab-probe", src), ("get", "storlab-probe", back)):
                    try:
                        r = self.cli([*base, *args], timeout=timeout + 5, check=False,
                                     writable=(Path(tmp),))
                    except ClusterError as exc:
                        return f"failed: rados {args[0]}: {_one_line(exc)}"
                    if r.returncode != 0:
                        said = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:]
                        return f"failed: rados {args[0]}: {' '.join(said) or r.returncode}"
                # written by the `ceph` user into the file storlab made: read from the
                # held directory without following a link, never a FIFO
                try:
                    fd = os.open("out", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                                 | os.O_CLOEXEC, dir_fd=dfd)
                except OSError as exc:
                    return f"failed: rados get: {exc.strerror}"
                with open(fd, "rb") as fh:
                    if not stat.S_ISREG(os.fstat(fd).st_mode) or fh.read(8192) != data:
                        return "failed: the object read back differs from the one written"
            finally:
                os.close(dfd)
        return f"ok (4 KiB put+get in {(time.monotonic() - t0) * 1e3:.0f} ms)"


def _prepare_probe_dir(dfd: int, data: bytes) -> None:
    """Make the probe's files in the held temporary directory `dfd` for rados, which runs
    as the `ceph` user: `in` (the object, `data`) and `out` (empty, for `rados get`), each
    made O_EXCL|O_NOFOLLOW and given to ceph by fchown through its own descriptor, `0600`.
    The directory itself stays root's, `0711` (ceph passes it, cannot list it, make,
    remove or rename anything in it, nor, in the sticky system TMPDIR, rename or replace
    the directory): given to ceph, the directory let a compromised ceph account rename
    a link over `in` (a chown by path then gave /etc/shadow to ceph) or swap the
    directory, in root's sticky TMPDIR, for one of its own."""
    os.fchmod(dfd, 0o711)
    for name, content in (("in", data), ("out", b"")):
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dfd)
        with open(fd, "wb") as fh:
            fh.write(content)
            fh.flush()
            if not walls_opted_out():  # rados runs as the `ceph` user: its files only
                uid, gid = _ceph_ids()
                os.fchown(fh.fileno(), uid, gid)


#: Where ceph-mgr finds its Python modules.
MGR_MODULES = "/usr/share/ceph/mgr"


def _open_mgr_caches(top: str = MGR_MODULES) -> None:
    """Make Python's `__pycache__` directories under the manager's modules readable
    (0755, their files 0644) where a root manager made them for root alone (storlab ran
    it as root under umask 077 before its walls): ceph-mgr, now the `ceph` user, checks
    every directory there for a module and aborts on one it cannot enter. Only these
    caches, root's, are changed; nothing else of the package."""
    for root, dirs, _ in os.walk(top):
        for name in dirs:
            if name != "__pycache__":
                continue
            p = os.path.join(root, name)
            st = os.lstat(p)
            if st.st_uid != 0 or not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o005 == 0o005:
                continue
            os.chmod(p, 0o755)
            for f in os.scandir(p):
                if f.is_file(follow_symlinks=False):
                    os.chmod(f.path, 0o644)


def _ceph_ids() -> tuple[int, int]:
    """The `ceph` user's uid and gid."""
    import pwd

    try:
        pw = pwd.getpwnam(CEPH_USER)
    except KeyError:
        raise ClusterError(f"no `{CEPH_USER}` user on this host (Debian's ceph-common "
                           "package makes it: run scripts/sysdeps.sh as root)") from None
    return pw.pw_uid, pw.pw_gid


def _one_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
