"""A real Swift all-in-one (XFS loop image, 3 devices, tempauth + s3api) brought up,
loaded through the objectstore runner with both APIs, brought down."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from storlab.campaign.campaign import Campaign
from storlab.clusters import ClusterError
from storlab.clusters._util import Daemon, wait_until
from storlab.campaign.runners.objload import LoadSpec, Target, run_load
from storlab.clusters.swift import SwiftCluster, SwiftOptions

_NEED = ("swift-proxy-server", "swift-object-server", "swift-account-server",
         "swift-container-server", "swift-ring-builder", "memcached", "mkfs.xfs", "losetup")
pytestmark = [
    pytest.mark.xdist_group("clusters"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a Swift cluster needs root"),
    pytest.mark.skipif(any(shutil.which(p) is None for p in _NEED),
                       reason="Swift packages missing: run scripts/sysdeps.sh as root"),
]
@pytest.fixture(scope="module")
def opts(free_ports):
    # random free ports: a user's own cluster or another test run may hold the defaults;
    # tie_to_parent: a killed test run takes its daemons with it
    base = free_ports(5)
    return {"port": base + 3, "storage_port": base, "memcached_port": base + 4,
            "tie_to_parent": True}


@pytest.fixture
def swift(swift_cluster):
    """The session's Swift (tests/conftest.py), shared with the runner contract's tests."""
    return swift_cluster


def _has_user(name):
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _target(st, api):
    s3 = st["s3"]
    return Target(api=api, endpoint=s3["endpoint"], access_key=s3["access_key"],
                  secret_key=s3["secret_key"], auth_url=st["auth_url"], user=st["user"],
                  key=st["key"], bucket=f"t-{api}")


def test_up_mounts_xfs_and_reports_status(swift, leftovers):
    c, base, st = swift
    assert st["ready"] and st["loop"].startswith("/dev/loop")
    left = leftovers(base)
    assert left["mounts"] == [str(base / "swift" / "node")] and len(left["loops"]) == 1
    status = c.status()
    assert status["health"] == "ok" and all(status["daemons"].values())
    assert set(status["daemons"]) == {"memcached", "account", "container", "object", "proxy"}


@pytest.mark.parametrize("api", ["swift", "s3"])
def test_closed_loop_mix_keeps_every_request(swift, api):
    _, _, st = swift
    res = run_load(_target(st, api), LoadSpec(clients=4, duration=2, objects=20,
                                              mix={"get": 60, "put": 30, "delete": 10},
                                              sizes="4k:0.5,32k:0.5"))
    s, rec = res.summary, res.records
    assert s["errors"] == 0 and s["requests"] == len(rec) > 20
    assert s["get_ops_per_s"] > s["delete_ops_per_s"] > 0 and s["put_ops_per_s"] > 0
    # GET sizes are what was read back: the prepared objects' sizes
    gets = rec[rec["op"] == "get"]
    assert set(gets["size"]) <= {4096, 32768} and len(set(gets["size"])) == 2
    assert s["get_lat_p50_ms"] <= s["get_lat_p95_ms"] <= s["get_lat_p99_ms"]
    assert abs(s["total_iops"] - s["get_ops_per_s"] - s["put_ops_per_s"]) < 1e-9


def test_open_loop_holds_the_target_rate(swift):
    _, _, st = swift
    res = run_load(_target(st, "swift"), LoadSpec(mode="open", rate=40, clients=4,
                                                  duration=3, objects=10, mix={"get": 1}))
    s = res.summary
    assert s["unserved"] == 0 and s["errors"] == 0
    assert 80 <= s["requests"] <= 160  # Poisson arrivals at 40/s for 3 s
    assert (res.records["t_start"] >= res.records["t_sched"] - 1e-6).all()


def test_cli_load_as_a_walled_child(swift, tmp_path, storlab):
    """`storlab cluster load` (the load a child in the walls a campaign's run gets): the
    summary keeps the keys the load in storlab's own process gave, --records the table
    of every request, written by storlab; the table names each operation."""
    from storlab.campaign.runners.objload import RECORD_COLUMNS

    c, base, st = swift
    rec = tmp_path / "rec.csv"
    args = ("cluster", "load", "swift", "--dir", str(base), "--duration", "1",
            "--clients", "2", "--objects", "10", "--mix", "get:70,put:30")
    r = storlab(*args, "--records", str(rec), "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["errors"] == 0 and s["requests"] > 10 and s["put_ops_per_s"] > 0
    inproc = run_load(Target(api="swift", auth_url=st["auth_url"], user=st["user"],
                             key=st["key"]), LoadSpec(clients=2, duration=0.5, objects=10,
                                                      mix={"get": 70, "put": 30}))
    assert set(s) == set(inproc.summary)
    df = pd.read_csv(rec)
    assert list(df.columns) == list(RECORD_COLUMNS)
    assert (df["status"] >= 0).sum() == s["requests"] and set(df["op"]) == {"get", "put"}
    r = storlab(*args, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ops/s" in r.stdout and " get " in r.stdout and " put " in r.stdout


def test_campaign_through_objectstore_runner(swift, tmp_path):
    c, base, st = swift
    (tmp_path / "space.yaml").write_text(textwrap.dedent("""
        factors:
          - {name: read_pct, kind: integer, range: [0, 100]}
          - {name: clients, kind: integer, range: [2, 4]}
    """))
    pd.DataFrame({"read_pct": [0, 100], "clients": [2, 4]}).to_csv(tmp_path / "c.csv",
                                                                    index=False)
    (tmp_path / "camp.yaml").write_text(textwrap.dedent(f"""
        space: space.yaml
        design: {{csv: c.csv}}
        timeout: 60
        runner:
          type: objectstore
          options: {{cluster: swift, cluster_dir: {base}, duration: 2, objects: 10,
                     records_dir: records}}
    """))
    camp = Campaign.load(tmp_path / "camp.yaml")
    assert camp.run().ok == 2
    runs = camp.results("run").set_index("read_pct")
    assert runs.loc[0, "write_iops"] > 0 and runs.loc[0, "read_iops"] == 0
    assert runs.loc[100, "read_iops"] > 0 and runs.loc[100, "write_iops"] == 0
    files = sorted((tmp_path / "scratch" / "records").glob("*.csv.gz"))
    assert len(files) == 2
    rec = pd.read_csv(files[0])
    assert list(rec.columns) == ["t_sched", "t_start", "t_end", "op", "size", "status",
                                 "worker"]


def test_records_dir_outside_the_campaign_never_through_a_link(swift, tmp_path, storlab):
    """Route: storlab (root) renamed its records file over somebody's file through a
    directory link swapped in on the way to an absolute `records_dir` outside the campaign
    (in a shared directory). The path the user wrote is resolved once, when the campaign
    is loaded (a link there then, such as `/home -> var/home`, is the user's own
    declaration: the records go where it leads, when that lies in a directory declared
    in sandbox.writable: the load's child writes them there, inside its sandbox); each write
    opens the resolved path from / one component at a time without following a link: a
    link swapped in after the load (here by a setup step) is refused, the run keeps its
    measurement with a warning naming the link, the victim's bytes are unchanged. A
    failed run (every GET of an object never prepared fails) writes none."""
    import sqlite3

    c, base, st = swift
    victim = tmp_path / "theirs" / "sub" / "c1-r1.csv.gz"
    victim.parent.mkdir(parents=True)
    victim.write_bytes(os.urandom(4096))
    before = victim.read_bytes()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "lnk").symlink_to(tmp_path / "mine")
    (tmp_path / "mine").mkdir()

    # every campaign file in tmp_path: the declared directories lie inside the campaign's
    # directory (outside it, sandbox.writable needs allow_destructive)
    def run(name, records, setup=(), writable=(shared,), refused=None, **load):
        spec = {"name": name, "timeout": 60, "store": f"{name}.db",
                "workdir": f"{name}-scratch", "space": {"factors": [
                    {"name": "clients", "kind": "categorical", "values": [1, 2]}],
                    "responses": [{"name": "total_iops", "goal": "maximize"}]},
                "design": {"configs": [{"clients": 1}]},
                "sandbox": {"writable": [str(w) for w in writable]}, "setup": list(setup),
                "runner": {"type": "objectstore", "options": {
                    "cluster": "swift", "cluster_dir": str(base), "duration": 1,
                    "objects": 4, "records_dir": str(records), **load}}}
        (tmp_path / f"{name}.yaml").write_text(__import__("yaml").safe_dump(spec))
        r = storlab("run", str(tmp_path / f"{name}.yaml"), timeout=120)
        if refused is not None:  # before any run, one line
            assert r.returncode == 2 and refused in r.stderr, r.stderr
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr
            return None
        got = None
        with sqlite3.connect(tmp_path / f"{name}.db") as db:
            got = db.execute("SELECT status, stderr_tail, metrics FROM runs").fetchone()
        # its one run: exit 0 when it worked, 1 when it failed
        assert r.returncode == (0 if got[0] == "ok" else 1), r.stderr
        assert "Traceback" not in r.stdout + r.stderr, r.stderr
        return got

    # a link there before the load: the user's declaration, where it leads declared too
    run("undeclared", shared / "lnk" / "sub", refused="declare its directory")
    assert not (tmp_path / "mine" / "sub").exists()
    assert run("linked", shared / "lnk" / "sub", writable=(shared, tmp_path / "mine"))[0] \
        == "ok"
    assert (tmp_path / "mine" / "sub" / "c1-r1.csv.gz").stat().st_size > 0
    # swapped for a link after the load: refused, the measurement kept
    (shared / "swap" / "sub").mkdir(parents=True)
    swap = ["sh", "-c", f"rm -rf {shared}/swap && ln -s {tmp_path}/theirs {shared}/swap"]
    status, tail, metrics = run("swapped", shared / "swap" / "sub", setup=[swap])
    assert status == "ok" and "warning" in tail and "swap is a symbolic link" in tail, tail
    assert json.loads(metrics)["requests"] > 0
    assert victim.read_bytes() == before
    assert run("plain", shared / "real" / "sub")[0] == "ok"
    assert (shared / "real" / "sub" / "c1-r1.csv.gz").stat().st_size > 0
    status, tail, _ = run("failing", shared / "failed", prepare="never", mix={"get": 100},
                          bucket=f"empty-{os.getpid()}")  # no object there to GET
    assert status == "failed", tail
    assert not (shared / "failed").exists()


def test_the_load_goes_to_the_cluster_storlab_started_unless_declared(swift, tmp_path,
                                                                     storlab):
    """The load reaches the host's network only at its endpoint's port: that endpoint is the
    cluster's (`cluster:`); naming it again is fine, a factor moving it to another port
    (a root HTTP service on loopback) is refused before any run in one line, even when
    the campaign declares `sandbox.network: true`: the keys are the cluster's."""
    import yaml

    c, base, st = swift
    own = st["s3"]["endpoint"].rstrip("/")
    other = own.rsplit(":", 1)[0] + ":1"  # another port on the same host: nothing there

    def run(name, values, sandbox=None):
        d = tmp_path / name
        d.mkdir()
        spec = {"name": name, "timeout": 60, "space": {"factors": [
                    {"name": "endpoint", "kind": "categorical", "values": values}],
                    "responses": [{"name": "total_iops", "goal": "maximize"}]},
                "design": {"kind": "full"}, "sandbox": sandbox or {},
                "runner": {"type": "objectstore", "options": {
                    "cluster": "swift", "cluster_dir": str(base), "api": "s3",
                    "duration": 1, "objects": 4, "clients": 1}}}
        (d / "campaign.yaml").write_text(yaml.safe_dump(spec))
        return d, storlab("run", str(d / "campaign.yaml"), timeout=120)

    d, r = run("own", [own, own + "/"])
    assert r.returncode == 0 and "ok 2, failed 0" in r.stdout, r.stdout + r.stderr
    d, r = run("moved", [own, other])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"factor endpoint: {other} is not the endpoint of cluster swift" in r.stderr
    assert not (d / "campaign.db.output").exists()  # no run started
    # declared network: still refused, the keys are the cluster's
    d, r = run("declared", [own, other], sandbox={"network": True})
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "go only to that cluster's endpoint" in r.stderr
    assert not (d / "campaign.db.output").exists()


def test_the_clusters_key_never_goes_to_the_campaigns_own_auth_url(swift, tmp_path,
                                                                  storlab):
    """A campaign naming `cluster: swift` and its own `auth_url` (with `sandbox.network:
    true`, which lets the load reach any host) is refused in one line before any run: the
    listener at that address (a local user's) is never sent the Swift key."""
    import http.server
    import threading

    import yaml

    _, base, st = swift
    heard: list[str] = []

    class Listener(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            heard.append(str(self.headers.get("X-Auth-Key")))
            self.send_response(200)
            self.send_header("X-Storage-Url", "http://127.0.0.1:1/v1/AUTH_x")
            self.send_header("X-Auth-Token", "t")
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Listener)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        d = tmp_path / "own-auth"
        d.mkdir()
        spec = {"name": "ownauth", "timeout": 60, "space": {"factors": [
                    {"name": "clients", "kind": "categorical", "values": [1, 2]}],
                    "responses": [{"name": "total_iops", "goal": "maximize"}]},
                "design": {"kind": "full"}, "sandbox": {"network": True},
                "runner": {"type": "objectstore", "options": {
                    "cluster": "swift", "cluster_dir": str(base), "api": "swift",
                    "auth_url": f"http://127.0.0.1:{srv.server_port}/auth/v1.0",
                    "duration": 1, "objects": 2}}}
        (d / "campaign.yaml").write_text(yaml.safe_dump(spec))
        r = storlab("run", str(d / "campaign.yaml"), timeout=120)
    finally:
        srv.shutdown()
        srv.server_close()
    assert heard == [], "the cluster's key was sent to the campaign's auth_url"
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "option auth_url" in r.stderr and "go only to that cluster's endpoint" in r.stderr
    assert not (d / "campaign.db.output").exists()  # no run started


def test_failing_daemon_start_reports_the_log_tail(tmp_path, free_ports):
    conf = tmp_path / "proxy.conf"
    conf.write_text(f"[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = {free_ports(1)}\n")
    d = Daemon("proxy", ["swift-proxy-server", str(conf), "-v"], tmp_path / "proxy.log",
               tmp_path / "proxy.pid")
    d.start()
    with pytest.raises(ClusterError) as exc:
        wait_until(lambda: False, 30, "the proxy", [d])
    msg = str(exc.value)
    assert "proxy exited during start-up" in msg
    assert "pipeline" in msg.lower() or "section" in msg.lower()  # the proxy's own error


def test_bad_options_are_refused_before_anything_starts(tmp_path, opts):
    c = SwiftCluster(tmp_path)
    with pytest.raises(ClusterError, match="replicas 4"):
        c.up(SwiftOptions(replicas=4, **opts))
    assert not (tmp_path / "swift").exists()


@pytest.mark.skipif(not _has_user("swift"), reason="no swift user")
def test_daemons_own_only_the_storage_when_run_as_swift(opts):
    """In a directory others can enter the daemons run as the swift user: they own only
    node/ (their storage); the confs and rings they read are root:swift 0640 (a server
    reads its conf as root before it drops to swift: one it could rewrite would make it
    root at its next start), the builders root's alone. The cluster answers a probe."""
    import grp
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="storlab-swift-user-"))
    os.chmod(base, 0o755)
    c = SwiftCluster(base)
    try:
        c.up(SwiftOptions(storage="dir", **opts), timeout=90)
        d, gid = base / "swift", grp.getgrnam("swift").gr_gid
        swift_uid = pwd.getpwnam("swift").pw_uid
        for f in ("proxy-server.conf", "object-server.conf", "object.ring.gz"):
            st = (d / f).stat()
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, gid, 0o640), f
        assert (d / "object.builder").stat().st_uid == 0
        assert all(p.stat().st_uid == swift_uid for p in [d / "node", *(d / "node").iterdir()])
        assert [p.name for p in d.iterdir() if p.stat().st_uid == swift_uid] == ["node"]
        assert c.probe().startswith("ok"), c.probe()
    finally:
        c.down()
        shutil.rmtree(base, ignore_errors=True)


