"""Cluster directories storlab trusts as root: the default base lies outside /tmp, and a
directory or link another user planted on the path is refused in one line before storlab
removes, makes, reads or writes anything there (no cluster is started here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storlab.clusters import ClusterError, get_cluster
from storlab.clusters._util import default_base

NOBODY = 65534


def test_default_base_is_not_shared(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("STORLAB_CLUSTER_DIR", raising=False)
    want = (Path("/var/lib/storlab/clusters") if os.geteuid() == 0 else
            Path(os.path.expanduser("~/.local/state/storlab/clusters")))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert default_base() == want
    monkeypatch.setenv("STORLAB_CLUSTER_DIR", str(tmp_path / "cl"))
    assert default_base() == tmp_path / "cl"
    assert get_cluster("ceph").dir == tmp_path / "cl" / "ceph"


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's link needs root")
@pytest.mark.parametrize("kind", ["ceph", "swift"])
def test_a_planted_kind_link_is_refused_and_its_target_kept(tmp_path: Path, kind: str) -> None:
    """nobody's link at <base>/<kind> (to a directory of root's that `up` would empty)."""
    base, victim = tmp_path / "base", tmp_path / "victim"
    base.mkdir()
    os.chmod(base, 0o1777)  # a shared base, like the old /tmp default
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    os.symlink(victim, base / kind)
    os.lchown(base / kind, NOBODY, NOBODY)
    with pytest.raises(ClusterError) as exc:
        get_cluster(kind, base)
    msg = str(exc.value)
    assert "\n" not in msg and f"{base / kind} (a symbolic link" in msg and "nobody" in msg
    assert (victim / "keep.txt").read_text() == "keep"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_up_replaces_a_link_of_ours_at_the_kind_without_following_it(tmp_path: Path) -> None:
    """A root-owned link at <base>/ceph passes the owner check, but `up` removes the entry
    itself from the base it holds open: the directory it led to keeps its files."""
    from storlab.clusters._util import fresh_cluster_dir

    base, victim = tmp_path / "base", tmp_path / "victim"
    base.mkdir()
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    os.symlink(victim, base / "ceph")
    fresh_cluster_dir(base / "ceph")
    assert (victim / "keep.txt").read_text() == "keep"
    assert not (base / "ceph").is_symlink() and list((base / "ceph").iterdir()) == []
    assert (base / "ceph").stat().st_mode & 0o777 == 0o700


def test_up_makes_a_missing_base_trusted_under_umask_002(tmp_path: Path) -> None:
    """The base's missing components are made 0755 whatever the umask: under umask 002
    mkdir alone gives 0775, which the trust check then refused."""
    from storlab.clusters._util import fresh_cluster_dir

    top = tmp_path / "top"
    top.mkdir(mode=0o755)
    os.chmod(top, 0o755)
    old = os.umask(0o002)
    try:
        fresh_cluster_dir(top / "a" / "base" / "ceph")
    finally:
        os.umask(old)
    for p in (top / "a", top / "a" / "base"):
        assert p.stat().st_mode & 0o777 == 0o755, p
    assert (top / "a" / "base" / "ceph").stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_cluster_commands_refuse_a_group_writable_base(tmp_path: Path, storlab) -> None:
    base = tmp_path / "base"
    base.mkdir()
    os.chmod(base, 0o770)
    for cmd in (["status", "ceph"], ["down", "swift"]):
        r = storlab("cluster", *cmd, "--dir", str(base))
        assert r.returncode == 2, r
        assert r.stderr.count("\n") == 1 and "mode 0770" in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_a_campaign_cluster_dir_of_another_user_is_refused_before_any_run(
        tmp_path: Path) -> None:
    """A campaign's `cluster_dir:` naming a directory its author (nobody) controls, with
    a forged state: refused at preflight, before storlab runs `ceph` with its conf."""
    import yaml

    from storlab.campaign.campaign import Campaign
    from storlab.errors import StorlabError

    forged = tmp_path / "forged"
    (forged / "ceph").mkdir(parents=True)
    (forged / "ceph" / "cluster.json").write_text('{"ready": true}')
    for p in (forged, forged / "ceph", forged / "ceph" / "cluster.json"):
        os.chown(p, NOBODY, NOBODY)
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump({
        "space": {"factors": [{"name": "osd_op_num_shards", "values": [2, 4]}]},
        "design": {"kind": "full"},
        "runner": {"type": "ceph", "options": {"cluster_dir": str(forged)}}}))
    with pytest.raises(StorlabError) as exc:
        Campaign.load(tmp_path / "campaign.yaml").preflight()
    msg = str(exc.value)
    assert "\n" not in msg and "options.cluster_dir" in msg and "nobody" in msg, msg
    assert not (tmp_path / "campaign.db").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's directory needs root")
@pytest.mark.parametrize("kind", ["ceph", "swift"])
def test_a_cluster_dir_made_by_another_user_after_the_check_is_never_read(
        tmp_path: Path, kind: str) -> None:
    """`--dir` naming a directory not made yet, in a sticky shared one: the cluster object
    is made (its path passes), then another user makes the directory with a forged state
    and PID record. status, state and down read nothing there and signal nothing: each
    checks the directory again as it is now; with no directory they say "no cluster"."""
    from storlab.clusters import cluster_state

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    c = get_cluster(kind, shared / "x")
    assert c.state() is None and c.status() is None
    assert c.down()["removed"] is None
    with pytest.raises(ClusterError, match="no .* cluster is up"):
        cluster_state(kind, shared / "x")
    # now nobody makes it, with a state and a PID record naming this very process
    d = shared / "x" / kind
    (d / "run").mkdir(parents=True)
    (d / "cluster.json").write_text('{"ready": true, "kind": "%s"}' % kind)
    (d / "run" / "mon.a.pid").write_text(f"{os.getpid()}\npython\n\n")
    for p in (shared / "x", d, d / "run", d / "cluster.json", d / "run" / "mon.a.pid"):
        os.chown(p, NOBODY, NOBODY)
    for call in (c.state, c.status, c.down):
        with pytest.raises(ClusterError) as exc:
            call()
        msg = str(exc.value)
        assert "\n" not in msg and f"{shared / 'x'} (a directory" in msg and "nobody" in msg
    assert (d / "cluster.json").exists()  # down removed nothing of theirs


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_a_link_of_ours_as_base_is_resolved_once(tmp_path: Path) -> None:
    """The base named through a link of ours: the cluster's directory is the link's
    target's, fixed when the object is made (a link changed later leads nowhere new)."""
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    c = get_cluster("ceph", tmp_path / "alias")
    assert c.dir == real / "ceph"
    other = tmp_path / "other"
    other.mkdir()
    os.unlink(tmp_path / "alias")
    os.symlink(other, tmp_path / "alias")
    assert c.dir == real / "ceph" and c.state() is None


