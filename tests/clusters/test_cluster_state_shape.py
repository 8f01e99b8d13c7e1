"""A cluster directory's cluster.json of another shape than `cluster up` writes (valid JSON,
wrong types, a path out of the directory): refused in one line naming the file and the
key, never a traceback. A campaign may ship its cluster directory (`cluster_dir:`), so
the ceph runner's conf and keyring, shown read-only to its load, are the trusted
directory's own regular files, never what the state or a link there names. No daemon is
started here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from storlab.clusters import ClusterError, get_cluster

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="storlab runs clusters as root")

BAD = {
    "ceph": [("[1]", "is not a JSON object"), ('"x"', "is not a JSON object"),
             ('{"ready": true, "osds": "x"}', "osds: must be int"),
             ('{"ready": true, "osds": true}', "osds: must be int"),
             ('{"ready": true, "conf": 1}', "conf: must be an absolute path"),
             ('{"ready": true, "conf": "/etc/shadow"}', "conf: must name an entry"),
             ('{"ready": true, "conf": "ceph.conf"}', "conf: must be an absolute path"),
             ('{"ready": true, "pool": ["bench"]}', "pool: must be a name"),
             ('{"ready": true, "image": "-x y"}', "image: must be a name"),
             ('{"ready": true, "mon_port": "3300"}', "mon_port: must be int"),
             ('{"ready": true, "s3": {"endpoint": 5}}', "s3: endpoint: must be str"),
             ('{"ready": true, "kind": "swift"}', "kind: 'swift' must be 'ceph'"),
             ('{"ready": "yes"}', "ready: must be bool"),
             ('{"ready": true}', "conf: missing")],
    "swift": [("[]", "is not a JSON object"),
              ('{"ready": true, "ports": [6200]}', "ports: must be an object"),
              ('{"ready": true, "ports": {"proxy": "8080"}}', "ports: proxy: must be int"),
              ('{"ready": true, "auth_url": null}', "auth_url: must be str"),
              ('{"ready": true, "loop": "/dev/sda"}', "loop: must be a loop device"),
              ('{"ready": true, "mounted": "/"}', "mounted: must name an entry"),
              ('{"ready": true, "s3": "x"}', "s3: must be an object"),
              ('{"ready": true, "kind": "swift", "user": "u", "key": "k"}',
               "auth_url: missing"),
              ('{"ready": true, "auth_url": "http://h/auth/v1.0", "user": "u", "key": "k", '
               '"s3": {"endpoint": "http://h"}}', "s3.access_key: missing")],
}


def _plant(base: Path, kind: str, text: str) -> Path:
    d = base / kind
    d.mkdir(parents=True, mode=0o700)
    os.chmod(base, 0o700)
    (d / "cluster.json").write_text(text + "\n")
    return d / "cluster.json"


@pytest.mark.parametrize("kind,text,why", [(k, t, w) for k, v in BAD.items() for t, w in v])
def test_a_state_of_another_shape_is_refused_in_one_line(tmp_path: Path, kind: str,
                                                         text: str, why: str) -> None:
    from storlab.clusters import cluster_state

    path = _plant(tmp_path / "base", kind, text)
    for call in (get_cluster(kind, tmp_path / "base").state,
                 lambda: cluster_state(kind, tmp_path / "base")):
        with pytest.raises(ClusterError) as exc:
            call()
        msg = str(exc.value)
        assert "\n" not in msg and msg.startswith(f"{path}: {why}"), msg


def test_the_state_up_writes_is_taken(tmp_path: Path) -> None:
    """What `up` writes (the shape and types of a real cluster's state) passes."""
    d = tmp_path / "base" / "ceph"
    st = {"kind": "ceph", "dir": str(d), "conf": str(d / "ceph.conf"), "fsid": "f",
          "osds": 1, "replicas": 1, "store": "memstore", "pool": "bench",
          "image": "storlab", "mon_port": 3300, "bind": "127.0.0.1", "rgw_port": 7480,
          "s3": {"endpoint": "http://127.0.0.1:7480", "access_key": "a", "secret_key": "b",
                 "region": "us-east-1"},
          "started": 1.5, "ready": True, "tie_to_parent": False, "up_seconds": 3}
    _plant(tmp_path / "base", "ceph", json.dumps(st))
    assert get_cluster("ceph", tmp_path / "base").state() == st


def test_a_state_whose_conf_is_a_link_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    """`conf` names the directory's own ceph.conf, but that entry is a link to another
    file: refused (shown to the load, it would be /etc/shadow)."""
    d = tmp_path / "base" / "ceph"
    _plant(tmp_path / "base", "ceph", json.dumps({"ready": True,
                                                  "conf": str(d / "ceph.conf")}))
    (d / "ceph.conf").symlink_to("/etc/shadow")
    with pytest.raises(ClusterError, match="conf: must name an entry of the cluster's"):
        get_cluster("ceph", tmp_path / "base").state()


def test_the_ceph_runner_shows_only_the_directory_s_own_regular_files(tmp_path: Path) -> None:
    """The load's read-only conf and keyring: the trusted directory's own regular files;
    a link there (to /etc/shadow) or a missing keyring is refused."""
    from storlab.campaign.runners.ceph import _cluster_files
    from storlab.errors import CampaignError

    d = tmp_path / "base" / "ceph"
    _plant(tmp_path / "base", "ceph", "{}")
    c = get_cluster("ceph", tmp_path / "base")
    (d / "ceph.conf").write_text("[global]\n")
    with pytest.raises(CampaignError, match="admin.keyring: No such file"):
        _cluster_files(c)
    (d / "admin.keyring").symlink_to("/etc/shadow")
    with pytest.raises(CampaignError, match="must be a regular file of the cluster's"):
        _cluster_files(c)
    (d / "admin.keyring").unlink()
    (d / "admin.keyring").write_text("[client.admin]\n")
    assert _cluster_files(c) == (str(d / "ceph.conf"), str(d / "admin.keyring"))


@pytest.mark.parametrize("text", ["[1]", '{"ready": true, "osds": "x"}',
                                  '{"ready": true, "conf": "/etc/ceph/ceph.conf"}'])
def test_a_campaign_shipping_a_cluster_dir_of_another_shape_gets_one_line(
        tmp_path: Path, storlab, text: str) -> None:
    """The campaign names its own (root's, 0700) cluster directory: `storlab run` fails
    its runs with the one-line refusal, `storlab cluster status` exits 2; no traceback."""
    path = _plant(tmp_path / "fake", "ceph", text)
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "fakec",
        "space": {"factors": [{"name": "seconds", "kind": "ordinal", "values": [1, 2]}],
                  "responses": [{"name": "y"}]},
        "design": {"kind": "full"},
        "runner": {"type": "ceph", "options": {"cluster_dir": str(tmp_path / "fake")}}}))
    r = storlab("run", str(tmp_path / "campaign.yaml"))
    out = r.stdout + r.stderr
    assert "Traceback" not in out and r.returncode in (1, 2), out
    assert f"{path}: " in out, out
    r = storlab("cluster", "status", "ceph", "--dir", str(tmp_path / "fake"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r
    assert r.stderr.count("\n") == 1 and f"{path}: " in r.stderr, r.stderr
