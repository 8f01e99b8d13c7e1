"""Who a Ceph cluster's programs run as, and the memory they may lock: a real memstore
Ceph with radosgw, brought up by a storlab whose soft RLIMIT_MEMLOCK is below its hard one.

- the `ceph` CLI and the other programs that talk to the daemons (`rados`, `rbd`,
  `radosgw-admin`) run as the `ceph` user with no capability, reading the conf and the
  admin keyring as copies inside their walls while the host's files stay root's 0600;
- radosgw starts as `ceph` (it used to start as root and defer its `--setuser` until its
  frontends listened: it connected to the cluster as root) and still serves S3;
- every daemon's and CLI call's hard RLIMIT_MEMLOCK is its soft one (they used to keep
  the hard limit storlab had, and could raise their soft one to it);
- `cluster load --dask` on a root worker (a real local Dask cluster over TLS) runs the
  load as the walled child `cluster load` starts (it used to run in the worker's own
  process, outside every wall)."""

from __future__ import annotations

import errno
import json
import os
import pwd
import resource
import shutil
import stat
import subprocess
import urllib.request

import pytest

from storlab.clusters._util import read_record

_NEED = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "rados", "radosgw", "radosgw-admin")
pytestmark = [
    pytest.mark.xdist_group("ceph"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a Ceph cluster needs root"),
    pytest.mark.skipif(any(shutil.which(p) is None for p in _NEED),
                       reason="Ceph packages missing: run scripts/sysdeps.sh as root"),
]


def _memlock_below() -> tuple[int, int]:
    """Lower this process's soft RLIMIT_MEMLOCK below its hard one; the previous pair."""
    old = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    hard = old[1]
    low = 1 << 20 if hard == resource.RLIM_INFINITY or hard > 1 << 20 else hard // 2
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (low, hard))
    return old


@pytest.fixture(scope="module")
def rgw_ceph(tmp_path_factory):
    import storlab.campaign.runners.cluster_walls  # noqa: F401  (the walls)
    from storlab.clusters._util import free_port_block
    from storlab.clusters.ceph import CephCluster, CephOptions

    base = tmp_path_factory.mktemp("cephacct")
    c = CephCluster(base)
    port = free_port_block(2)
    old = _memlock_below()
    low = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    try:
        st = c.up(CephOptions(osds=1, store="memstore", osd_bytes=256 << 20, mon_port=port,
                              rgw=True, rgw_port=port + 1, pg_num=8, tie_to_parent=True),
                  timeout=180)
        yield c, base, st, low
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, old)
        c.down()


def _status(pid: int, name: str) -> list[str]:
    with open(f"/proc/{pid}/status") as fh:
        return next(line for line in fh if line.startswith(name + ":")).split()[1:]


def _memlock(limits: str) -> tuple[str, str]:
    line = next(x for x in limits.splitlines() if x.startswith("Max locked memory"))
    soft, hard = line.split()[3:5]
    return soft, hard


def test_the_cli_runs_as_ceph_reading_copies_of_root_files(rgw_ceph):
    c, base, _, _ = rgw_ceph
    d = base / "ceph"
    pw = pwd.getpwnam("ceph")
    r = c.cli(["sh", "-c", f"id -u; id -G; grep CapEff /proc/self/status; "
               f"cat {c.conf} {d}/admin.keyring | grep -c 'key = '; "
               f"stat -c '%u %a' {d}/admin.keyring; : >> {d}/admin.keyring"], check=False)
    out = r.stdout.splitlines()
    assert out[0] == str(pw.pw_uid) and out[1] == str(pw.pw_gid), r
    assert out[2].split()[1] == "0000000000000000"
    assert out[3] == "1"  # the admin key read (the conf names no key)
    assert out[4] == "0 444"  # the copy inside: root's, readable, read-only
    assert r.returncode != 0 and ("Permission denied" in r.stderr
                                  or "Read-only file system" in r.stderr), r.stderr
    for f in (c.conf, d / "admin.keyring"):  # the host's files: root's alone, unchanged
        st = os.stat(f)
        assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600, f
    # the real programs work so: the CLI, rados (the probe writes and reads an object)
    assert c.ceph("health").startswith("HEALTH_OK")
    s = c.status(probe=True)
    assert s["healthy"] and s["probe"].startswith("ok"), s