# The `ceph` user's side of the race on `CephCluster._give`: in the cluster's `var/`
# (its cwd), wait until root changes an entry of crash/sub (sub is listed by then), then
# exchange sub with the link sub.l -> the victim directory (renameat2 RENAME_EXCHANGE).
_SWAPPER = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
assert libc.inotify_add_watch(fd, b"crash/sub", 0x4) >= 0  # IN_ATTRIB
print("ready", flush=True)
named = False
while not named:
    buf, off = os.read(fd, 65536), 0
    while off < len(buf):
        _, _, _, ln = struct.unpack_from("iIII", buf, off)
        named = named or bool(buf[off + 16:off + 16 + ln].rstrip(b"\0"))
        off += 16 + ln
r = libc.syscall(316, -100, b"crash/sub", -100, b"crash/sub.l", 2)
print("swapped", r, ctypes.get_errno(), flush=True)
"""


def _ceph_user() -> tuple[int, int] | None:
    import pwd

    try:
        pw = pwd.getpwnam("ceph")
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


@pytest.mark.skipif(os.geteuid() != 0 or _ceph_user() is None
                    or not os.path.exists("/usr/bin/python3")
                    or not os.path.exists("/usr/bin/setpriv"),
                    reason="needs root, the ceph user, /usr/bin/python3 and setpriv")
def test_give_never_follows_a_directory_the_daemon_swaps_for_a_link(tmp_path: Path) -> None:
    """A `ceph` process (a compromised monitor: `var/` is its cwd and writable) swaps a
    directory of `var/` for a link to root's directory while root gives `var/` to ceph:
    root's files there keep their owner and mode."""
    import subprocess

    uid, gid = _ceph_user()  # type: ignore[misc]
    c = get_cluster("ceph", tmp_path / "base")
    names = [f"f{i:04d}" for i in range(2000)]  # a long listing: the window
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    for n in names:
        (victim / n).write_text("root's")
        os.chmod(victim / n, 0o640)
    var = c.dir / "var"
    (var / "crash" / "sub").mkdir(parents=True)
    os.chmod(c.dir, 0o700)
    for n in names:
        (var / "crash" / "sub" / n).touch()
    os.symlink(victim, var / "crash" / "sub.l")
    for p in [var, *var.rglob("*")]:
        os.lchown(p, uid, gid)  # as after the first `_give`, before the daemons start
    child = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
         "/usr/bin/python3", "-I", "-c", _SWAPPER],
        cwd=var, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        c._give("var")
        assert child.stdout.readline().startswith("swapped 0")  # the race was run
    finally:
        child.kill()
        child.wait()
    assert (var / "crash" / "sub").is_symlink()  # the swap took place mid-walk
    changed = [n for n in names if (victim / n).stat().st_uid != 0
               or (victim / n).stat().st_mode & 0o777 != 0o640]
    assert changed == [], f"{len(changed)} of root's files given to ceph"
    assert os.stat(victim).st_uid == 0
    # the real directory (now at sub.l's name) was given whole
    assert all((var / "crash" / "sub.l" / n).stat().st_uid == uid for n in names)