# A local user's squatter: once the cluster directory appears (`up` makes it after its
# "port free" check), it binds the proxy's port as soon as the port is free (trying every
# millisecond) and answers every request as a proxy would, printing each X-Auth-Key it is
# sent.
_SQUATTER = r"""
import http.server, os, sys, time
d, port = sys.argv[1], int(sys.argv[2])
while not os.path.exists(d):
    time.sleep(0.002)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("key", self.headers.get("X-Auth-Key"), flush=True)
        self.send_response(200)
        self.send_header("X-Storage-Url", f"http://127.0.0.1:{port}/v1/AUTH_test")
        self.send_header("X-Auth-Token", "AUTH_tk")
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_HEAD = do_GET
    def log_message(self, *a):
        pass
while True:
    try:
        srv = http.server.HTTPServer(("127.0.0.1", port), H)
        break
    except OSError:
        time.sleep(0.001)
print("bound", flush=True)
srv.serve_forever()
"""


def test_a_port_squatted_after_the_check_is_refused_and_never_sent_the_key(tmp_path,
                                                                           free_ports):
    """Another process binds the proxy's port between `up`'s "port free" check and the
    proxy's start: `up` fails in one error naming the port, and that process is never
    sent the key (it was, and `status` called the cluster healthy)."""
    import subprocess
    import sys

    base = free_ports(5)
    o = SwiftOptions(port=base + 3, storage_port=base, memcached_port=base + 4,
                     storage="dir", replicas=1, tie_to_parent=True)
    c = SwiftCluster(tmp_path)
    squat = subprocess.Popen([sys.executable, "-I", "-c", _SQUATTER, str(tmp_path / "swift"),
                              str(o.port)], stdout=subprocess.PIPE, text=True)
    try:
        with pytest.raises(ClusterError) as exc:
            c.up(o, timeout=60)
        msg = str(exc.value)
        assert f"port 127.0.0.1:{o.port} is held by another process, not the proxy" in msg
    finally:
        squat.kill()
        heard = squat.communicate()[0]
        c.down()
    assert "bound" in heard  # the race was run: it held the port
    assert "key" not in heard.replace("bound", ""), heard


