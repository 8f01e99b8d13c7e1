"""Load from several hosts, on one machine: network namespaces joined to this one by veth
pairs are the "hosts", each running `fio --server`; a fio campaign drives them all as
clients. Checks one row per fio server (two servers on one address are two rows: the rows
are keyed by host and port) and totals equal to fio's own "All clients" record."""

from __future__ import annotations

import shutil

import pytest

from storlab.campaign.runners.fio import FioRunner
from storlab.campaign.runners.fio_parse import parse_json_output
from storlab.clusters.netns import wait_port

pytestmark = [pytest.mark.xdist_group("lan")]


@pytest.fixture(scope="module")
def fio_hosts(lan):
    """Three fio servers on the two namespace hosts of `lan`: two on the first (ports 8811
    and 8812, the case that used to be merged into one row), one on the second."""
    if shutil.which("fio") is None:
        pytest.skip("needs fio")
    h0, h1 = lan.hosts[0].addr, lan.hosts[1].addr
    clients = [f"{h0},8811", f"{h0},8812", f"{h1},8811"]
    for c in clients:
        host, port = c.split(",")
        lan.popen(0 if host == h0 else 1, ["fio", f"--server=ip:{host},{port}"])
    for c in clients:
        host, port = c.split(",")
        wait_port(host, int(port))
    return clients


TINY = {"rw": "randread", "bs": "4k", "size": "4m", "runtime": 1, "time_based": 1}


def test_rows_per_server_and_totals_match_fio(fio_hosts, tmp_path):
    res = FioRunner(clients=fio_hosts, **TINY).run({}, tmp_path / "run")
    assert res.ok, res.stderr
    got = sorted((r["host"], r["port"]) for r in res.rows)
    assert got == sorted((c.split(",")[0], int(c.split(",")[1])) for c in fio_hosts)
    assert all(r["read_iops"] > 0 for r in res.rows)
    assert res.metrics["read_iops"] == pytest.approx(sum(r["read_iops"] for r in res.rows))
    # fio's own aggregate of its clients agrees with storlab's merged total
    doc = parse_json_output(res.raw)
    everyone = [r for r in doc["client_stats"] if r["jobname"] == "All clients"]
    assert len(everyone) == 1
    # every I/O fio counted is in exactly one per-server record
    per_server = [r for r in doc["client_stats"] if r["jobname"] != "All clients"]
    assert sum(r["read"]["total_ios"] for r in per_server) == everyone[0]["read"]["total_ios"]
    # fio divides the total by the longest server's run time, storlab sums the servers'
    # rates: the sum lies between fio's aggregate and the aggregate scaled by the spread of
    # the servers' run times (1-s runs differed by 3.6 % on a loaded machine)
    times = [r["read"]["runtime"] for r in per_server]
    assert min(times) > 0, times
    spread = max(times) / min(times)
    for ours, fios in (("read_iops", "iops"), ("read_bw_bytes", "bw_bytes")):
        agg = everyone[0]["read"][fios]
        assert agg * 0.999 <= res.metrics[ours] <= agg * spread * 1.001, (ours, times)


def test_campaign_keeps_a_row_per_host(fio_hosts, tmp_path, two_size_campaign):
    camp = two_size_campaign(tmp_path, {"type": "fio", "options": {
        "clients": list(fio_hosts), "rw": "randread", "size": "4m", "runtime": 1,
        "time_based": 1}}, timeout=60)
    assert camp.run().ok == 2
    hosts = camp.results("host")
    runs = camp.results("run").set_index("config_id")
    assert len(hosts) == 2 * len(fio_hosts)
    for cid, rows in hosts.groupby("config_id"):
        assert len(rows) == len(fio_hosts)
        assert rows["read_iops"].sum() == pytest.approx(runs.loc[cid, "read_iops"])


#: Modules the Dask scheduler and workers import that a file in the working directory
#: would shadow were it on sys.path (`python -m` puts it there first).
_PLANTED = ("typing", "enum", "distributed", "tornado", "toolz", "yaml")


def test_dask_children_import_nothing_from_the_working_directory(lan, tmp_path,
                                                                 monkeypatch):
    """`Lan.dask` (`cluster load --dask`, as root) starts `python -m distributed.cli.*`:
    started from the operator's working directory without -P they imported a `typing.py`
    found there. Planted modules leave a marker and fail the import: none may be touched,
    and the scheduler and both workers come up."""
    pytest.importorskip("distributed")
    marker = tmp_path / "imported"
    for name in _PLANTED:
        (tmp_path / f"{name}.py").write_text(
            f"open({str(marker)!r} + '-{name}', 'w').close()\nraise ImportError('planted')\n")
    monkeypatch.chdir(tmp_path)
    with lan.dask(timeout=60) as d:
        assert d.address.startswith(f"tls://{lan.gateway}:")
        assert all(w.poll() is None for w in d.workers)
    assert sorted(m.name for m in tmp_path.glob("imported-*")) == []


#: A client run as nobody with the system's Python and the venv's packages (the venv's own
#: interpreter lives under /root): what any local user connecting to the scheduler gets.
_NOBODY_CLIENT = """
import sys
from distributed import Client
try:
    with Client(sys.argv[1], timeout=5) as c:
        print(c.run_on_scheduler(lambda: __import__("os").getuid()))
except Exception as exc:
    print("refused", type(exc).__name__)
"""


def _as_nobody(address: str) -> str:
    import os
    import subprocess
    import sysconfig

    py = shutil.which("python3", path="/usr/bin")
    if py is None or shutil.which("setpriv") is None:
        pytest.skip("needs /usr/bin/python3 and setpriv")
    r = subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                        py, "-c", _NOBODY_CLIENT, address], capture_output=True, text=True,
                       timeout=60, cwd="/", env={"PATH": os.environ["PATH"], "HOME": "/",
                                                 "PYTHONPATH": sysconfig.get_paths()["purelib"]})
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr


def test_lans_dask_runs_no_code_for_another_user(lan):
    """`Lan.dask` (bench_multihost.py, the multi-host tests) runs a root scheduler on the
    gateway, an address of the host that every local user reaches: on plain TCP nobody's
    client ran code there as root (the control below does). Its mutual TLS refuses a client
    without the LAN's certificate, over tcp:// and tls:// alike; the holder's client runs."""
    import subprocess
    import sys

    from storlab.clusters._util import free_port_block

    with lan.dask(timeout=60) as d:
        where = d.address.split("://", 1)[1]
        for scheme in ("tcp", "tls"):
            assert _as_nobody(f"{scheme}://{where}").startswith("refused"), scheme
        from distributed import Client

        with Client(d.address, timeout=30, security=d.security) as c:
            assert c.run_on_scheduler(lambda: 7) == 7
    # control: the same scheduler on plain TCP, as Lan.dask started it before
    port = free_port_block(1)
    sched = subprocess.Popen([sys.executable, "-P", "-m", "distributed.cli.dask_scheduler",
                              "--host", lan.gateway, "--port", str(port), "--no-dashboard"],
                             cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(lan.gateway, port, timeout=60)
        assert _as_nobody(f"tcp://{lan.gateway}:{port}") == "0"  # root's uid, for nobody
    finally:
        sched.terminate()
        sched.wait(20)
