"""`storlab cluster` as a user runs it, without bringing a cluster up (the integration
tests do that): empty status, bad input as one line with exit 2, a runner refusing a
cluster that is not up."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from storlab.campaign.runners import make_runner

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


@pytest.fixture
def storlab(storlab):
    """The shared `storlab` fixture, each command bounded at 120 s."""
    return functools.partial(storlab, timeout=120)


def test_status_and_down_when_nothing_is_up(tmp_path, storlab):
    r = storlab("cluster", "status", "--dir", tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"ceph": None, "swift": None}
    r = storlab("cluster", "down", "--dir", tmp_path)
    assert r.returncode == 0 and "nothing to bring down" in r.stdout


def test_status_output_file_is_private(tmp_path, storlab):
    """`-o FILE` of cluster state (keys included when a cluster is up) is 0600 whatever
    the umask, like the other outputs holding credentials."""
    out = tmp_path / "out" / "status.json"
    out.parent.mkdir()
    r = storlab("cluster", "status", "--dir", tmp_path / "cl", "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    assert json.loads(out.read_text()) == {"ceph": None, "swift": None}


def test_bad_input_is_one_line_exit_2(tmp_path, storlab):
    for args, words in ((("up", "minio"), "must be one of ceph, swift"),
                        (("up", "ceph", "--store", "filestore"), "memstore, bluestore"),
                        (("up", "swift", "--replicas", "5"), "replicas 5"),
                        (("load", "swift"), "no swift cluster is up")):
        r = storlab("cluster", *args, "--dir", tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing was created by refused requests


def test_multihost_options_refused_in_one_line(tmp_path, storlab):
    """--bind only on an address of this host that is loopback or private; client-conf and
    --hosts need what they name."""
    for args, words in ((("up", "ceph", "--bind", "8.8.8.8"), "only a loopback or private"),
                        (("up", "swift", "--bind", "10.255.255.254"), "no interface"),
                        (("up", "ceph", "--bind", "my-host"), "must be an IPv4 address"),
                        (("client-conf", tmp_path / "cc"), "no ceph cluster is up"),
                        (("load", "ceph", "--hosts", "2"), "--hosts needs --dask")):
        r = storlab("cluster", *args, "--dir", tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_runners_are_registered_and_fail_cleanly_without_a_cluster(tmp_path):
    r = make_runner("objectstore", {"cluster": "swift", "cluster_dir": str(tmp_path),
                                    "duration": 1})
    res = r.run({"read_pct": 100}, tmp_path)
    assert res.status == "failed" and "no swift cluster is up" in res.stderr
    c = make_runner("ceph", {"cluster_dir": str(tmp_path)})
    res = c.run({"osd_op_num_shards": 2}, tmp_path)
    assert res.status == "failed" and "no ceph cluster is up" in res.stderr


def test_stray_daemons_are_found_by_their_config_path(tmp_path):
    """The safety net of `down`: a daemon whose PID file was lost is still stopped, and only
    a process holding our exact config path as an argument is touched."""
    import time

    from storlab.clusters._util import pids_with_arg, stop_strays

    conf = str(tmp_path / "ceph.conf")
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", conf])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                              conf + ".other"])
    try:
        time.sleep(0.3)
        assert [p for p, _ in pids_with_arg(conf)] == [mine.pid]
        assert stop_strays(conf, grace=5) == [mine.pid]
        assert mine.wait(10) is not None and other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_rados_bench_json_cut_by_cleanup_messages():
    """rados bench prints 'Removed N objects' into the middle of its JSON line; its values
    are strings; write mode's stddev_iops is garbage and is left out."""
    from storlab.campaign.runners.ceph import parse_rados_bench

    out = ('hints = 1\n{"concurrent_ios":"8","average_iops":"10205","bandwidth":"39.86",'
           '"stddev_iops":"-1272536144"\nRemoved 20420 objects\nClean up completed and '
           'total clean up time :1.5\n,"average_latency":"0.000783","max_latency":"0.0043"}\n')
    m = parse_rados_bench(out, "write")
    assert m == pytest.approx({"write_iops": 10205.0, "write_bw_bytes": 39.86e6,
                               "write_lat_mean_ms": 0.783, "write_lat_max_ms": 4.3})
    assert "read_iops" in parse_rados_bench(out, "rand")
