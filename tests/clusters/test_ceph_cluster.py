"""A real memstore Ceph (1 mon, 1 mgr, 1 OSD) brought up, driven by a small campaign
through the ceph runner (a start-up-only parameter forces an OSD restart), brought down."""

from __future__ import annotations

import errno
import os
import pwd
import shutil
import signal
import stat
import textwrap
import time

import pandas as pd
import pytest

from storlab.campaign.campaign import Campaign
from storlab.campaign.runners.ceph import CephRunner
from storlab.errors import StorlabError
from storlab.clusters import ClusterError
from storlab.clusters._util import Daemon, read_record, wait_until
from storlab.clusters.ceph import CephCluster, CephOptions

_NEED = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "rados", "fio")
# Its own group ("ceph", with the runner contract's Ceph cases), apart from the other
# clusters' ("clusters", "lan"): one worker holds the session's Ceph, and the Ceph and Swift
# tests, each a few minutes on 2 cores, run side by side instead of one after the other.
pytestmark = [
    pytest.mark.xdist_group("ceph"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a Ceph cluster needs root"),
    pytest.mark.skipif(any(shutil.which(p) is None for p in _NEED),
                       reason="Ceph packages missing: run scripts/sysdeps.sh as root"),
]
@pytest.fixture(scope="module")
def ceph(ceph_cluster):
    """The session's Ceph (tests/conftest.py), which the runner contract uses too."""
    return ceph_cluster


def test_up_is_healthy_and_status_reports_daemons(ceph):
    c, base, st = ceph
    assert st["ready"] and st["replicas"] == 1
    status = c.status()
    assert status["health"] == "HEALTH_OK"
    assert status["daemons"] == {"mgr.x": True, "mon.a": True, "osd.0": True}
    with pytest.raises(ClusterError, match="already exists"):
        c.up(CephOptions(mon_port=st["mon_port"]))


def test_campaign_applies_parameters_and_runs_loads(ceph, tmp_path):
    c, base, st = ceph
    (tmp_path / "space.yaml").write_text(textwrap.dedent("""
        factors:
          - {name: osd_op_num_shards, kind: integer, range: [2, 4]}
          - {name: objecter_inflight_ops, kind: integer, range: [64, 1024]}
    """))
    # Each load starts where the OSD is (the second at 4 shards, where the first left it),
    # so only config 3's change of the shard count restarts it (each restart is slow).
    ceph_conf = os.environ.get("CEPH_CONF")
    for load, shards in (("rados_bench", [2, 2, 4]), ("fio", [4, 4, 2])):
        pd.DataFrame({"osd_op_num_shards": shards, "objecter_inflight_ops": [64, 1024, 1024]}
                     ).to_csv(tmp_path / f"{load}.csv", index=False)
        opts = ({"seconds": 1, "block_size": 4096, "concurrency": 8} if load == "rados_bench"
                else {"rw": "randwrite", "bs": "4k", "iodepth": 8, "runtime": 1,
                      "time_based": 1})
        (tmp_path / f"{load}.yaml").write_text(textwrap.dedent(f"""
            space: space.yaml
            design: {{csv: {load}.csv}}
            randomize: false
            timeout: 150
            store: {load}.db
            runner:
              type: ceph
              options:
                cluster_dir: {base}
                load: {{type: {load}, options: {opts}}}
        """))
        camp = Campaign.load(tmp_path / f"{load}.yaml")
        osd = _copies(c.conf, "ceph-osd", "-i", "0")
        assert len(osd) == 1
        summary = camp.run()
        runs = camp.results("run")
        assert summary.ok == 3, (runs.get("status"), c.ceph("health", "detail", check=False))
        assert (runs["write_iops"] > 0).all()
        assert (runs["ceph_health_wait_s"] >= 0).all()
        # the shard count cannot change at runtime: going 2 -> 4 (4 -> 2) restarts the
        # OSD; the client-side objecter option never does
        by = runs.set_index("config_id")
        assert by.loc[3, "ceph_restarted"] == 1.0
        assert by.loc[2, "ceph_restarted"] == 0.0 and by.loc[2, "ceph_changed"] == 1.0
        assert c.ceph("config", "get", "osd", "osd_op_num_shards").strip() == str(shards[2])
        # the campaign's restart (one after the other: rados_bench's, then fio's) leaves
        # exactly one OSD, a new one
        after = _copies(c.conf, "ceph-osd", "-i", "0")
        assert len(after) == 1 and after != osd
        # fio's librados found the cluster through CEPH_CONF in fio's environment only
        assert os.environ.get("CEPH_CONF") == ceph_conf
    assert c.status()["health"] == "HEALTH_OK"
    # the OSD's usage stays within its size across the restarts (memstore's own count went
    # below zero; the OSD then took itself for full and never booted again)
    osd_df = c.ceph_json("osd", "df")["nodes"][0]
    assert 0 <= osd_df["kb_used"] <= osd_df["kb"] == 512 << 10, osd_df


def _param_campaign(d, base, factor, values, extra=""):
    (d / "campaign.yaml").write_text(textwrap.dedent(f"""
        space: {{factors: [{{name: {factor}, kind: categorical, values: {values}}}]}}
        design: {{kind: full}}
        runner:
          type: ceph
          options:
            cluster_dir: {base}
            load: {{type: rados_bench, options: {{seconds: 1}}}}
            {extra}
    """))
    return Campaign.load(d / "campaign.yaml")


def test_a_free_form_ceph_option_is_refused_before_any_run(ceph, tmp_path):
    """osd_class_dir (a directory of plugins the root OSD loads) is a string of any value
    in Ceph's schema: refused by its type before anything runs, unless allow_destructive;
    a string option with enum_values is a parameter like a number."""
    c, base, _ = ceph
    before = c.ceph("config", "get", "osd", "osd_class_dir").strip()
    camp = _param_campaign(tmp_path, base, "osd_class_dir", [str(tmp_path), "/tmp"])
    with pytest.raises(StorlabError) as exc:
        camp.preflight()
    msg = str(exc.value)
    assert "\n" not in msg and "factor osd_class_dir" in msg and "type str" in msg
    assert "paths and code" in msg and "allow_destructive" in msg
    with pytest.raises(StorlabError, match="osd_class_dir"):
        camp.run()
    assert not (tmp_path / "campaign.db").exists()
    # storlab's own check at run time too (a runner used without the campaign's preflight)
    runner = CephRunner(cluster_dir=str(base))
    res = runner.run({"pid_file": str(tmp_path / "victim")}, tmp_path)
    assert res.status == "failed" and "factor pid_file" in res.stderr
    assert c.ceph("config", "get", "osd", "osd_class_dir").strip() == before
    assert c.ceph("config", "get", "osd", "pid_file").strip() == ""
    # allowed when the campaign says so (checked only: a run would point the OSD there)
    _param_campaign(tmp_path, base, "osd_class_dir", ["/tmp", "/var/tmp"],
                    "allow_destructive: true").preflight()
    # a string with Ceph's enum_values: every level must be one of them
    _param_campaign(tmp_path, base, "osd_op_queue", ["wpq", "mclock_scheduler"]).preflight()
    with pytest.raises(StorlabError, match="level 'fifo' is not one of Ceph's values"):
        _param_campaign(tmp_path, base, "osd_op_queue", ["wpq", "fifo"]).preflight()


def test_a_level_or_who_read_as_a_ceph_cli_option_is_refused(ceph, tmp_path):
    """A level `--log_file=FILE` of an int option, or `who: --log_file=FILE`, would be an
    option of root's `ceph` CLI (a root file written outside every wall): refused before
    any run in one line (allow_destructive opens no such level), and again at the call."""
    c, base, _ = ceph
    victim = tmp_path / "victim"
    levels = [2, f"--log_file={victim}"]
    for extra in ("", "allow_destructive: true"):
        camp = _param_campaign(tmp_path, base, "osd_op_num_shards", levels, extra)
        with pytest.raises(StorlabError) as exc:
            camp.run()
        msg = str(exc.value)
        assert "\n" not in msg and "factor osd_op_num_shards" in msg and "integer" in msg
        assert not (tmp_path / "campaign.db").exists()
    with pytest.raises(StorlabError) as exc:
        _param_campaign(tmp_path, base, "osd_op_num_shards", [2, 4],
                        f"who: {{osd_op_num_shards: '--log_file={victim}'}}").preflight()
    assert "\n" not in str(exc.value) and "who.osd_op_num_shards" in str(exc.value)
    # the check next to the argv (a runner driven without the campaign's preflight)
    runner = CephRunner(cluster_dir=str(base))
    with pytest.raises(StorlabError, match="integer"):
        runner.apply(c, {"osd_op_num_shards": f"--log_file={victim}"})
    runner.who = {"osd_op_num_shards": f"--log_file={victim}"}
    with pytest.raises(StorlabError, match="Ceph configuration section"):
        runner.apply(c, {"osd_op_num_shards": 2})
    assert not victim.exists()


def test_client_conf_never_writes_through_a_planted_link(ceph, tmp_path):
    c, base, _ = ceph
    loot = tmp_path / "loot"
    loot.write_text("")
    # a DEST another user made (nobody's directory holding nobody's link): refused
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.symlink(loot, theirs / "ceph.client.admin.keyring")
    os.lchown(theirs / "ceph.client.admin.keyring", 65534, 65534)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(ClusterError) as exc:
        c.client_conf(theirs)
    assert "\n" not in str(exc.value) and "nobody" in str(exc.value)
    # our own DEST with a link at a file's name: the link is replaced, never followed
    mine = tmp_path / "mine"
    mine.mkdir()
    os.symlink(loot, mine / "ceph.client.admin.keyring")
    got = c.client_conf(mine)
    keyring = mine / "ceph.client.admin.keyring"
    assert got["keyring"] == str(keyring) and not keyring.is_symlink()
    assert "key = " in keyring.read_text() and loot.read_text() == ""
    assert stat.S_IMODE(keyring.stat().st_mode) == 0o600
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700


def test_failing_daemon_start_reports_the_log_tail(tmp_path):
    # A daemon whose failure we control: ceph-mon's own start-up failure was seen exiting
    # 1 with nothing written on one CI machine, so its words cannot be relied upon here.
    script = "echo 'starting'; echo 'error: cannot open /nonexistent' >&2; exit 3"
    d = Daemon("mon.zz", ["sh", "-c", script], tmp_path / "mon.log", tmp_path / "mon.pid")
    d.start()
    with pytest.raises(ClusterError) as exc:
        wait_until(lambda: False, 30, "the monitor", [d])
    msg = str(exc.value)
    assert "mon.zz exited during start-up (exit status 3)" in msg
    assert str(tmp_path / "mon.log") in msg
    assert "error: cannot open /nonexistent" in msg and "starting" in msg


def _copies(conf, program, *args):
    """Live processes running `program` with our conf and `args` (a second copy shows)."""
    out = []
    for e in os.listdir("/proc"):
        try:
            with open(f"/proc/{e}/cmdline", "rb") as fh:
                cmd = fh.read().decode(errors="replace").split("\0")
        except (OSError, ValueError):
            continue
        if cmd and os.path.basename(cmd[0]) == program and str(conf) in cmd and \
                all(a in cmd for a in args):
            out.append(int(e))
    return out


def test_files_are_for_root_only(ceph):
    c, base, st = ceph
    d = base / "ceph"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for f in ("ceph.conf", "admin.keyring", "mon.keyring", "cluster.json", "mon.a/keyring",
              "mgr.x/keyring", "osd.0/keyring"):
        assert stat.S_IMODE((d / f).stat().st_mode) == 0o600, f
    for sub in ("mon.a", "mgr.x", "osd.0", "log", "run", "var"):
        assert stat.S_IMODE((d / sub).stat().st_mode) == 0o700, sub
    # nothing under the state directory is readable by others
    for p in d.rglob("*"):
        assert not stat.S_IMODE(p.lstat().st_mode) & 0o077 or p.is_symlink(), p


def _field(pid, name):
    """A field of /proc/PID/status, split."""
    with open(f"/proc/{pid}/status") as fh:
        return next(line for line in fh if line.startswith(name + ":")).split()[1:]


def test_daemons_run_as_ceph_inside_read_only_walls(ceph):
    """Each daemon runs as the `ceph` user with no capability left, as the child of
    bwrap's init (pid 2: the session's cluster is tied to the test run, and the init dies
    with it) in a mount namespace whose root is read-only: the system and root's files of the
    cluster (keyrings, state, PID records) cannot be written, nor mostly seen; its own data
    directory and the runtime directory are its only writable places, and /dev holds no
    disk."""
    c, base, _ = ceph
    d = base / "ceph"
    uid, gid = pwd.getpwnam("ceph").pw_uid, pwd.getpwnam("ceph").pw_gid
    pids = {pf.stem: read_record(pf).pid for pf in (d / "run").glob("*.pid")}
    assert set(pids) == {"mon.a", "mgr.x", "osd.0"}
    for name, pid in pids.items():
        assert _field(pid, "Uid") == [str(uid)] * 4 and _field(pid, "Gid") == [str(gid)] * 4
        assert _field(pid, "CapEff") == ["0000000000000000"], name
        assert _field(pid, "NSpid")[-1] == "2", name  # under its sandbox's pid 1
        with open(f"/proc/{pid}/mountinfo") as fh:
            root = next(line.split() for line in fh if line.split()[4] == "/")
        assert "ro" in root[5].split(","), (name, root)
        inside = f"/proc/{pid}/root"
        with pytest.raises(OSError) as exc:  # even for root, through the daemon's view
            open(f"{inside}/etc/storlab-cephwall-probe", "w").close()
        assert exc.value.errno == errno.EROFS
        for f in ("admin.keyring", "mon.keyring", "cluster.json", "run"):
            assert not os.path.lexists(f"{inside}{d}/{f}"), (name, f)
        others = {"mon.a", "mgr.x", "osd.0"} - {name}
        assert os.path.isdir(f"{inside}{d}/{name}") and not any(
            os.path.lexists(f"{inside}{d}/{o}") for o in others), name
        assert not [n for n in os.listdir(f"{inside}/dev") if n.startswith(("loop", "vd",
                                                                            "sd", "nvme"))]
    # the daemons' own files are the ceph user's, root's stay root's
    assert (d / "osd.0").stat().st_uid == uid and (d / "var" / "run").stat().st_uid == uid
    assert (d / "admin.keyring").stat().st_uid == 0 and (d / "run").stat().st_uid == 0


def test_the_ceph_cli_runs_inside_read_only_walls(ceph, tmp_path):
    """The CLI (root) sees the conf and the admin keyring, read-only, and nothing of the
    host's files: a value read as its own option (`--log_file=FILE`) or any write lands
    nowhere."""
    c, base, _ = ceph
    d = base / "ceph"
    victim = tmp_path / "victim"
    assert c.ceph(f"--log_file={victim}", "--log_to_file=true", "health", check=False) \
        is not None
    assert not victim.exists()
    r = c.cli(["sh", "-c", f"touch {victim}; echo x >> {d}/admin.keyring; "
               f"touch {d}/x; ls /dev; cat {d}/cluster.json"], check=False)
    assert r.returncode != 0 and not victim.exists() and not (d / "x").exists()
    assert "x" not in (d / "admin.keyring").read_text().splitlines()
    assert "Read-only file system" in r.stderr and "loop" not in r.stdout
    assert "No such file" in r.stderr  # cluster.json: not shown
    assert c.ceph("health").startswith("HEALTH_OK")  # and it still talks to the monitor


def test_the_largest_admin_socket_answers_are_far_below_the_limit(ceph):
    """asok_command refuses an answer announced longer than ASOK_REPLY_LIMIT (a `ceph`
    process announcing 4 GiB filled root's memory): the largest real answers, `perf dump`
    and `config show` of the monitor and the OSD, are read whole and far below it."""
    import json

    from storlab.clusters._util import ASOK_REPLY_LIMIT, asok_command

    c, _, _ = ceph
    sizes = {}
    for name in ("mon.a", "osd.0"):
        for prefix in ("perf dump", "config show"):
            out = asok_command(c.dir / "var" / "run" / f"ceph-{name}.asok", prefix)
            assert isinstance(out, dict) and out, (name, prefix, out)
            sizes[name, prefix] = len(json.dumps(out))
    print("admin socket answers (bytes of JSON):", sizes)
    assert max(sizes.values()) < ASOK_REPLY_LIMIT // 16, sizes


def test_osd_restarts_start_exactly_one_copy(ceph):
    """One restart here; restarts one after the other start one copy each too (the
    campaign test above restarts the OSD twice and checks the same after each)."""
    c, base, st = ceph
    before = _copies(c.conf, "ceph-osd", "-i", "0")
    assert len(before) == 1
    c.restart_osds(timeout=120)
    after = _copies(c.conf, "ceph-osd", "-i", "0")
    assert len(after) == 1 and after != before
    assert c.osds_up_in() == {0: (True, True)}
    s = c.status(probe=True)
    assert s["healthy"] and s["probe"].startswith("ok"), s
    # memstore's dump of its store stays out of the log: one line per mount and stop (the
    # first mount, this stop and mount at least)
    log = (base / "ceph" / "log" / "osd.0.out").read_text()
    assert log.count("dump: (left out)") >= 3 and '"collections"' not in log


def test_killed_osd_is_reported_then_restarted(ceph):
    c, base, st = ceph
    pid = _copies(c.conf, "ceph-osd", "-i", "0")[0]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while _copies(c.conf, "ceph-osd", "-i", "0") and time.monotonic() < deadline:
        time.sleep(0.1)
    s = c.status(probe=True)
    assert not s["healthy"] and s["daemons"]["osd.0"] is False
    assert "osd.0 not running" in s["health"] and s["probe"].startswith("failed"), s
    with pytest.raises(ClusterError, match="osd.0"):
        c.check_daemons()
    # a dead OSD is restarted cleanly (memstore reloads what its last clean stop saved)
    c.restart_osds(timeout=120)
    assert len(_copies(c.conf, "ceph-osd", "-i", "0")) == 1
    assert c.status()["healthy"]


#: Brings a tied Ceph up in a process of its own (as a test run does), says so, waits.
_TIED_UP = """
import sys, time
from pathlib import Path
import storlab.campaign.runners.cluster_walls  # the walls the cluster's programs run in
from storlab.clusters.ceph import CephCluster, CephOptions

c = CephCluster(Path(sys.argv[1]))
c.up(CephOptions(osds=1, store="memstore", osd_bytes=256 << 20, mon_port=int(sys.argv[2]),
                 pg_num=8, tie_to_parent=True), timeout=180)
print("up", flush=True)
time.sleep(600)
"""


def test_a_killed_run_takes_its_tied_daemons_with_it(tmp_path, free_ports, leftovers):
    """The daemons drop root (`--setuser ceph`), which cleared the parent-death signal
    bwrap set on them as their sandbox's pid 1: a SIGKILLed test run left them running.
    Tied, they run under bwrap's init, which dies with the run: all gone in seconds."""
    import subprocess
    import sys

    base = tmp_path / "k"
    base.mkdir()
    up = subprocess.Popen([sys.executable, "-c", _TIED_UP, str(base), str(free_ports(1))],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert up.stdout.readline().strip() == "up", up.stderr.read() if up.poll() else ""
        running = _copies(CephCluster(base).conf, "ceph-mon")
        assert len(running) == 1 and _field(running[0], "Uid")[0] == \
            str(pwd.getpwnam("ceph").pw_uid)
        up.kill()
        up.wait()
        deadline = time.monotonic() + 5
        while leftovers(base)["processes"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert leftovers(base)["processes"] == [], "daemons outlived the killed run"
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        CephCluster(base).down()  # whatever is left (nothing, with the fix)


def test_failed_up_keeps_the_logs(tmp_path, free_ports):
    c = CephCluster(tmp_path)
    with pytest.raises(ClusterError) as exc:
        c.up(CephOptions(mon_port=free_ports(1), tie_to_parent=True), timeout=0.01)
    msg = str(exc.value)
    assert f"logs are kept in {tmp_path / 'ceph' / 'log'}" in msg
    assert (tmp_path / "ceph" / "log" / "mon.a.out").exists()
    assert sorted(p.name for p in (tmp_path / "ceph").iterdir()) == ["log"]
    assert c.state() is None and not _copies(c.conf, "ceph-mon")
    assert c.down()["removed"] and not (tmp_path / "ceph").exists()


@pytest.mark.last
def test_down_leaves_nothing(ceph, leftovers):
    """Last of the session (marked `last`): brings the shared cluster down and checks what
    is left."""
    c, base, _ = ceph
    assert leftovers(base)["processes"]
    r = c.down()
    assert sorted(r["stopped"]) == ["mgr.x", "mon.a", "osd.0"]
    assert leftovers(base) == {"processes": [], "mounts": [], "loops": []}
    assert not (base / "ceph").exists()
    assert c.down()["stopped"] == []  # idempotent
    assert c.status() is None