def test_status_and_loads_refuse_a_proxy_port_another_process_holds(swift, tmp_path):
    """The proxy storlab started is gone: with nothing on its port a load is refused (the
    next process to bind the port would be sent the key); with another process answering
    there, status is not healthy and names it, no probe sends the key there, a load is
    refused."""
    import subprocess
    import sys

    from storlab.clusters import cluster_state

    c, base, st = swift
    port = st["ports"]["proxy"]
    from storlab.clusters._util import stop_pid

    stop_pid(c.dir / "run" / "proxy.pid", grace=10)
    squat = None
    try:
        with pytest.raises(ClusterError, match=f"proxy storlab started does not listen on "
                                               f"127.0.0.1:{port}; nothing"):
            cluster_state("swift", base)
        assert c.probe().startswith("failed: the proxy storlab started does not listen")
        squat = subprocess.Popen([sys.executable, "-I", "-c", _SQUATTER, str(c.dir),
                                  str(port)], stdout=subprocess.PIPE, text=True)
        wait_until(lambda: not _port_free(port), 20, "the squatter to bind")
        status = c.status(probe=True)
        assert not status["healthy"]
        assert f"proxy: port {port} is held by another process" in status["health"]
        assert status["probe"].startswith(f"failed: port 127.0.0.1:{port} is held by")
        with pytest.raises(ClusterError, match=f"port 127.0.0.1:{port} is held by another"):
            cluster_state("swift", base)
    finally:
        heard = ""
        if squat is not None:
            squat.kill()
            heard = squat.communicate()[0]
        c.restart("proxy")
    assert "key" not in heard.replace("bound", ""), heard
    assert c.status()["healthy"]