def test_radosgw_starts_as_ceph_and_serves_s3(rgw_ceph, tmp_path, storlab_argv):
    c, base, st, _ = rgw_ceph
    d = base / "ceph"
    pw = pwd.getpwnam("ceph")
    pid = read_record(d / "run" / "rgw.pid").pid
    assert _status(pid, "Uid") == [str(pw.pw_uid)] * 4
    assert _status(pid, "CapEff") == ["0000000000000000"]
    # its own PID namespace: pid 1 there, or 2 under bwrap's init when tied to the test
    ns = _status(pid, "NSpid")
    assert len(ns) >= 2 and ns[-1] in ("1", "2"), ns
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        assert b"--setuser" not in fh.read()
    # radosgw says when it drops a root it started with ("deferred set uid:gid")
    log = (d / "log" / "rgw.out").read_text(errors="replace")
    assert "process radosgw" in log and "set uid:gid" not in log
    # /proc: its kernel-wide parts read-only, as the other daemons' (even for root, through
    # the daemon's view); its own entries its own
    with pytest.raises(OSError) as exc:
        open(f"/proc/{pid}/root/proc/sys/kernel/hostname", "w").close()
    assert exc.value.errno == errno.EROFS
    # it serves S3: anonymous and signed requests (the walled load, PUT and GET)
    with urllib.request.urlopen(st["s3"]["endpoint"] + "/", timeout=10) as resp:
        assert resp.status == 200
    p = subprocess.run([*storlab_argv, "cluster", "load", "ceph", "--dir", str(base),
                        "--duration", "1", "--clients", "2", "--objects", "5",
                        "--mix", "get:50,put:50", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout)
    assert res["requests"] > 0 and res["errors"] == 0 and res["put_ops_per_s"] > 0, res


def test_no_cluster_program_keeps_a_hard_memlock_above_its_soft_one(rgw_ceph):
    c, base, _, low = rgw_ceph
    d = base / "ceph"
    pids = {pf.stem: read_record(pf).pid for pf in (d / "run").glob("*.pid")}
    assert set(pids) == {"mon.a", "mgr.x", "osd.0", "rgw"}
    for name, pid in pids.items():
        with open(f"/proc/{pid}/limits") as fh:
            assert _memlock(fh.read()) == (str(low), str(low)), name
    old = _memlock_below()
    try:
        now = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
        r = c.cli(["cat", "/proc/self/limits"])
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, old)
    assert _memlock(r.stdout) == (str(now), str(now))


def _ours(pid: int) -> bool:
    """`pid` descends from this process (another test run's load children are not)."""
    while pid > 1:
        with open(f"/proc/{pid}/status") as fh:
            pid = int(next(x for x in fh if x.startswith("PPid:")).split()[1])
        if pid == os.getpid():
            return True
    return False


def _load_children() -> dict[int, str]:
    """Live processes running the object-store load's child (`-m ...objload`): pid ->
    its mount namespace."""
    out = {}
    for e in os.listdir("/proc"):
        try:
            with open(f"/proc/{e}/cmdline", "rb") as fh:
                cmd = fh.read().split(b"\0")
            # the child itself (python), not the bwrap whose argv names it
            if b"storlab.campaign.runners.objload" in cmd and b"-m" in cmd and \
                    not os.path.basename(cmd[0]).startswith((b"bwrap", b"perl")) and \
                    _ours(int(e)):
                out[int(e)] = os.readlink(f"/proc/{e}/ns/mnt")
        except (OSError, StopIteration):
            continue
    return out


def test_the_dask_load_runs_walled_on_a_root_worker(rgw_ceph):
    """`cluster load --dask` (run_load_on_hosts): a root worker runs each host's load as
    the walled child `cluster load` starts (its own mount namespace, below a bwrap), where
    it used to run in the worker's own process, outside every wall."""
    import threading
    import time

    distributed = pytest.importorskip("distributed")
    from distributed.security import Security

    from storlab.campaign.runners import (Target, load_spec_from, resolve_target,
                                          run_load_walled)
    from storlab.campaign.runners.fanout import run_load_on_hosts

    c, base, _, _ = rgw_ceph
    sec = Security.temporary()
    target = Target(**resolve_target({"cluster": "ceph", "cluster_dir": str(base)}))
    spec = load_spec_from({"mix": "get:50,put:50", "sizes": "4k", "clients": 2,
                           "duration": 3, "objects": 5, "timeout": 10})
    seen: dict[int, tuple[str, list[str]]] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for pid, ns in _load_children().items():
                try:
                    with open(f"/proc/{pid}/status") as fh:
                        nspid = next(x for x in fh if x.startswith("NSpid:")).split()[1:]
                    seen.setdefault(pid, (ns, nspid))
                except (OSError, StopIteration):
                    pass
            time.sleep(0.05)

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  protocol="tls", security=sec, dashboard_address=None,
                                  host="127.0.0.1") as lc:
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        try:
            # as `storlab cluster load --dask` calls it
            res = run_load_on_hosts(lc.scheduler_address, target, spec, 1, security=sec,
                                    walled=run_load_walled)
        finally:
            stop.set()
            t.join()
    assert res.summary["requests"] > 0 and res.summary["errors"] == 0, res.summary
    assert res.summary["put_ops_per_s"] > 0
    own = os.readlink("/proc/self/ns/mnt")  # the worker's too (a child of this process)
    assert seen, "no walled load child ran on the worker"
    for pid, (ns, nspid) in seen.items():
        assert ns != own and len(nspid) >= 2, (pid, ns, nspid)  # its sandbox's namespaces
