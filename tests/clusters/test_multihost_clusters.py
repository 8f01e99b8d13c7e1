"""Load on a real cluster from several hosts: one Ceph cluster (with radosgw) bound to the
root end of a two-namespace LAN (`lan`), then
- a `runner: ceph` campaign whose fio load runs on fio servers inside both namespaces
  (client/server mode, librados reading `cluster client-conf`'s files): one row per server,
  keyed by host and port, and run totals equal to their sum and to fio's own aggregate;
- `storlab cluster load ceph --dask ... --hosts 2` with a Dask worker in each namespace:
  one row per host, merged totals equal to their sum, every request from one of the hosts.
One cluster for the module; a few seconds of load per test."""

from __future__ import annotations

import json
import math
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from storlab.campaign.runners.fio_parse import parse_json_output
from storlab.campaign.store import Store
from storlab.clusters.netns import wait_port

pytestmark = [pytest.mark.xdist_group("lan")]
NOBODY = pwd.getpwnam("nobody").pw_uid
NOBODY_GROUP = pwd.getpwnam("nobody").pw_gid


@pytest.fixture(scope="module")
def ceph_on_lan(lan, tmp_path_factory):
    """A Ceph cluster with radosgw listening on the LAN's root end; down afterwards."""
    from storlab.campaign.runners import register_cluster_walls
    from storlab.clusters._util import free_port_block
    from storlab.clusters.ceph import CephCluster, CephOptions

    missing = [p for p in ("ceph-mon", "ceph-osd", "radosgw", "fio") if not shutil.which(p)]
    if missing:
        pytest.skip(f"missing {missing}: run scripts/sysdeps.sh as root")
    base = tmp_path_factory.mktemp("mh")
    register_cluster_walls()  # the walls Ceph's programs start in
    c = CephCluster(base)
    port = free_port_block(2)
    try:
        c.up(CephOptions(bind=lan.gateway, mon_port=port, rgw=True, rgw_port=port + 1,
                         tie_to_parent=True), timeout=180)
        c.prefill(16 << 20, timeout=120)  # objects for the reads
        yield c
    finally:
        c.down()