def test_restart_refuses_a_process_that_binds_the_port_in_the_gap(swift):
    """`restart` stops the proxy and starts it again; another process that binds the port
    in between answers the healthcheck too (it was taken for the proxy and restart said
    done). restart fails at once naming it; nothing is sent the key; the next restart,
    the squatter gone, brings the proxy back."""
    import subprocess
    import sys

    c, _, st = swift
    port = st["ports"]["proxy"]
    squat = subprocess.Popen([sys.executable, "-I", "-c", _SQUATTER, str(c.dir), str(port)],
                             stdout=subprocess.PIPE, text=True)
    try:
        with pytest.raises(ClusterError, match=f"port 127.0.0.1:{port} is held by another "
                                               "process, not the proxy"):
            c.restart("proxy", timeout=30)
    finally:
        squat.kill()
        heard = squat.communicate()[0]
        c.restart("proxy")
    assert "bound" in heard  # the race was run: it held the port
    assert "key" not in heard.replace("bound", ""), heard
    assert c.status(probe=True)["healthy"]


def _port_free(port):
    from storlab.clusters._util import port_free

    return port_free(port)


def test_files_are_private_and_keys_random(swift):
    c, base, st = swift
    d = base / "swift"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for f in ("proxy-server.conf", "object-server.conf", "cluster.json", "object.ring.gz"):
        assert stat.S_IMODE((d / f).stat().st_mode) == 0o600, f
    assert st["key"] != "testing" and len(st["key"]) >= 20
    assert st["key"] in (d / "proxy-server.conf").read_text()
    assert st["s3"]["secret_key"] == st["key"]