@pytest.mark.skipif(os.geteuid() != 0 or _ceph_user() is None, reason="needs root and ceph")
def test_give_refuses_a_hard_link_to_a_file_elsewhere(tmp_path: Path) -> None:
    """A second name in `var/` of a file of root's (where hard links are not protected)
    is not given: root's file keeps its owner."""
    c = get_cluster("ceph", tmp_path / "base")
    (c.dir / "var" / "log").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_text("root's")
    os.chmod(secret, 0o600)
    os.link(secret, c.dir / "var" / "log" / "ceph.log")
    with pytest.raises(ClusterError, match="hard link"):
        c._give("var")
    assert secret.stat().st_uid == 0 and secret.stat().st_mode & 0o777 == 0o600


def test_admin_socket_never_through_a_link_and_bounded_in_time(tmp_path: Path) -> None:
    """Root asks a daemon's admin socket in the daemons' `var/run`: a link planted there
    (to another Unix socket) is refused, and a peer answering a byte at a time is cut at
    the timeout (a recv timeout alone bounded each byte only)."""
    import socket
    import struct
    import threading
    import time

    from storlab.clusters._util import asok_command

    other = socket.socket(socket.AF_UNIX)
    other.bind(str(tmp_path / "other.sock"))
    other.listen(1)
    os.symlink(tmp_path / "other.sock", tmp_path / "ceph-mon.a.asok")
    with pytest.raises(ClusterError, match="not a socket"):
        asok_command(tmp_path / "ceph-mon.a.asok", "status")
    drip = socket.socket(socket.AF_UNIX)
    drip.bind(str(tmp_path / "ceph-osd.0.asok"))
    drip.listen(1)

    def serve() -> None:
        c, _ = drip.accept()
        c.recv(1000)
        c.sendall(struct.pack(">I", 64))
        try:
            for _ in range(64):
                c.send(b" ")
                time.sleep(0.3)
        except OSError:
            pass
        c.close()
    threading.Thread(target=serve, daemon=True).start()
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match="timed out"):
        asok_command(tmp_path / "ceph-osd.0.asok", "status", timeout=1.5)
    assert time.monotonic() - t0 < 3
    other.close()
    drip.close()


def test_admin_socket_answer_longer_than_the_limit_is_refused_unread(tmp_path: Path) -> None:
    """The answer's length is the daemon's word (4 bytes, up to 4 GiB) and the daemons run
    as `ceph`: one announcing 4 GiB and sending it fast filled root's memory within the
    timeout. A real Unix socket server announcing 4 GiB (and sending bytes as fast as it
    can) is refused at the length, before a byte of the body is read; an answer within
    the limit is read whole."""
    import json as _json
    import resource
    import socket
    import struct
    import threading
    import time

    from storlab.clusters._util import ASOK_REPLY_LIMIT, asok_command

    sent: list[int] = []

    def server(name: str, announce: int, body: bytes | None) -> socket.socket:
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(str(tmp_path / name))
        srv.listen(1)

        def serve() -> None:
            c, _ = srv.accept()
            with c:
                c.recv(1000)
                c.sendall(struct.pack(">I", announce))
                try:
                    if body is not None:
                        c.sendall(body)
                        return
                    chunk = b"\0" * (1 << 20)
                    while True:  # as much as root will take
                        c.sendall(chunk)
                        sent.append(len(chunk))
                except OSError:
                    pass
        threading.Thread(target=serve, daemon=True).start()
        return srv

    huge = server("ceph-osd.0.asok", 0xFFFFFFFF, None)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match=r"announced a 4294967295-byte answer, more than "
                                           r"the 64 MiB .* refused unread"):
        asok_command(tmp_path / "ceph-osd.0.asok", "perf dump", timeout=5)
    assert time.monotonic() - t0 < 2  # at the length, not at the timeout
    # root read nothing of it: the peer could put no more than the socket buffers hold
    assert sum(sent) < 16 << 20, sum(sent)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 64 << 10  # KiB
    huge.close()
    # a long answer within the limit is read whole
    doc = _json.dumps({"k": "v" * (ASOK_REPLY_LIMIT // 8)}).encode()
    fine = server("ceph-mon.a.asok", len(doc), doc)
    assert asok_command(tmp_path / "ceph-mon.a.asok", "config show", timeout=10) == \
        {"k": "v" * (ASOK_REPLY_LIMIT // 8)}
    fine.close()