def test_ceph_runner_fio_servers_on_two_hosts(lan, ceph_on_lan, tmp_path, two_size_campaign):
    conf = ceph_on_lan.client_conf(tmp_path / "client")
    clients = []
    for h in lan.hosts:  # one fio server per host, the cluster's client conf in its env
        lan.popen(h.index, ["fio", f"--server=ip:{h.addr},8765"],
                  env={"CEPH_CONF": conf["conf"]})
        clients.append(f"{h.addr},8765")
    for h in lan.hosts:
        wait_port(h.addr, 8765)
    camp = two_size_campaign(tmp_path, {"type": "ceph", "options": {
        "cluster_dir": str(ceph_on_lan.dir.parent),
        "load": {"type": "fio", "options": {"clients": clients, "rw": "randread",
                                            "size": "16m", "iodepth": 4, "runtime": 2,
                                            "time_based": 1}}}}, timeout=90)
    assert camp.run().ok == 2
    runs = camp.results("run").set_index("config_id")
    hosts = camp.results("host")
    assert len(hosts) == 4
    for cid, rows in hosts.groupby("config_id"):
        # one row per fio server (host and port), each of them did I/O on the cluster
        assert sorted(zip(rows["host"], rows["port"])) == sorted(
            (h.addr, 8765) for h in lan.hosts)
        assert (rows["read_iops"] > 0).all()
        assert rows["read_iops"].sum() == pytest.approx(runs.loc[cid, "read_iops"])
        assert rows["read_bw_bytes"].sum() == pytest.approx(runs.loc[cid, "read_bw_bytes"])
    # fio's own "All clients" count of I/Os is the servers' sum (the raw output is stored)
    with Store(camp.store_path) as store:
        raws = [r["raw"] for r in store.runs(with_raw=True) if r["status"] == "ok"]
    assert len(raws) == 2
    for raw in raws:
        doc = parse_json_output(raw)
        every = [r for r in doc["client_stats"] if r["jobname"] == "All clients"][0]
        per = [r for r in doc["client_stats"] if r["jobname"] != "All clients"]
        assert sum(r["read"]["total_ios"] for r in per) == every["read"]["total_ios"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the walled server drops root: needs root")
def test_a_walled_fio_server_reaches_ceph_with_its_ports(lan, ceph_on_lan, tmp_path,
                                                         storlab_argv):
    """`storlab fio-server --ceph` (the recipe docs/clusters.md gives) in a host: its rbd
    job reads the cluster's image (without `--ceph` Landlock refuses the monitor's port:
    librados then retries until its mount timeout; the refusal itself is
    test_fio_client_walls' connect test). The server runs as its directory's owner
    (nobody): the client conf lies there, theirs."""
    from storlab.clusters.ceph import IMAGE, POOL

    srv = Path(tempfile.mkdtemp(prefix="fixd-srv-", dir="/tmp"))  # parents others search
    try:
        conf = ceph_on_lan.client_conf(srv / "ceph")
        for p in (srv, *srv.rglob("*")):
            os.chown(p, NOBODY, NOBODY_GROUP)
        job = tmp_path / "rbd.fio"
        job.write_text(f"[r]\nioengine=rbd\nclientname=admin\npool={POOL}\n"
                       f"rbdname={IMAGE}\nrw=randread\nbs=4k\nsize=4m\nio_size=1m\n")
        h = lan.hosts[0]
        lan.popen(h.index, [*storlab_argv, "fio-server", "--dir", str(srv), "--bind",
                            h.addr, "--port", "8767", "--ceph", "--connect-port",
                            str(ceph_on_lan.state()["mon_port"])],  # not Ceph's default
                  env={"CEPH_CONF": conf["conf"]})
        wait_port(h.addr, 8767)
        p = subprocess.run(["fio", f"--client=ip:{h.addr},8767", str(job)],
                           capture_output=True, text=True, timeout=120)
        out = p.stdout + p.stderr
        assert p.returncode == 0 and "err= 0" in out, out
    finally:
        shutil.rmtree(srv)


@pytest.fixture
def dask_lan(lan):
    """A Dask scheduler on the LAN's root end and one worker per host (TLS: `Lan.dask`)."""
    with lan.dask() as d:
        yield d


def test_object_load_from_two_hosts_through_dask(lan, ceph_on_lan, dask_lan, tmp_path, storlab):
    recs = tmp_path / "records.csv"
    r = storlab("cluster", "load", "ceph", "--dask", dask_lan.address, "--hosts", "2",
                "--duration", "1.5", "--clients", "2", "--objects", "20", "--mix",
                "get:80,put:20", "--sizes", "4k", "--records", str(recs), "--dir",
                str(ceph_on_lan.dir.parent), "--json", timeout=120, env=dask_lan.env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    rows, merged = out["hosts"], out["merged"]
    # one row per namespace host (the workers' addresses), each of them loaded the cluster
    assert sorted(row["host"].split("//")[1].split(":")[0] for row in rows) == sorted(
        h.addr for h in lan.hosts)
    assert all(row["ops_per_s"] > 0 and row["errors"] == 0 for row in rows)
    for k in ("ops_per_s", "get_ops_per_s", "put_ops_per_s", "mb_per_s", "requests"):
        assert merged[k] == pytest.approx(sum(row[k] for row in rows)), k
    assert merged["hosts"] == 2
    # every request is in the records once, tagged with its host; the merged latency comes
    # from them all (between the hosts' own)
    df = pd.read_csv(recs)
    assert len(df) == merged["requests"]
    assert df.groupby("host").size().to_dict() == {row["host"]: row["requests"]
                                                   for row in rows}
    lo, hi = sorted(row["lat_p50_ms"] for row in rows)
    assert lo <= merged["lat_p50_ms"] <= hi or math.isclose(lo, hi)