def test_a_failed_device_loses_no_request_as_the_simulator_says(swift):
    """Swift's own device failure (its directory gone: the object server answers 507) on
    3 devices and 2 replicas: GETs read the other replica, PUTs write a handoff, no request
    fails; the simulator of the same layout, with the device failed, says availability 1."""
    from storlab.sim.model import build_model
    from storlab.sim.run import run_model
    from storlab.sim.spec import parse_cluster

    c, _, st = swift
    dev = c.node / "d1"
    aside = c.node / "d1.failed"
    dev.rename(aside)
    try:
        res = run_load(_target(st, "swift"), LoadSpec(clients=2, duration=2, objects=20,
                                                      mix={"get": 70, "put": 30}))
    finally:
        aside.rename(dev)
    s = res.summary
    assert s["errors"] == 0 and s["get_ops_per_s"] > 0 and s["put_ops_per_s"] > 0
    # the device was down for Swift: its object server refused it and the proxy said so
    log = (c.dir / "log" / "proxy.log").read_text(errors="replace")
    assert "Insufficient Storage" in log, log[-2000:]
    sim = {"nodes": [{"role": "both", "count": 1, "disks": {"type": "ssd_s3700", "count": 3}}],
           "swift": {"replicas": 2, "part_power": 6}, "failed_disks": 1,
           "workload": {"mix": {"GET": 0.7, "PUT": 0.3}, "clients": 2, "requests": 2000}}
    rep = run_model(build_model(parse_cluster(sim)), backend="python")
    assert rep.ops.set_index("op").loc["ALL", "availability"] == 1.0


def test_killed_object_server_is_reported(swift):
    c, base, st = swift
    obj = c._server_daemon("object")
    rec = obj.record()
    os.killpg(rec.pid, signal.SIGKILL)  # the server and its workers
    deadline = time.monotonic() + 30
    while obj.state() != "gone" and time.monotonic() < deadline:
        time.sleep(0.1)
    s = c.status(probe=True)
    assert not s["healthy"] and s["daemons"]["object"] is False
    assert "object not running" in s["health"]
    assert s["probe"].startswith("failed: 503"), s["probe"]
    # started again, once: a second start while it runs is refused
    obj.start()
    with pytest.raises(ClusterError, match="second copy"):
        c._server_daemon("object").start()
    wait_until(lambda: c.status(probe=True)["healthy"], 60, "swift healthy again", [obj])


@pytest.mark.last
def test_down_leaves_nothing(swift, leftovers):
    """Last of the session: brings the shared cluster down and checks what is left."""
    c, base, _ = swift
    r = c.down()
    assert set(r["stopped"]) == {"memcached", "account", "container", "object", "proxy"}
    assert r["loop_detached"]
    assert leftovers(base) == {"processes": [], "mounts": [], "loops": []}
    assert not (base / "swift").exists()
